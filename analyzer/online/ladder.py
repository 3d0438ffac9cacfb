"""The fallback ladder: retry a failing GLM tool-session call with smaller payloads.

Triggers (from the original answer's class): ``tool-history-5xx``, and
``empty-200-stop`` on a request that carries tool history. Rungs, in order, each a
new payload built from the original without mutating it:

1. ``tool_choice_none`` — keep tools and transcript, set ``tool_choice: "none"``
2. ``drop_tools`` — remove ``tools``, ``tool_choice``, ``parallel_tool_calls``
3. ``final_answer`` — drop tools, append a user message asking for a final answer
4. ``flatten_transcript`` (opt-in) — as 3, with assistant tool calls and tool
   results rewritten as plain chat messages, so no tool structure remains

An opt-in second ladder handles ``length-with-no-content`` (seed 003): retry with a
``thinking_token_budget`` that leaves the answer its reserve, then with thinking off.

The ladder is transport-agnostic: the caller passes ``send(payload) -> (status,
headers, body)`` (a coroutine function for :func:`arun_ladder`). One state machine,
:func:`_ladder_steps`, drives both the sync and the async runner, so the two cannot
drift apart.

Payloads share every unchanged object with the original (messages, tools): rungs
cost a few dict copies, not a deep copy of a 200 KB transcript. Nothing here
mutates a payload; callers must not mutate the rung payloads either.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable, Generator, Iterable, Mapping

from .classify import (
    EMPTY_200_STOP,
    LENGTH_WITH_NO_CONTENT,
    OK,
    TIMEOUT,
    TOOL_HISTORY_5XX,
    TurnFeatures,
    decide,
)
from .features import answer_summary, features_from_exchange, requested_max_tokens
from .normalize import normalize_thinking

ORIGINAL = "original"
TOOL_CHOICE_NONE = "tool_choice_none"
DROP_TOOLS = "drop_tools"
FINAL_ANSWER = "final_answer"
FLATTEN_TRANSCRIPT = "flatten_transcript"
THINKING_BUDGET = "thinking_budget"
DISABLE_THINKING = "disable_thinking"

#: The classes that start the tool-session ladder (the fix being sized).
TOOL_TRIGGERS: tuple[str, ...] = (TOOL_HISTORY_5XX, EMPTY_200_STOP)

#: The tool-session rungs, in order; ``flatten_transcript`` is opt-in.
DEFAULT_RUNGS: tuple[str, ...] = (TOOL_CHOICE_NONE, DROP_TOOLS, FINAL_ANSWER)
ALL_RUNGS: tuple[str, ...] = DEFAULT_RUNGS + (FLATTEN_TRANSCRIPT,)
#: The opt-in rungs for ``length-with-no-content``.
LENGTH_RUNGS: tuple[str, ...] = (THINKING_BUDGET, DISABLE_THINKING)

FINAL_ANSWER_PROMPT = (
    "Please give your final answer now, based on the information above. "
    "Do not call any more tools."
)

# Keys that offer tools to the model (OpenAI current and legacy spellings).
_TOOL_KEYS = frozenset({"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"})
# Message keys that carry tool structure inside a transcript.
_MESSAGE_TOOL_KEYS = frozenset({"tool_calls", "function_call", "tool_call_id"})

# Outcomes recorded on a LadderResult.
NOT_TRIGGERED = "not-triggered"
RECOVERED = "recovered"
EXHAUSTED = "exhausted"  # every rung was tried and failed
ATTEMPT_LIMIT = "attempt-limit"  # max_attempts reached before the rungs ran out
TIME_BUDGET = "time-budget"  # the total time budget ran out
TRANSPORT_ERROR = "transport-error"  # a rung call raised; the upstream is unreachable


class BudgetExceeded(TimeoutError):
    """The ladder's total time budget ran out during a rung call (async runner)."""


Send = Callable[[dict], tuple]
ASend = Callable[[dict], Awaitable[tuple]]


@dataclass(slots=True)
class Attempt:
    """One upstream call the ladder made (the original call is rung ``original``)."""

    rung: str
    status: int | None
    incident_class: str
    latency_ms: int
    finish_reason: str | None = None
    has_content: bool | None = None
    has_tool_calls: bool | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The attempt as a JSON-ready dict (the ``ladder.attempts`` log shape)."""
        return asdict(self)


@dataclass(slots=True)
class LadderResult:
    """What the ladder did and the answer to pass on to the client.

    ``status``/``headers``/``body`` are the recovered rung's answer, or the
    original answer when nothing recovered (the client then sees the real failure
    of the request it sent). ``recovered_at`` is the rung that recovered, or None.
    """

    status: int | None
    headers: Any
    body: Any
    attempts: list[Attempt] = field(default_factory=list)
    trigger: str | None = None
    recovered_at: str | None = None
    outcome: str = NOT_TRIGGERED

    @property
    def triggered(self) -> bool:
        """True when the original answer triggered at least one retry decision."""
        return self.trigger is not None

    def to_log(self) -> dict[str, Any] | None:
        """The ``ladder`` log field: None when the ladder did not trigger."""
        if self.trigger is None:
            return None
        return {
            "trigger": self.trigger,
            "outcome": self.outcome,
            "recovered_at": self.recovered_at,
            "attempts": [a.to_dict() for a in self.attempts],
        }


# ---------------------------------------------------------------------------
# Rung payloads


def _without_tools(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in _TOOL_KEYS}


def _with_final_prompt(messages: Any) -> list:
    msgs = list(messages) if isinstance(messages, list) else []
    msgs.append({"role": "user", "content": FINAL_ANSWER_PROMPT})
    return msgs


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return json.dumps(content, ensure_ascii=False)


def flatten_messages(messages: Any) -> list:
    """Rewrite tool calls and tool results as plain chat messages.

    Messages without tool structure are shared, not copied.
    """
    if not isinstance(messages, list):
        return []
    out = []
    names: dict[str, str] = {}
    for m in messages:
        if not isinstance(m, dict):
            out.append(m)
            continue
        role = m.get("role")
        if role == "assistant" and (m.get("tool_calls") or m.get("function_call")):
            calls = m.get("tool_calls") or [{"function": m.get("function_call")}]
            lines = [_text_of(m.get("content"))] if m.get("content") else []
            for c in calls:
                fn = (c or {}).get("function") or {}
                name = fn.get("name", "tool")
                if c and c.get("id"):
                    names[c["id"]] = name
                lines.append(f"[I called the tool {name} with arguments {_text_of(fn.get('arguments'))}]")
            out.append({"role": "assistant", "content": "\n".join(lines)})
        elif role in ("tool", "function"):
            name = names.get(m.get("tool_call_id", ""), m.get("name") or "tool")
            out.append({"role": "user", "content": f"[Result of the tool {name}]\n{_text_of(m.get('content'))}"})
        elif "tool_calls" in m or "function_call" in m or "tool_call_id" in m:
            # Empty leftovers (the ``tool_calls: []`` vLLM returns on a plain answer,
            # which agents echo back): drop the keys so no tool structure remains.
            out.append({k: v for k, v in m.items() if k not in _MESSAGE_TOOL_KEYS})
        else:
            out.append(m)
    return out


def build_rung(payload: Mapping[str, Any], rung: str, *, model: str | None = None, answer_reserve: int = 256) -> dict[str, Any]:
    """Return the payload for one rung, built from ``payload`` without mutating it.

    ``model`` and ``answer_reserve`` are used only by the length rungs.
    """
    if rung == TOOL_CHOICE_NONE:
        out = {**payload, "tool_choice": "none"}
        if "functions" in payload or "function_call" in payload:
            out["function_call"] = "none"  # the legacy spelling says the same
        return out
    if rung == DROP_TOOLS:
        return _without_tools(payload)
    if rung == FINAL_ANSWER:
        out = _without_tools(payload)
        out["messages"] = _with_final_prompt(payload.get("messages"))
        return out
    if rung == FLATTEN_TRANSCRIPT:
        out = _without_tools(payload)
        out["messages"] = _with_final_prompt(flatten_messages(payload.get("messages")))
        return out
    if rung == THINKING_BUDGET:
        max_tokens = requested_max_tokens(payload)
        budget = max(0, (max_tokens or 0) - answer_reserve - 2)
        asked = payload.get("thinking_token_budget")
        if isinstance(asked, int) and not isinstance(asked, bool) and 0 <= asked < budget:
            budget = asked  # never raise a budget the client set lower
        return {**payload, "thinking_token_budget": budget}
    if rung == DISABLE_THINKING:
        out = normalize_thinking(payload, model or str(payload.get("model") or ""), False)
        out.pop("thinking_token_budget", None)
        return out
    raise ValueError(f"unknown ladder rung {rung!r}; known: {ALL_RUNGS + LENGTH_RUNGS}")


def rung_payloads(payload: Mapping[str, Any], rungs: Iterable[str] = ALL_RUNGS) -> list[tuple[str, dict]]:
    """Every rung's payload for ``payload``, in order (for dry runs and replays)."""
    return [(r, build_rung(payload, r)) for r in rungs]


def ladder_trigger(features: TurnFeatures, *, length_recovery: bool = False) -> str | None:
    """The class that makes the ladder retry this answer, or None.

    ``tool-history-5xx`` always; ``empty-200-stop`` when the prompt carries tool
    history; ``length-with-no-content`` when ``length_recovery`` is on.
    """
    cls = decide(features).incident_class
    if cls == TOOL_HISTORY_5XX:
        return cls
    if cls == EMPTY_200_STOP and features.tool_history:
        return cls
    if cls == LENGTH_WITH_NO_CONTENT and length_recovery:
        return cls
    return None


# ---------------------------------------------------------------------------
# The state machine both runners drive

# A step yields (rung, payload, seconds_left) and receives
# (status, headers, body, latency_ms, exception_or_None).
_Outcome = tuple[Any, Any, Any, int, BaseException | None]


def _ladder_steps(
    payload: Mapping[str, Any],
    *,
    rungs: tuple[str, ...],
    length_recovery: bool,
    max_attempts: int,
    time_budget_s: float,
    answer_reserve: int,
    clock: Callable[[], float],
) -> Generator[tuple[str, dict, float | None], _Outcome, LadderResult]:
    status, headers, body, latency, exc = yield (ORIGINAL, payload, None)  # type: ignore[misc]
    if exc is not None:
        raise exc  # the original call failed in transport: the proxy's own error path handles it
    feats = features_from_exchange(payload, status, body)
    first = _attempt(ORIGINAL, feats, status, body, latency, None)
    result = LadderResult(status=status, headers=headers, body=body, attempts=[first])
    trigger = ladder_trigger(feats, length_recovery=length_recovery)
    if trigger is None:
        return result
    result.trigger = trigger
    plan = LENGTH_RUNGS if trigger == LENGTH_WITH_NO_CONTENT else rungs
    started = clock()
    result.outcome = EXHAUSTED
    for rung in plan:
        if len(result.attempts) >= max_attempts:
            result.outcome = ATTEMPT_LIMIT
            break
        left = time_budget_s - (clock() - started)
        if left <= 0:
            result.outcome = TIME_BUDGET
            break
        rung_payload = build_rung(payload, rung, answer_reserve=answer_reserve)
        status, headers, body, latency, exc = yield (rung, rung_payload, left)
        if exc is not None:
            cls = TIMEOUT if isinstance(exc, BudgetExceeded) else None
            f = features_from_exchange(rung_payload, None, None, exc)
            result.attempts.append(_attempt(rung, f, None, None, latency, exc, cls))
            result.outcome = TIME_BUDGET if cls == TIMEOUT else TRANSPORT_ERROR
            break
        f = features_from_exchange(rung_payload, status, body)
        att = _attempt(rung, f, status, body, latency, None)
        result.attempts.append(att)
        if att.incident_class == OK:
            result.status, result.headers, result.body = status, headers, body
            result.recovered_at = rung
            result.outcome = RECOVERED
            break
    return result


def _attempt(rung: str, f: TurnFeatures, status, body, latency_ms: int, exc, cls: str | None = None) -> Attempt:
    summary = answer_summary(body) if status is not None and 200 <= status < 300 else {}
    return Attempt(
        rung=rung,
        status=status,
        incident_class=cls or decide(f).incident_class,
        latency_ms=latency_ms,
        finish_reason=summary.get("finish_reason"),
        has_content=summary.get("has_content"),
        has_tool_calls=summary.get("has_tool_calls"),
        prompt_tokens=summary.get("prompt_tokens"),
        completion_tokens=summary.get("completion_tokens"),
        error=None if exc is None else f"{type(exc).__name__}: {exc}"[:500],
    )


def _check_bounds(max_attempts: int, time_budget_s: float) -> None:
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be a positive integer, got {max_attempts!r}")
    if time_budget_s <= 0:
        raise ValueError(f"time_budget_s must be positive, got {time_budget_s!r}")


def _rungs_for(flatten: bool, rungs: Iterable[str] | None) -> tuple[str, ...]:
    if rungs is not None:
        return tuple(rungs)
    return ALL_RUNGS if flatten else DEFAULT_RUNGS


def run_ladder(
    payload: Mapping[str, Any],
    send: Send,
    *,
    flatten: bool = False,
    rungs: Iterable[str] | None = None,
    length_recovery: bool = False,
    max_attempts: int = 4,
    time_budget_s: float = 120.0,
    answer_reserve: int = 256,
    clock: Callable[[], float] = time.monotonic,
) -> LadderResult:
    """Send ``payload``; if the answer triggers the ladder, retry down the rungs.

    Args:
        payload: the chat-completions request (not mutated).
        send: ``send(payload) -> (status, headers, body)``; may raise on transport
            failure. An exception on the original call propagates unchanged.
        flatten: also try the opt-in ``flatten_transcript`` rung.
        rungs: an explicit rung order (overrides ``flatten``).
        length_recovery: also retry ``length-with-no-content`` (thinking budget,
            then thinking off).
        max_attempts: upstream calls at most, the original included.
        time_budget_s: seconds the retries may take in all, counted from the
            original answer (the original call has the proxy's own timeout). The
            sync runner cannot interrupt a running ``send``; it starts no rung
            after the budget is spent.
        answer_reserve: tokens kept for the visible answer by the
            ``thinking_budget`` rung.
        clock: a monotonic clock in seconds (injectable for tests).

    Returns:
        A :class:`LadderResult`: the answer to pass on and every attempt made.
    """
    _check_bounds(max_attempts, time_budget_s)
    steps = _ladder_steps(payload, rungs=_rungs_for(flatten, rungs), length_recovery=length_recovery,
                          max_attempts=max_attempts, time_budget_s=time_budget_s,
                          answer_reserve=answer_reserve, clock=clock)
    try:
        rung, body_payload, _left = next(steps)
        while True:
            t0 = clock()
            try:
                status, headers, body = send(body_payload)
                outcome: _Outcome = (status, headers, body, _ms(clock() - t0), None)
            except Exception as exc:  # noqa: BLE001 - every transport failure is an attempt
                outcome = (None, None, None, _ms(clock() - t0), exc)
            rung, body_payload, _left = steps.send(outcome)
    except StopIteration as stop:
        return stop.value


async def arun_ladder(
    payload: Mapping[str, Any],
    send: ASend,
    *,
    flatten: bool = False,
    rungs: Iterable[str] | None = None,
    length_recovery: bool = False,
    max_attempts: int = 4,
    time_budget_s: float = 120.0,
    answer_reserve: int = 256,
    clock: Callable[[], float] = time.monotonic,
) -> LadderResult:
    """The async :func:`run_ladder`: ``send`` is a coroutine function.

    Each rung call is cancelled when the remaining time budget runs out, so the
    budget is a hard bound here.
    """
    _check_bounds(max_attempts, time_budget_s)
    steps = _ladder_steps(payload, rungs=_rungs_for(flatten, rungs), length_recovery=length_recovery,
                          max_attempts=max_attempts, time_budget_s=time_budget_s,
                          answer_reserve=answer_reserve, clock=clock)
    try:
        rung, body_payload, left = next(steps)
        while True:
            t0 = clock()
            try:
                call = send(body_payload)
                if left is None:
                    status, headers, body = await call
                else:
                    try:
                        status, headers, body = await asyncio.wait_for(call, left)
                    except asyncio.TimeoutError as exc:
                        raise BudgetExceeded(f"ladder time budget ran out after {_ms(clock() - t0)} ms") from exc
                outcome: _Outcome = (status, headers, body, _ms(clock() - t0), None)
            except Exception as exc:  # noqa: BLE001 - every transport failure is an attempt
                outcome = (None, None, None, _ms(clock() - t0), exc)
            rung, body_payload, left = steps.send(outcome)
    except StopIteration as stop:
        return stop.value


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))
