"""End to end over real HTTP: client -> ladder proxy (FastAPI + httpx + arun_ladder)
-> fault-injecting upstream, all on 127.0.0.1.

Attempts are counted where they land (at the upstream), and the proxy's JSONL
log is read back as the analyzer would read it.
"""

from __future__ import annotations

import http.client
import json
import re

import pytest

from analyzer.online import LOG_FIELDS_VERSION
from tests.support.proxy import readme_example_source
from tools.faulty_upstream import (
    DROP_TOOLS,
    FINAL_ANSWER,
    FLATTEN_TRANSCRIPT,
    TOOL_CHOICE_NONE,
    always,
    answer_in_reasoning,
    completion,
    empty_200_stop,
    fail_on_tool_history_with_tools,
    fail_until,
    glm53,
    hang_up,
    has_tool_structure,
    length_no_content,
    naked_500,
    no_reasoning_config,
    ok,
    sequence,
    slow,
    thinking_disabled,
)
from tests.support.proxy_client import HISTORY, LOG_FIELD_KEYS, client_payload, only_response, post
from tests.support.repo import REPO
from tools.loopback import free_port

# ---------------------------------------------------------------------------
# Recovery


@pytest.mark.parametrize("script, options, rung, trigger", [
    (fail_until(TOOL_CHOICE_NONE), {}, TOOL_CHOICE_NONE, "tool-history-5xx"),
    (fail_on_tool_history_with_tools(), {}, DROP_TOOLS, "tool-history-5xx"),
    (fail_until(FINAL_ANSWER, failure=empty_200_stop), {}, FINAL_ANSWER, "empty-200-stop"),
    # flatten=True is reachable with the default max_attempts.
    (fail_until(FLATTEN_TRANSCRIPT), {"flatten": True}, FLATTEN_TRANSCRIPT, "tool-history-5xx"),
], ids=["rung1-tool_choice_none", "rung2-drop_tools", "rung3-final_answer", "rung4-flatten-opt-in"])
def test_recovery_at_the_expected_rung(upstream, make_proxy, script, options, rung, trigger):
    upstream.script = script
    proxy = make_proxy(**options)
    r = post(proxy, client_payload())

    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == "Here is the answer."
    order = ["original", TOOL_CHOICE_NONE, DROP_TOOLS, FINAL_ANSWER, FLATTEN_TRANSCRIPT]
    expected = order[: order.index(rung) + 1]
    assert upstream.rungs_seen() == expected  # what actually arrived, rung by rung

    # What each attempt sent: normalized once, then reduced per rung.
    first = upstream.payloads[0]
    assert "enable_thinking" not in first and "user" not in first
    assert first["chat_template_kwargs"] == {"enable_thinking": True, "thinking": True, "clear_thinking": False}
    assert all(p["chat_template_kwargs"] == first["chat_template_kwargs"] for p in upstream.payloads)
    if rung == FLATTEN_TRANSCRIPT:
        assert not has_tool_structure(upstream.payloads[-1]["messages"])

    rec = only_response(proxy)
    assert rec["has_content"] is True and rec["content"] == "Here is the answer." and "error" not in rec
    assert rec["upstream_status"] == 200 and rec["finish_reason"] == "stop" and rec["tool_history"] is True
    assert rec["incident_class"] == trigger and rec["final_class"] == "ok"
    ladder = rec["ladder"]
    assert ladder["trigger"] == trigger and ladder["outcome"] == "recovered" and ladder["recovered_at"] == rung
    assert [a["rung"] for a in ladder["attempts"]] == expected
    assert [a["incident_class"] for a in ladder["attempts"]] == [trigger] * (len(expected) - 1) + ["ok"]
    assert ladder["attempts"][-1]["status"] == 200 and ladder["attempts"][-1]["completion_tokens"] == 42


def test_length_recovery_over_http(upstream, make_proxy):
    # Empty for lack of budget until the request carries a thinking budget.
    upstream.script = lambda p: ok() if "thinking_token_budget" in p else length_no_content(4096)
    proxy = make_proxy(length_recovery=True, answer_reserve=1024)
    r = post(proxy, client_payload(max_tokens=4096))
    assert r.status_code == 200 and upstream.count == 2
    assert upstream.payloads[1]["thinking_token_budget"] == 4096 - 1024 - 2
    rec = only_response(proxy)
    assert rec["incident_class"] == "length-with-no-content" and rec["final_class"] == "ok"
    assert rec["ladder"]["recovered_at"] == "thinking_budget" and rec["max_tokens"] == 4096


# ---------------------------------------------------------------------------
# Giving up


def test_every_rung_failing_gives_the_client_the_original_500(upstream, proxy):
    upstream.script = always(naked_500)
    r = post(proxy, client_payload())

    assert r.status_code == 500 and r.content == b""
    assert upstream.count == 4  # the original and the three default rungs
    assert upstream.rungs_seen() == ["original", TOOL_CHOICE_NONE, DROP_TOOLS, FINAL_ANSWER]
    rec = only_response(proxy)
    assert rec["error"] == "Provider returned 500: "
    # The naked-500 signature, as the real proxy's allow-list captures it.
    assert rec["upstream_headers"]["content-length"] == "0" and "server" not in rec["upstream_headers"]
    assert rec["upstream_status"] == 500
    assert rec["incident_class"] == rec["final_class"] == "tool-history-5xx"
    ladder = rec["ladder"]
    assert ladder["outcome"] == "exhausted" and ladder["recovered_at"] is None
    assert [a["status"] for a in ladder["attempts"]] == [500] * 4


def test_mixed_failures_then_exhausted(upstream, proxy):
    upstream.script = sequence([naked_500, empty_200_stop, naked_500, empty_200_stop])
    r = post(proxy, client_payload())
    assert r.status_code == 500 and upstream.count == 4
    rec = only_response(proxy)
    assert [a["incident_class"] for a in rec["ladder"]["attempts"]] == [
        "tool-history-5xx", "empty-200-stop", "tool-history-5xx", "empty-200-stop"]


@pytest.mark.parametrize("max_attempts", [1, 2, 3, 5])
def test_never_more_attempts_than_the_bound(upstream, make_proxy, max_attempts):
    upstream.script = always(naked_500)
    proxy = make_proxy(flatten=True, max_attempts=max_attempts)
    r = post(proxy, client_payload())
    assert r.status_code == 500
    assert upstream.count == max_attempts  # counted where the calls land
    rec = only_response(proxy)
    assert len(rec["ladder"]["attempts"]) == max_attempts
    assert rec["ladder"]["outcome"] == ("exhausted" if max_attempts == 5 else "attempt-limit")


def test_time_budget_is_a_hard_bound_over_http(upstream, make_proxy):
    # The original fails fast; every rung hangs far longer than the budget.
    upstream.script = lambda p: naked_500() if p.get("tool_choice") == "auto" else slow(ok(), 30)
    proxy = make_proxy(time_budget_s=1.0)  # generous: a loaded machine must still reach the rung
    r = post(proxy, client_payload())
    assert r.status_code == 500 and upstream.count == 2
    rec = only_response(proxy)
    assert rec["ladder"]["outcome"] == "time-budget"
    assert rec["ladder"]["attempts"][1]["incident_class"] == "timeout"


def test_transport_error_on_a_rung_stops_the_ladder(upstream, proxy):
    upstream.script = sequence([naked_500, hang_up, ok])
    r = post(proxy, client_payload())
    assert r.status_code == 500 and upstream.count == 2  # no third call, though it would have recovered
    rec = only_response(proxy)
    failed = rec["ladder"]["attempts"][1]
    assert rec["ladder"]["outcome"] == "transport-error"
    assert failed["status"] is None and failed["incident_class"] == "connection-error"
    assert failed["error"].startswith("RemoteProtocolError: ")


# ---------------------------------------------------------------------------
# Not retried


def test_request_without_tool_history_is_not_retried(upstream, proxy):
    upstream.script = always(naked_500)
    plain = client_payload(messages=[{"role": "user", "content": "How much of Texas is protected?"}])
    r = post(proxy, plain)
    assert r.status_code == 500 and upstream.count == 1
    rec = only_response(proxy)
    assert rec["tool_history"] is False and rec["ladder"] is None
    assert rec["incident_class"] == rec["final_class"] == "other-5xx"


def test_empty_200_without_tool_history_is_passed_on_untouched(upstream, proxy):
    upstream.script = always(empty_200_stop)
    r = post(proxy, client_payload(messages=[{"role": "user", "content": "hi"}]))
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == ""
    assert upstream.count == 1
    rec = only_response(proxy)
    assert rec["has_content"] is False and rec["incident_class"] == "empty-200-stop" and rec["ladder"] is None


def test_healthy_tool_call_is_passed_on(upstream, proxy):
    call = {"id": "chatcmpl-tool-9", "type": "function", "function": {"name": "fly_to", "arguments": "{}"}}
    upstream.script = always(lambda: completion("", finish_reason="tool_calls", tool_calls=[call]))
    r = post(proxy, client_payload())
    assert r.status_code == 200 and upstream.count == 1
    rec = only_response(proxy)
    assert rec["has_tool_calls"] is True and rec["tool_calls"] == [{"name": "fly_to", "arguments": "{}"}]
    assert rec["incident_class"] == "ok" and rec["ladder"] is None


def test_rate_limit_is_not_retried(upstream, proxy):
    from tools.faulty_upstream import rate_limited

    upstream.script = always(rate_limited)
    r = post(proxy, client_payload())
    assert r.status_code == 429 and upstream.count == 1
    rec = only_response(proxy)
    assert rec["error"].startswith("Provider returned 429: ")
    assert rec["upstream_headers"]["retry-after"] == "45" and rec["incident_class"] == "rate-limited"


def test_unreachable_upstream_is_the_proxys_own_error_path(make_proxy):
    dead = f"http://127.0.0.1:{free_port()}/v1/chat/completions"  # a port nothing listens on
    proxy = make_proxy(upstream_url=dead)
    r = post(proxy, client_payload())
    assert r.status_code == 502
    rec = only_response(proxy)
    assert rec["error"].startswith("ConnectError: ")
    assert rec["incident_class"] == "connection-error" and rec["upstream_status"] is None and rec["ladder"] is None


# ---------------------------------------------------------------------------
# The thinking-budget contract at the proxy boundary


@pytest.mark.parametrize("budget", [-2, 1.5, True, "16"])
def test_invalid_budget_is_rejected_before_any_model_call(upstream, proxy, budget):
    r = post(proxy, client_payload(max_tokens=4096, thinking_token_budget=budget))
    assert r.status_code == 400 and upstream.count == 0
    assert r.json()["error"]["param"] == "thinking_token_budget"
    rec = only_response(proxy)
    assert rec["error"].startswith("ThinkingBudgetError: thinking_token_budget=")
    assert rec["final_class"] == rec["incident_class"] == "client-error"
    assert rec["upstream_status"] is None and rec["ladder"] is None


def test_budget_that_cannot_hold_the_answer_reserve_is_rejected(upstream, make_proxy):
    proxy = make_proxy(answer_reserve=64)
    assert post(proxy, client_payload(max_tokens=192, thinking_token_budget=127)).status_code == 400
    assert upstream.count == 0
    r = post(proxy, client_payload(max_tokens=192, thinking_token_budget=126))  # the exact boundary
    assert r.status_code == 200 and upstream.payloads[0]["thinking_token_budget"] == 126


@pytest.mark.parametrize("budget", [-1, 0, 16])
def test_valid_budgets_are_forwarded_as_sent(upstream, make_proxy, budget):
    proxy = make_proxy(answer_reserve=64)
    r = post(proxy, client_payload(max_tokens=192, thinking_token_budget=budget))
    assert r.status_code == 200
    assert upstream.payloads[0]["thinking_token_budget"] == budget  # -1 never becomes 0
    assert only_response(proxy)["thinking_token_budget"] == budget


# ---------------------------------------------------------------------------
# The log record


def test_log_record_round_trips_through_json(upstream, proxy):
    upstream.script = fail_on_tool_history_with_tools()
    post(proxy, client_payload(max_tokens=2048))
    upstream.script = always(naked_500)
    post(proxy, client_payload(messages=[{"role": "user", "content": "q"}]))

    lines = proxy.log_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    for line in lines:
        record = json.loads(line)
        assert json.dumps(record) == line  # nothing the proxy wrote is lost on a round trip
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", record["timestamp"])
        if record["type"] == "response":
            assert LOG_FIELD_KEYS <= set(record)
            assert record["log_fields_version"] == LOG_FIELDS_VERSION
            assert isinstance(record["latency_ms"], int) and record["model"] == "glm-5"
            assert record["session_id"] == "4a57eaa9-ea0d-44ad-b3d5-a51f3bacced6"
            assert record["client"] == "geo-agent/v3.13.1"
    recovered, plain = [json.loads(x) for x in lines if json.loads(x)["type"] == "response"]
    assert recovered["ladder"]["recovered_at"] == DROP_TOOLS and recovered["ladder"]["outcome"] == "recovered"
    assert recovered["max_tokens"] == 2048
    assert plain["ladder"] is None and plain["incident_class"] == "other-5xx"
    requests = [json.loads(x) for x in lines if json.loads(x)["type"] == "request"]
    assert [r["message_count"] for r in requests] == [len(HISTORY), 1]
    assert all(r["tools_count"] == 3 and r["enable_thinking"] is True for r in requests)


def test_upstream_naked_500_has_the_glm_signature(upstream):
    upstream.script = always(naked_500)
    conn = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=10)
    try:
        conn.request("POST", "/v1/chat/completions", body=json.dumps(client_payload()),
                     headers={"content-type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    assert resp.status == 500 and body == b""
    assert resp.getheader("content-length") == "0" and resp.getheader("server") is None
    assert upstream.count == 1


# ---------------------------------------------------------------------------
# The integration guide's example is this proxy

#: The proxy integration guide, kept beside the module it describes.
GUIDE = REPO / "analyzer" / "online" / "README.md"


def test_readme_example_runs_on_its_own(upstream, tmp_path):
    """The documented code needs nothing from the rest of tests/support/proxy.py."""
    from tests.support.proxy import LadderProxy

    import sys
    import types

    # A module of its own, as a proxy's file is: pydantic resolves ChatRequest through sys.modules.
    module = types.ModuleType("readme_example")
    sys.modules[module.__name__] = module
    try:
        exec(compile(readme_example_source(), "README example", "exec"), module.__dict__)
        upstream.script = fail_on_tool_history_with_tools()
        with LadderProxy(upstream.chat_url, tmp_path / "readme.jsonl", app_factory=module.create_app) as proxy:
            r = post(proxy, client_payload())
            assert r.status_code == 200 and upstream.count == 3
            rec = only_response(proxy)
    finally:
        del sys.modules[module.__name__]
    assert rec["ladder"]["recovered_at"] == DROP_TOOLS and rec["final_class"] == "ok"


def check_readme_section(section: str) -> None:
    """The guide's code is the support proxy's app, and it documents every log key."""
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "the guide has no python example"
    assert blocks[0].strip() == readme_example_source().strip(), \
        "analyzer/online/README.md's example and tests/support/proxy.py differ: copy the marked region into the guide"
    documented = set(re.findall(r"`([a-z_]+)`", section))
    from analyzer.online import Attempt

    attempt_keys = set(Attempt("original", None, "ok", 0).to_dict())
    missing = (LOG_FIELD_KEYS | attempt_keys | {"trigger", "outcome", "recovered_at", "attempts"}) - documented
    assert not missing, f"log keys not documented in analyzer/online/README.md: {sorted(missing)}"


def test_readme_example_is_the_tested_proxy():
    check_readme_section(GUIDE.read_text(encoding="utf-8"))


def test_the_ladder_stops_at_the_callers_deadline_over_http(upstream, make_proxy):
    # The original 500 arrives after 1.2 s of a 2 s caller deadline: no rung can
    # finish in the 0.8 s left (min 1 s), so none starts, and the log says why.
    upstream.script = sequence([slow(naked_500(), 1.2), ok])
    proxy = make_proxy(caller_deadline_s=2.0)
    r = post(proxy, client_payload())
    assert r.status_code == 500 and upstream.count == 1
    rec = only_response(proxy)
    assert rec["ladder"]["outcome"] == "deadline" and rec["ladder"]["recovered_at"] is None
    assert rec["incident_class"] == rec["final_class"] == "tool-history-5xx"


# ---------------------------------------------------------------------------
# GLM as it fails today, over real HTTP: a GLM-5.3 served as glm-5


def test_a_leaked_answer_comes_back_split_and_a_clean_one_byte_for_byte(upstream, make_proxy):
    proxy = make_proxy()
    upstream.script = glm53(always(lambda: ok("The total is 61,883 acres.")))
    # Thinking off, and no override: the normalizer sends false keys (glm-5 reads as GLM-5.0).
    r = post(proxy, client_payload(enable_thinking=False))
    assert r.status_code == 200 and upstream.count == 1
    message = r.json()["choices"][0]["message"]
    assert message["content"] == "The total is 61,883 acres."
    assert message["reasoning_content"] == "The user wants the total; check the schema first."
    rec = proxy.responses()[-1]
    assert (rec["incident_class"], rec["final_class"], rec["reasoning_repaired"]) == ("reasoning-leaked", "ok", True)
    assert rec["thinking_sent"] == {"enable_thinking": False, "thinking": False}
    # Thinking on: the answer as the upstream sent it, to the byte.
    clean = ok("The total is 61,883 acres.")
    upstream.reset(glm53(always(clean)))
    r = post(proxy, client_payload(enable_thinking=True))
    assert r.status_code == 200 and r.content == clean.body
    assert proxy.responses()[-1]["reasoning_repaired"] is False


def test_with_the_template_override_thinking_off_is_the_lowest_effort_and_nothing_leaks(upstream, make_proxy):
    proxy = make_proxy(templates={"glm-5": "glm-5.3"})
    upstream.script = glm53(always(lambda: ok("The total is 61,883 acres.")))
    r = post(proxy, client_payload(enable_thinking=False))
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "The total is 61,883 acres."
    sent = upstream.payloads[0]["chat_template_kwargs"]
    assert sent == {"reasoning_effort": "low"} and not thinking_disabled(upstream.payloads[0])
    rec = proxy.responses()[-1]
    assert rec["incident_class"] == "ok" and rec["thinking_sent"] == {"reasoning_effort": "low"}


def test_an_answer_in_reasoning_with_tool_history_is_retried_and_logged(upstream, make_proxy):
    proxy = make_proxy()
    upstream.script = sequence([answer_in_reasoning(completion_tokens=0), ok])
    r = post(proxy, client_payload())
    assert r.status_code == 200 and upstream.count == 2
    rec = proxy.responses()[-1]
    assert rec["incident_class"] == "answer-in-reasoning" and rec["ladder"]["recovered_at"] == TOOL_CHOICE_NONE
    assert rec["ladder"]["attempts"][0]["has_reasoning_text"] is True


def test_a_budget_the_server_cannot_take_is_a_refused_rung_with_vllms_words(upstream, make_proxy):
    proxy = make_proxy(length_recovery=True, answer_reserve=1024)
    upstream.script = no_reasoning_config(sequence([length_no_content(4096), ok]))
    r = post(proxy, client_payload(max_tokens=4096))
    assert r.status_code == 200
    budget, off = proxy.responses()[-1]["ladder"]["attempts"][1:]
    assert (budget["rung"], budget["status"], budget["refused"]) == ("thinking_budget", 400, True)
    assert budget["refused_reason"].startswith("thinking_token_budget is set but reasoning_config is not configured.")
    assert off["rung"] == "disable_thinking" and off["incident_class"] == "ok"


def test_the_analyzer_reads_what_the_proxy_logged_of_these_shapes(upstream, make_proxy, tmp_path):
    """The proxy's own log, ingested: each turn in its class, the repaired answer counted."""
    from analyzer.classification.turns import refresh_turns
    from analyzer.ingestion.logs import ingest
    from analyzer.outputs.summary import build_summary
    from analyzer.store.db import connect

    proxy = make_proxy(length_recovery=True, answer_reserve=1024)
    upstream.script = glm53(always(lambda: ok("The total is 61,883 acres.")))
    post(proxy, client_payload(enable_thinking=False))
    upstream.reset(always(answer_in_reasoning))
    post(proxy, client_payload(messages=[{"role": "user", "content": "q"}]))
    upstream.reset(no_reasoning_config(sequence([length_no_content(4096), ok])))
    post(proxy, client_payload(max_tokens=4096))
    con = connect(tmp_path / "a.duckdb")
    ingest(con, [str(proxy.log_path)])
    refresh_turns(con)
    classes = [c for (c,) in con.execute("SELECT incident_class FROM turns ORDER BY ts").fetchall()]
    assert classes == ["reasoning-leaked", "answer-in-reasoning", "length-with-no-content"]
    findings = {f["kind"]: f for f in build_summary(con, with_oncall=False)["deployment"]["findings"]}
    assert findings["repaired"]["turns"] == 1 and findings["thinking-off-leaks"]["turns"] == 1
    assert findings["answer-in-reasoning"]["turns"] == 1 and findings["budget-refused"]["turns"] == 1
    con.close()
