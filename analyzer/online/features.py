"""Extract :class:`TurnFeatures` from what a proxy has in hand: payload and answer."""

from __future__ import annotations

import json
from typing import Any, Mapping

from .classify import (
    ERROR_HTTP,
    LOGGED,
    TurnFeatures,
    error_kind_of_exception,
    parse_error,
)


def has_tool_history(messages: Any) -> bool:
    """True when a transcript carries tool history anywhere.

    Tool history is a ``role: tool`` (or legacy ``function``) message, or an
    assistant message with ``tool_calls`` / ``function_call`` — at any position,
    not only in the current turn.
    """
    if not isinstance(messages, list):
        return False
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "tool" or role == "function":
            return True
        if role == "assistant" and (m.get("tool_calls") or m.get("function_call")):
            return True
    return False


def parse_body(body: Any) -> Any:
    """Decode an upstream answer body (bytes, str or already-parsed JSON).

    Returns the parsed JSON value, or None for an empty or non-JSON body (a naked
    500 has an empty body; an HTML error page is not JSON).
    """
    if body is None or isinstance(body, (dict, list)):
        return body
    if isinstance(body, (bytes, bytearray, memoryview)):
        if not body:
            return None
        try:
            return json.loads(bytes(body))
        except ValueError:
            return None
    if isinstance(body, str):
        if not body:
            return None
        try:
            return json.loads(body)
        except ValueError:
            return None
    return None


def answer_summary(body: Any) -> dict[str, Any]:
    """What a chat-completions answer says about itself.

    Returns a dict with ``finish_reason``, ``has_content``, ``has_tool_calls``,
    ``has_reasoning``, ``prompt_tokens`` and ``completion_tokens`` (None where the
    body does not say). Reads the first choice, as the proxy does.
    """
    doc = parse_body(body)
    out: dict[str, Any] = {
        "finish_reason": None,
        "has_content": None,
        "has_tool_calls": None,
        "has_reasoning": None,
        "prompt_tokens": None,
        "completion_tokens": None,
    }
    if not isinstance(doc, dict):
        if body is not None:
            # A body arrived but is empty or not a JSON object (an HTML error page
            # on a 200): that answer is empty, not unknown, so a ladder rung that
            # gets it has not recovered. None still means "no body to read".
            out["has_content"] = out["has_tool_calls"] = out["has_reasoning"] = False
        return out
    # A JSON answer with no usable choice is an empty answer, not an unknown one.
    out["has_content"] = out["has_tool_calls"] = out["has_reasoning"] = False
    usage = doc.get("usage")
    if isinstance(usage, dict):
        out["prompt_tokens"] = _int_or_none(usage.get("prompt_tokens"))
        out["completion_tokens"] = _int_or_none(usage.get("completion_tokens"))
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return out
    choice = choices[0]
    out["finish_reason"] = choice.get("finish_reason") or None
    msg = choice.get("message")
    if not isinstance(msg, dict):
        return out
    content = msg.get("content")
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    out["has_content"] = bool(content and str(content).strip())
    out["has_tool_calls"] = bool(msg.get("tool_calls") or msg.get("function_call"))
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    out["has_reasoning"] = bool(reasoning)
    return out


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def requested_max_tokens(payload: Mapping[str, Any]) -> int | None:
    """The completion cap a request asked for (``max_completion_tokens`` wins)."""
    for key in ("max_completion_tokens", "max_tokens"):
        v = _int_or_none(payload.get(key))
        if v is not None:
            return v
    return None


def features_from_exchange(
    payload: Mapping[str, Any],
    status: int | None,
    body: Any,
    error: BaseException | str | None = None,
) -> TurnFeatures:
    """Build the per-turn features from a live request payload and its answer.

    Args:
        payload: the chat-completions request as sent upstream.
        status: the upstream HTTP status, or None when nothing answered.
        body: the upstream answer body (bytes, str or parsed JSON).
        error: the exception raised by the transport, or the proxy's error text,
            when the call failed without an HTTP answer.
    """
    error_kind: str | None = None
    if error is not None:
        if isinstance(error, BaseException):
            error_kind = error_kind_of_exception(error)
        else:
            error_kind, parsed_status = parse_error(error)
            if status is None:
                status = parsed_status
    elif status is not None and not (200 <= status < 300):
        error_kind = ERROR_HTTP
    answer = answer_summary(body) if status is not None and 200 <= status < 300 else None
    return TurnFeatures(
        status=status,
        finish_reason=answer["finish_reason"] if answer else None,
        has_content=answer["has_content"] if answer else None,
        has_tool_calls=answer["has_tool_calls"] if answer else None,
        tool_history=has_tool_history(payload.get("messages")),
        has_reasoning=answer["has_reasoning"] if answer else None,
        completion_tokens=answer["completion_tokens"] if answer else None,
        max_tokens=requested_max_tokens(payload),
        error_kind=error_kind,
        evidence=LOGGED,
    )
