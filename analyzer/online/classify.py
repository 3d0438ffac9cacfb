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

#: Every class, in the order reports list them (failures the ladder targets first).
CLASSES: tuple[str, ...] = (
    OK,
    TOOL_HISTORY_5XX,
    EMPTY_200_STOP,
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
)

#: Upstream failures that a wedged or down pod explains (the analyzer re-labels
#: these inside metric windows).
UPSTREAM_FAILURE_CLASSES = frozenset(
    {TOOL_HISTORY_5XX, OTHER_5XX, TIMEOUT, CONNECTION_ERROR}
)

# Error kinds: what kind of failure a response record's ``error`` text describes.
ERROR_HTTP = "http"  # upstream answered with an HTTP error status
ERROR_TIMEOUT = "timeout"  # upstream read timeout
ERROR_CONNECT = "connect"  # connection refused/failed, DNS, TLS: nothing answered
ERROR_RESET = "reset"  # the connection broke mid-answer
ERROR_CANCELLED = "cancelled"  # the caller hung up first
ERROR_REJECTED = "rejected"  # the proxy refused the request before routing
ERROR_CONFIG = "config"  # the proxy is misconfigured (missing provider key)
ERROR_OTHER = "other"  # any other exception text

ERROR_KINDS = (
    ERROR_HTTP,
    ERROR_TIMEOUT,
    ERROR_CONNECT,
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

#: parse_error reads only this many leading characters, so the analyzer can
#: classify each distinct error *head* once instead of each error text.
ERROR_HEAD_CHARS = 200

_PROVIDER_RETURNED = re.compile(r"^Provider returned (\d{3})\b")
_EXCEPTION_PREFIX = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*)(?::|$)")
_CONNECT_EXCEPTIONS = frozenset(
    {"ConnectError", "ConnectTimeout", "ConnectionError", "ConnectionRefusedError",
     "gaierror", "ClientConnectorError", "SSLError", "ProxyError"}
)
_RESET_EXCEPTIONS = frozenset(
    {"RemoteProtocolError", "ReadError", "ConnectionResetError", "ServerDisconnectedError",
     "IncompleteRead", "ProtocolError", "WriteError"}
)
_TIMEOUT_EXCEPTIONS = frozenset({"ReadTimeout", "TimeoutException", "TimeoutError", "WriteTimeout", "PoolTimeout"})
# Raised by this module's own request validation before any model call: the
# client's request was refused, nothing upstream failed.
_REJECTED_EXCEPTIONS = frozenset({"ThinkingBudgetError"})


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
        has_reasoning: the answer carried a reasoning trace.
        completion_tokens: completion tokens the provider reported.
        max_tokens: the completion cap the request asked for.
        error_kind: one of :data:`ERROR_KINDS` for a failed call, else None.
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

    kind = f.error_kind
    if kind == ERROR_CANCELLED:
        return done(CLIENT_CANCELLED, "error_kind")
    if kind == ERROR_REJECTED:
        return done(CLIENT_ERROR, "error_kind")
    if kind == ERROR_TIMEOUT:
        return done(TIMEOUT, "error_kind")
    status = f.status
    if status is None and kind in (ERROR_CONNECT, ERROR_RESET):
        return done(CONNECTION_ERROR, "error_kind")
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
    finish = f.finish_reason.lower() if f.finish_reason else None
    if f.has_tool_calls:
        if finish in _ENDED:
            return done(TOOL_CALL_STOP_MISMATCH, "has_tool_calls", "finish_reason")
        return done(OK, "has_tool_calls")
    if f.has_content:
        return done(OK, "has_content")
    if f.has_content is None and f.has_tool_calls is None:
        # Nothing says the answer was empty; do not invent an incident.
        return done(OK, guessed=True)
    if finish in _LENGTH:
        return done(LENGTH_WITH_NO_CONTENT, "has_content", "finish_reason")
    if finish is not None:
        return done(EMPTY_200_STOP, "has_content", "finish_reason")
    return done(_length_or_stop_by_tokens(f), guessed=True)


def _length_or_stop_by_tokens(f: TurnFeatures) -> str:
    """Tell length from stop for an empty answer with no logged finish reason."""
    tokens = f.completion_tokens
    if tokens is None:
        return EMPTY_200_STOP
    if f.max_tokens is not None and tokens >= f.max_tokens:
        return LENGTH_WITH_NO_CONTENT
    if f.has_reasoning and tokens in ROUND_CAPS:
        return LENGTH_WITH_NO_CONTENT
    return EMPTY_200_STOP


def parse_error(error: str | None, provider: str | None = None) -> tuple[str | None, int | None]:
    """Read an error string as the proxy writes it: return ``(error_kind, status)``.

    ``status`` is the HTTP status the upstream answered (for ``Provider returned
    NNN``), the status the proxy answered for its own rejections, or None when no
    HTTP answer came back. ``(None, None)`` for no error.
    """
    if error is None:
        return None, None
    error = error[:ERROR_HEAD_CHARS]
    if provider in ("unrouted", "streaming-unsupported"):
        return ERROR_REJECTED, 400
    text = error.lstrip()
    m = _PROVIDER_RETURNED.match(text)
    if m:
        return ERROR_HTTP, int(m.group(1))
    if text.startswith("Request timed out"):
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
        if name in _REJECTED_EXCEPTIONS:
            return ERROR_REJECTED, 400
    lowered = text.lower()
    if "unknown model" in lowered or "not routable" in lowered or "no provider" in lowered:
        return ERROR_REJECTED, 400
    return ERROR_OTHER, None


def error_kind_of_exception(exc: BaseException) -> str:
    """Map an exception raised by a transport (httpx, aiohttp, stdlib) to an error kind."""
    return parse_error(f"{type(exc).__name__}: {exc}")[0] or ERROR_OTHER
