"""The one classification rule: per-turn features in, an incident class out.

The proxy calls :func:`classify` on every response it relays; the analyzer extracts
the same :class:`TurnFeatures` from logs in SQL, classifies each *distinct* feature
combination with this same function and joins the labels back. There is no second
copy of these rules anywhere in the project.

The window classes ``wedged-pod`` and ``pod-down`` are not decided here: they need
Prometheus metrics, which a single response does not carry. The analyzer applies
them afterwards to failures that fall inside a wedged or down window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Class names are an API: the analyzer's views, the report and the proxy's log
# fields all use these exact strings.
OK = "ok"
TOOL_HISTORY_5XX = "tool-history-5xx"
EMPTY_200_STOP = "empty-200-stop"
LENGTH_WITH_NO_CONTENT = "length-with-no-content"
WEDGED_POD = "wedged-pod"
POD_DOWN = "pod-down"
TIMEOUT = "timeout"
CONNECTION_ERROR = "connection-error"
OTHER_5XX = "other-5xx"
RATE_LIMITED = "rate-limited"
CLIENT_ERROR = "client-error"
CLIENT_CANCELLED = "client-cancelled"
UNANSWERED = "unanswered"
TOOL_CALL_STOP_MISMATCH = "tool-call-stop-mismatch"
NO_ANSWER_200 = "no-answer-200"
CONNECT_TIMEOUT = "connect-timeout"
LATE_200 = "late-200"
ANSWER_IN_REASONING = "answer-in-reasoning"
REASONING_LEAKED = "reasoning-leaked"

#: Every class, in the order reports list them (failures the ladder targets first).
CLASSES: tuple[str, ...] = (
    OK,
    TOOL_HISTORY_5XX,
    EMPTY_200_STOP,
    ANSWER_IN_REASONING,
    LENGTH_WITH_NO_CONTENT,
    WEDGED_POD,
    POD_DOWN,
    TIMEOUT,
    CONNECTION_ERROR,
    OTHER_5XX,
    RATE_LIMITED,
    CLIENT_ERROR,
    CLIENT_CANCELLED,
    UNANSWERED,
    TOOL_CALL_STOP_MISMATCH,
    REASONING_LEAKED,
    NO_ANSWER_200,
    CONNECT_TIMEOUT,
    LATE_200,
)

#: Upstream failures that a wedged or down pod explains (the analyzer re-labels
#: these inside metric windows).
UPSTREAM_FAILURE_CLASSES = frozenset(
    {TOOL_HISTORY_5XX, OTHER_5XX, TIMEOUT, CONNECTION_ERROR, CONNECT_TIMEOUT}
)

#: The caller's own deadline, in seconds, when none is configured: geo-agent's
#: nginx ``proxy_read_timeout`` (300 s). An otherwise-ok answer slower than this
#: reached nobody: ``late-200``.
DEFAULT_CALLER_DEADLINE_S = 300.0

# Error kinds: what kind of failure a response record's ``error`` text describes.
ERROR_HTTP = "http"  # upstream answered with an HTTP error status
ERROR_TIMEOUT = "timeout"  # upstream read timeout
ERROR_CONNECT_TIMEOUT = "connect-timeout"  # connect, pool or write timeout: the request never got through
ERROR_CONNECT = "connect"  # connection refused/failed, DNS, TLS: nothing answered
ERROR_BAD_BODY = "bad-body"  # a 2xx whose body is empty or not JSON (the proxy's JSONDecodeError)
ERROR_RESET = "reset"  # the connection broke mid-answer
ERROR_CANCELLED = "cancelled"  # the caller hung up first
ERROR_REJECTED = "rejected"  # the proxy refused the request before routing
ERROR_CONFIG = "config"  # the proxy is misconfigured (missing provider key)
ERROR_OTHER = "other"  # any other exception text

ERROR_KINDS = (
    ERROR_HTTP,
    ERROR_TIMEOUT,
    ERROR_CONNECT_TIMEOUT,
    ERROR_CONNECT,
    ERROR_BAD_BODY,
    ERROR_RESET,
    ERROR_CANCELLED,
    ERROR_REJECTED,
    ERROR_CONFIG,
    ERROR_OTHER,
)

LOGGED = "logged"
INFERRED = "inferred"

# Round completion caps clients commonly send. A legacy empty answer that used
# exactly one of these with a reasoning trace ran out of budget while thinking.
ROUND_CAPS = frozenset({256, 512, 1000, 1024, 2000, 2048, 4000, 4096, 8000, 8192, 16000, 16384, 32000, 32768})

# finish_reason values that say "the turn is over" (OpenAI and Anthropic spellings).
_ENDED = frozenset({"stop", "end_turn", "stop_sequence"})
_LENGTH = frozenset({"length", "max_tokens"})
# finish_reason values that say the provider gave up mid-answer (vLLM, OpenRouter).
_FAILED = frozenset({"error"})

#: The characters that do not make content: exactly Python's ``str.isspace``
#: set, so ``is_blank(text)`` is ``not text.strip()``. queries/turn_features.sql
#: trims the same characters (a test checks the two agree).
BLANK_CHARS = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())

#: Every ``httpx.TimeoutException`` reads ``Request timed out after <ms>ms`` in
#: the proxy's log. Its connect, pool and write timeouts are 30 s; its read
#: timeout is 600 s (1,200 s since 2026-08-19). A timeout that fired before this
#: many milliseconds cannot be a read timeout of that deployment.
CONNECT_TIMEOUT_MAX_MS = 60_000

#: parse_error reads only this many leading characters, so the analyzer can
#: classify each distinct error *head* once instead of each error text.
ERROR_HEAD_CHARS = 200

_PROVIDER_RETURNED = re.compile(r"^Provider returned (\d{3})\b")
_TIMED_OUT_AFTER = re.compile(r"^Request timed out after (\d{1,12}) ?ms")
_EXCEPTION_PREFIX = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)(?::|$)")
_CONNECT_EXCEPTIONS = frozenset(
    {"ConnectError", "ConnectionError", "ConnectionRefusedError",
     "gaierror", "ClientConnectorError", "SSLError", "ProxyError"}
)
_RESET_EXCEPTIONS = frozenset(
    {"RemoteProtocolError", "ReadError", "ConnectionResetError", "ServerDisconnectedError",
     "IncompleteRead", "ProtocolError", "WriteError"}
)
_TIMEOUT_EXCEPTIONS = frozenset({"ReadTimeout", "TimeoutException", "TimeoutError"})
# Timeouts before the request reached the upstream (httpx names): told apart from
# a read timeout because the pod never saw the request.
_CONNECT_TIMEOUT_EXCEPTIONS = frozenset({"ConnectTimeout", "PoolTimeout", "WriteTimeout"})
# The proxy's ``response.json()`` on an empty or non-JSON 200 body (the message
# is "Expecting value: ..."); bytes that are not text, and JSON nested deeper
# than the decoder's stack, fail the same call with these.
_BAD_BODY_EXCEPTIONS = frozenset({"JSONDecodeError"})
_BAD_BODY_MESSAGES = {"UnicodeDecodeError": "codec can't decode", "RecursionError": "while decoding a JSON"}
# Raised by this module's own request validation before any model call (and the
# reference proxy's routing): the client's request was refused, nothing upstream
# failed.
_REJECTED_EXCEPTIONS = frozenset({"ThinkingBudgetError", "ClientRequestError", "UnknownModelError"})
# asyncio's cancellation of the proxy's handler: the caller hung up (uvicorn
# cancels a request whose client disconnected).
_CANCELLED_EXCEPTIONS = frozenset({"CancelledError"})


@dataclass(frozen=True, slots=True)
class TurnFeatures:
    """The small per-turn record the classification rule reads.

    Every field is optional because old proxy logs lack most of them.

    Attributes:
        status: HTTP status of the upstream answer (200, 500, ...); None when
            nothing answered (connection failure, timeout, cancel).
        finish_reason: the provider's ``finish_reason`` (or Anthropic
            ``stop_reason``); None when not logged.
        has_content: the answer had non-empty visible content.
        has_tool_calls: the answer emitted at least one tool call.
        tool_history: the prompt carries tool history anywhere in the transcript
            (a ``role: tool`` message or an assistant message with ``tool_calls``).
        has_reasoning: the answer carried a reasoning trace (its text, or reasoning
            tokens in the usage).
        completion_tokens: completion tokens the provider reported.
        max_tokens: the completion cap the request asked for.
        error_kind: one of :data:`ERROR_KINDS` for a failed call, else None.
        no_answer: the 2xx body was JSON but carried no usable answer (no
            ``choices``, ``choices: []``, an ``error`` object instead).
        late: the turn took longer than the caller's deadline (see
            :data:`DEFAULT_CALLER_DEADLINE_S`); only an otherwise-ok answer
            becomes ``late-200``.
        has_reasoning_text: the answer carried a non-blank reasoning *text*
            (``reasoning_content``): with no content, the answer may be in it
            (``answer-in-reasoning``). Reasoning tokens alone do not count.
        reasoning_leaked: the content carries a think block that was not split out
            (:func:`analyzer.online.reasoning.has_leaked_think_block`).
        reasoning_at_cap: the logged reasoning text stops at the log's cap (the
            proxy's 4,000 characters), so it may be longer; False when the whole
            trace was logged and is shorter; None when not known. Only legacy
            records without a ``finish_reason`` need it (see :func:`decide`).
        evidence: ``"inferred"`` marks every field as reconstructed; use it when
            you cannot say which. Default ``"logged"``.
        inferred: names of the fields the caller reconstructed rather than read
            from a log field (e.g. ``("status", "tool_history")`` for a legacy
            record whose status was parsed from the error text and whose tool
            history came from earlier turns). A decision is ``inferred`` only
            when it consulted one of these.
    """

    status: int | None = None
    finish_reason: str | None = None
    has_content: bool | None = None
    has_tool_calls: bool | None = None
    tool_history: bool | None = None
    has_reasoning: bool | None = None
    completion_tokens: int | None = None
    max_tokens: int | None = None
    error_kind: str | None = None
    no_answer: bool | None = None
    late: bool | None = None
    has_reasoning_text: bool | None = None
    reasoning_leaked: bool | None = None
    reasoning_at_cap: bool | None = None
    evidence: str = LOGGED
    inferred: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """A class and whether it rests on logged fields or on inference."""

    incident_class: str
    evidence: str


def classify(features: TurnFeatures) -> str:
    """Return the incident class of one turn (see :data:`CLASSES`).

    Window classes (``wedged-pod``, ``pod-down``) and ``unanswered`` are applied
    by the analyzer, not here.
    """
    return decide(features).incident_class


def decide(f: TurnFeatures) -> Decision:
    """Classify a turn and say whether the decision needed inference.

    The decision is ``inferred`` when the caller marked all features as inferred
    (``evidence="inferred"``), when a field the decision consulted is listed in
    ``f.inferred``, or when an empty 200 had no logged ``finish_reason`` and length
    had to be told from stop by token evidence.
    """
    all_inferred = f.evidence == INFERRED
    reconstructed = f.inferred

    def done(cls: str, *consulted: str, guessed: bool = False) -> Decision:
        inferred = all_inferred or guessed or any(c in reconstructed for c in consulted)
        return Decision(cls, INFERRED if inferred else LOGGED)

    kind = f.error_kind if isinstance(f.error_kind, str) else None
    if kind == ERROR_CANCELLED:
        return done(CLIENT_CANCELLED, "error_kind")
    if kind == ERROR_REJECTED:
        return done(CLIENT_ERROR, "error_kind")
    if kind == ERROR_TIMEOUT:
        return done(TIMEOUT, "error_kind")
    if kind == ERROR_CONNECT_TIMEOUT:
        return done(CONNECT_TIMEOUT, "error_kind")
    if kind == ERROR_BAD_BODY:
        # An empty or non-JSON 2xx body is an empty answer: the same failure as
        # an empty 200 with no finish reason (and the same ladder trigger).
        return done(EMPTY_200_STOP, "error_kind")
    status = f.status if isinstance(f.status, int) and not isinstance(f.status, bool) else None
    answered_2xx = status is not None and 200 <= status < 300
    if (status is None or answered_2xx) and kind in (ERROR_CONNECT, ERROR_RESET):
        return done(CONNECTION_ERROR, "error_kind")
    if (status is None or answered_2xx) and kind is not None and kind != ERROR_HTTP:
        # The proxy failed on its way to an answer (after a 2xx too): it relays a 502.
        return done(OTHER_5XX, "error_kind")
    if status is None and kind is not None:
        # An exception with no HTTP answer: the proxy relays it as a 502.
        return done(OTHER_5XX, "error_kind")
    if status is not None and not (200 <= status < 300):
        if status == 429:
            return done(RATE_LIMITED, "status")
        if 400 <= status < 500:
            return done(CLIENT_ERROR, "status")
        # 1xx/3xx the proxy relays as 502 like any other upstream failure.
        # A missing provider key is the proxy's own fault, not the upstream's:
        # no payload change can fix it, so it is never ladder-eligible.
        if status >= 500 and f.tool_history and kind in (None, ERROR_HTTP):
            return done(TOOL_HISTORY_5XX, "status", "tool_history")
        return done(OTHER_5XX, "status", "tool_history")

    # A 2xx answer (or a success record whose status was not logged).
    finish = f.finish_reason.lower() if isinstance(f.finish_reason, str) and f.finish_reason else None
    if f.no_answer:
        return done(NO_ANSWER_200, "no_answer")
    if finish in _FAILED:
        # The provider gave up mid-answer: partial content is not an answer.
        return done(NO_ANSWER_200, "finish_reason")

    def ok(*consulted: str, guessed: bool = False) -> Decision:
        # An otherwise-ok answer that reached the caller after its deadline
        # reached nobody; a failure that also came late keeps its class.
        if f.late:
            return done(LATE_200, "late", *consulted, guessed=guessed)
        return done(OK, *consulted, guessed=guessed)

    if f.has_tool_calls and finish in _ENDED:
        return done(TOOL_CALL_STOP_MISMATCH, "has_tool_calls", "finish_reason")
    if f.reasoning_leaked:
        # The user saw the scratchpad (thinking "off" sent to a template without an
        # off switch: vllm-project/vllm#54744). Not ok, even with an answer after it.
        return done(REASONING_LEAKED, "reasoning_leaked")
    if f.has_tool_calls:
        return ok("has_tool_calls")
    if f.has_content:
        return ok("has_content")
    if f.has_content is None and f.has_tool_calls is None:
        # Nothing says the answer was empty; do not invent an incident.
        return ok(guessed=True)
    if finish in _LENGTH:
        return done(LENGTH_WITH_NO_CONTENT, "has_content", "finish_reason")
    if finish is not None:
        # Emptiness is decided from the content, never from token counts: a stop with
        # the answer filed as reasoning is answer-in-reasoning whatever the usage says.
        if f.has_reasoning_text:
            return done(ANSWER_IN_REASONING, "has_content", "finish_reason", "has_reasoning_text")
        return done(EMPTY_200_STOP, "has_content", "finish_reason")
    return done(_length_or_stop_by_tokens(f), guessed=True)


def is_blank(text: object) -> bool:
    """True when ``text`` has no visible character (None, "", "\\n\\n", ...).

    The one rule for "empty content", online and offline: whitespace-only content
    is empty although the proxy logs ``has_content: true`` for it.
    """
    if text is None:
        return True
    if not isinstance(text, str):
        return False
    return not text.strip(BLANK_CHARS)


def _length_or_stop_by_tokens(f: TurnFeatures) -> str:
    """Tell length from stop for an empty answer with no logged finish reason.

    Length evidence is the completion tokens at the request's ``max_tokens``, or at
    a round cap with a reasoning trace. Without it the answer stopped: with a
    reasoning text, the answer is in the reasoning (``answer-in-reasoning``: the
    glm45 parser files a GLM answer given without thinking as reasoning,
    sgl-project/sglang#37645), else it is empty. A round cap does not count when
    the whole reasoning text was logged and is shorter than the log's cap
    (``reasoning_at_cap`` False): a trace that long would have filled it.
    """
    tokens = f.completion_tokens
    stopped = ANSWER_IN_REASONING if f.has_reasoning_text else EMPTY_200_STOP
    if not isinstance(tokens, int) or isinstance(tokens, bool):
        return stopped
    if isinstance(f.max_tokens, int) and tokens >= f.max_tokens:
        return LENGTH_WITH_NO_CONTENT
    if f.has_reasoning and tokens in ROUND_CAPS and not (f.has_reasoning_text and f.reasoning_at_cap is False):
        return LENGTH_WITH_NO_CONTENT
    return stopped


def parse_error(error: str | None, provider: str | None = None) -> tuple[str | None, int | None]:
    """Read an error string as the proxy writes it: return ``(error_kind, status)``.

    ``status`` is the HTTP status the upstream answered (for ``Provider returned
    NNN``), the status the proxy answered for its own rejections, or None when no
    HTTP answer came back. ``(None, None)`` for no error.
    """
    if error is None:
        return None, None
    if not isinstance(error, str):
        error = str(error)
    error = error[:ERROR_HEAD_CHARS]
    if provider in ("unrouted", "streaming-unsupported"):
        return ERROR_REJECTED, 400
    text = error.lstrip()
    m = _PROVIDER_RETURNED.match(text)
    if m:
        return ERROR_HTTP, int(m.group(1))
    if text.startswith("Request timed out"):
        # The proxy writes every httpx timeout this way; the duration tells a
        # connect/pool/write timeout (30 s) from a read timeout (600 s or more).
        m = _TIMED_OUT_AFTER.match(text)
        if m and int(m.group(1)) < CONNECT_TIMEOUT_MAX_MS:
            return ERROR_CONNECT_TIMEOUT, None
        return ERROR_TIMEOUT, None
    if text.startswith("Client disconnected") or text.startswith("Client cancelled"):
        return ERROR_CANCELLED, None
    if text.startswith("Streaming is not supported"):
        return ERROR_REJECTED, 400
    if "API key not configured" in text:
        return ERROR_CONFIG, 500
    m = _EXCEPTION_PREFIX.match(text)
    if m:
        name = m.group(1).rsplit(".", 1)[-1]
        if name in _CONNECT_EXCEPTIONS:
            return ERROR_CONNECT, None
        if name in _RESET_EXCEPTIONS:
            return ERROR_RESET, None
        if name in _TIMEOUT_EXCEPTIONS:
            return ERROR_TIMEOUT, None
        if name in _CONNECT_TIMEOUT_EXCEPTIONS:
            return ERROR_CONNECT_TIMEOUT, None
        if name in _BAD_BODY_EXCEPTIONS or (name in _BAD_BODY_MESSAGES and _BAD_BODY_MESSAGES[name] in text):
            # The upstream answered 200 with a body that is not JSON.
            return ERROR_BAD_BODY, 200
        if name in _REJECTED_EXCEPTIONS:
            return ERROR_REJECTED, 400
        if name in _CANCELLED_EXCEPTIONS:
            return ERROR_CANCELLED, None
    lowered = text.lower()
    if "unknown model" in lowered or "not routable" in lowered or "no provider" in lowered:
        return ERROR_REJECTED, 400
    return ERROR_OTHER, None


def exception_text(exc: BaseException) -> str:
    """``<ExceptionType>: <message>``, as the proxy logs an exception; the type's name when ``str(exc)`` raises."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - a broken __str__ must not break classification
        return type(exc).__name__


def error_kind_of_exception(exc: BaseException) -> str:
    """Map an exception raised by a transport (httpx, aiohttp, stdlib) to an error kind."""
    return parse_error(exception_text(exc))[0] or ERROR_OTHER
