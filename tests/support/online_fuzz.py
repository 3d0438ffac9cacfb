"""Junk an upstream can answer: arbitrary JSON, answer-shaped JSON with junk in every slot, non-JSON.

Hypothesis strategies: :data:`json_values` (NaN and infinities included), :data:`junk`,
:func:`answer_docs` (chat-completions answers with any slot replaced by junk) and
:data:`bodies` (all of these, as bytes, parsed, text, or not JSON at all, with the
100,000-deep :data:`DEEP` and :data:`DEEP_OBJECT`). tests/unit/online/test_online_fuzz.py
feeds them to analyzer.online; tests/e2e/test_online_proxy_fuzz.py sends them over HTTP.
"""

from __future__ import annotations

import json

from hypothesis import strategies as st

DEEP = ("[" * 100_000 + "]" * 100_000).encode()  # deeper than any JSON parser's stack
DEEP_OBJECT = ('{"a":' * 100_000 + "1" + "}" * 100_000).encode()

# Arbitrary JSON values (NaN and infinities included: Python's json accepts them).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
junk = json_values | st.sampled_from([[{"text": 5}], [{"text": None}], [5], "x", {"function": "f"}, [[1]], {}])


@st.composite
def answer_docs(draw):
    """Chat-completions answers with any slot replaced by junk (mostly answer-shaped)."""
    message = draw(st.fixed_dictionaries({"content": junk}, optional={
        "role": junk, "tool_calls": junk | st.lists(junk, min_size=1, max_size=2), "function_call": junk,
        "reasoning_content": junk, "reasoning": junk}))
    choice = draw(st.fixed_dictionaries({"message": st.just(message) | st.just(message) | junk,
                                         "finish_reason": junk}, optional={"index": junk}))
    choices = st.lists(st.just(choice), min_size=1, max_size=2)
    return draw(st.fixed_dictionaries({"choices": choices | choices | choices | junk}, optional={
        "usage": st.fixed_dictionaries({}, optional={
            "prompt_tokens": junk, "completion_tokens": junk,
            "completion_tokens_details": st.fixed_dictionaries({}, optional={"reasoning_tokens": junk}) | junk,
        }) | junk,
        "error": junk}))


def dumps(doc) -> bytes:
    """``doc`` as JSON bytes."""
    return json.dumps(doc).encode()


bodies = st.one_of(
    answer_docs().map(dumps),
    answer_docs(),  # already-parsed JSON, as some transports hand it over
    json_values.map(dumps),
    json_values,
    st.binary(max_size=64),
    st.text(max_size=64),
    st.sampled_from([b"", b" ", b"\n", b"<html>502 Bad Gateway</html>", b"null", b"{", DEEP, DEEP_OBJECT,
                     DEEP.decode(), bytearray(b"{}"), memoryview(b"[]"), 5, 2.5, object()]),
)
