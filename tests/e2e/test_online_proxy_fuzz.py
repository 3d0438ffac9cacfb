"""The example proxy of analyzer/online/README.md survives malformed upstream answers
and client junk over real HTTP.

A fault-injecting upstream on 127.0.0.1 answers with malformed bodies (the
bodies of ``tests/support/online_fuzz.py``: arbitrary JSON, answer-shaped JSON with
junk in every slot, non-JSON, empty, 100,000-deep), statuses and content types;
clients send junk in the fields the normalizer reads. For every request the
client never gets a 500 the proxy's own code produced (a 500 is only ever the
upstream's 500, passed on byte for byte), and a response record is always
logged. A fixed corpus then goes through the proxy and the analyzer: the class
the proxy logged (``analyzer.online.log_fields``) is the class the analyzer
gives the same record after ingesting the proxy's log.
"""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.store.db import connect
from analyzer.ingestion.logs import ingest
from analyzer.classification.turns import refresh_turns
from tests.support.proxy import LadderProxy
from tools.faulty_upstream import FaultyUpstream, Reply, always
from tests.support.online_fuzz import DEEP, DEEP_OBJECT, bodies

HISTORY = [
    {"role": "user", "content": "Protected lands in Texas?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "chatcmpl-tool-1", "type": "function", "function": {"name": "query", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "chatcmpl-tool-1", "content": "| Texas | 61,883 |"},
]
TOOLS = [{"type": "function", "function": {"name": "query", "parameters": {"type": "object"}}}]
CONTENT_TYPES = ("application/json", "text/html", "text/plain; charset=utf-8", "")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    log = tmp_path_factory.mktemp("fuzz") / "proxy.jsonl"
    with FaultyUpstream() as upstream, LadderProxy(upstream.chat_url, log, flatten=True,
                                                   length_recovery=True) as proxy:
        with httpx.Client(timeout=30) as client:
            yield upstream, proxy, client
        assert not upstream.script_errors


def _wire(body) -> bytes:
    """A fuzzed body as the bytes an upstream puts on the wire."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8", "surrogatepass")
    try:
        return json.dumps(body).encode()
    except (TypeError, ValueError):
        return repr(body).encode("utf-8", "replace")


# JSON a client can send (httpx refuses NaN and infinities).
client_junk = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)
client_payloads = st.fixed_dictionaries(
    {"model": st.just("glm-5"), "messages": st.sampled_from([HISTORY, HISTORY[:1]])},
    optional={"tools": st.just(TOOLS), "enable_thinking": st.sampled_from([True, False, None]) | client_junk,
              "chat_template_kwargs": client_junk, "thinking_token_budget": client_junk | st.integers(-2, 9000),
              "max_tokens": client_junk | st.integers(1, 9000), "user": st.just("s-fuzz")})


def _response_count(proxy) -> int:
    return sum(1 for r in proxy.records() if r.get("type") == "response")


@pytest.mark.slow
@settings(max_examples=350, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.data_too_large])
@given(body=bodies, status=st.sampled_from([200, 200, 200, 201, 500, 502, 429, 400]),
       content_type=st.sampled_from(CONTENT_TYPES), payload=client_payloads)
def test_malformed_upstream_answers_never_break_the_proxy(servers, body, status, content_type, payload):
    upstream, proxy, client = servers
    wire = _wire(body)
    headers = (("content-type", content_type),) if content_type else ()
    upstream.reset(always(Reply(status, wire, headers)))
    before = _response_count(proxy)

    r = client.post(proxy.chat_url, json=payload)

    if r.status_code == 500:  # only ever the upstream's own 500, passed on unchanged
        assert status == 500 and r.content == wire and upstream.count >= 1
    assert r.status_code in {200, 201, 400, 429, 500, 502}, r.text[:200]
    if r.status_code == 400 and upstream.count == 0:
        assert "rejected" in r.json()["error"]["message"]  # the documented client error
    if 200 <= status < 300 and r.status_code == 502:  # a 2xx that is not JSON, as the real proxy answers it
        assert r.json()["error"]["message"].split(":")[0] in ("JSONDecodeError", "UnicodeDecodeError",
                                                               "RecursionError")
    assert _response_count(proxy) == before + 1  # a response record for every request
    rec = proxy.records()[-1]
    assert rec["type"] == "response" and rec["incident_class"] and rec["final_class"]


# A fixed corpus, classified by the proxy and then by the analyzer from the proxy's log.
CORPUS = [
    (200, b""), (200, b"\n"), (200, b"<html>Bad gateway</html>"), (200, b"null"), (200, b"[]"), (200, b"5"),
    (200, b'{"choices": []}'), (200, b'{"error": {"message": "overloaded"}}'), (200, DEEP), (200, DEEP_OBJECT),
    (200, b'{"choices": [{"message": {"content": [{"text": 5}]}, "finish_reason": "stop"}]}'),
    (200, b'{"choices": [{"message": {"content": [{"text": null}]}, "finish_reason": 7}]}'),
    (200, b'{"choices": [{"message": {"content": "\\n\\n"}, "finish_reason": "stop"}]}'),
    (200, b'{"choices": [{"message": {"content": "partial"}, "finish_reason": "error"}]}'),
    (200, b'{"choices": [{"message": {"content": "ok"}, "finish_reason": ["stop"]}]}'),
    (200, b'{"choices": [{"message": {"content": null, "tool_calls": "call"}, "finish_reason": "tool_calls"}]}'),
    (200, b'{"choices": [{"message": {"content": "", "tool_calls": [5]}, "finish_reason": "tool_calls"}]}'),
    (200, b'{"choices": [{"message": {"content": "Fine."}, "finish_reason": "stop"}],'
          b' "usage": {"completion_tokens": "many"}}'),
    (200, b'{"choices": [{"message": {"content": "", "reasoning_content": "hmm"}, "finish_reason": "length"}],'
          b' "usage": {"completion_tokens": 16, "completion_tokens_details": {"reasoning_tokens": 16}}}'),
    (200, b'{"choices": ["junk"]}'), (200, b'{"choices": [{"message": "text"}]}'),
    (500, b""), (502, b"<html>oops</html>"), (429, b'{"error": "slow down"}'),
]


def test_the_proxy_and_the_analyzer_agree_on_every_malformed_answer(upstream, make_proxy, tmp_path):
    proxy = make_proxy(flatten=True, length_recovery=True)
    with httpx.Client(timeout=30) as client:
        for i, (status, wire) in enumerate(CORPUS):
            upstream.reset(always(Reply(status, wire, (("content-type", "application/json"),))))
            messages = HISTORY if i % 2 == 0 else HISTORY[:1]
            r = client.post(proxy.chat_url, json={"model": "glm-5", "messages": messages, "tools": TOOLS,
                                                  "max_tokens": 64, "user": f"s-{i}"})
            assert r.status_code != 500 or (status == 500 and r.content == wire)
    logged = {r["request_id"]: r["incident_class"] for r in proxy.responses()}
    assert len(logged) == len(CORPUS)
    con = connect(tmp_path / "a.duckdb")
    ingest(con, [str(proxy.log_path)])
    refresh_turns(con)
    offline = dict(con.execute("SELECT request_id, incident_class FROM turns").fetchall())
    con.close()
    order = [r["request_id"] for r in proxy.responses()]
    diff = [(i, CORPUS[i][1][:60], logged[rid], offline.get(rid)) for i, rid in enumerate(order)
            if offline.get(rid) != logged[rid]]
    assert not diff
    # The corpus reaches the new classes, not only ok and 5xx.
    assert {"no-answer-200", "empty-200-stop", "ok", "length-with-no-content"} <= set(logged.values())
