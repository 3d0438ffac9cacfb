"""The real proxy's seams, over real HTTP through the reference proxy
(tests/support/proxy.py, the README's example): a gzip-encoded upstream, a body
pydantic drops fields from, a non-GLM model, a GLM-5.3-like upstream that refuses
a rung's shape, the thinking keys that reach the upstream, and every branch that
writes a response record (refused requests, a client that hangs up).
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from analyzer.online import LOG_FIELDS_VERSION
from tests.support.proxy import create_app
from tools.faulty_upstream import (
    DROP_TOOLS,
    TOOL_CHOICE_NONE,
    always,
    completion,
    fail_on_tool_history_with_tools,
    glm53_refuses_thinking_off,
    gzipped,
    length_no_content,
    naked_500,
    ok,
    refusing,
    slow,
)
from tests.support.proxy_client import LOG_FIELD_KEYS, client_payload, only_response, post

# ---------------------------------------------------------------------------
# A gzip-encoded upstream


def test_a_gzip_encoded_upstream_answer_reaches_the_client_decodable(upstream, proxy):
    upstream.script = always(lambda: gzipped(ok()))
    # The upstream really compresses: httpx decodes the body, its headers describe the wire.
    direct = httpx.post(upstream.chat_url, json=client_payload(), timeout=10)
    assert direct.headers["content-encoding"] == "gzip"
    assert int(direct.headers["content-length"]) != len(direct.content)
    upstream.reset()

    r = post(proxy, client_payload())
    assert r.status_code == 200 and upstream.count == 1
    assert r.json()["choices"][0]["message"]["content"] == "Here is the answer."
    assert "content-encoding" not in r.headers and int(r.headers["content-length"]) == len(r.content)
    assert r.headers["content-type"] == "application/json"
    rec = only_response(proxy)
    assert rec["has_content"] is True and rec["final_class"] == "ok" and rec["ladder_armed"] is True


def test_gzip_on_every_rung_and_on_the_failure_passed_on(upstream, proxy):
    # A recovery whose failures and answer are all compressed.
    upstream.script = fail_on_tool_history_with_tools(failure=lambda: gzipped(naked_500()),
                                                      success=lambda: gzipped(ok()))
    r = post(proxy, client_payload())
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Here is the answer."
    assert only_response(proxy)["ladder"]["recovered_at"] == DROP_TOOLS


def test_a_gzip_encoded_error_body_is_passed_on_decoded(upstream, make_proxy):
    proxy = make_proxy()
    error = completion(status=503)  # any JSON body on an error status
    upstream.script = always(lambda: gzipped(error))
    r = post(proxy, client_payload(messages=[{"role": "user", "content": "q"}]))
    assert r.status_code == 503 and r.json()["choices"][0]["message"]["content"] == "Here is the answer."
    rec = only_response(proxy)
    assert rec["error"].startswith("Provider returned 503: {")  # logged decoded, not as compressed bytes
    assert rec["upstream_headers"]["content-length"] != str(len(r.content))  # the wire's, as the upstream sent it


# ---------------------------------------------------------------------------
# What pydantic drops is read from the raw body


def test_a_negative_budget_in_the_raw_body_is_a_400_and_a_client_error_record(upstream, proxy):
    r = post(proxy, client_payload(max_tokens=4096, thinking_token_budget=-5))
    assert r.status_code == 400 and upstream.count == 0
    assert r.json()["error"]["param"] == "thinking_token_budget"
    rec = only_response(proxy)
    assert rec["error"].startswith("ThinkingBudgetError: thinking_token_budget=-5 rejected")
    assert rec["incident_class"] == rec["final_class"] == "client-error"
    assert rec["thinking_token_budget"] == -5 and rec["upstream_status"] is None
    assert rec["ladder"] is None and rec["ladder_armed"] is None  # no ladder result: unknown


def test_the_clients_template_kwargs_reach_the_upstream_merged(upstream, proxy):
    r = post(proxy, client_payload(chat_template_kwargs={"reasoning_effort": "high"}))
    assert r.status_code == 200
    assert upstream.payloads[0]["chat_template_kwargs"] == {
        "reasoning_effort": "high", "enable_thinking": True, "thinking": True, "clear_thinking": False}


def test_a_body_pydantic_refuses_is_a_400_with_a_record(upstream, proxy):
    r = httpx.post(proxy.chat_url, json=client_payload(enable_thinking="maybe"), timeout=30)
    assert r.status_code == 400 and upstream.count == 0
    assert r.json()["error"]["param"] == "enable_thinking" and "rejected" in r.json()["error"]["message"]
    (rec,) = proxy.records()
    assert rec["type"] == "response" and rec["final_class"] == "client-error"
    assert rec["error"].startswith("ClientRequestError: enable_thinking='maybe' rejected")
    assert LOG_FIELD_KEYS <= set(rec)


# ---------------------------------------------------------------------------
# Thinking keys as the upstream receives them


def test_glm_thinking_on_reaches_the_upstream_with_clear_thinking_false(upstream, proxy):
    post(proxy, client_payload())
    assert upstream.payloads[0]["chat_template_kwargs"] == {
        "enable_thinking": True, "thinking": True, "clear_thinking": False}
    post(proxy, client_payload(enable_thinking=False))
    assert upstream.payloads[1]["chat_template_kwargs"] == {"enable_thinking": False, "thinking": False}
    post(proxy, client_payload(enable_thinking=None))
    assert "chat_template_kwargs" not in upstream.payloads[2]  # the model's default, as the real proxy


def test_clear_thinking_true_is_the_operators_option(upstream, make_proxy):
    proxy = make_proxy(clear_thinking=True)
    post(proxy, client_payload())
    assert upstream.payloads[0]["chat_template_kwargs"] == {
        "enable_thinking": True, "thinking": True, "clear_thinking": True}


# ---------------------------------------------------------------------------
# The model gate


def test_a_non_glm_model_gets_one_upstream_call_and_ladder_armed_false(upstream, proxy):
    upstream.script = always(naked_500)
    r = post(proxy, client_payload(model="qwen3"))
    assert r.status_code == 500 and upstream.count == 1  # a GLM request would have had 4 calls
    assert upstream.payloads[0]["chat_template_kwargs"] == {"enable_thinking": True}  # qwen's own key
    rec = only_response(proxy)
    assert rec["model"] == "qwen3" and rec["ladder_armed"] is False and rec["ladder"] is None
    assert rec["incident_class"] == rec["final_class"] == "tool-history-5xx"
    assert rec["log_fields_version"] == LOG_FIELDS_VERSION == 4


# ---------------------------------------------------------------------------
# A GLM-5.3-like upstream that refuses a rung's shape


def test_a_refused_rung_is_recorded_and_a_later_rung_recovers(upstream, proxy):
    upstream.script = refusing(lambda p: p.get("tool_choice") == "none", fail_on_tool_history_with_tools())
    r = post(proxy, client_payload())
    assert r.status_code == 200 and upstream.rungs_seen() == ["original", TOOL_CHOICE_NONE, DROP_TOOLS]
    rec = only_response(proxy)
    ladder = rec["ladder"]
    assert ladder["outcome"] == "recovered" and ladder["recovered_at"] == DROP_TOOLS
    assert [(a["rung"], a["status"], a["refused"]) for a in ladder["attempts"]] == [
        ("original", 500, False), (TOOL_CHOICE_NONE, 400, True), (DROP_TOOLS, 200, False)]


def test_a_glm53_that_refuses_thinking_off_marks_the_rung_refused(upstream, make_proxy):
    upstream.script = glm53_refuses_thinking_off(always(lambda: length_no_content(4096)))
    proxy = make_proxy(length_recovery=True, answer_reserve=1024)
    r = post(proxy, client_payload(max_tokens=4096))
    assert r.status_code == 200 and upstream.count == 3  # the original length answer is passed on
    assert upstream.payloads[2]["chat_template_kwargs"]["thinking"] is False
    ladder = only_response(proxy)["ladder"]
    assert ladder["outcome"] == "exhausted"
    assert [(a["rung"], a["status"], a["refused"]) for a in ladder["attempts"]] == [
        ("original", 200, False), ("thinking_budget", 200, False), ("disable_thinking", 400, True)]
    # The client's own thinking-off request to that upstream is an ordinary client error, not a refused rung.
    upstream.reset()
    r = post(proxy, client_payload(enable_thinking=False))
    assert r.status_code == 400 and upstream.count == 1
    rec = proxy.responses()[-1]
    assert rec["incident_class"] == "client-error" and rec["ladder"] is None


# ---------------------------------------------------------------------------
# Requests the proxy refuses itself, and a client that hangs up


def test_streaming_is_refused_with_a_client_error_record(upstream, proxy):
    r = post(proxy, client_payload(stream=True))
    assert r.status_code == 400 and upstream.count == 0
    (rec,) = proxy.records()  # no request record, as the real proxy
    assert rec["provider"] == "streaming-unsupported" and rec["final_class"] == "client-error"
    assert rec["latency_ms"] == 0 and rec["upstream_status"] is None


def test_an_unrouted_model_is_refused_with_a_client_error_record(upstream, make_proxy):
    proxy = make_proxy(served=("glm-*", "qwen*"))
    r = post(proxy, client_payload(model="gpt-9"))
    assert r.status_code == 400 and upstream.count == 0 and "Unknown model 'gpt-9'" in r.json()["error"]["message"]
    (rec,) = proxy.records()
    assert rec["provider"] == "unrouted" and rec["final_class"] == "client-error"


def test_a_client_that_hangs_up_leaves_a_client_cancelled_record(upstream, tmp_path):
    upstream.script = always(slow(ok(), 5.0))
    log = tmp_path / "cancelled.jsonl"
    app = create_app(upstream.chat_url, str(log))

    async def main():
        async with app.router.lifespan_context(app):
            # The app runs in the client's task: cancelling it is uvicorn cancelling the handler.
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy") as c:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(c.post("/v1/chat/completions", json=client_payload()), 0.5)

    asyncio.run(main())
    import json

    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["type"] for r in records] == ["request", "response"]
    rec = records[1]
    assert rec["error"].startswith("Client disconnected/cancelled after ")
    assert rec["incident_class"] == rec["final_class"] == "client-cancelled"
    assert rec["upstream_status"] is None and rec["ladder"] is None and rec["ladder_armed"] is None
    assert 400 <= rec["latency_ms"] < 5000
