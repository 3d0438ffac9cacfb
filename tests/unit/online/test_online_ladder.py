"""The fallback ladder: rung payloads (property tests) and the sync/async runners.

The runners are driven by plain functions here (``send(payload) -> (status,
headers, body)``); ``test_online_proxy.py`` drives them over real HTTP.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.online import (
    ALL_RUNGS,
    DEFAULT_RUNGS,
    LENGTH_RUNGS,
    LadderSettings,
    TurnFeatures,
    arun_ladder,
    build_rung,
    ladder_trigger,
    run_ladder,
    rung_payloads,
    validate_thinking_budget,
)
from tests.support.online_ladder import (
    EMPTY_STOP,
    NAKED_500,
    OK,
    TOOLS,
    FakeClock,
    ScriptedSend,
    answer,
    ladder,
    run_both,
    tool_payload,
)

TOOL_KEYS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")
MESSAGE_TOOL_KEYS = ("tool_calls", "function_call", "tool_call_id")

# ---------------------------------------------------------------------------
# Strategies: realistic chat-completions payloads with tool history

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
_name = st.sampled_from(["query", "show_layer", "fly_to", "get_schema", "hide_layer"])
_args = st.one_of(
    st.dictionaries(st.sampled_from(["sql", "layer_id", "lat", "zoom"]), st.integers() | _text, max_size=3)
    .map(json.dumps),
    st.just(""),
    st.dictionaries(st.just("sql"), _text, max_size=1),  # some clients send parsed arguments
)
_content = st.one_of(st.none(), _text, st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _text}),
                                                  max_size=2))


@st.composite
def tool_round(draw, counter):
    """An assistant tool-call message and a result for each call."""
    n = draw(st.integers(1, 3))
    calls = []
    for _ in range(n):
        counter[0] += 1
        calls.append({"id": f"chatcmpl-tool-{counter[0]}", "type": "function",
                      "function": {"name": draw(_name), "arguments": draw(_args)}})
    assistant = {"role": "assistant", "content": draw(_content), "tool_calls": calls}
    if draw(st.booleans()):
        assistant["reasoning_content"] = draw(_text)
    results = [{"role": "tool", "tool_call_id": c["id"], "content": draw(_content)} for c in calls]
    return [assistant, *results]


@st.composite
def legacy_round(draw):
    """The legacy function-calling shape."""
    name = draw(_name)
    return [{"role": "assistant", "content": None, "function_call": {"name": name, "arguments": draw(_args)}},
            {"role": "function", "name": name, "content": draw(_content)}]


@st.composite
def plain_turn(draw):
    """A plain assistant answer (sometimes with the empty tool_calls vLLM echoes back) or a user message."""
    if draw(st.booleans()):
        msg = {"role": "assistant", "content": draw(_text)}
        extra = draw(st.sampled_from(["none", "empty-list", "null"]))
        if extra == "empty-list":
            msg["tool_calls"] = []
        elif extra == "null":
            msg["tool_calls"] = None
        return [msg]
    return [{"role": "user", "content": draw(_content)}]


@st.composite
def transcripts(draw, with_tool_history=True):
    counter = [0]
    messages = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(_text)})
    messages.append({"role": "user", "content": draw(_text)})
    kinds = ["tool", "legacy", "plain"] if with_tool_history else ["plain"]
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(kinds))
        messages += draw(tool_round(counter)) if kind == "tool" else draw(legacy_round()) if kind == "legacy" \
            else draw(plain_turn())
    if with_tool_history and not any(m["role"] in ("tool", "function") for m in messages):
        messages += draw(tool_round(counter))
    return messages


_tool_def = _name.map(lambda n: {"type": "function", "function": {
    "name": n, "description": f"{n} tool", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}})


@st.composite
def payloads(draw, with_tool_history=True):
    payload = {"model": draw(st.sampled_from(["glm-5", "z-ai/glm-5.2", "qwen3", "kimi-k2"])),
               "messages": draw(transcripts(with_tool_history))}
    payload["tools"] = draw(st.lists(_tool_def, min_size=1, max_size=4))  # a tool session offers tools
    if draw(st.booleans()):
        payload["tool_choice"] = draw(st.sampled_from(
            ["auto", "required", {"type": "function", "function": {"name": "query"}}]))
    if draw(st.booleans()):
        payload["parallel_tool_calls"] = draw(st.booleans())
    if draw(st.booleans()):
        payload["max_tokens"] = draw(st.integers(1, 32768))
    if draw(st.booleans()):
        payload["chat_template_kwargs"] = {"enable_thinking": draw(st.booleans())}
    if draw(st.booleans()):
        payload["temperature"] = 0.0
    return payload


# ---------------------------------------------------------------------------
# What a payload offers the model


def offers_tools(p):
    return bool(p.get("tools") or p.get("functions"))


def may_call_tools(p):
    return offers_tools(p) and p.get("tool_choice") != "none"


def tool_structure(messages):
    """Messages that still carry any tool structure (role or key)."""
    return [m for m in messages if isinstance(m, dict)
            and (m.get("role") in ("tool", "function") or any(k in m for k in MESSAGE_TOOL_KEYS))]


def tool_surface(p):
    """What a payload exposes of tools; each rung may only shrink this set."""
    surface = set()
    if offers_tools(p):
        surface.add("offers-tools")
    if may_call_tools(p):
        surface.add("may-call-tools")
    if tool_structure(p.get("messages") or []):
        surface.add("tool-structure-in-transcript")
    return surface


def is_final_answer_request(m):
    return m.get("role") == "user" and "final answer" in str(m.get("content")).lower()


# ---------------------------------------------------------------------------
# Rung payloads: properties


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads())
def test_rungs_never_mutate_the_input(payload):
    before = copy.deepcopy(payload)
    built = rung_payloads(payload, ALL_RUNGS + LENGTH_RUNGS)
    assert payload == before
    for _rung, out in built:
        assert out is not payload
        json.dumps(out)  # still a JSON request


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads())
def test_rungs_shrink_the_tool_surface_monotonically(payload):
    built = dict(rung_payloads(payload, ALL_RUNGS))
    assert list(built) == list(ALL_RUNGS)
    surfaces = [tool_surface(payload)] + [tool_surface(built[r]) for r in ALL_RUNGS]
    for wider, narrower in zip(surfaces, surfaces[1:]):
        assert narrower <= wider

    # 1. tool_choice none: tools and transcript kept, calling switched off.
    r1 = built["tool_choice_none"]
    assert r1["tool_choice"] == "none" and not may_call_tools(r1)
    assert {k: v for k, v in r1.items() if k != "tool_choice"} == \
        {k: v for k, v in payload.items() if k != "tool_choice"}
    assert r1["messages"] is payload["messages"]  # shared, not copied
    # 2. drop_tools: no tool key at all, everything else as sent.
    r2 = built["drop_tools"]
    assert not any(k in r2 for k in TOOL_KEYS)
    assert r2 == {k: v for k, v in payload.items() if k not in TOOL_KEYS}
    # 3. final_answer: as 2, plus one user message asking for the final answer.
    r3 = built["final_answer"]
    assert not any(k in r3 for k in TOOL_KEYS)
    assert r3["messages"][:-1] == payload["messages"] and is_final_answer_request(r3["messages"][-1])
    assert {k: v for k, v in r3.items() if k != "messages"} == {k: v for k, v in r2.items() if k != "messages"}
    # 4. flatten_transcript: no tool structure anywhere.
    r4 = built["flatten_transcript"]
    assert not any(k in r4 for k in TOOL_KEYS)
    msgs = r4["messages"]
    assert tool_structure(msgs) == []
    assert {m["role"] for m in msgs} <= {"system", "user", "assistant"}
    assert len(msgs) == len(payload["messages"]) + 1 and is_final_answer_request(msgs[-1])
    assert tool_surface(r4) == set()


@settings(max_examples=100, deadline=None)
@given(payloads())
def test_flatten_keeps_what_the_tools_said(payload):
    msgs = build_rung(payload, "flatten_transcript")["messages"]
    text = "\n".join(str(m.get("content")) for m in msgs)
    for m in payload["messages"]:
        for call in m.get("tool_calls") or []:
            assert call["function"]["name"] in text
        if m.get("function_call"):
            assert m["function_call"]["name"] in text
        if m["role"] in ("tool", "function") and isinstance(m.get("content"), str):
            assert m["content"] in text
    # Messages with no tool structure at all are passed through untouched.
    for original, flat in zip(payload["messages"], msgs):
        if not tool_structure([original]):
            assert flat is original


@settings(max_examples=50, deadline=None)
@given(payloads(with_tool_history=False))
def test_rungs_on_a_transcript_without_tool_history(payload):
    r4 = build_rung(payload, "flatten_transcript")
    assert tool_structure(r4["messages"]) == []
    assert r4["messages"][:-1] == [
        {k: v for k, v in m.items() if k not in MESSAGE_TOOL_KEYS} for m in payload["messages"]]


def test_drop_tools_removes_the_legacy_function_keys_too():
    payload = {"model": "glm-5", "messages": [], "functions": [{"name": "f"}], "function_call": "auto",
               "tools": [], "tool_choice": "auto", "parallel_tool_calls": False, "temperature": 0}
    assert build_rung(payload, "drop_tools") == {"model": "glm-5", "messages": [], "temperature": 0}


def test_unknown_rung_is_an_error():
    with pytest.raises(ValueError, match="unknown ladder rung"):
        build_rung({"messages": []}, "retry_harder")


def test_rung_payloads_default_is_every_tool_rung_in_order():
    payload = {"messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function"}]}
    assert [r for r, _ in rung_payloads(payload)] == list(ALL_RUNGS)
    assert ALL_RUNGS[: len(DEFAULT_RUNGS)] == DEFAULT_RUNGS and ALL_RUNGS[-1] == "flatten_transcript"


# ---------------------------------------------------------------------------
# The runners (the request, the scripted replies and run_both: tests/support/online_ladder.py)


def summary(result):
    return [(a.rung, a.status, a.incident_class) for a in result.attempts]


@pytest.mark.parametrize("replies, recovered_at, calls", [
    ((NAKED_500, OK), "tool_choice_none", 2),
    ((NAKED_500, NAKED_500, OK), "drop_tools", 3),
    ((NAKED_500, NAKED_500, EMPTY_STOP, OK), "final_answer", 4),
    ((EMPTY_STOP, OK), "tool_choice_none", 2),
    ((EMPTY_STOP, EMPTY_STOP, EMPTY_STOP, OK), "final_answer", 4),
])
def test_recovery_at_the_expected_rung(replies, recovered_at, calls):
    for result, send in run_both(tool_payload(), lambda: ScriptedSend(*replies)):
        assert result.recovered_at == recovered_at and result.outcome == "recovered"
        assert send.calls == calls and len(result.attempts) == calls
        assert [a.rung for a in result.attempts] == ["original", *DEFAULT_RUNGS][:calls]
        assert (result.status, result.body) == (OK[0], OK[2])  # the recovered answer is passed on
        assert result.trigger == ("tool-history-5xx" if replies[0] is NAKED_500 else "empty-200-stop")
        # What was sent really was each rung's payload.
        assert send.payloads[0] is not None and send.payloads[1]["tool_choice"] == "none"


def test_flatten_is_opt_in():
    replies = (NAKED_500, NAKED_500, NAKED_500, NAKED_500, OK)
    (sync, s), (asyn, a) = run_both(tool_payload(), lambda: ScriptedSend(*replies))
    assert sync.outcome == asyn.outcome == "exhausted" and s.calls == a.calls == 4
    (sync, s), (asyn, a) = run_both(tool_payload(), lambda: ScriptedSend(*replies), flatten=True, max_attempts=5)
    assert sync.recovered_at == asyn.recovered_at == "flatten_transcript" and s.calls == a.calls == 5
    assert tool_structure(s.payloads[-1]["messages"]) == []


def test_every_rung_failing_passes_the_original_answer_on():
    original = (500, {"content-length": "0", "date": "x"}, b"")
    for result, send in run_both(tool_payload(), lambda: ScriptedSend(original, EMPTY_STOP, NAKED_500, EMPTY_STOP)):
        assert result.outcome == "exhausted" and result.recovered_at is None
        assert (result.status, result.upstream_headers, result.body) == original
        assert result.headers == {"date": "x"}  # forwardable: content-length described the wire
        assert send.calls == 4
        assert summary(result) == [("original", 500, "tool-history-5xx"), ("tool_choice_none", 200, "empty-200-stop"),
                                   ("drop_tools", 500, "tool-history-5xx"), ("final_answer", 200, "empty-200-stop")]
        log = result.to_log()
        assert log["outcome"] == "exhausted" and len(log["attempts"]) == 4
        assert json.loads(json.dumps(log)) == log


@pytest.mark.parametrize("reply, expected_class", [
    (OK, "ok"),
    ((200, {}, answer(content="", tool_calls=[{"id": "c", "type": "function",
                                                "function": {"name": "query", "arguments": "{}"}}],
                      finish="tool_calls")), "ok"),
    ((429, {"retry-after": "45"}, b'{"error": "rate"}'), "rate-limited"),
    ((400, {}, b'{"error": "bad"}'), "client-error"),
    ((200, {}, answer(content="", finish="length", reasoning="hmm", tokens=512)), "length-with-no-content"),
])
def test_answers_that_do_not_trigger_the_ladder(reply, expected_class):
    for result, send in run_both(tool_payload(max_tokens=512), lambda: ScriptedSend(reply, OK)):
        assert send.calls == 1 and result.outcome == "not-triggered" and result.trigger is None
        assert result.to_log() is None
        assert summary(result) == [("original", reply[0], expected_class)]


def test_no_tool_history_means_no_retry():
    plain = {"model": "glm-5", "messages": [{"role": "user", "content": "q"}], "tools": TOOLS}
    for reply, cls in ((NAKED_500, "other-5xx"), (EMPTY_STOP, "empty-200-stop")):
        for result, send in run_both(plain, lambda: ScriptedSend(reply, OK)):
            assert send.calls == 1 and result.trigger is None and summary(result)[0][2] == cls


def test_an_empty_or_non_json_200_on_a_rung_is_not_a_recovery():
    replies = (NAKED_500, (200, {}, b""), (200, {}, b"<html>upstream hiccup</html>"), OK)
    for result, send in run_both(tool_payload(), lambda: ScriptedSend(*replies)):
        assert result.recovered_at == "final_answer" and send.calls == 4
        assert [a.incident_class for a in result.attempts[1:3]] == ["empty-200-stop", "empty-200-stop"]


def test_ladder_trigger():
    assert ladder_trigger(TurnFeatures(status=500, tool_history=True)) == "tool-history-5xx"
    assert ladder_trigger(TurnFeatures(status=500, tool_history=False)) is None
    empty = dict(status=200, has_content=False, has_tool_calls=False, finish_reason="stop")
    assert ladder_trigger(TurnFeatures(**empty, tool_history=True)) == "empty-200-stop"
    assert ladder_trigger(TurnFeatures(**empty, tool_history=False)) is None
    length = dict(status=200, has_content=False, has_tool_calls=False, finish_reason="length", tool_history=True)
    assert ladder_trigger(TurnFeatures(**length)) is None
    assert ladder_trigger(TurnFeatures(**length), length_recovery=True) == "length-with-no-content"
    assert ladder_trigger(TurnFeatures(status=500, tool_history=True, error_kind="config")) is None
    assert ladder_trigger(TurnFeatures(error_kind="timeout", tool_history=True)) is None


# -- bounds -----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(max_attempts=st.integers(1, 7), flatten=st.booleans(), failure=st.sampled_from([NAKED_500, EMPTY_STOP]))
def test_never_more_calls_than_max_attempts(max_attempts, flatten, failure):
    rungs = ALL_RUNGS if flatten else DEFAULT_RUNGS
    send = ScriptedSend(failure)
    result = run_ladder(tool_payload(), send, LadderSettings(flatten=flatten, max_attempts=max_attempts))
    expected = min(max_attempts, 1 + len(rungs))
    assert send.calls == len(result.attempts) == expected <= max_attempts
    assert result.outcome == ("exhausted" if max_attempts > len(rungs) else "attempt-limit")
    assert [a.rung for a in result.attempts] == ["original", *rungs][:expected]


@settings(max_examples=80, deadline=None)
@given(oks=st.lists(st.booleans(), min_size=1, max_size=6), max_attempts=st.integers(1, 6))
def test_recovers_at_the_first_good_rung_within_the_bound(oks, max_attempts):
    """Model check: call i answers OK iff oks[i] (the original must fail to trigger)."""
    replies = [NAKED_500] + [OK if good else NAKED_500 for good in oks]
    send = ScriptedSend(*replies)
    result = run_ladder(tool_payload(), send, LadderSettings(flatten=True, max_attempts=max_attempts))
    allowed = min(max_attempts - 1, len(ALL_RUNGS))  # rung calls the bounds allow
    first_good = next((i for i, good in enumerate((oks + [oks[-1]] * 6)[:allowed]) if good), None)
    if first_good is None:
        assert result.recovered_at is None and send.calls == 1 + allowed
        assert (result.status, result.body) == NAKED_500[::2]
    else:
        assert result.recovered_at == ALL_RUNGS[first_good] and send.calls == first_good + 2
    assert send.calls <= max_attempts


@pytest.mark.parametrize("budget, cost, rung_calls", [
    (15, 10, 2),   # rungs start at elapsed 0 and 10; the third would start at 20 > 15
    (10, 10, 1),   # the second rung would start exactly when the budget is spent
    (25, 10, 3),
    (1000, 10, 3),  # the budget never binds: every default rung runs
    (5, 100, 1),   # a rung that overruns is not interrupted by the sync runner, but nothing follows it
])
def test_time_budget_with_an_injected_clock(budget, cost, rung_calls):
    clock = FakeClock()
    send = ScriptedSend(NAKED_500, clock=clock, cost=cost)
    result = run_ladder(tool_payload(), send, LadderSettings(time_budget_s=budget, clock=clock))
    assert send.calls == 1 + rung_calls
    assert result.outcome == ("time-budget" if rung_calls < len(DEFAULT_RUNGS) else "exhausted")
    assert all(a.latency_ms == cost * 1000 for a in result.attempts)  # latency read from the same clock

    clock = FakeClock()
    asend = ScriptedSend(NAKED_500, clock=clock, cost=cost)
    aresult = asyncio.run(arun_ladder(tool_payload(), asend.coroutine,
                                      LadderSettings(time_budget_s=budget, clock=clock)))
    assert asend.calls == send.calls and aresult.outcome == result.outcome


def test_async_budget_is_a_hard_bound_on_a_hanging_rung():
    cancelled = []

    async def send(payload):
        if payload.get("tool_choice") != "none":
            return NAKED_500
        try:
            await asyncio.Event().wait()  # never answers
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    result = asyncio.run(arun_ladder(tool_payload(), send, LadderSettings(time_budget_s=0.5)))
    assert cancelled == [True]
    assert result.outcome == "time-budget" and result.recovered_at is None
    assert summary(result) == [("original", 500, "tool-history-5xx"), ("tool_choice_none", None, "timeout")]
    assert (result.status, result.body) == (500, b"")


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"max_attempts": -1}, {"max_attempts": 2.5},
                                    {"time_budget_s": 0}, {"time_budget_s": -1}])
def test_invalid_bounds_are_rejected_before_any_call(kwargs):
    send = ScriptedSend(OK)
    with pytest.raises(ValueError):
        ladder(run_ladder, tool_payload(), send, **kwargs)
    with pytest.raises(ValueError):
        asyncio.run(ladder(arun_ladder, tool_payload(), send.coroutine, **kwargs))
    assert send.calls == 0


# -- transport errors ---------------------------------------------------------


def test_exception_on_the_original_call_propagates_unchanged():
    boom = ConnectionRefusedError(111, "Connection refused")
    send = ScriptedSend(boom, OK)
    with pytest.raises(ConnectionRefusedError) as info:
        run_ladder(tool_payload(), send)
    assert info.value is boom and send.calls == 1

    asend = ScriptedSend(boom, OK)
    with pytest.raises(ConnectionRefusedError) as ainfo:
        asyncio.run(arun_ladder(tool_payload(), asend.coroutine))
    assert ainfo.value is boom and asend.calls == 1


@pytest.mark.parametrize("exc, cls", [
    (ConnectionRefusedError(111, "Connection refused"), "connection-error"),
    (ConnectionResetError(104, "Connection reset by peer"), "connection-error"),
    (RuntimeError("boom"), "other-5xx"),
])
def test_transport_error_on_a_rung_stops_the_ladder(exc, cls):
    for result, send in run_both(tool_payload(), lambda: ScriptedSend(NAKED_500, exc, OK)):
        assert send.calls == 2  # no rung after the failure, though one would have recovered
        assert result.outcome == "transport-error" and result.recovered_at is None
        assert (result.status, result.body) == (500, b"")  # the original answer is passed on
        failed = result.attempts[1]
        assert (failed.rung, failed.status, failed.incident_class) == ("tool_choice_none", None, cls)
        assert failed.error.startswith(type(exc).__name__ + ": ")


# -- length recovery ------------------------------------------------------------

LENGTH = (200, {}, answer(content=None, finish="length", reasoning="thinking " * 50, tokens=1024))


def test_length_recovery_is_opt_in():
    payload = tool_payload(max_tokens=1024)
    send = ScriptedSend(LENGTH, OK)
    result = run_ladder(payload, send)
    assert send.calls == 1 and result.trigger is None
    assert result.attempts[0].incident_class == "length-with-no-content"


def test_length_recovery_budget_then_thinking_off():
    payload = tool_payload(max_tokens=1024, chat_template_kwargs={"enable_thinking": True, "clear_thinking": False})
    before = copy.deepcopy(payload)
    for result, send in run_both(payload, lambda: ScriptedSend(LENGTH, LENGTH, OK), length_recovery=True,
                                 answer_reserve=256):
        assert result.trigger == "length-with-no-content"
        assert [a.rung for a in result.attempts] == ["original", *LENGTH_RUNGS]
        assert result.recovered_at == "disable_thinking" and send.calls == 3
        budgeted, off = send.payloads[1], send.payloads[2]
        # The budget leaves exactly the reserve: it passes the contract at the boundary.
        assert budgeted["thinking_token_budget"] == 1024 - 256 - 2
        assert validate_thinking_budget(budgeted["thinking_token_budget"], 1024, 256) == 766
        # Thinking off: both GLM keys false, the client's clear_thinking kept, no budget; tools untouched.
        assert off["chat_template_kwargs"] == {"enable_thinking": False, "thinking": False, "clear_thinking": False}
        assert "thinking_token_budget" not in off and off["tools"] is TOOLS
    assert payload == before


def test_length_recovery_at_the_budget_rung():
    payload = tool_payload(max_tokens=4096)
    send = ScriptedSend(LENGTH, OK)
    result = run_ladder(payload, send, LadderSettings(length_recovery=True, answer_reserve=1024))
    assert result.recovered_at == "thinking_budget" and send.calls == 2
    assert send.payloads[1]["thinking_token_budget"] == 3070  # the answer-reserve table's exact-boundary row (4096, reserve 1024)


def test_length_recovery_does_not_replace_the_tool_ladder():
    send = ScriptedSend(NAKED_500, OK)
    result = run_ladder(tool_payload(), send, LadderSettings(length_recovery=True))
    assert result.recovered_at == "tool_choice_none"


def test_thinking_budget_rung_never_raises_a_lower_client_budget():
    from analyzer.online import build_rung

    low = build_rung({"max_tokens": 4096, "thinking_token_budget": 64, "messages": []}, "thinking_budget")
    assert low["thinking_token_budget"] == 64
    none = build_rung({"max_tokens": 4096, "messages": []}, "thinking_budget", answer_reserve=1024)
    assert none["thinking_token_budget"] == 4096 - 1024 - 2


def test_tool_choice_none_also_closes_the_legacy_function_call():
    from analyzer.online import build_rung

    out = build_rung({"functions": [{"name": "q"}], "function_call": "auto", "messages": []}, "tool_choice_none")
    assert out["function_call"] == "none" and out["tool_choice"] == "none"


# -- a ladder that fits production ---------------------------------------------


def test_every_enabled_rung_is_reachable_under_the_defaults():
    for flatten, rungs in ((False, DEFAULT_RUNGS), (True, ALL_RUNGS)):
        for result, send in run_both(tool_payload(), lambda: ScriptedSend(NAKED_500), flatten=flatten):
            assert [a.rung for a in result.attempts] == ["original", *rungs]
            assert result.outcome == "exhausted" and send.calls == 1 + len(rungs)
    payload = tool_payload(max_tokens=2048)
    result = run_ladder(payload, ScriptedSend(LENGTH), LadderSettings(length_recovery=True))
    assert [a.rung for a in result.attempts] == ["original", *LENGTH_RUNGS]


def test_no_thinking_budget_without_a_max_tokens_to_size_it_from():
    payload = tool_payload()
    payload.pop("max_tokens", None)
    for result, send in run_both(payload, lambda: ScriptedSend(LENGTH, OK), length_recovery=True):
        assert all("thinking_token_budget" not in p for p in send.payloads)
        assert [a.rung for a in result.attempts] == ["original", "disable_thinking"]
        assert result.skipped == [{"rung": "thinking_budget",
                                   "reason": "the request has no max_tokens to size a thinking budget from"}]
        assert result.to_log()["skipped"] == result.skipped and result.recovered_at == "disable_thinking"
    # No room under the cap after the answer reserve: skipped too, never a budget of 0.
    tight = run_ladder(tool_payload(max_tokens=200), ScriptedSend(LENGTH, OK),
                       LadderSettings(length_recovery=True, answer_reserve=256))
    assert [s["rung"] for s in tight.skipped] == ["thinking_budget"]


def test_a_rung_that_cannot_be_built_is_skipped_and_recorded():
    # Client junk where the template kwargs belong: thinking cannot be switched off.
    payload = tool_payload(max_tokens=1024, chat_template_kwargs="junk")
    for result, send in run_both(payload, lambda: ScriptedSend(LENGTH), length_recovery=True):
        assert [a.rung for a in result.attempts] == ["original", "thinking_budget"]
        assert [s["rung"] for s in result.skipped] == ["disable_thinking"]
        assert "chat_template_kwargs" in result.skipped[0]["reason"]
        assert result.outcome == "exhausted" and send.calls == 2


@pytest.mark.parametrize("answer_value", [
    None, 5, "200", (200, {}), [500, {}, b"", "extra"], ("200", {}, b""), (True, {}, b""), (200.0, {}, b""),
])
def test_whatever_send_returns_is_an_attempt_not_an_exception(answer_value):
    # On the original call: a result with no HTTP status, class other-5xx.
    for result, _send in run_both(tool_payload(), lambda: ScriptedSend(answer_value)):
        assert result.status is None and result.outcome == "not-triggered"
        assert result.attempts[0].incident_class == "other-5xx"
        assert result.attempts[0].error.startswith("MalformedAnswer: send returned")
    # On a rung: recorded, and the ladder goes on to the next rung.
    for result, send in run_both(tool_payload(), lambda: ScriptedSend(NAKED_500, answer_value, OK)):
        assert [a.incident_class for a in result.attempts] == ["tool-history-5xx", "other-5xx", "ok"]
        assert result.recovered_at == "drop_tools"
        json.dumps(result.to_log())


def test_no_rung_starts_that_cannot_finish_before_the_caller_deadline():
    clock = FakeClock()
    send = ScriptedSend(NAKED_500, OK, clock=clock, cost=100.0)  # every call takes 100 s
    # The caller gives up 150 s after the request: the original took 100 s, 50 s are left,
    # so one rung may start (min_attempt_s=60 would forbid it).
    result = run_ladder(tool_payload(), send, LadderSettings(clock=clock, min_attempt_s=60), deadline=clock.now + 150)
    assert result.outcome == "deadline" and send.calls == 1 and result.recovered_at is None
    assert result.to_log()["outcome"] == "deadline"


def test_time_left_is_the_relative_form_of_the_deadline():
    clock = FakeClock()
    send = ScriptedSend(NAKED_500, OK, clock=clock, cost=100.0)
    result = run_ladder(tool_payload(), send, LadderSettings(clock=clock, min_attempt_s=60), time_left_s=150)
    assert result.outcome == "deadline" and send.calls == 1
    # Enough time left: the ladder runs and recovers.
    clock2 = FakeClock()
    send2 = ScriptedSend(NAKED_500, OK, clock=clock2, cost=10.0)
    ok = run_ladder(tool_payload(), send2, LadderSettings(clock=clock2), time_left_s=300)
    assert ok.recovered_at == "tool_choice_none"


def test_an_answer_after_the_deadline_is_not_a_recovery_in_the_sync_runner():
    clock = FakeClock()
    send = ScriptedSend(NAKED_500, OK, clock=clock, cost=100.0)
    # 50 s left after the original: the rung starts (min 1 s) but its answer lands at 200 s.
    result = run_ladder(tool_payload(), send, LadderSettings(clock=clock), deadline=clock.now + 150)
    assert send.calls == 2 and result.outcome == "deadline" and result.recovered_at is None
    assert result.attempts[-1].incident_class == "ok"  # the answer itself was fine
    assert result.status == 500  # the client is passed the original answer


def test_the_async_runner_cuts_a_rung_off_at_the_deadline():
    async def main():
        calls = []

        async def send(payload):
            calls.append(payload)
            if len(calls) == 1:
                return NAKED_500
            await asyncio.sleep(5)  # a slow rung
            return OK

        loop = asyncio.get_running_loop()
        return await arun_ladder(tool_payload(), send,
                                 LadderSettings(clock=loop.time, min_attempt_s=0.1), deadline=loop.time() + 1.3), calls

    result, calls = asyncio.run(main())
    assert len(calls) == 2 and result.outcome == "deadline"
    assert result.attempts[-1].incident_class == "timeout"
    assert result.attempts[-1].error.startswith("DeadlineExceeded: the caller's deadline passed")


@pytest.mark.parametrize("kwargs", [
    {"time_budget_s": float("nan")}, {"time_budget_s": "60"}, {"time_budget_s": True},
    {"max_attempts": True}, {"answer_reserve": -1}, {"answer_reserve": 1.5},
    {"deadline": float("nan")}, {"deadline": float("inf")}, {"time_left_s": float("nan")},
    {"min_attempt_s": -1}, {"rungs": ["drop_tools", "nope"]}, {"rungs": "drop_tools"},
])
def test_budgets_and_bounds_are_validated(kwargs):
    send = ScriptedSend(OK)
    with pytest.raises(ValueError):
        ladder(run_ladder, tool_payload(), send, **kwargs)
    assert send.calls == 0
    # No bound at all is said with math.inf, not NaN.
    assert run_ladder(tool_payload(), ScriptedSend(NAKED_500, OK),
                      LadderSettings(time_budget_s=float("inf"))).recovered_at


def test_the_deadline_stops_a_rung_even_when_the_budget_is_tighter():
    clock = FakeClock()
    send = ScriptedSend(NAKED_500, OK, clock=clock, cost=100.0)
    # After the original: 0.5 s to the deadline (< min_attempt_s), 0.2 s of budget left.
    result = run_ladder(tool_payload(), send,
                        LadderSettings(clock=clock, time_budget_s=0.2), deadline=clock.now + 100.5)
    assert result.outcome == "deadline" and send.calls == 1


# ---------------------------------------------------------------------------
# GLM as it fails today: leaked think blocks, answers in reasoning, budgets refused

LEAKED = (200, {"content-type": "application/json"}, answer(content="Simple question.</think>2 + 2 = **4**"))
IN_REASONING = (200, {}, answer(content="", reasoning="Texas holds 61,883 acres.", tokens=0))
# vLLM's 400 for a budget on a server started without --reasoning-parser.
NO_PARSER = (400, {}, json.dumps({"object": "error", "type": "BadRequestError", "code": 400, "message": (
    "thinking_token_budget is set but reasoning_config is not configured. Please set --reasoning-parser "
    "and/or --reasoning-config to use thinking_token_budget.")}).encode())


def test_a_leaked_answer_comes_back_split_and_says_so():
    payload = {"model": "glm-5", "messages": [{"role": "user", "content": "2+2?"}]}
    for result, send in run_both(payload, lambda: ScriptedSend(LEAKED)):
        assert send.calls == 1 and result.trigger is None and result.reasoning_repaired is True
        message = json.loads(result.body)["choices"][0]["message"]
        assert message == {"role": "assistant", "content": "2 + 2 = **4**", "tool_calls": [],
                           "reasoning_content": "Simple question."}
        # The incident is the original answer's: the user would have seen the scratchpad.
        assert result.attempts[0].incident_class == "reasoning-leaked" and result.attempts[0].reasoning_leaked


def test_a_clean_answer_is_passed_on_byte_for_byte():
    payload = {"model": "glm-5", "messages": [{"role": "user", "content": "2+2?"}]}
    for result, _ in run_both(payload, lambda: ScriptedSend(OK)):
        assert result.body is OK[2] and result.reasoning_repaired is False


def test_repair_follows_the_model_gate_and_can_be_turned_off():
    qwen = {"model": "qwen3", "messages": [{"role": "user", "content": "q"}]}
    assert run_ladder(qwen, ScriptedSend(LEAKED)).body is LEAKED[2]  # not armed: exactly what send returned
    glm = {"model": "glm-5", "messages": [{"role": "user", "content": "q"}]}
    off = run_ladder(glm, ScriptedSend(LEAKED), LadderSettings(repair_reasoning=False))
    assert off.body is LEAKED[2] and off.reasoning_repaired is False
    with pytest.raises(ValueError, match="repair_reasoning"):
        run_ladder(glm, ScriptedSend(OK), LadderSettings(repair_reasoning=1))


def test_a_recovered_rung_that_leaks_is_repaired_too():
    result = run_ladder(tool_payload(), ScriptedSend(NAKED_500, LEAKED))
    assert result.recovered_at == "tool_choice_none" and result.reasoning_repaired
    assert json.loads(result.body)["choices"][0]["message"]["content"] == "2 + 2 = **4**"


def test_an_answer_in_reasoning_with_tool_history_is_retried():
    for result, send in run_both(tool_payload(), lambda: ScriptedSend(IN_REASONING, OK)):
        assert result.trigger == "answer-in-reasoning" and result.recovered_at == "tool_choice_none"
        assert result.attempts[0].has_reasoning_text is True and send.calls == 2
    # Without tool history it is passed on (the fix is the deployment's parser, not a retry).
    plain = {"model": "glm-5", "messages": [{"role": "user", "content": "q"}]}
    result = run_ladder(plain, ScriptedSend(IN_REASONING))
    assert result.trigger is None and result.attempts[0].incident_class == "answer-in-reasoning"


def test_a_budget_refused_for_lack_of_a_parser_is_a_refused_rung_with_vllms_reason():
    payload = tool_payload(max_tokens=4096)
    for result, send in run_both(payload, lambda: ScriptedSend(LENGTH, NO_PARSER, OK), length_recovery=True):
        budget, off = result.attempts[1], result.attempts[2]
        assert (budget.rung, budget.status, budget.refused) == ("thinking_budget", 400, True)
        assert budget.refused_reason.startswith("thinking_token_budget is set but reasoning_config is not configured.")
        assert off.refused is False and off.refused_reason is None and result.recovered_at == "disable_thinking"
        assert result.to_log()["attempts"][1]["refused_reason"] == budget.refused_reason


@pytest.mark.parametrize("templates, model", [({"glm-5": "glm-5.3"}, "glm-5"), (None, "GLM-5.3-Flash")])
def test_thinking_off_rung_on_glm_5_3_sends_no_false_key(templates, model):
    payload = tool_payload(model=model, max_tokens=1024, chat_template_kwargs={"enable_thinking": True})
    send = ScriptedSend(LENGTH, LENGTH, OK)
    result = run_ladder(payload, send, LadderSettings(length_recovery=True, templates=templates))
    assert result.recovered_at == "disable_thinking"
    assert send.payloads[2]["chat_template_kwargs"] == {"enable_thinking": True, "reasoning_effort": "low"}
    with pytest.raises(ValueError):
        run_ladder(payload, ScriptedSend(OK), LadderSettings(templates={'glm-5': 'not a glm'}))
