"""``analyzer.online`` is total on what the upstream and the client control.

The proxy imports this module on every request: an exception here is a 500 to
the client and a lost response record. Hypothesis generates arbitrary JSON (and
non-JSON) for upstream bodies, statuses and ``send`` results, malformed
transcripts for the rungs, and junk client values for the normalizer; every
function must return a result, and the only exception the client can provoke is
the documented :class:`analyzer.online.ClientRequestError` (a ``ValueError``).

``KNOWN_CRASHERS`` and ``KNOWN_BAD_TRANSCRIPTS`` replay the exact shapes that
raised in the fuzz run that first found crashes here (348 malformed calls). Each
property then draws up to 200 examples of every kind of junk (below, and the
upstream bodies of tests/support/online_fuzz.py). On a developer's machine each run
draws afresh; under CI (``CI`` set) Hypothesis's own ``ci`` profile derandomizes, so
CI replays the same draws every run and new shapes are found on developers' runs.
"""

from __future__ import annotations

import asyncio
import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.online import (
    CLASSES,
    OUTCOMES,
    ClientRequestError,
    LadderSettings,
    answer_summary,
    arun_ladder,
    build_rung,
    decide,
    features_from_exchange,
    log_fields,
    normalize_thinking,
    parse_error,
    run_ladder,
    validate_thinking_budget,
)
from analyzer.online.ladder import ALL_RUNGS, LENGTH_RUNGS, RungUnavailable, flatten_messages
from tests.support.online_fuzz import DEEP, DEEP_OBJECT, bodies, dumps, junk

# Per property. It was 350 (the first fuzz run's 348 calls, per property): 6 s of generation in the
# quick loop, for shapes that run now replays exactly (KNOWN_CRASHERS). 200 draws a run from the same
# strategies (every kind of junk) at 4/7 of the cost; fresh ones on every developer's run.
EXAMPLES = 200
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

statuses = st.one_of(st.integers(-10, 1000), st.sampled_from([None, "200", 200.0, True, False, [], {}]))


@st.composite
def transcripts(draw):
    """Messages lists whose tool structure is malformed in every way seen in the wild."""
    tool_call = st.fixed_dictionaries({}, optional={
        "id": junk | st.sampled_from([["unhashable"], {"x": 1}, "c1"]),
        "type": junk,
        "function": junk | st.fixed_dictionaries({}, optional={"name": junk, "arguments": junk}),
    })
    calls = st.lists(tool_call | junk, min_size=1, max_size=3)
    assistant = st.fixed_dictionaries({"role": st.just("assistant"), "tool_calls": calls | calls | junk},
                                      optional={"content": junk, "function_call": junk})
    result = st.fixed_dictionaries({"role": st.sampled_from(["tool", "function"]),
                                    "tool_call_id": junk | st.sampled_from([["unhashable"], "c1"])},
                                   optional={"content": junk, "name": junk})
    other = st.fixed_dictionaries({}, optional={
        "role": st.sampled_from(["user", "assistant", "tool", "function", "system"]) | junk,
        "content": junk, "tool_calls": junk, "function_call": junk, "tool_call_id": junk, "name": junk})
    message = assistant | result | other | junk
    return draw(st.lists(message, max_size=6) | junk)


@st.composite
def payloads(draw):
    """A chat-completions payload with client junk in any field."""
    payload = draw(st.fixed_dictionaries({"messages": transcripts()}, optional={
        "model": junk | st.sampled_from(["glm-5", "qwen3", "z-ai/glm-5.2"]),
        "tools": junk, "tool_choice": junk, "functions": junk, "function_call": junk,
        "max_tokens": junk | st.integers(-5, 70000), "max_completion_tokens": junk,
        "thinking_token_budget": junk | st.integers(-5, 70000),
        "chat_template_kwargs": junk,
    }))
    return payload


def _check_features(f) -> None:
    d = decide(f)
    assert d.incident_class in CLASSES
    assert isinstance(f.tool_history, bool)


@FUZZ
@given(payload=payloads() | junk, status=statuses, body=bodies,
       error=st.none() | st.text(max_size=40) | st.sampled_from([ValueError("x"), TimeoutError()]),
       latency=st.none() | st.integers(-5, 10**9) | st.floats() | junk)
def test_answer_functions_never_raise(payload, status, body, error, latency):
    _check_features(features_from_exchange(payload, status, body))
    _check_features(features_from_exchange(payload, status, body, error, latency_ms=latency))
    summary = answer_summary(body)
    assert set(summary) >= {"finish_reason", "has_content", "has_tool_calls", "no_answer", "bad_body"}
    assert summary["finish_reason"] is None or isinstance(summary["finish_reason"], str)
    fields = log_fields(payload, status, body, error=error, latency_ms=latency)
    assert fields["final_class"] in CLASSES and fields["incident_class"] in CLASSES
    json.dumps(fields)  # the record is still writable
    if isinstance(error, str):
        kind, parsed = parse_error(error)
        assert parsed is None or isinstance(parsed, int)


class ScriptedSend:
    """``send`` answering with a scripted sequence (the last repeats); any value goes."""

    def __init__(self, answers):
        self.answers = list(answers) or [(500, {}, b"")]
        self.calls = 0

    def __call__(self, payload):
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, BaseException):
            raise answer
        return answer


send_results = st.one_of(
    st.tuples(statuses, junk, bodies),
    st.tuples(st.just(500), st.just({}), st.just(b"")),  # a naked 500: keeps the ladder going
    st.tuples(st.just(200), st.just({}), bodies),
    junk,  # not a (status, headers, body) tuple at all
    st.tuples(st.just(200), st.just({})),  # a 2-tuple
)


def _check_result(result, payload_before, payload) -> None:
    assert result.outcome in OUTCOMES
    assert all(a.incident_class in CLASSES for a in result.attempts)
    json.dumps(result.to_log())
    for skipped in result.skipped:
        assert skipped["rung"] in ALL_RUNGS + LENGTH_RUNGS and isinstance(skipped["reason"], str)
    assert payload == payload_before  # never mutated


@FUZZ
@given(payload=payloads(), answers=st.lists(send_results, min_size=1, max_size=6),
       flatten=st.booleans(), length_recovery=st.booleans())
def test_ladder_never_raises_on_what_send_returns(payload, answers, flatten, length_recovery):
    # A tool-history transcript in front, so most originals that fail do trigger.
    payload = {**payload, "messages": [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "q"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "rows"},
        *(payload["messages"] if isinstance(payload["messages"], list) else [payload["messages"]])]}
    before = copy.deepcopy(payload)
    send = ScriptedSend(answers)
    result = run_ladder(payload, send, LadderSettings(flatten=flatten, length_recovery=length_recovery))
    _check_result(result, before, payload)
    assert send.calls == len(result.attempts)
    log = log_fields(payload, result.status, result.body, result, latency_ms=10)
    assert log["incident_class"] in CLASSES
    json.dumps(log)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=payloads(), answers=st.lists(send_results, min_size=1, max_size=5))
def test_async_ladder_never_raises_on_what_send_returns(payload, answers):
    before = copy.deepcopy(payload)
    scripted = ScriptedSend(answers)

    async def send(p):
        return scripted(p)

    result = asyncio.run(arun_ladder(payload, send, LadderSettings(flatten=True, length_recovery=True)))
    _check_result(result, before, payload)


@FUZZ
@given(payload=payloads(), rung=st.sampled_from(ALL_RUNGS + LENGTH_RUNGS),
       reserve=st.integers(0, 5000))
def test_rungs_are_built_or_skipped_never_crash(payload, rung, reserve):
    before = copy.deepcopy(payload)
    try:
        out = build_rung(payload, rung, answer_reserve=reserve)
    except RungUnavailable as skip:
        assert skip.rung == rung and skip.reason
    else:
        assert isinstance(out, dict) and out is not payload
        if rung == "thinking_budget":
            assert out["thinking_token_budget"] >= 0
            assert out["thinking_token_budget"] > 0 or payload.get("thinking_token_budget") == 0
    flatten_messages(payload["messages"])
    assert payload == before


@FUZZ
@given(payload=payloads() | junk, model=junk | st.sampled_from(["glm-5", "qwen3", "deepseek-r1", "kimi-k2", ""]),
       enabled=st.sampled_from([True, False, None]) | junk,
       budget=junk | st.integers(-3, 10**6) | st.floats(), max_tokens=junk | st.integers(-3, 10**6),
       reserve=st.integers(0, 4096))
def test_client_values_get_a_result_or_the_documented_client_error(payload, model, enabled, budget,
                                                                    max_tokens, reserve):
    try:
        out = normalize_thinking(payload, model, enabled)
    except ClientRequestError as exc:
        assert isinstance(exc, ValueError) and exc.field in ("payload", "enable_thinking", "chat_template_kwargs")
    else:
        assert isinstance(out, dict)
    try:
        got = validate_thinking_budget(budget, max_tokens, reserve)
    except ClientRequestError as exc:
        assert isinstance(exc, ValueError) and exc.field in ("thinking_token_budget", "max_tokens")
    else:
        assert got is None or (isinstance(got, int) and got >= 0)


# The shapes that once raised, replayed exactly.
_TOOL_HISTORY = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "q"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "rows"}]


def _answer(message=None, finish="stop"):
    return dumps({"choices": [{"message": message or {}, "finish_reason": finish}]})


KNOWN_CRASHERS = [
    ("content-text-int", _answer({"content": [{"text": 5}]})),
    ("content-text-null", _answer({"content": [{"text": None}]})),
    ("finish-reason-number", _answer({"content": "hi"}, 5)),
    ("finish-reason-list", _answer({"content": "hi"}, ["stop"])),
    ("deep-array", DEEP),
    ("deep-object", DEEP_OBJECT),
]
KNOWN_BAD_TRANSCRIPTS = [
    ("tool-calls-string", [{"role": "assistant", "tool_calls": "call the tool"}]),
    ("tool-calls-dict", [{"role": "assistant", "tool_calls": {"id": "c1", "function": {"name": "q"}}}]),
    ("tool-calls-int-list", [{"role": "assistant", "tool_calls": [5]}]),
    ("function-as-string", [{"role": "assistant", "tool_calls": [{"id": "c1", "function": "q"}]}]),
    ("unhashable-call-id", [{"role": "assistant", "tool_calls": [{"id": ["c1"], "function": {"name": "q"}}]},
                            {"role": "tool", "tool_call_id": ["c1"], "content": "rows"}]),
    ("unhashable-result-id", [{"role": "tool", "tool_call_id": {"a": 1}, "content": [{"text": 5}]}]),
]


@pytest.mark.parametrize("body", [c[1] for c in KNOWN_CRASHERS], ids=[c[0] for c in KNOWN_CRASHERS])
def test_known_crashing_bodies_are_classified(body):
    payload = {"model": "glm-5", "messages": _TOOL_HISTORY}
    cls = decide(features_from_exchange(payload, 200, body)).incident_class
    assert cls in CLASSES
    json.dumps(log_fields(payload, 200, body))


@pytest.mark.parametrize("messages", [c[1] for c in KNOWN_BAD_TRANSCRIPTS], ids=[c[0] for c in KNOWN_BAD_TRANSCRIPTS])
def test_flatten_rung_runs_on_malformed_transcripts_after_four_failed_calls(messages):
    payload = {"model": "glm-5", "messages": _TOOL_HISTORY + messages, "tools": [{"type": "function"}]}
    send = ScriptedSend([(500, {}, b"")] * 4 + [(200, {}, _answer({"content": "done"}))])
    result = run_ladder(payload, send, LadderSettings(flatten=True))
    assert [a.rung for a in result.attempts] == ["original", *ALL_RUNGS]  # every rung reached, none raised
    assert result.recovered_at == "flatten_transcript"
    flat = build_rung(payload, "flatten_transcript")["messages"]
    assert all(not any(k in m for k in ("tool_calls", "tool_call_id")) for m in flat if isinstance(m, dict))


@pytest.mark.parametrize("kwargs", ["enable", ["enable_thinking"], 5, 2.5, True])
def test_chat_template_kwargs_junk_is_the_client_error(kwargs):
    with pytest.raises(ClientRequestError) as info:
        normalize_thinking({"model": "glm-5", "chat_template_kwargs": kwargs}, "glm-5", True)
    assert info.value.field == "chat_template_kwargs" and isinstance(info.value, ValueError)
    # Nothing to write (the client did not ask): left as sent.
    assert normalize_thinking({"chat_template_kwargs": kwargs}, "glm-5", None) == {"chat_template_kwargs": kwargs}
