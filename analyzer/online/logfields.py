"""The extra fields a proxy adds to its response record, so new logs need no inference."""

from __future__ import annotations

from typing import Any, Mapping

from .classify import DEFAULT_CALLER_DEADLINE_S, decide
from .features import features_from_exchange, status_or_none
from .ladder import LadderResult
from .normalize import thinking_sent

#: Bumped when the shape of :func:`log_fields` changes; the analyzer reads it.
#: 2: ``ladder.skipped``, ``attempts[].no_answer``, the ``deadline`` outcome, and the
#: classes ``no-answer-200``, ``connect-timeout`` and ``late-200``.
#: 3: ``ladder_armed`` (the ladder was armed for this request's model: GLM by
#: default, so a non-GLM failure with ``ladder: null`` is not a ladder that failed
#: to trigger) and ``attempts[].refused`` (a rung the upstream answered 400/422).
#: 4: ``reasoning_repaired`` (a leaked think block was split out of the answer passed
#: on), ``thinking_sent`` (the thinking keys the request carried upstream),
#: ``attempts[].has_reasoning_text``, ``.reasoning_leaked`` and ``.refused_reason``,
#: and the classes ``answer-in-reasoning`` and ``reasoning-leaked``.
LOG_FIELDS_VERSION = 4

#: Where a gateway's adapter puts :func:`log_fields` in the gateway's own log, and
#: where the analyzer reads them back: a key of LiteLLM's
#: ``metadata.spend_logs_metadata`` (the one free-form object LiteLLM copies into
#: every StandardLoggingPayload).
LOG_FIELDS_KEY = "analyzer_log_fields"


def log_fields(
    payload: Mapping[str, Any],
    status: int | None,
    body: Any,
    ladder: LadderResult | None = None,
    *,
    error: BaseException | str | None = None,
    latency_ms: int | None = None,
    caller_deadline_s: float | None = DEFAULT_CALLER_DEADLINE_S,
) -> dict[str, Any]:
    """The fields to merge into the proxy's response record for one turn.

    ``status``/``body``/``error`` describe the answer passed on to the client (the
    proxy's own ``has_content``, ``tokens`` etc. describe the same answer). With a
    ``ladder`` result, ``incident_class`` is the class of the *original* answer —
    the incident that happened — and ``ladder`` holds every attempt, so "5xx with
    tool history, recovered at rung k" reads apart from "every rung failed". An
    answer whose leaked think block the ladder split out (``ladder.reasoning_repaired``)
    keeps ``incident_class`` ``reasoning-leaked`` (the user would have seen the
    scratchpad) while ``final_class`` is the class of the repaired answer.
    ``latency_ms`` (the turn's duration for the caller) and ``caller_deadline_s``
    make an otherwise-ok answer slower than the deadline ``late-200``. Total:
    never raises on what the upstream sent.

    Shape (every key always present; JSON-serializable)::

        log_fields_version  int
        upstream_status     int | null   HTTP status of the answer passed on
        finish_reason       str | null   its finish_reason
        max_tokens          int | null   the cap the client asked for
        thinking_token_budget int | null as sent by the client
        tool_history        bool         tool messages/calls anywhere in the prompt
        incident_class      str          class of the original answer
        final_class         str          class of the answer passed on
        caller_deadline_s   float | null the deadline ``late-200`` was judged by
        reasoning_repaired  bool         a leaked think block was split out of the
                                         answer passed on
        thinking_sent       object | null  the thinking keys of the payload's
                                         chat_template_kwargs as sent (enable_thinking,
                                         thinking, clear_thinking, reasoning_effort)
        ladder_armed        bool | null  the ladder result passed was armed for this
                                         request's model (the model gate); null when
                                         no ladder result was passed
        ladder              object | null  {trigger, outcome, recovered_at,
                                            attempts: [{rung, status, incident_class,
                                            latency_ms, finish_reason, has_content,
                                            has_tool_calls, prompt_tokens,
                                            completion_tokens, error, no_answer,
                                            refused, has_reasoning_text,
                                            reasoning_leaked, refused_reason}],
                                            skipped: [{rung, reason}]}
    """
    if not isinstance(payload, Mapping):
        payload = {}
    status = status_or_none(status)
    final = features_from_exchange(payload, status, body, error, latency_ms=latency_ms,
                                   caller_deadline_s=caller_deadline_s)
    final_class = decide(final).incident_class
    repaired = bool(getattr(ladder, "reasoning_repaired", False))
    if ladder is not None and (ladder.triggered or repaired) and ladder.attempts:
        incident_class = ladder.attempts[0].incident_class
    else:
        incident_class = final_class
    budget = payload.get("thinking_token_budget")
    return {
        "log_fields_version": LOG_FIELDS_VERSION,
        "upstream_status": status,
        "finish_reason": final.finish_reason,
        "max_tokens": final.max_tokens,
        "thinking_token_budget": budget if isinstance(budget, int) and not isinstance(budget, bool) else None,
        "tool_history": final.tool_history,
        "incident_class": incident_class,
        "final_class": final_class,
        "caller_deadline_s": caller_deadline_s,
        "reasoning_repaired": repaired,
        "thinking_sent": thinking_sent(payload),
        # Unknown (null) without a ladder result: a transport error on the original
        # call or a request refused before any call; the analyzer reads such a
        # record as written by the ladder-running proxy it came from.
        "ladder_armed": bool(getattr(ladder, "armed", False)) if ladder is not None else None,
        "ladder": ladder.to_log() if ladder is not None else None,
    }
