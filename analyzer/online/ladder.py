"""The fallback ladder: retry a failing GLM tool-session call with smaller payloads.

Triggers (from the original answer's class): ``tool-history-5xx``, and
``empty-200-stop`` on a request that carries tool history. Rungs, in order, each a
new payload built from the original without mutating it:

1. ``tool_choice_none`` — keep tools and transcript, set ``tool_choice: "none"``
2. ``drop_tools`` — remove ``tools``, ``tool_choice``, ``parallel_tool_calls``
3. ``final_answer`` — drop tools, append a user message asking for a final answer
4. ``flatten_transcript`` (opt-in) — as 3, with assistant tool calls and tool
   results rewritten as plain chat messages, so no tool structure remains

An opt-in second ladder handles ``length-with-no-content`` (the reasoning ate the
whole ``max_tokens``): retry with a ``thinking_token_budget`` that leaves the answer
its reserve, then with thinking off.

Every enabled rung is reachable under the defaults (``max_attempts`` defaults to
one call per rung plus the original). A rung that cannot be built from the
payload (no transcript to finish, no ``max_tokens`` to size a thinking budget
from, client junk the normalizer refuses) is skipped and recorded in
``LadderResult.skipped``. With a caller ``deadline`` (absolute on ``clock``, or
``time_left_s``), no rung starts with less than ``min_attempt_s`` left, the async
runner cuts a rung off at the deadline, and an answer that arrives after it does
not count as recovered: the outcome is ``deadline``.

The ladder is a GLM fix: it is armed only for a payload whose ``model``
matches ``models`` (default :data:`LADDER_MODELS`, ``("*glm*",)``; None arms it
for every model). Any other request costs exactly one call and is never retried
(``LadderResult.armed`` is False).

A rung answered with 400 or 422 was *refused*: the upstream does not accept
that rung's shape (GLM-5.3 is reported to reject ``thinking.type: disabled``).
The attempt is recorded with ``refused=True`` and the ladder goes on to the next
rung; the call counts toward ``max_attempts``.

Whatever ``send`` returns (a malformed tuple, a junk status, any body) becomes an
attempt with a class; only a transport exception on the *original* call
propagates. ``LadderResult.headers`` is a plain dict safe to forward with
``LadderResult.body`` (no ``content-encoding``/``content-length``/hop-by-hop
headers: ``send`` returns the decoded body); ``upstream_headers`` keeps what
``send`` returned.

The ladder is transport-agnostic: the caller passes ``send(payload) -> (status,
headers, body)`` (a coroutine function for :func:`arun_ladder`), and one
:class:`LadderSettings` made for the deployment. One state machine,
:func:`_ladder_steps`, drives both the sync and the async runner, so the two cannot
drift apart.

Payloads share every unchanged object with the original (messages, tools): rungs
cost a few dict copies, not a deep copy of a 200 KB transcript. Nothing here
mutates a payload; callers must not mutate the rung payloads either.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable, Generator, Iterable, Mapping

from .classify import (
    ANSWER_IN_REASONING,
    EMPTY_200_STOP,
    LENGTH_WITH_NO_CONTENT,
    OK,
    OTHER_5XX,
    REASONING_LEAKED,
    TIMEOUT,
    TOOL_HISTORY_5XX,
    TurnFeatures,
    decide,
    exception_text,
)
from .features import answer_summary, features_from_exchange, requested_max_tokens, status_or_none
from .models import LADDER_MODELS, model_matches, model_patterns
from .normalize import BUDGET_OVERHEAD_TOKENS, ClientRequestError, normalize_thinking
from .reasoning import repair_leaked_answer
from .templates import check_templates

ORIGINAL = "original"
TOOL_CHOICE_NONE = "tool_choice_none"
DROP_TOOLS = "drop_tools"
FINAL_ANSWER = "final_answer"
FLATTEN_TRANSCRIPT = "flatten_transcript"
THINKING_BUDGET = "thinking_budget"
DISABLE_THINKING = "disable_thinking"

#: The classes that start the tool-session ladder (the fix being sized). An answer
#: filed as reasoning (``answer-in-reasoning``) is empty to the client, like an
#: ``empty-200-stop``: retried with tool history, although its real fix is the
#: deployment's reasoning parser.
TOOL_TRIGGERS: tuple[str, ...] = (TOOL_HISTORY_5XX, EMPTY_200_STOP, ANSWER_IN_REASONING)

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
DEADLINE = "deadline"  # the caller's deadline left no time for the next rung (or passed during it)
TRANSPORT_ERROR = "transport-error"  # a rung call raised; the upstream is unreachable

#: Every outcome a LadderResult can carry.
OUTCOMES: tuple[str, ...] = (NOT_TRIGGERED, RECOVERED, EXHAUSTED, ATTEMPT_LIMIT, TIME_BUDGET, DEADLINE,
                             TRANSPORT_ERROR)

#: Seconds a rung needs at least: none starts with less left before the deadline.
DEFAULT_MIN_ATTEMPT_S = 1.0

#: A deadline further ahead of the ladder's clock than this is on another clock
#: (``time.time()`` is ~1.7e9 s ahead of ``time.monotonic()``): refused.
MAX_DEADLINE_AHEAD_S = 86_400.0

#: Statuses with which the upstream refuses a rung's shape (not the rung's idea
#: failing): the attempt is marked ``refused`` and the next rung is tried.
REFUSED_STATUSES = frozenset({400, 422})

#: Headers that describe the wire, not the decoded body ``send`` returns, and
#: hop-by-hop headers (RFC 9110 7.6.1): never in ``LadderResult.headers``.
UNFORWARDABLE_HEADERS = frozenset({
    "content-encoding", "content-length", "transfer-encoding",
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
    "te", "trailer", "upgrade",
})


class BudgetExceeded(TimeoutError):
    """The ladder's total time budget ran out during a rung call (async runner)."""


class DeadlineExceeded(BudgetExceeded):
    """The caller's deadline passed during a rung call (async runner)."""


class RungUnavailable(ValueError):
    """A rung cannot be built from this payload; the ladder skips it.

    ``rung`` names the rung and ``reason`` says why (logged in ``skipped``).
    """

    def __init__(self, rung: str, reason: str):
        self.rung = rung
        self.reason = reason
        super().__init__(f"rung {rung} skipped: {reason}")


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
    no_answer: bool | None = None  # a 2xx JSON body with no usable choice (``no-answer-200``)
    refused: bool = False  # a rung the upstream refused (400/422): its shape, not its idea, failed
    has_reasoning_text: bool | None = None  # a reasoning text came back (``answer-in-reasoning`` with no content)
    reasoning_leaked: bool | None = None  # the content carried a think block (``reasoning-leaked``)
    refused_reason: str | None = None  # what the upstream said when it refused the rung (its error message)

    def to_dict(self) -> dict[str, Any]:
        """The attempt as a JSON-ready dict (the ``ladder.attempts`` log shape)."""
        return asdict(self)


@dataclass(slots=True)
class LadderResult:
    """What the ladder did and the answer to pass on to the client.

    ``status``/``headers``/``body`` are the recovered rung's answer, or the
    original answer when nothing recovered (the client then sees the real failure
    of the request it sent). ``headers`` is a plain dict with lower-case keys,
    safe to forward with ``body`` as it is: ``send`` returns a decoded body, so
    ``content-encoding``, ``content-length``, ``transfer-encoding`` and the
    hop-by-hop headers are left out (see :func:`forwardable_headers`);
    ``upstream_headers`` is what ``send`` returned, untouched (for logging, e.g.
    the naked 500's ``content-length: 0``). ``recovered_at`` is the rung that
    recovered, or None. ``armed`` is True when the ladder was armed for this
    request (its model matched ``models``). ``reasoning_repaired`` is True when the
    answer passed on had a leaked think block split out of its content (``body``
    is then the repaired answer; see :mod:`analyzer.online.reasoning`).
    """

    status: int | None
    headers: dict[str, str]
    body: Any
    attempts: list[Attempt] = field(default_factory=list)
    trigger: str | None = None
    recovered_at: str | None = None
    outcome: str = NOT_TRIGGERED
    skipped: list[dict[str, str]] = field(default_factory=list)
    upstream_headers: Any = None
    armed: bool = False
    reasoning_repaired: bool = False

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
            "skipped": [dict(x) for x in self.skipped],
        }


# ---------------------------------------------------------------------------
# Headers


def _header_text(value: Any, *, numbers: bool = True) -> str | None:
    """A header name or value as text (bytes as latin-1); None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    if numbers and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _header_pairs(headers: Any) -> list[tuple[Any, Any]]:
    items = getattr(headers, "items", None)
    if callable(items):
        return list(items())
    if isinstance(headers, (list, tuple)):
        return [h for h in headers if isinstance(h, (list, tuple)) and len(h) == 2]
    return []


def forwardable_headers(headers: Any) -> dict[str, str]:
    """``headers`` as a plain dict (lower-case keys) safe to forward with a decoded body.

    Drops :data:`UNFORWARDABLE_HEADERS` and any header the ``connection`` header
    names. ``headers`` may be any mapping (``httpx.Headers``, a dict), a list of
    pairs, or junk: this never raises (junk gives ``{}``, a junk entry is left
    out). Repeated names keep the last value (``httpx.Headers.items()`` has
    already joined them).
    """
    try:
        pairs = _header_pairs(headers)
        out: dict[str, str] = {}
        for key, value in pairs:
            name, text = _header_text(key, numbers=False), _header_text(value)
            if name is not None and text is not None:
                out[name.strip().lower()] = text
        named = {t.strip().lower() for t in out.get("connection", "").split(",")}
        return {k: v for k, v in out.items() if k and k not in UNFORWARDABLE_HEADERS and k not in named}
    except Exception:  # noqa: BLE001 - a mapping whose items() raises: nothing to forward
        return {}


# ---------------------------------------------------------------------------
# Rung payloads


def _without_tools(payload: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in payload.items() if k not in _TOOL_KEYS}


def _with_final_prompt(messages: list) -> list:
    msgs = list(messages)
    msgs.append({"role": "user", "content": FINAL_ANSWER_PROMPT})
    return msgs


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] if isinstance(p, dict) and isinstance(p.get("text"), str)
                       else "" if isinstance(p, dict) else _json_text(p) for p in content)
    return _json_text(content)


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return ""  # not JSON (or nested past the encoder's stack): nothing readable


def _calls_of(m: Mapping[str, Any]) -> list[dict]:
    """An assistant message's tool calls as dicts; junk entries are dropped."""
    calls = m.get("tool_calls")
    if isinstance(calls, dict):
        calls = [calls]
    if not isinstance(calls, list) or not calls:
        fc = m.get("function_call")
        calls = [{"function": fc}] if fc else []
    return [c for c in calls if isinstance(c, dict)]


def flatten_messages(messages: Any) -> list:
    """Rewrite tool calls and tool results as plain chat messages.

    Messages without tool structure are shared, not copied. Malformed tool
    structure (a string where calls belong, ``function`` as a string, ids that
    are not strings) is read as far as it goes, never raised on.
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
            lines = [_text_of(m.get("content"))] if m.get("content") else []
            for c in _calls_of(m):
                fn = c.get("function")
                if isinstance(fn, str):
                    fn = {"name": fn}
                elif not isinstance(fn, dict):
                    fn = {}
                name = fn.get("name") if isinstance(fn.get("name"), str) and fn.get("name") else "tool"
                if isinstance(c.get("id"), str) and c["id"]:
                    names[c["id"]] = name
                lines.append(f"[I called the tool {name} with arguments {_text_of(fn.get('arguments'))}]")
            out.append({"role": "assistant", "content": "\n".join(lines)})
        elif role in ("tool", "function"):
            call_id = m.get("tool_call_id")
            own = m.get("name") if isinstance(m.get("name"), str) and m.get("name") else "tool"
            name = names.get(call_id, own) if isinstance(call_id, str) else own
            out.append({"role": "user", "content": f"[Result of the tool {name}]\n{_text_of(m.get('content'))}"})
        elif "tool_calls" in m or "function_call" in m or "tool_call_id" in m:
            # Empty leftovers (the ``tool_calls: []`` vLLM returns on a plain answer,
            # which agents echo back): drop the keys so no tool structure remains.
            out.append({k: v for k, v in m.items() if k not in _MESSAGE_TOOL_KEYS})
        else:
            out.append(m)
    return out


def build_rung(payload: Mapping[str, Any], rung: str, *, answer_reserve: int = 256,
               templates: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Return the payload for one rung, built from ``payload`` without mutating it.

    ``answer_reserve`` and ``templates`` (the operator's GLM template override, see
    :func:`analyzer.online.normalize_thinking`) are used only by the length rungs:
    ``disable_thinking`` on a GLM without an off switch (GLM-5.3 on; the model is
    the payload's) asks for the lowest reasoning effort instead of sending a false key.

    Raises:
        RungUnavailable: the rung cannot be built from this payload (the ladder
            skips it): ``final_answer``/``flatten_transcript`` without a
            ``messages`` list; ``thinking_budget`` without a ``max_tokens`` to size
            the budget from, or with no room for one; ``disable_thinking`` when
            the payload's thinking keys are client junk.
        ValueError: an unknown rung name.
    """
    if rung not in ALL_RUNGS + LENGTH_RUNGS:
        raise ValueError(f"unknown ladder rung {rung!r}; known: {ALL_RUNGS + LENGTH_RUNGS}")
    if not isinstance(payload, Mapping):
        raise RungUnavailable(rung, f"the payload is a {type(payload).__name__}, not an object")
    if rung == TOOL_CHOICE_NONE:
        out = {**payload, "tool_choice": "none"}
        if "functions" in payload or "function_call" in payload:
            out["function_call"] = "none"  # the legacy spelling says the same
        return out
    if rung == DROP_TOOLS:
        return _without_tools(payload)
    if rung in (FINAL_ANSWER, FLATTEN_TRANSCRIPT):
        messages = payload.get("messages")
        if not isinstance(messages, list):
            # A final-answer prompt with no transcript asks about nothing.
            raise RungUnavailable(rung, "the payload has no messages list")
        out = _without_tools(payload)
        out["messages"] = _with_final_prompt(messages if rung == FINAL_ANSWER else flatten_messages(messages))
        return out
    if rung == THINKING_BUDGET:
        max_tokens = requested_max_tokens(payload)
        if max_tokens is None:
            # Without the client's cap there is nothing to size a budget from; a
            # budget of 0 would silently mean "no thinking", which is the next rung.
            raise RungUnavailable(rung, "the request has no max_tokens to size a thinking budget from")
        budget = max_tokens - answer_reserve - BUDGET_OVERHEAD_TOKENS
        asked = payload.get("thinking_token_budget")
        if isinstance(asked, int) and not isinstance(asked, bool) and 0 <= asked < budget:
            budget = asked  # never raise a budget the client set lower
        if budget <= 0 and not (isinstance(asked, int) and asked == budget):
            raise RungUnavailable(rung, f"max_tokens={max_tokens} leaves no thinking budget after the "
                                        f"answer reserve of {answer_reserve}")
        return {**payload, "thinking_token_budget": budget}
    # DISABLE_THINKING
    name = payload.get("model")
    try:
        out = normalize_thinking(payload, name if isinstance(name, str) else "", False, templates=templates)
    except ClientRequestError as exc:
        raise RungUnavailable(rung, str(exc)) from exc
    out.pop("thinking_token_budget", None)
    return out


def rung_payloads(payload: Mapping[str, Any], rungs: Iterable[str] = ALL_RUNGS) -> list[tuple[str, dict]]:
    """Every rung's payload for ``payload``, in order (for dry runs and replays).

    Rungs that cannot be built from this payload (:class:`RungUnavailable`) are
    left out, as the ladder would skip them.
    """
    out = []
    for r in rungs:
        try:
            out.append((r, build_rung(payload, r)))
        except RungUnavailable:
            continue
    return out


def ladder_trigger(features: TurnFeatures, *, length_recovery: bool = False) -> str | None:
    """The class that makes the ladder retry this answer, or None.

    ``tool-history-5xx`` always; ``empty-200-stop`` and ``answer-in-reasoning``
    when the prompt carries tool history; ``length-with-no-content`` when
    ``length_recovery`` is on.
    """
    return class_trigger(decide(features).incident_class, bool(features.tool_history),
                         length_recovery=length_recovery)


def class_trigger(incident_class: str, tool_history: bool, *, length_recovery: bool = False) -> str | None:
    """The ladder trigger of an answer of class ``incident_class``, or None.

    The rule of :func:`ladder_trigger` once the class is known (as when a proxy
    logged it): the analyzer reads a logged class through this.
    """
    if incident_class == TOOL_HISTORY_5XX:
        return incident_class
    if incident_class in (EMPTY_200_STOP, ANSWER_IN_REASONING) and tool_history:
        return incident_class
    if incident_class == LENGTH_WITH_NO_CONTENT and length_recovery:
        return incident_class
    return None


# ---------------------------------------------------------------------------
# The state machine both runners drive

# A step yields (rung, payload, seconds_left, deadline_binds) and receives
# (status, headers, body, latency_ms, exception_or_None) — already coerced by
# _coerce_answer, so the state machine only ever sees well-typed answers.
_Outcome = tuple[Any, Any, Any, int, BaseException | None]


class MalformedAnswer(Exception):
    """``send`` returned something that is not ``(status, headers, body)``."""


def _coerce_answer(answer: Any) -> tuple[int | None, Any, Any]:
    """``send``'s result as ``(status, headers, body)``; raises MalformedAnswer otherwise.

    A status that is not an HTTP status code becomes None (no HTTP answer); the
    headers and body are passed on as they are.
    """
    if not isinstance(answer, (tuple, list)) or len(answer) != 3:
        raise MalformedAnswer(f"send returned {type(answer).__name__}, not (status, headers, body)")
    status, headers, body = answer
    if status_or_none(status) is None:
        raise MalformedAnswer(f"send returned the status {_short_repr(status)}, not an HTTP status code")
    return status, headers, body


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not break the ladder
        text = f"<{type(value).__name__}>"
    return text[:80]


def _error_text(exc: BaseException) -> str:
    return exception_text(exc)[:500]


def _ladder_steps(payload: Mapping[str, Any], settings: "LadderSettings", deadline: float | None
                  ) -> Generator[tuple[str, Any, float | None, bool], _Outcome, LadderResult]:
    armed = model_matches(payload.get("model") if isinstance(payload, Mapping) else None, settings.model_patterns)
    result = yield from _climb(payload, armed, settings, deadline)
    if armed and settings.repair_reasoning:
        _repair_answer(result)
    return result


def _ok_once_repaired(payload: Mapping[str, Any], status: int | None, body: Any, att: Attempt) -> bool:
    """A rung's answer that only leaked its reasoning is a recovery: the answer passed on is repaired."""
    if att.incident_class != REASONING_LEAKED:
        return False
    repaired, did = repair_leaked_answer(body)
    return did and decide(features_from_exchange(payload, status, repaired)).incident_class == OK


def _repair_answer(result: LadderResult) -> None:
    """Split a leaked think block out of the answer passed on (a 2xx), in place."""
    if result.status is None or not 200 <= result.status < 300:
        return
    body, repaired = repair_leaked_answer(result.body)
    if repaired:
        result.body = body
        result.reasoning_repaired = True


def _climb(payload: Mapping[str, Any], armed: bool, settings: LadderSettings, deadline: float | None
           ) -> Generator[tuple[str, Any, float | None, bool], _Outcome, LadderResult]:
    status, headers, body, latency, exc = yield (ORIGINAL, payload, None, False)  # type: ignore[misc]
    if exc is not None and not isinstance(exc, MalformedAnswer):
        raise exc  # the original call failed in transport: the proxy's own error path handles it
    if exc is not None:
        # send answered, but not with an answer: an attempt with no HTTP status.
        feats = features_from_exchange(payload, None, None, exc)
        first = _attempt(ORIGINAL, feats, None, None, latency, exc, OTHER_5XX)
        return LadderResult(status=None, headers={}, body=None, attempts=[first], armed=armed)
    feats = features_from_exchange(payload, status, body)
    first = _attempt(ORIGINAL, feats, status, body, latency, None)
    result = LadderResult(status=status, headers=forwardable_headers(headers), body=body, attempts=[first],
                          upstream_headers=headers, armed=armed)
    trigger = ladder_trigger(feats, length_recovery=settings.length_recovery) if armed else None
    if trigger is None:
        return result
    result.trigger = trigger
    plan = LENGTH_RUNGS if trigger == LENGTH_WITH_NO_CONTENT else settings.rung_order
    limit = settings.max_attempts if settings.max_attempts is not None else 1 + len(plan)
    clock = settings.clock
    started = clock()
    result.outcome = EXHAUSTED
    for rung in plan:
        if len(result.attempts) >= limit:
            result.outcome = ATTEMPT_LIMIT
            break
        now = clock()
        budget_left = settings.time_budget_s - (now - started)
        deadline_left = math.inf if deadline is None else deadline - now
        if budget_left <= 0:
            result.outcome = TIME_BUDGET
            break
        if deadline_left < settings.min_attempt_s:
            result.outcome = DEADLINE  # this rung could not finish before the caller gives up
            break
        try:
            rung_payload = build_rung(payload, rung, answer_reserve=settings.answer_reserve,
                                      templates=settings.templates)
        except RungUnavailable as skip:
            result.skipped.append({"rung": rung, "reason": skip.reason})
            continue
        except Exception as bug:  # noqa: BLE001 - a payload no rung can read is skipped, not raised
            result.skipped.append({"rung": rung, "reason": _error_text(bug)})
            continue
        binds = deadline_left <= budget_left
        status, headers, body, latency, exc = yield (rung, rung_payload, min(budget_left, deadline_left), binds)
        if exc is not None:
            f = features_from_exchange(rung_payload, None, None, exc)
            if isinstance(exc, BudgetExceeded):
                result.attempts.append(_attempt(rung, f, None, None, latency, exc, TIMEOUT))
                result.outcome = DEADLINE if isinstance(exc, DeadlineExceeded) else TIME_BUDGET
                break
            cls = OTHER_5XX if isinstance(exc, MalformedAnswer) else None
            result.attempts.append(_attempt(rung, f, None, None, latency, exc, cls))
            if isinstance(exc, MalformedAnswer):
                continue  # send answered with junk: try the next rung
            result.outcome = TRANSPORT_ERROR
            break
        f = features_from_exchange(rung_payload, status, body)
        att = _attempt(rung, f, status, body, latency, None)
        # The upstream refused this rung's shape (e.g. a template that rejects
        # thinking off): recorded, and the next rung is tried.
        att.refused = status in REFUSED_STATUSES
        if att.refused:
            att.refused_reason = refusal_reason(body)
        result.attempts.append(att)
        repair = settings.repair_reasoning
        if att.incident_class == OK or (repair and _ok_once_repaired(rung_payload, status, body, att)):
            if deadline is not None and clock() > deadline:
                # Too late for the caller (the sync runner cannot cut a call off):
                # the client never sees this answer, so it is not a recovery.
                result.outcome = DEADLINE
                break
            result.status, result.body = status, body
            result.headers, result.upstream_headers = forwardable_headers(headers), headers
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
        error=None if exc is None else _error_text(exc),
        no_answer=summary.get("no_answer"),
        has_reasoning_text=summary.get("has_reasoning_text"),
        reasoning_leaked=summary.get("reasoning_leaked"),
    )


#: Characters of an upstream's refusal kept in ``Attempt.refused_reason``.
REFUSAL_CHARS = 300


def refusal_reason(body: Any) -> str | None:
    """The message of an upstream's 4xx answer (OpenAI/vLLM error shapes), cut short; None when it says none.

    Reads ``error.message``, ``message`` or ``detail`` of a JSON body, else the
    body's text. Never raises.
    """
    try:
        doc = body
        if isinstance(body, (bytes, bytearray, memoryview)):
            doc = bytes(body).decode("utf-8", "replace")
        if isinstance(doc, str):
            try:
                doc = json.loads(doc)
            except (ValueError, RecursionError):
                pass
        text = None
        if isinstance(doc, dict):
            err = doc.get("error")
            for candidate in ((err.get("message") if isinstance(err, dict) else err),
                              doc.get("message"), doc.get("detail")):
                if isinstance(candidate, str) and candidate.strip():
                    text = candidate
                    break
        elif isinstance(doc, str):
            text = doc
        if not text or not text.strip():
            return None
        text = " ".join(text.split())
        return text[:REFUSAL_CHARS]
    except Exception:  # noqa: BLE001 - a body we cannot read says nothing
        return None


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _call_deadline(deadline: Any, time_left_s: Any, clock: Callable[[], float]) -> float | None:
    """The call's absolute deadline on ``clock``: the earlier of the two forms given, or None.

    Raises:
        ValueError: a deadline that cannot mean what it says (NaN, inf, on another clock).
    """
    if deadline is not None and (not _is_number(deadline) or not math.isfinite(deadline)):
        raise ValueError(f"deadline must be a finite time on the ladder's clock, got {deadline!r}")
    if time_left_s is not None and (not _is_number(time_left_s) or math.isnan(time_left_s)):
        raise ValueError(f"time_left_s must be a number of seconds, got {time_left_s!r}")
    if deadline is not None:
        # A deadline on another clock than the ladder's (``time.time()``) is refused.
        now = clock()
        if _is_number(now) and deadline - now > MAX_DEADLINE_AHEAD_S:
            raise ValueError(
                f"deadline={deadline!r} is {deadline - now:.3g} s ahead of the ladder's clock ({now!r}), more "
                f"than a day: it looks like time.time(). The deadline is on the ladder's clock (time.monotonic() "
                f"by default): pass time.monotonic() + seconds, or time_left_s=seconds")
    candidates = [d for d in (deadline, None if time_left_s is None else clock() + time_left_s) if d is not None]
    return min(candidates) if candidates else None


def _rungs_for(flatten: bool, rungs: Iterable[str] | None) -> tuple[str, ...]:
    if rungs is None:
        return ALL_RUNGS if flatten else DEFAULT_RUNGS
    if isinstance(rungs, str):
        raise ValueError(f"rungs must be a sequence of rung names, got the string {rungs!r}")
    out = tuple(rungs)
    unknown = [r for r in out if r not in ALL_RUNGS + LENGTH_RUNGS]
    if unknown:
        raise ValueError(f"unknown ladder rung(s) {unknown!r}; known: {ALL_RUNGS + LENGTH_RUNGS}")
    return out


@dataclass(frozen=True)
class LadderSettings:
    """How the ladder runs: one object for a deployment (made once, at the proxy's start), shared by
    :func:`run_ladder` and :func:`arun_ladder`; checked when made (``ValueError``).

    Attributes:
        flatten: also try the opt-in ``flatten_transcript`` rung.
        rungs: an explicit rung order (overrides ``flatten``).
        length_recovery: also retry ``length-with-no-content`` (thinking budget,
            then thinking off).
        max_attempts: upstream calls at most, the original included; None (the
            default) allows one call per enabled rung, so every rung is reachable.
        time_budget_s: seconds the retries may take in all, counted from the
            original answer (the original call has the proxy's own timeout); a
            positive number, ``math.inf`` for no bound (NaN is refused).
        answer_reserve: tokens kept for the visible answer by the
            ``thinking_budget`` rung.
        min_attempt_s: no rung starts with less than this left before the call's
            deadline (outcome ``deadline``).
        clock: a monotonic clock in seconds (injectable for tests); a call's
            ``deadline`` is on it.
        models: case-insensitive ``fnmatch`` patterns for ``payload["model"]``:
            the ladder is armed only for a matching model (default
            :data:`LADDER_MODELS`, GLM); None arms it for every model. Any other
            request gets exactly one call, no retries, ``armed`` False, and its
            answer exactly as ``send`` returned it.
        templates: the operator's GLM template override, ``{served-name pattern:
            generation}`` (e.g. ``{"glm-5": "glm-5.3"}``): the ``disable_thinking``
            rung never sends a false thinking key to a generation without an off
            switch (see :func:`analyzer.online.normalize_thinking`).
        repair_reasoning: for an armed model, split a think block that leaked into
            the content of the answer passed on (text before ``</think>`` to
            ``reasoning_content``; an answer without think tags is passed on byte
            for byte); ``reasoning_repaired`` says it happened.
    """

    flatten: bool = False
    rungs: Iterable[str] | None = None
    length_recovery: bool = False
    max_attempts: int | None = None
    time_budget_s: float = 120.0
    answer_reserve: int = 256
    min_attempt_s: float = DEFAULT_MIN_ATTEMPT_S
    clock: Callable[[], float] = time.monotonic
    models: Iterable[str] | None = LADDER_MODELS
    templates: Mapping[str, str] | None = None
    repair_reasoning: bool = True
    #: The rungs in the order they are tried, and ``models`` as patterns: what the checks made of the above.
    rung_order: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())
    model_patterns: tuple[str, ...] | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        m = self.max_attempts
        if m is not None and (not isinstance(m, int) or isinstance(m, bool) or m < 1):
            raise ValueError(f"max_attempts must be a positive integer or None, got {m!r}")
        # NaN compares false with everything, so `NaN <= 0` would let it through as "no budget".
        b = self.time_budget_s
        if not _is_number(b) or math.isnan(b) or b <= 0:
            raise ValueError(f"time_budget_s must be a positive number of seconds (inf: no bound), got {b!r}")
        r = self.answer_reserve
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise ValueError(f"answer_reserve must be a non-negative integer, got {r!r}")
        a = self.min_attempt_s
        if not _is_number(a) or not math.isfinite(a) or a < 0:
            raise ValueError(f"min_attempt_s must be a non-negative number of seconds, got {a!r}")
        check_templates(self.templates)
        if not isinstance(self.repair_reasoning, bool):
            raise ValueError(f"repair_reasoning must be true or false, got {self.repair_reasoning!r}")
        object.__setattr__(self, "rung_order", _rungs_for(self.flatten, self.rungs))
        object.__setattr__(self, "model_patterns", model_patterns(self.models))


#: The ladder's defaults (GLM models, the default rungs, two minutes of retries).
DEFAULT_SETTINGS = LadderSettings()


def run_ladder(payload: Mapping[str, Any], send: Send, settings: LadderSettings = DEFAULT_SETTINGS, *,
               deadline: float | None = None, time_left_s: float | None = None) -> LadderResult:
    """Send ``payload``; if the answer triggers the ladder, retry down the rungs of ``settings``.

    Args:
        payload: the chat-completions request (not mutated).
        send: ``send(payload) -> (status, headers, body)``; may raise on transport
            failure. An exception on the original call propagates unchanged; any
            other result, however malformed, is classified and never raised on.
        settings: how the ladder runs (:class:`LadderSettings`).
        deadline: when this call's caller gives up, on ``settings.clock``'s timeline
            (e.g. ``time.monotonic()`` at the request's arrival + 300). A deadline
            more than a day ahead of ``clock()`` is refused (``ValueError``): it is
            ``time.time()``-based, not on this clock.
        time_left_s: the same as seconds the caller has left now; with both, the
            earlier wins.

    A rung answered with 400 or 422 is recorded with ``refused=True`` (the
    upstream does not accept that rung's shape) and the next rung is tried.

    The sync runner cannot interrupt a running ``send``: it starts no rung past
    the budget or the deadline, and an answer that arrives after the deadline is
    not a recovery.

    Returns:
        A :class:`LadderResult`: the answer to pass on and every attempt made.
    """
    clock = settings.clock
    steps = _ladder_steps(payload, settings, _call_deadline(deadline, time_left_s, clock))
    try:
        rung, body_payload, _left, _binds = next(steps)
        while True:
            t0 = clock()
            try:
                status, headers, body = _coerce_answer(send(body_payload))
                outcome: _Outcome = (status, headers, body, _ms(clock() - t0), None)
            except Exception as exc:  # noqa: BLE001 - every transport failure is an attempt
                outcome = (None, None, None, _ms(clock() - t0), exc)
            rung, body_payload, _left, _binds = steps.send(outcome)
    except StopIteration as stop:
        return stop.value


async def arun_ladder(payload: Mapping[str, Any], send: ASend, settings: LadderSettings = DEFAULT_SETTINGS, *,
                      deadline: float | None = None, time_left_s: float | None = None) -> LadderResult:
    """The async :func:`run_ladder`: ``send`` is a coroutine function.

    Each rung call is cancelled when the remaining time budget or the caller's
    deadline runs out, so both are hard bounds here.
    """
    # Here, not at the top: a running event loop has loaded asyncio already, and the
    # analyzer imports this package on every run without needing it.
    import asyncio

    clock = settings.clock
    steps = _ladder_steps(payload, settings, _call_deadline(deadline, time_left_s, clock))
    try:
        rung, body_payload, left, binds = next(steps)
        while True:
            t0 = clock()
            try:
                call = send(body_payload)
                if left is None or math.isinf(left):
                    answer = await call
                else:
                    try:
                        answer = await asyncio.wait_for(call, left)
                    except asyncio.TimeoutError as exc:
                        kind = DeadlineExceeded if binds else BudgetExceeded
                        what = "the caller's deadline passed" if binds else "ladder time budget ran out"
                        raise kind(f"{what} after {_ms(clock() - t0)} ms") from exc
                status, headers, body = _coerce_answer(answer)
                outcome: _Outcome = (status, headers, body, _ms(clock() - t0), None)
            except Exception as exc:  # noqa: BLE001 - every transport failure is an attempt
                outcome = (None, None, None, _ms(clock() - t0), exc)
            rung, body_payload, left, binds = steps.send(outcome)
    except StopIteration as stop:
        return stop.value


def _ms(seconds: float) -> int:
    try:
        return int(round(seconds * 1000))
    except (OverflowError, ValueError):  # a clock that returned inf/NaN
        return 0
