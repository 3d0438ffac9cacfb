"""Table tests for the one classification rule: ``classify``/``decide`` and ``parse_error``.

Each row is one turn as the proxy (logged fields) or the analyzer (old records,
inferred fields) would describe it, with the class and the evidence expected.
"""

from __future__ import annotations

import pytest

from analyzer.online import (
    CLASSES,
    INFERRED,
    LOGGED,
    Decision,
    TurnFeatures,
    classify,
    decide,
    features_from_exchange,
    parse_error,
)

# Shorthands for the rows below.
TF = TurnFeatures
OK_ANSWER = dict(status=200, has_content=True, has_tool_calls=False)
EMPTY = dict(status=200, has_content=False, has_tool_calls=False)


# (id, features, expected class, expected evidence)
LOGGED_ROWS = [
    ("ok-content", TF(**OK_ANSWER, finish_reason="stop"), "ok", LOGGED),
    ("ok-tool-calls", TF(status=200, has_content=False, has_tool_calls=True, finish_reason="tool_calls"), "ok", LOGGED),
    ("ok-content-and-tool-calls", TF(status=200, has_content=True, has_tool_calls=True, finish_reason="tool_calls"),
     "ok", LOGGED),
    ("ok-201", TF(status=201, has_content=True, has_tool_calls=False), "ok", LOGGED),
    ("ok-tool-calls-no-finish-reason", TF(status=200, has_content=False, has_tool_calls=True), "ok", LOGGED),
    ("tool-history-5xx", TF(status=500, tool_history=True, error_kind="http"), "tool-history-5xx", LOGGED),
    ("tool-history-502", TF(status=502, tool_history=True, error_kind="http"), "tool-history-5xx", LOGGED),
    ("tool-history-503-no-kind", TF(status=503, tool_history=True), "tool-history-5xx", LOGGED),
    ("other-5xx-no-history", TF(status=500, tool_history=False, error_kind="http"), "other-5xx", LOGGED),
    ("other-5xx-history-unknown", TF(status=500, tool_history=None, error_kind="http"), "other-5xx", LOGGED),
    # A missing provider key is the proxy's fault: never ladder-eligible, even with tool history.
    ("config-500-with-history", TF(status=500, tool_history=True, error_kind="config"), "other-5xx", LOGGED),
    ("empty-200-stop", TF(**EMPTY, finish_reason="stop"), "empty-200-stop", LOGGED),
    ("empty-200-end-turn", TF(**EMPTY, finish_reason="end_turn"), "empty-200-stop", LOGGED),
    ("empty-200-STOP-uppercase", TF(**EMPTY, finish_reason="STOP"), "empty-200-stop", LOGGED),
    ("empty-200-tool-calls-reason", TF(**EMPTY, finish_reason="tool_calls"), "empty-200-stop", LOGGED),
    ("length-no-content", TF(**EMPTY, finish_reason="length", has_reasoning=True), "length-with-no-content", LOGGED),
    ("anthropic-max-tokens", TF(**EMPTY, finish_reason="max_tokens"), "length-with-no-content", LOGGED),
    # A logged finish_reason wins over token evidence.
    ("logged-stop-beats-tokens", TF(**EMPTY, finish_reason="stop", completion_tokens=1024, max_tokens=1024),
     "empty-200-stop", LOGGED),
    ("timeout", TF(error_kind="timeout"), "timeout", LOGGED),
    ("timeout-with-history", TF(error_kind="timeout", tool_history=True), "timeout", LOGGED),
    ("connect", TF(error_kind="connect"), "connection-error", LOGGED),
    ("reset", TF(error_kind="reset"), "connection-error", LOGGED),
    ("other-exception", TF(error_kind="other"), "other-5xx", LOGGED),
    ("rate-limited", TF(status=429, tool_history=True, error_kind="http"), "rate-limited", LOGGED),
    ("client-error-400", TF(status=400, error_kind="http"), "client-error", LOGGED),
    ("client-error-401", TF(status=401, error_kind="http"), "client-error", LOGGED),
    ("rejected-by-proxy", TF(status=400, error_kind="rejected"), "client-error", LOGGED),
    ("rejected-no-status", TF(error_kind="rejected"), "client-error", LOGGED),
    ("client-cancelled", TF(error_kind="cancelled", tool_history=True), "client-cancelled", LOGGED),
    ("tool-call-stop-mismatch", TF(status=200, has_content=True, has_tool_calls=True, finish_reason="stop"),
     "tool-call-stop-mismatch", LOGGED),
    ("tool-call-end-turn-mismatch", TF(status=200, has_content=False, has_tool_calls=True, finish_reason="end_turn"),
     "tool-call-stop-mismatch", LOGGED),
    # Answers that are not answers: a 200 with no usable choice, a 200 with
    # finish_reason "error", an unreadable 200 body, a connect timeout, a 200 too late.
    ("no-answer-200-no-choices", TF(status=200, has_content=False, has_tool_calls=False, no_answer=True),
     "no-answer-200", LOGGED),
    ("no-answer-200-finish-error", TF(**OK_ANSWER, finish_reason="error"), "no-answer-200", LOGGED),
    ("bad-body-is-empty-200", TF(status=200, error_kind="bad-body", tool_history=True), "empty-200-stop", LOGGED),
    ("connect-timeout", TF(error_kind="connect-timeout", tool_history=True), "connect-timeout", LOGGED),
    ("late-200", TF(**OK_ANSWER, finish_reason="stop", late=True), "late-200", LOGGED),
    ("late-200-tool-calls", TF(status=200, has_tool_calls=True, finish_reason="tool_calls", late=True),
     "late-200", LOGGED),
    # A failure that also came late keeps its failure class.
    ("late-empty-stays-empty", TF(**EMPTY, finish_reason="stop", late=True), "empty-200-stop", LOGGED),
    ("late-5xx-stays-5xx", TF(status=500, tool_history=True, late=True), "tool-history-5xx", LOGGED),
    ("late-mismatch-stays", TF(status=200, has_tool_calls=True, finish_reason="stop", late=True),
     "tool-call-stop-mismatch", LOGGED),
    ("on-time-ok", TF(**OK_ANSWER, late=False), "ok", LOGGED),
    # The glm45 parser filed a GLM answer as reasoning (sgl-project/sglang#37645):
    # empty content, a reasoning text, stopped.
    ("answer-in-reasoning", TF(**EMPTY, finish_reason="stop", has_reasoning=True, has_reasoning_text=True),
     "answer-in-reasoning", LOGGED),
    # Emptiness is read from the content, never from the usage (mistral-vibe#1116: 0 tokens beside the text).
    ("answer-in-reasoning-zero-tokens", TF(**EMPTY, finish_reason="stop", has_reasoning_text=True,
                                           completion_tokens=0), "answer-in-reasoning", LOGGED),
    ("length-with-reasoning-text-stays-length", TF(**EMPTY, finish_reason="length", has_reasoning_text=True),
     "length-with-no-content", LOGGED),
    # Reasoning tokens alone (a provider that hides the text) are no answer to find.
    ("reasoning-tokens-only-is-empty", TF(**EMPTY, finish_reason="stop", has_reasoning=True,
                                          has_reasoning_text=False), "empty-200-stop", LOGGED),
    ("tool-calls-with-reasoning-is-ok", TF(status=200, has_content=False, has_tool_calls=True,
                                           finish_reason="tool_calls", has_reasoning_text=True), "ok", LOGGED),
    # The scratchpad reached the user (vllm-project/vllm#54744), with or without an answer after it.
    ("reasoning-leaked", TF(**OK_ANSWER, finish_reason="stop", reasoning_leaked=True), "reasoning-leaked", LOGGED),
    ("reasoning-leaked-with-tool-calls", TF(status=200, has_content=True, has_tool_calls=True,
                                            finish_reason="tool_calls", reasoning_leaked=True),
     "reasoning-leaked", LOGGED),
    ("reasoning-leaked-late-stays-leaked", TF(**OK_ANSWER, reasoning_leaked=True, late=True),
     "reasoning-leaked", LOGGED),
    ("mismatch-beats-leak", TF(status=200, has_content=True, has_tool_calls=True, finish_reason="stop",
                               reasoning_leaked=True), "tool-call-stop-mismatch", LOGGED),
]

# Old records: no finish_reason, often no status. Length vs stop from token evidence.
INFERRED_ROWS = [
    ("legacy-empty-at-cap", TF(**EMPTY, completion_tokens=1024, max_tokens=1024), "length-with-no-content", INFERRED),
    ("legacy-empty-over-cap", TF(**EMPTY, completion_tokens=1030, max_tokens=1024), "length-with-no-content",
     INFERRED),
    ("legacy-empty-round-cap-with-reasoning", TF(**EMPTY, completion_tokens=4096, has_reasoning=True),
     "length-with-no-content", INFERRED),
    ("legacy-empty-round-cap-no-reasoning", TF(**EMPTY, completion_tokens=4096, has_reasoning=False),
     "empty-200-stop", INFERRED),
    ("legacy-empty-odd-count-with-reasoning", TF(**EMPTY, completion_tokens=1023, has_reasoning=True),
     "empty-200-stop", INFERRED),
    ("legacy-empty-below-cap", TF(**EMPTY, completion_tokens=1, max_tokens=1024), "empty-200-stop", INFERRED),
    ("legacy-empty-no-tokens", TF(**EMPTY), "empty-200-stop", INFERRED),
    # Legacy answers in the reasoning: a reasoning text and no length evidence.
    ("legacy-answer-in-reasoning", TF(**EMPTY, completion_tokens=180, has_reasoning=True, has_reasoning_text=True),
     "answer-in-reasoning", INFERRED),
    ("legacy-answer-in-reasoning-no-usage", TF(**EMPTY, has_reasoning=True, has_reasoning_text=True),
     "answer-in-reasoning", INFERRED),
    ("legacy-answer-in-reasoning-zero-tokens", TF(**EMPTY, completion_tokens=0, has_reasoning=True,
                                                  has_reasoning_text=True, reasoning_at_cap=False),
     "answer-in-reasoning", INFERRED),
    ("legacy-reasoning-at-max-tokens-is-length", TF(**EMPTY, completion_tokens=900, max_tokens=900,
                                                    has_reasoning=True, has_reasoning_text=True,
                                                    reasoning_at_cap=False), "length-with-no-content", INFERRED),
    # A round cap with a trace at the log's 4,000-character cap is length; with the
    # whole trace logged and shorter, the count is a coincidence, not the cap.
    ("legacy-round-cap-trace-at-cap-is-length", TF(**EMPTY, completion_tokens=1024, has_reasoning=True,
                                                has_reasoning_text=True, reasoning_at_cap=True),
     "length-with-no-content", INFERRED),
    ("legacy-round-cap-trace-length-unknown-is-length", TF(**EMPTY, completion_tokens=1024, has_reasoning=True,
                                                           has_reasoning_text=True),
     "length-with-no-content", INFERRED),
    ("legacy-round-cap-short-whole-trace", TF(**EMPTY, completion_tokens=512, has_reasoning=True,
                                              has_reasoning_text=True, reasoning_at_cap=False),
     "answer-in-reasoning", INFERRED),
    ("legacy-round-cap-tokens-only-is-length", TF(**EMPTY, completion_tokens=1024, has_reasoning=True,
                                                  has_reasoning_text=False, reasoning_at_cap=False),
     "length-with-no-content", INFERRED),
    ("legacy-status-unlogged-empty-at-cap", TF(has_content=False, has_tool_calls=False, completion_tokens=512,
                                               max_tokens=512), "length-with-no-content", INFERRED),
    # A success record that says nothing about content: do not invent an incident.
    ("nothing-known", TF(status=200), "ok", INFERRED),
    ("nothing-known-no-status", TF(), "ok", INFERRED),
    # The caller marks every field as reconstructed (status parsed from error text,
    # tool history from earlier turns of the session).
    ("caller-inferred-5xx", TF(status=500, tool_history=True, error_kind="http", evidence=INFERRED),
     "tool-history-5xx", INFERRED),
    ("caller-inferred-ok", TF(**OK_ANSWER, evidence=INFERRED), "ok", INFERRED),
    ("caller-inferred-timeout", TF(error_kind="timeout", evidence=INFERRED), "timeout", INFERRED),
]


@pytest.mark.parametrize("features, expected, evidence",
                         [r[1:] for r in LOGGED_ROWS + INFERRED_ROWS],
                         ids=[r[0] for r in LOGGED_ROWS + INFERRED_ROWS])
def test_decide_table(features, expected, evidence):
    decision = decide(features)
    assert decision == Decision(expected, evidence)
    assert classify(features) == expected
    assert expected in CLASSES


def test_every_per_turn_class_is_reachable_from_the_tables():
    # wedged-pod, pod-down and unanswered are applied by the analyzer from
    # metric windows / missing records, never by the per-turn rule.
    reached = {r[2] for r in LOGGED_ROWS + INFERRED_ROWS}
    assert reached == set(CLASSES) - {"wedged-pod", "pod-down", "unanswered"}


def test_per_field_inference_marks_only_decisions_that_consulted_the_field():
    # Status parsed from the error text: the 5xx decision rests on it.
    assert decide(TF(status=500, tool_history=True, error_kind="http", inferred=("status",))).evidence == INFERRED
    # Tool history reconstructed from earlier turns: the class depends on it.
    assert decide(TF(status=500, tool_history=True, error_kind="http",
                     inferred=("tool_history",))).evidence == INFERRED
    # A timeout never consults tool history, so reconstructing it changes nothing.
    assert decide(TF(error_kind="timeout", tool_history=True, inferred=("tool_history",))).evidence == LOGGED
    # Content was logged; tool history was not needed for an ok answer.
    assert decide(TF(**OK_ANSWER, tool_history=True, inferred=("tool_history",))).evidence == LOGGED


@pytest.mark.parametrize("tokens, max_tokens, reasoning, expected", [
    (1024, 1024, False, "length-with-no-content"),
    (1023, 1024, False, "empty-200-stop"),
    (2048, None, True, "length-with-no-content"),
    (2048, None, False, "empty-200-stop"),
    (2049, None, True, "empty-200-stop"),
    (0, 1024, True, "empty-200-stop"),
])
def test_legacy_length_vs_stop_from_token_evidence(tokens, max_tokens, reasoning, expected):
    f = TF(status=200, has_content=False, has_tool_calls=False, has_reasoning=reasoning,
           completion_tokens=tokens, max_tokens=max_tokens)
    assert decide(f) == Decision(expected, INFERRED)
    # The same answer with its finish_reason logged needs no inference.
    logged = TF(status=200, has_content=False, has_tool_calls=False, has_reasoning=reasoning,
                completion_tokens=tokens, max_tokens=max_tokens,
                finish_reason="length" if expected == "length-with-no-content" else "stop")
    assert decide(logged) == Decision(expected, LOGGED)


# ---------------------------------------------------------------------------
# parse_error: every error string of docs/log-format.md's table ("How a failure reads")

PARSE_ROWS = [
    # upstream answered with an HTTP error
    ("naked-500", "Provider returned 500: ", None, ("http", 500)),
    ("500-with-body", 'Provider returned 500: {"error": "Internal Server Error"}', None, ("http", 500)),
    ("502", "Provider returned 502: <html>Bad Gateway</html>", None, ("http", 502)),
    ("429", 'Provider returned 429: {"error": {"message": "Rate limit exceeded: 60 requests per 60s", '
            '"type": "rate_limit_exceeded", "code": 429}}', None, ("http", 429)),
    ("400", 'Provider returned 400: {"object": "error", "message": "tool_choice invalid"}', None, ("http", 400)),
    ("503-long-body", "Provider returned 503: " + "x" * 1000, None, ("http", 503)),
    # upstream read timeout
    ("timeout", "Request timed out after 1200003ms", None, ("timeout", None)),
    # caller hung up
    ("cancelled", "Client disconnected/cancelled after 300012ms (upstream still pending)", None,
     ("cancelled", None)),
    # connection failure or other exception
    ("connect", "ConnectError: All connection attempts failed", None, ("connect", None)),
    ("connect-dns", "ConnectError: [Errno -2] Name or service not known", None, ("connect", None)),
    # A connect/pool/write timeout never reached the upstream; told
    # from a read timeout by the exception name, or in the proxy's own text by
    # the duration (30 s against 600/1,200 s).
    ("connect-timeout", "ConnectTimeout: timed out", None, ("connect-timeout", None)),
    ("pool-timeout", "PoolTimeout: ", None, ("connect-timeout", None)),
    ("write-timeout", "WriteTimeout: ", None, ("connect-timeout", None)),
    ("read-timeout-exception", "ReadTimeout: ", None, ("timeout", None)),
    ("timed-out-after-30s", "Request timed out after 30004ms", None, ("connect-timeout", None)),
    ("timed-out-after-59s", "Request timed out after 59999ms", None, ("connect-timeout", None)),
    ("timed-out-after-60s", "Request timed out after 60000ms", None, ("timeout", None)),
    ("timed-out-after-600s", "Request timed out after 600012ms", None, ("timeout", None)),
    ("reset", "RemoteProtocolError: Server disconnected without sending a response.", None, ("reset", None)),
    ("read-error", "ReadError: ", None, ("reset", None)),
    ("read-timeout-exception", "ReadTimeout: timed out", None, ("timeout", None)),
    ("dotted-exception", "httpx.ConnectError: All connection attempts failed", None, ("connect", None)),
    ("bare-exception-name", "RemoteProtocolError", None, ("reset", None)),
    ("other-exception", "KeyError: 'choices'", None, ("other", None)),
    # The proxy's response.json() on an empty/non-JSON 200 body.
    ("json-decode", "JSONDecodeError: Expecting value: line 1 column 1 (char 0)", None, ("bad-body", 200)),
    # the proxy refused the request itself (analyzer.online's budget contract)
    ("budget-rejected", "ThinkingBudgetError: thinking_token_budget=-2 rejected: negative values other than -1 "
                        "are invalid", "nrp", ("rejected", 400)),
    # model not routable (synthetic provider `unrouted`)
    ("unrouted", "Unknown model 'glm-9'. This deployment serves: nrp (kimi, qwen3, glm-5)", "unrouted",
     ("rejected", 400)),
    ("unknown-model-text-only", "Unknown model 'glm-9'. This deployment serves: nrp (kimi)", None,
     ("rejected", 400)),
    # stream: true sent
    ("streaming", "Streaming is not supported by this proxy. Send stream: false.", "streaming-unsupported",
     ("rejected", 400)),
    ("streaming-text-only", "Streaming is not supported by this proxy", None, ("rejected", 400)),
    # provider key missing
    ("missing-key", "NRP API key not configured on server", "nrp", ("config", 500)),
    ("missing-key-openrouter", "OPENROUTER API key not configured on server", "openrouter", ("config", 500)),
]


@pytest.mark.parametrize("error, provider, expected", [r[1:] for r in PARSE_ROWS], ids=[r[0] for r in PARSE_ROWS])
def test_parse_error_table(error, provider, expected):
    assert parse_error(error, provider) == expected


def test_parse_error_none_is_no_error():
    assert parse_error(None) == (None, None)
    assert parse_error(None, "unrouted") == (None, None)


def test_provider_returned_needs_three_digits():
    assert parse_error("Provider returned 5000: ")[0] != "http"
    assert parse_error("Provider said 500")[0] == "other"


@pytest.mark.parametrize("error, tool_history, expected", [
    ("Provider returned 500: ", True, "tool-history-5xx"),
    ("Provider returned 500: ", False, "other-5xx"),
    ("Provider returned 429: {}", True, "rate-limited"),
    ("Request timed out after 1200003ms", True, "timeout"),
    ("Client disconnected/cancelled after 300012ms (upstream still pending)", True, "client-cancelled"),
    ("ConnectError: All connection attempts failed", False, "connection-error"),
    ("RemoteProtocolError: Server disconnected without sending a response.", True, "connection-error"),
    ("NRP API key not configured on server", True, "other-5xx"),
    ("KeyError: 'choices'", True, "other-5xx"),
    ("ThinkingBudgetError: thinking_token_budget=1.5 rejected: must be an integer", True, "client-error"),
])
def test_error_text_to_class(error, tool_history, expected):
    """An old failure record: status and kind come from the error text only."""
    kind, status = parse_error(error)
    assert classify(TF(status=status, error_kind=kind, tool_history=tool_history, evidence=INFERRED)) == expected
    # features_from_exchange reads the same text the same way.
    messages = [{"role": "user", "content": "q"}]
    if tool_history:
        messages += [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c", "content": "r"}]
    assert classify(features_from_exchange({"messages": messages}, None, None, error)) == expected


def test_features_from_exchange_live_answers():
    history = [{"role": "user", "content": "q"},
               {"role": "assistant", "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c", "content": "r"}]
    payload = {"model": "glm-5", "messages": history, "max_tokens": 512}
    naked = features_from_exchange(payload, 500, b"")
    assert (naked.status, naked.tool_history, naked.error_kind, naked.has_content) == (500, True, "http", None)
    assert classify(naked) == "tool-history-5xx"

    empty = features_from_exchange(payload, 200, b'{"choices": [{"message": {"content": ""}, '
                                                 b'"finish_reason": "stop"}]}')
    assert classify(empty) == "empty-200-stop"
    length = features_from_exchange(payload, 200, {"choices": [{"message": {"content": None,
                                                                             "reasoning_content": "hmm"},
                                                                 "finish_reason": "length"}],
                                                   "usage": {"completion_tokens": 512}})
    assert (length.has_reasoning, length.completion_tokens, length.max_tokens) == (True, 512, 512)
    assert classify(length) == "length-with-no-content"
    # Whitespace-only content is no content.
    blank = features_from_exchange(payload, 200, '{"choices": [{"message": {"content": "  \\n"}, '
                                                 '"finish_reason": "stop"}]}')
    assert blank.has_content is False
    # Content parts count as content.
    parts = features_from_exchange(payload, 200, {"choices": [{"message": {"content": [{"type": "text",
                                                                                       "text": "hi"}]},
                                                               "finish_reason": "stop"}]})
    assert classify(parts) == "ok"
    # A 200 whose body is empty or not JSON (an HTML error page) is an empty
    # answer, not an unknown one: with tool history it triggers the ladder.
    for body in (b"", b"<html>oops</html>", b"   "):
        broken = features_from_exchange(payload, 200, body)
        assert (broken.has_content, broken.has_tool_calls) == (False, False)
        assert broken.error_kind == "bad-body"
        assert classify(broken) == "empty-200-stop"
    # JSON that is not an answer object: a 200 without a usable answer.
    for body in ("[]", "5", '{"error": {"message": "overloaded"}}', '{"choices": []}'):
        assert classify(features_from_exchange(payload, 200, body)) == "no-answer-200"
    # No body at all (a legacy success record without content fields) stays unknown.
    assert classify(features_from_exchange(payload, 200, None)) == "ok"
    assert decide(features_from_exchange(payload, 200, None)).evidence == INFERRED
    # Tool history anywhere counts, not only in the current turn.
    earlier = history + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next?"}]
    assert features_from_exchange({"messages": earlier}, 500, b"").tool_history is True
    assert features_from_exchange({"messages": [{"role": "user", "content": "q"}]}, 500, b"").tool_history is False
    # An empty tool_calls list is not tool history.
    plain = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": []}]
    assert features_from_exchange({"messages": plain}, 500, b"").tool_history is False
