"""Extract :class:`TurnFeatures` from what a proxy has in hand: payload and answer."""

from __future__ import annotations

import json
from typing import Any, Mapping

from .classify import (
    DEFAULT_CALLER_DEADLINE_S,
    ERROR_BAD_BODY,
    ERROR_HTTP,
    LOGGED,
    is_blank,
    TurnFeatures,
    error_kind_of_exception,
    parse_error,
)
from .reasoning import has_leaked_think_block


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


_NOT_JSON = object()  # _decode's marker for a body that arrived but is not JSON


def _decode(body: Any) -> Any:
    """The parsed body, None for no body, or ``_NOT_JSON`` for an empty/non-JSON one."""
    if body is None or isinstance(body, (dict, list)):
        return body
    if isinstance(body, (bytes, bytearray, memoryview)):
        body = bytes(body)
    elif not isinstance(body, str):
        return _NOT_JSON
    if not body:
        return _NOT_JSON
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        # Invalid JSON, bad UTF-8, or nesting deeper than the parser's stack.
        return _NOT_JSON


def _text(content: Any) -> str | None:
    """Visible text of a message's ``content``: a string, or text parts; None otherwise."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts; only string texts count
        return "".join(p["text"] for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return None


def _usable_tool_calls(msg: Mapping[str, Any]) -> bool:
    calls = msg.get("tool_calls")
    if isinstance(calls, list) and any(isinstance(c, dict) for c in calls):
        return True
    return isinstance(msg.get("function_call"), dict)


def answer_summary(body: Any) -> dict[str, Any]:
    """What a chat-completions answer says about itself. Never raises.

    Returns a dict with ``finish_reason``, ``has_content``, ``has_tool_calls``,
    ``has_reasoning``, ``has_reasoning_text``, ``reasoning_leaked``,
    ``prompt_tokens``, ``completion_tokens``, ``reasoning_tokens``, ``no_answer``
    and ``bad_body`` (None where the body does not say). Reads the first choice,
    as the proxy does. Whitespace-only content is no content (:func:`is_blank`);
    reasoning tokens in ``usage.completion_tokens_details`` are reasoning evidence
    (``has_reasoning``) but not a reasoning text (``has_reasoning_text``).
    ``reasoning_leaked`` marks content carrying a think block that was not split
    out. ``bad_body`` marks an empty or non-JSON body, ``no_answer`` a JSON body
    with no usable choice.
    """
    out: dict[str, Any] = {
        "finish_reason": None,
        "has_content": None,
        "has_tool_calls": None,
        "has_reasoning": None,
        "has_reasoning_text": None,
        "reasoning_leaked": None,
        "prompt_tokens": None,
        "completion_tokens": None,
        "reasoning_tokens": None,
        "no_answer": None,
        "bad_body": None,
    }
    if body is None:
        return out  # no body to read
    doc = _decode(body)
    # A body arrived: from here on the answer is empty unless it says otherwise.
    out["has_content"] = out["has_tool_calls"] = out["has_reasoning"] = False
    out["has_reasoning_text"] = out["reasoning_leaked"] = False
    out["no_answer"] = out["bad_body"] = False
    if doc is _NOT_JSON:
        out["bad_body"] = True
        return out
    if not isinstance(doc, dict):
        out["no_answer"] = True
        return out
    usage = doc.get("usage")
    if isinstance(usage, dict):
        out["prompt_tokens"] = _int_or_none(usage.get("prompt_tokens"))
        out["completion_tokens"] = _int_or_none(usage.get("completion_tokens"))
        details = usage.get("completion_tokens_details")
        if isinstance(details, dict):
            out["reasoning_tokens"] = _int_or_none(details.get("reasoning_tokens"))
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        out["no_answer"] = True  # choices: [], an error object, ...
        return out
    choice = choices[0]
    finish = choice.get("finish_reason")
    out["finish_reason"] = finish if isinstance(finish, str) and finish else None
    msg = choice.get("message")
    if not isinstance(msg, dict):
        out["no_answer"] = True
        return out
    text = _text(msg.get("content"))
    out["has_content"] = not is_blank(text)
    out["reasoning_leaked"] = has_leaked_think_block(text)
    out["has_tool_calls"] = _usable_tool_calls(msg)
    reasoning = msg.get("reasoning_content") or msg.get("reasoning")
    out["has_reasoning_text"] = isinstance(reasoning, str) and not is_blank(reasoning)
    out["has_reasoning"] = out["has_reasoning_text"] or bool(
        out["reasoning_tokens"] and out["reasoning_tokens"] > 0)
    return out


def _int_or_none(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def status_or_none(status: Any) -> int | None:
    """An HTTP status as an int in 100..599, or None for anything else."""
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        return status
    return None


def requested_max_tokens(payload: Any) -> int | None:
    """The completion cap a request asked for (``max_completion_tokens`` wins)."""
    if not isinstance(payload, Mapping):
        return None
    for key in ("max_completion_tokens", "max_tokens"):
        v = _int_or_none(payload.get(key))
        if v is not None:
            return v
    return None


def is_late(latency_ms: Any, caller_deadline_s: float | None = DEFAULT_CALLER_DEADLINE_S) -> bool | None:
    """Whether a turn of ``latency_ms`` missed the caller's deadline (None: unknown)."""
    if caller_deadline_s is None or not isinstance(latency_ms, (int, float)) or isinstance(latency_ms, bool):
        return None
    if latency_ms != latency_ms:  # NaN
        return None
    return latency_ms > caller_deadline_s * 1000


def features_from_exchange(
    payload: Mapping[str, Any],
    status: int | None,
    body: Any,
    error: BaseException | str | None = None,
    *,
    latency_ms: int | None = None,
    caller_deadline_s: float | None = DEFAULT_CALLER_DEADLINE_S,
) -> TurnFeatures:
    """Build the per-turn features from a live request payload and its answer.

    Total: whatever the upstream sent (or ``send`` returned), this returns
    features and never raises.

    Args:
        payload: the chat-completions request as sent upstream.
        status: the upstream HTTP status, or None when nothing answered.
        body: the upstream answer body (bytes, str or parsed JSON).
        error: the exception raised by the transport, or the proxy's error text,
            when the call failed without an HTTP answer.
        latency_ms: how long the turn took for the caller, when known.
        caller_deadline_s: the caller's own deadline; an otherwise-ok answer
            slower than this is ``late-200``. None: never late.
    """
    if not isinstance(payload, Mapping):
        payload = {}
    status = status_or_none(status)
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
    answer = answer_summary(body) if status is not None and 200 <= status < 300 and error is None else None
    if answer and answer["bad_body"]:
        error_kind = ERROR_BAD_BODY
    return TurnFeatures(
        status=status,
        finish_reason=answer["finish_reason"] if answer else None,
        has_content=answer["has_content"] if answer else None,
        has_tool_calls=answer["has_tool_calls"] if answer else None,
        tool_history=has_tool_history(payload.get("messages")),
        has_reasoning=answer["has_reasoning"] if answer else None,
        has_reasoning_text=answer["has_reasoning_text"] if answer else None,
        reasoning_leaked=answer["reasoning_leaked"] if answer else None,
        completion_tokens=answer["completion_tokens"] if answer else None,
        max_tokens=requested_max_tokens(payload),
        error_kind=error_kind,
        no_answer=answer["no_answer"] if answer else None,
        late=is_late(latency_ms, caller_deadline_s),
        evidence=LOGGED,
    )
