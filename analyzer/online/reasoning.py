"""Reasoning that reached the wrong field: think blocks leaked into ``content``.

vLLM's GLM reasoning parser (``--reasoning-parser glm45``/``glm47``) stops
*extracting* reasoning when a request says ``enable_thinking: false`` or
``thinking: false``. A GLM-5.3 template has no off switch, so the model thinks
anyway and the scratchpad arrives in ``message.content`` with a dangling
``</think>`` (vllm-project/vllm#54744): ``"Simple question.</think>2 + 2 = 4"``.

The proposed parser fix (vllm-project/vllm PR #54825) is output-driven, and so is
this module: a content that carries a think block is split, the text before
``</think>`` moved to ``reasoning_content``; a content without think tags is left
alone, byte for byte. :func:`has_leaked_think_block` is the one rule for "a think
block leaked", online and offline (``analyzer.store.record_sql`` generates its SQL
from :data:`THINK_OPEN`, :data:`THINK_CLOSE` and ``BLANK_CHARS``; a test checks the
two agree).
"""

from __future__ import annotations

import json
from typing import Any

from .classify import BLANK_CHARS

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def has_leaked_think_block(text: Any) -> bool:
    """True when ``text`` (a message's content) carries a think block that was not split out.

    Either the content opens with ``<think>`` (after blank characters), or it holds a
    ``</think>`` with no ``<think>`` before it (the template opened the block in the
    prompt, so the model only ever writes the closing tag). A ``<think>...</think>``
    quoted in the middle of an answer is not a leak. Anything that is not a string
    is not a leak.
    """
    if not isinstance(text, str):
        return False
    if text.lstrip(BLANK_CHARS).startswith(THINK_OPEN):
        return True
    close = text.find(THINK_CLOSE)
    if close < 0:
        return False
    opened = text.find(THINK_OPEN)
    return opened < 0 or close < opened


def split_leaked_reasoning(text: str) -> tuple[str, str] | None:
    """``(reasoning, content)`` of a content with a leaked think block, or None when there is none.

    The reasoning is the text before the first ``</think>`` (without an opening
    ``<think>`` and the blanks around it); the content is exactly what follows the
    tag. A block opened and never closed (``<think>...`` cut by the token cap) is all
    reasoning: the content is empty.
    """
    if not has_leaked_think_block(text):
        return None
    body = text
    stripped = text.lstrip(BLANK_CHARS)
    if stripped.startswith(THINK_OPEN):
        body = stripped[len(THINK_OPEN):]
    close = body.find(THINK_CLOSE)
    if close < 0:
        return body.strip(BLANK_CHARS), ""
    return body[:close].strip(BLANK_CHARS), body[close + len(THINK_CLOSE):]


def _repair_message(message: Any) -> dict | None:
    """A copy of ``message`` with its leaked block moved to ``reasoning_content``, or None."""
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if not isinstance(content, str):
        return None  # content parts (or nothing): left as sent
    parts = split_leaked_reasoning(content)
    if parts is None:
        return None
    leaked, rest = parts
    out = dict(message)
    before = message.get("reasoning_content")
    if isinstance(before, str) and before.strip(BLANK_CHARS):
        out["reasoning_content"] = before + ("\n" if leaked else "") + leaked
    else:
        out["reasoning_content"] = leaked
    out["content"] = rest
    return out


def repair_leaked_answer(body: Any) -> tuple[Any, bool]:
    """``(body, repaired)``: a chat-completions answer with every leaked think block split out.

    Each choice whose ``message.content`` (a string) carries a leaked think block
    gets the text before ``</think>`` appended to its ``reasoning_content`` and keeps
    what follows as ``content``. The body comes back in the form it came (bytes,
    str or a parsed dict; re-encoded as UTF-8 JSON when repaired). An answer with
    nothing to repair — no think tags, not JSON, no choices — is returned as the
    very same object, so its bytes are untouched. Never raises.
    """
    try:
        return _repair(body)
    except Exception:  # noqa: BLE001 - a body we cannot read is passed on as it came
        return body, False


def _repair(body: Any) -> tuple[Any, bool]:
    if isinstance(body, dict):
        doc, form = body, "dict"
    elif isinstance(body, (bytes, bytearray, memoryview, str)):
        raw = body if isinstance(body, str) else bytes(body)
        # Cheap refusal first: no closing or opening tag, nothing to split.
        probe = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        if THINK_CLOSE not in probe and THINK_OPEN not in probe and "\\u003c" not in probe.lower():
            return body, False
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            return body, False
        form = "str" if isinstance(body, str) else "bytes"
    else:
        return body, False
    if not isinstance(doc, dict) or not isinstance(doc.get("choices"), list):
        return body, False
    choices = list(doc["choices"])
    repaired = False
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict):
            continue
        message = _repair_message(choice.get("message"))
        if message is not None:
            choices[i] = {**choice, "message": message}
            repaired = True
    if not repaired:
        return body, False
    out = {**doc, "choices": choices}
    if form == "dict":
        return out, True
    text = json.dumps(out, ensure_ascii=False)
    return (text if form == "str" else text.encode("utf-8")), True
