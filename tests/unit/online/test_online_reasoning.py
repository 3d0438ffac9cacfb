"""Leaked think blocks: the rule, the split, and the repair of an answer (analyzer.online.reasoning).

The shapes come from the public threads: GLM-5.3 under vLLM's glm45/glm47 parser with
thinking "off" puts its scratchpad and a dangling ``</think>`` into ``content``
(vllm-project/vllm#54744, example in PR #54825); tag-free output must pass through
byte for byte.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.online import (
    BLANK_CHARS,
    features_from_exchange,
    has_leaked_think_block,
    repair_leaked_answer,
    split_leaked_reasoning,
)


@pytest.mark.parametrize("text, leaked", [
    ("Simple question.</think>2 + 2 = **4**", True),          # the template opened the block: only </think>
    ("<think>Plan.</think>Answer.", True),                       # a block opened in the output
    ("\n\n<think>Plan.</think>Answer.", True),                   # after blank characters
    ("\u3000<think>cut off by the cap", True),                   # opened and never closed
    ("Thinking...</think>", True),                               # all scratchpad, no answer after it
    ("Answer.", False),
    ("", False),
    ("Use <think>...</think> tags in the prompt.", False),       # quoted in an answer
    ("a </think> then <think>", True),                           # a close before any open
    ("<thinking>not the tag</thinking>", False),
    ("</Think> in another case", False),
    (None, False),
    (["<think>"], False),
])
def test_the_leak_rule(text, leaked):
    assert has_leaked_think_block(text) is leaked


@pytest.mark.parametrize("text, expected", [
    ("Simple question.</think>2 + 2 = **4**\n\n...", ("Simple question.", "2 + 2 = **4**\n\n...")),
    ("<think>\nPlan it.\n</think>\n\nThe total is 61,883 acres.", ("Plan it.", "\n\nThe total is 61,883 acres.")),
    ("  <think>cut by the cap", ("cut by the cap", "")),
    ("All scratchpad.</think>", ("All scratchpad.", "")),
    ("first</think>second</think>third", ("first", "second</think>third")),
    ("No tags at all.", None),
])
def test_the_split(text, expected):
    assert split_leaked_reasoning(text) == expected


def _answer(content, reasoning=None, choices=1):
    message = {"role": "assistant", "content": content, "tool_calls": []}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "glm-5",
            "choices": [{"index": i, "message": dict(message), "finish_reason": "stop"} for i in range(choices)],
            "usage": {"prompt_tokens": 10, "completion_tokens": 30, "total_tokens": 40}}


@pytest.mark.parametrize("form", ["bytes", "str", "dict"])
def test_a_leaked_answer_is_split_in_the_form_it_came(form):
    doc = _answer("The user wants totals.</think>The total is 61,883 acres.")
    body = {"bytes": json.dumps(doc).encode(), "str": json.dumps(doc), "dict": doc}[form]
    repaired, did = repair_leaked_answer(body)
    assert did is True
    assert type(repaired) is type(body)
    out = repaired if isinstance(repaired, dict) else json.loads(repaired)
    message = out["choices"][0]["message"]
    assert message["content"] == "The total is 61,883 acres."
    assert message["reasoning_content"] == "The user wants totals."
    # Everything else is the upstream's.
    assert {k: v for k, v in out.items() if k != "choices"} == {k: v for k, v in doc.items() if k != "choices"}
    # The input is never mutated.
    assert doc["choices"][0]["message"]["content"].startswith("The user wants totals.")
    # The repaired answer is an ordinary answer now.
    assert features_from_exchange({}, 200, repaired).reasoning_leaked is False


def test_leaked_reasoning_is_appended_to_the_reasoning_there():
    doc = _answer("more thought</think>Answer.", reasoning="Earlier thought.")
    out, did = repair_leaked_answer(doc)
    assert did and out["choices"][0]["message"]["reasoning_content"] == "Earlier thought.\nmore thought"


def test_every_choice_is_repaired():
    doc = _answer("x</think>y", choices=3)
    out, did = repair_leaked_answer(doc)
    assert did and [c["message"]["content"] for c in out["choices"]] == ["y", "y", "y"]


@pytest.mark.parametrize("body", [
    json.dumps(_answer("The total is 61,883 acres.")).encode(),
    # ensure_ascii escapes and odd spacing: bytes the analyzer must not re-encode
    b'{"choices": [{"message": {"content": "caf\\u00e9 \\u003cb\\u003e"}}],   "x": 1}',
    json.dumps(_answer("Quote <think>...</think> in a prompt.")),
    b"",
    b"not json </think>",
    b'{"choices": "junk </think>"}',
    b'[1, 2, "</think>"]',
    json.dumps({"choices": [{"message": {"content": [{"type": "text", "text": "a</think>b"}]}}]}),
    None,
    12,
])
def test_an_answer_with_nothing_to_repair_is_the_very_same_object(body):
    out, did = repair_leaked_answer(body)
    assert did is False and out is body


@settings(deadline=None, max_examples=300)
@given(st.text(alphabet=st.sampled_from(list("ab <>/thinkTH\n") + list(BLANK_CHARS[:4])), max_size=40))
def test_the_split_keeps_every_visible_character_and_agrees_with_the_rule(text):
    parts = split_leaked_reasoning(text)
    assert (parts is not None) is has_leaked_think_block(text)
    if parts is None:
        return
    reasoning, content = parts
    # Nothing is invented: both parts come from the text, in order.
    assert reasoning in text and content in text
    assert text.rstrip(BLANK_CHARS).endswith(content.rstrip(BLANK_CHARS))


@settings(deadline=None, max_examples=200)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["choices", "message", "content", "reasoning_content", "x"]), inner,
                        max_size=3), max_leaves=10))
def test_repair_never_raises(doc):
    for body in (doc, json.dumps(doc), json.dumps(doc).encode()):
        out, did = repair_leaked_answer(body)
        if not did:
            assert out is body
