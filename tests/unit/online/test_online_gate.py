"""What the ladder must do to fit the real proxy: the model gate, refused rungs,
forwardable headers, the deadline's clock, log fields version 3, and the
client-side classes (a cancelled handler, a request the proxy refused).

The runners are driven by plain functions here; ``test_online_proxy.py`` drives
the same behaviour over real HTTP.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from analyzer.online import (
    LADDER_MODELS,
    LOG_FIELDS_VERSION,
    ClientRequestError,
    LadderSettings,
    arun_ladder,
    decide,
    features_from_exchange,
    forwardable_headers,
    is_glm,
    log_fields,
    model_matches,
    run_ladder,
)
from tests.support.online_ladder import NAKED_500, OK, FakeClock, ScriptedSend, run_both, tool_payload

# ---------------------------------------------------------------------------
# The model gate


@pytest.mark.parametrize("model, glm", [
    ("glm-5", True), ("GLM-4.6", True), ("z-ai/glm-5.2", True), ("zai-org/GLM-5-FP8", True),
    ("qwen3", False), ("kimi-k2", False), ("", False), (None, False), (5, False),
])
def test_is_glm_is_one_rule(model, glm):
    from analyzer.core.focus import is_glm as focus_is_glm

    assert is_glm(model) is glm
    assert focus_is_glm is is_glm  # analyzer.core.focus re-exports the online rule
    assert model_matches(model, LADDER_MODELS) is glm  # the default gate is the same rule


def test_model_patterns_are_case_insensitive_fnmatch():
    assert LADDER_MODELS == ("*glm*",)
    assert model_matches("Qwen/Qwen3-235B", ("qwen/*",))
    assert not model_matches("qwen3", ("qwen/*",))
    assert model_matches("anything", None) and model_matches(None, None)
    assert not model_matches(None, ("*",))
    with pytest.raises(ValueError, match="sequence"):
        model_matches("glm-5", "*glm*")


@pytest.mark.parametrize("model", ["qwen3", "kimi-k2", None])
def test_a_model_outside_the_gate_gets_one_call_and_no_retry(model):
    payload = tool_payload(model=model) if model else {k: v for k, v in tool_payload().items() if k != "model"}
    for result, send in run_both(payload, lambda: ScriptedSend(NAKED_500, OK)):
        assert send.calls == 1 and result.trigger is None and result.armed is False
        assert result.outcome == "not-triggered" and result.to_log() is None
        assert result.attempts[0].incident_class == "tool-history-5xx"  # the incident is still classified
    fields = log_fields(payload, result.status, result.body, result)
    assert fields["ladder_armed"] is False and fields["ladder"] is None
    assert fields["incident_class"] == "tool-history-5xx"


def test_the_gate_arms_glm_and_models_none_arms_every_model():
    for result, send in run_both(tool_payload(model="zai-org/GLM-5-FP8"), lambda: ScriptedSend(NAKED_500, OK)):
        assert result.armed is True and result.recovered_at == "tool_choice_none" and send.calls == 2
    for result, send in run_both(tool_payload(model="qwen3"), lambda: ScriptedSend(NAKED_500, OK), models=None):
        assert result.armed is True and result.recovered_at == "tool_choice_none" and send.calls == 2
    for result, send in run_both(tool_payload(model="qwen3"), lambda: ScriptedSend(NAKED_500, OK),
                                 models=["QWEN*"]):
        assert result.armed is True and send.calls == 2
    # Armed but healthy: armed, not triggered.
    result = run_ladder(tool_payload(), ScriptedSend(OK))
    assert result.armed is True and result.trigger is None
    assert log_fields(tool_payload(), result.status, result.body, result)["ladder_armed"] is True


def test_ladder_armed_is_unknown_without_a_ladder_result():
    # No ladder result (a transport error on the original call, a request refused
    # before any call): null, not false, so the analyzer does not read the record as
    # one of a model the ladder was off for.
    fields = log_fields(tool_payload(), 200, OK[2])
    assert fields["ladder_armed"] is None and fields["log_fields_version"] == LOG_FIELDS_VERSION == 4


@pytest.mark.parametrize("models", ["*glm*", [5], 7])
def test_junk_models_are_refused_before_any_call(models):
    send = ScriptedSend(OK)
    with pytest.raises(ValueError, match="models"):
        run_ladder(tool_payload(), send, LadderSettings(models=models))
    assert send.calls == 0


# ---------------------------------------------------------------------------
# Refused rungs

REFUSED = (400, {"content-type": "application/json"},
           b'{"error": {"message": "thinking.type disabled is not supported"}}')
UNPROCESSABLE = (422, {}, b'{"detail": "unsupported"}')


def test_a_rung_the_upstream_refuses_is_recorded_and_the_next_rung_tried():
    for result, send in run_both(tool_payload(), lambda: ScriptedSend(NAKED_500, REFUSED, UNPROCESSABLE, OK)):
        assert [a.rung for a in result.attempts] == ["original", "tool_choice_none", "drop_tools", "final_answer"]
        assert [a.refused for a in result.attempts] == [False, True, True, False]
        assert result.recovered_at == "final_answer" and send.calls == 4
        log = result.to_log()
        assert all(isinstance(a["refused"], bool) for a in log["attempts"])
        assert json.loads(json.dumps(log)) == log


def test_refused_rungs_count_toward_max_attempts():
    result = run_ladder(tool_payload(), ScriptedSend(NAKED_500, REFUSED, OK), LadderSettings(max_attempts=2))
    assert result.outcome == "attempt-limit" and [a.refused for a in result.attempts] == [False, True]


def test_every_rung_refused_is_exhausted_and_the_original_is_passed_on():
    result = run_ladder(tool_payload(), ScriptedSend(NAKED_500, REFUSED))
    assert result.outcome == "exhausted" and result.status == 500
    assert [a.refused for a in result.attempts] == [False, True, True, True]


def test_an_original_400_is_not_a_refused_rung():
    result = run_ladder(tool_payload(), ScriptedSend(REFUSED))
    assert result.trigger is None and result.attempts[0].refused is False
    assert result.attempts[0].incident_class == "client-error"


def test_a_refused_disable_thinking_rung_is_marked():
    # GLM-5.3 is reported to refuse thinking off: the length ladder's last rung.
    length = (200, {}, json.dumps({"choices": [{"message": {"content": None, "reasoning_content": "hm"},
                                                 "finish_reason": "length"}]}).encode())
    result = run_ladder(tool_payload(max_tokens=1024), ScriptedSend(length, length, REFUSED),
                        LadderSettings(length_recovery=True))
    assert [(a.rung, a.refused) for a in result.attempts] == [
        ("original", False), ("thinking_budget", False), ("disable_thinking", True)]
    assert result.outcome == "exhausted"


# ---------------------------------------------------------------------------
# Forwardable headers


def test_headers_are_a_forwardable_dict_and_the_original_is_kept():
    wire = {"Content-Type": "application/json", "Content-Encoding": "gzip", "Content-Length": "120",
            "Transfer-Encoding": "chunked", "Connection": "keep-alive, X-Hop", "Keep-Alive": "timeout=5",
            "X-Hop": "1", "TE": "trailers", "Trailer": "x", "Upgrade": "h2c", "Proxy-Authenticate": "Basic",
            "Proxy-Authorization": "secret", "X-Request-Id": "abc", "Retry-After": "3"}
    result = run_ladder(tool_payload(), ScriptedSend((200, wire, OK[2])))
    assert result.headers == {"content-type": "application/json", "x-request-id": "abc", "retry-after": "3"}
    assert result.upstream_headers is wire
    # The recovered rung's headers replace the original's.
    rec = run_ladder(tool_payload(), ScriptedSend((500, {"content-length": "0"}, b""), (200, wire, OK[2])))
    assert rec.recovered_at and rec.headers["x-request-id"] == "abc" and rec.upstream_headers is wire


def test_httpx_headers_are_made_forwardable():
    httpx = pytest.importorskip("httpx")
    h = httpx.Headers([("Content-Encoding", "gzip"), ("content-length", "31"), ("Set-Cookie", "a=1"),
                       ("set-cookie", "b=2"), ("content-type", "application/json")])
    out = forwardable_headers(h)
    assert out == {"set-cookie": "a=1, b=2", "content-type": "application/json"}
    assert type(out) is dict


class _BrokenItems(dict):
    def items(self):
        raise RuntimeError("no")


@pytest.mark.parametrize("junk", [None, 5, "content-type: x", b"raw", [("a",)], [1, 2], _BrokenItems(a="b"),
                                  {1: "x", "ok": object(), b"Bytes-Key": b"v", "n": 3}])
def test_junk_headers_never_raise(junk):
    out = forwardable_headers(junk)
    assert isinstance(out, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in out.items())
    for result, _send in run_both(tool_payload(), lambda: ScriptedSend((200, junk, OK[2]))):
        assert isinstance(result.headers, dict) and result.upstream_headers is junk


def test_pairs_are_read_and_bytes_decoded():
    assert forwardable_headers([(b"X-A", b"1"), ("Content-Length", "2")]) == {"x-a": "1"}
    assert forwardable_headers({1: "x", "n": 3, b"Bytes-Key": b"v"}) == {"n": "3", "bytes-key": "v"}


# ---------------------------------------------------------------------------
# The deadline's clock


def test_a_wall_clock_deadline_is_refused_with_the_fix_in_the_message():
    send = ScriptedSend(NAKED_500, OK)
    with pytest.raises(ValueError) as info:
        run_ladder(tool_payload(), send, deadline=time.time() + 300)
    msg = str(info.value)
    assert "time.time()" in msg and "time.monotonic() + seconds" in msg and "time_left_s=" in msg
    with pytest.raises(ValueError, match="time.time"):
        asyncio.run(arun_ladder(tool_payload(), send.coroutine, deadline=time.time() + 300))
    assert send.calls == 0


def test_a_deadline_up_to_a_day_ahead_is_accepted():
    clock = FakeClock()
    assert run_ladder(tool_payload(), ScriptedSend(OK),
                      LadderSettings(clock=clock), deadline=clock.now + 86400).status == 200
    with pytest.raises(ValueError):
        run_ladder(tool_payload(), ScriptedSend(OK), LadderSettings(clock=clock), deadline=clock.now + 86401)
    # The monotonic form the proxy uses.
    assert run_ladder(tool_payload(), ScriptedSend(OK), deadline=time.monotonic() + 300).status == 200


# ---------------------------------------------------------------------------
# Client-side classes


def test_a_cancelled_handler_is_client_cancelled():
    exc = asyncio.CancelledError()
    assert decide(features_from_exchange(tool_payload(), None, None, exc)).incident_class == "client-cancelled"
    fields = log_fields(tool_payload(), None, None, error=exc, latency_ms=1200)
    assert fields["incident_class"] == fields["final_class"] == "client-cancelled"
    assert fields["upstream_status"] is None and fields["ladder"] is None and fields["ladder_armed"] is None
    # The real proxy's text for the same branch reads the same.
    text = "Client disconnected/cancelled after 1200ms (upstream still pending)"
    assert log_fields(tool_payload(), None, None, error=text)["final_class"] == "client-cancelled"


@pytest.mark.parametrize("exc", [
    ClientRequestError("chat_template_kwargs", "junk", "must be an object"),
    ClientRequestError("stream", True, "Streaming is not supported by this proxy"),
])
def test_a_request_the_proxy_refused_is_client_error(exc):
    fields = log_fields(tool_payload(), None, None, error=exc)
    assert fields["incident_class"] == fields["final_class"] == "client-error"
    assert fields["upstream_status"] is None


def test_an_unrouted_model_is_client_error():
    class UnknownModelError(Exception):
        pass

    exc = UnknownModelError("Unknown model 'gpt-9'. This deployment serves: nrp (glm-5)")
    assert log_fields({"model": "gpt-9"}, None, None, error=exc)["final_class"] == "client-error"
