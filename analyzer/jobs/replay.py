"""``analyze replay``: re-send failed full-capture turns through the fallback ladder.

A turn is *eligible* when the analyzer classified it as ladder-eligible
(``turns.ladder_trigger`` set: ``tool-history-5xx``, or ``empty-200-stop`` with tool
history, outside wedged/down windows) and its request was captured in full mode
(``turns.has_messages``: the whole prompt is in ``records.raw``). By default only
GLM models are replayed (the ladder is a GLM fix); ``only_models`` picks others.

For each eligible turn the original request is rebuilt from the logs and sent
through :func:`analyzer.online.arun_ladder` — the very ladder the proxy runs — to
an OpenAI-compatible endpoint. Every attempt (the original call, then each rung)
is stored in the table ``replay_attempts``; the ``ladder_attempts`` view unions
them with ``source = 'replay'``, so ``ladder_summary`` and the sizing block read
replayed and production ladders alike. Replaying a turn again replaces its
earlier replay rows (keyed by the turn's ``request_id`` and ``ts``).

What is recovered from the logs
-------------------------------

- ``messages``: the whole prompt as the client sent it. Each de-duplicated system
  message (``{role, system_sha256, content_len, _dedup: true}``) is re-hydrated
  from the ``system_prompt`` record with that ``system_sha256`` (its text is in
  ``content``; a record whose sha256 matches its text is preferred). A turn whose
  system prompt record was not ingested is skipped, never sent with a hole.
- ``model``: as logged (or ``model`` given to the command, for an endpoint that
  serves the model under another name).
- ``max_tokens`` and ``thinking_token_budget``: only when logged, i.e. by a proxy
  running ``analyzer.online.log_fields`` (or a ``max_tokens`` in the request
  record); otherwise the endpoint's default applies.
- The thinking switch: the request record's ``enable_thinking``, applied with
  :func:`analyzer.online.normalize_thinking` as the ladder proxy does.

What cannot be recovered
------------------------

- ``tools``: the proxy logs only ``tools_count``, never the definitions. With a
  tools file (``--tools FILE``: a JSON list of OpenAI tool definitions, or an
  object mapping an origin — exact, or its scheme and host — to such a list, with
  ``"*"`` as the default) the real definitions are sent. Without one, each turn
  offers one minimal *stand-in* per tool name seen in its transcript (assistant
  ``tool_calls``): same names, an empty free-form parameter schema. That keeps the
  shape that matters to the GLM failure (tools offered + tool history) but not
  the prompt size or the exact template rendering of the real definitions, and
  tools never called in the transcript are missing. The output says which turns
  used stand-ins. A request that offered no tools (``tools_count = 0``) is sent
  without tools.
- ``tool_choice``, ``parallel_tool_calls``, sampling parameters (``temperature``,
  ``top_p``, ...), ``stop``, ``response_format``, other ``chat_template_kwargs``,
  and headers the client sent: not logged, so the endpoint's defaults apply.
- Randomness: a replay is one new sample, not the original call; a failure that
  does not reproduce (the original call now answers) is stored with outcome
  ``not-triggered`` and no trigger, so it counts in no recovery rate.

The API key is read from an environment variable named on the command line. It is
sent as ``Authorization: Bearer ...`` and never printed, logged or stored: the
stored ``endpoint`` has no user info and no query string, and any error text
that would contain the key is scrubbed.

Errors: an endpoint that cannot be reached (connection refused, DNS, connect
timeout) or that refuses the first call outright (401/403/404/405: bad key, wrong
URL, unknown model) stops the replay with :class:`AnalyzerError` and
``ExitCode.UPSTREAM``; turns finished before are kept. An endpoint answering
500s is a *result*: those ladders are stored as ``exhausted``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable
from urllib.parse import urlsplit, urlunsplit

import duckdb

from analyzer.classification.turns import ensure_turns
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.focus import is_glm, like_match
from analyzer.core.isotime import iso_utc
from analyzer.core.scrub import scrub as scrub_credentials
from analyzer.core.urls import public_url
from analyzer.online import (
    ALL_RUNGS,
    DEFAULT_RUNGS,
    ORIGINAL,
    Attempt,
    LadderResult,
    LadderSettings,
    arun_ladder,
    decide,
    features_from_exchange,
    normalize_thinking,
    rung_payloads,
)
from analyzer.online.classify import exception_text
from analyzer.online.ladder import TRANSPORT_ERROR
from analyzer.store.asking import ask
from analyzer.store.db import connect_writer, transaction

#: Statuses of the *first* call that mean the replay is misconfigured (bad key,
#: wrong URL, unknown model), not that the model failed: they stop the replay.
FATAL_STATUSES = frozenset({401, 403, 404, 405})

#: Said in every replay's output: what the logs do not carry.
NOT_RECOVERED = (
    "tool definitions (only tools_count is logged)",
    "tool_choice and parallel_tool_calls",
    "sampling parameters (temperature, top_p, stop, ...) and response_format",
    "max_tokens and thinking_token_budget unless logged by analyzer.online.log_fields",
)

STAND_IN_DESCRIPTION = "Stand-in for the tool `{name}`: its real definition was not logged."

_REPLAY_COLUMNS = (
    "request_id", "ts", "session_id", "model", "trigger", "outcome", "recovered_at", "attempt_no",
    "rung", "status", "incident_class", "latency_ms", "finish_reason", "prompt_tokens",
    "completion_tokens", "error", "endpoint", "replayed_at", "refused", "refused_reason",
)


# ---------------------------------------------------------------------------
# Planning: what would be sent


@dataclass
class ReplayTurn:
    """One eligible turn and the payload rebuilt from its logs."""

    request_id: str
    ts: datetime
    session_id: str | None
    model: str | None  # as logged
    origin: str | None
    logged_trigger: str
    payload: dict[str, Any]
    tools_source: str  # 'file' | 'stand-in' | 'none'
    system_prompts: int = 0  # system messages re-hydrated
    notes: list[str] = field(default_factory=list)

    def key(self) -> str:
        """The turn's identity in messages: request id and request time."""
        return f"{self.request_id}@{iso_utc(self.ts, 'microseconds')}"


@dataclass
class SkippedTurn:
    """An eligible turn that cannot be replayed faithfully, and why."""

    request_id: str
    ts: datetime
    model: str | None
    reason: str


@dataclass
class ReplayPlan:
    """The turns to replay, the ones skipped, and the ladder's rungs."""

    turns: list[ReplayTurn]
    skipped: list[SkippedTurn]
    rungs: tuple[str, ...]
    not_captured: int  # eligible turns (selected models) without `messages`
    models: list[str] | None  # the model filter, None for "GLM models"

    def rung_summaries(self, turn: ReplayTurn) -> list[dict[str, Any]]:
        """Per payload the ladder may send for ``turn`` (original first): its shape."""
        return [_payload_summary(rung, p) for rung, p in [(ORIGINAL, turn.payload)] + rung_payloads(turn.payload, self.rungs)]


def _payload_summary(rung: str, p: dict) -> dict[str, Any]:
    tools = p.get("tools") or []
    return {
        "rung": rung,
        "messages": len(p.get("messages") or []),
        "tools": len(tools),
        "tool_names": [((t or {}).get("function") or {}).get("name") for t in tools],
        "tool_choice": p.get("tool_choice"),
        "max_tokens": p.get("max_tokens"),
        "bytes": len(json.dumps(p, ensure_ascii=False).encode()),
    }


def load_tools_file(tools_file: str | Path) -> dict[str, list[dict]]:
    """Read tool definitions: a JSON list (every turn) or an object origin -> list.

    Returns a mapping with ``"*"`` for the default. Raises AnalyzerError (usage)
    when the file is missing or is not tool definitions.
    """
    p = Path(tools_file)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AnalyzerError(f"cannot read {p}: {exc.strerror or exc}", ExitCode.NO_INPUT, param="tools_file") from exc
    except ValueError as exc:
        raise AnalyzerError(f"{p} is not JSON: {exc}", ExitCode.USAGE, param="tools_file") from exc
    table = {"*": doc} if isinstance(doc, list) else doc
    if not isinstance(table, dict):
        raise AnalyzerError(f"{p} must hold a list of tool definitions or an object of such lists",
                            ExitCode.USAGE, param="tools_file")
    for key, tools in table.items():
        if not isinstance(tools, list) or not all(_is_tool(t) for t in tools):
            raise AnalyzerError(
                f"{p}: {key!r} is not a list of tool definitions "
                '({"type": "function", "function": {"name": ..., "parameters": ...}})', ExitCode.USAGE,
                param="tools_file")
    return table


def _is_tool(t: Any) -> bool:
    return (isinstance(t, dict) and t.get("type", "function") == "function"
            and isinstance(t.get("function"), dict) and isinstance(t["function"].get("name"), str))


def tools_for_origin(table: dict[str, list[dict]], origin: str | None) -> list[dict] | None:
    """The tools file entry for an origin: exact, then scheme://host, then ``*``."""
    if origin:
        if origin in table:
            return table[origin]
        parts = urlsplit(origin)
        host = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
        if host in table:
            return table[host]
    return table.get("*")


def tool_names(messages: Any) -> list[str]:
    """Tool names the transcript shows, in order of first use."""
    names: list[str] = []
    if not isinstance(messages, list):
        return names
    for m in messages:
        if not isinstance(m, dict):
            continue
        found = []
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict):
                found.append(((call.get("function") or {}).get("name")))
        if isinstance(m.get("function_call"), dict):
            found.append(m["function_call"].get("name"))
        if m.get("role") in ("tool", "function"):
            found.append(m.get("name"))
        for n in found:
            if isinstance(n, str) and n and n not in names:
                names.append(n)
    return names


def stand_in_tools(names: Iterable[str]) -> list[dict]:
    """Minimal tool definitions for names seen in a transcript."""
    return [{"type": "function", "function": {
        "name": n, "description": STAND_IN_DESCRIPTION.format(name=n),
        "parameters": {"type": "object", "properties": {}, "additionalProperties": True}}} for n in names]


def rehydrate(messages: list, prompts: dict[str, str]) -> tuple[list, int, list[str]]:
    """Replace each ``_dedup`` system message by its full text.

    Returns the new messages, how many were re-hydrated, and the hashes with no
    ``system_prompt`` record.
    """
    out, done, missing = [], 0, []
    for m in messages:
        if isinstance(m, dict) and m.get("_dedup"):
            sha = m.get("system_sha256")
            text = prompts.get(sha) if isinstance(sha, str) else None
            if text is None:
                missing.append(str(sha))
                continue
            out.append({"role": m.get("role") or "system", "content": text})
            done += 1
        else:
            out.append(m)
    return out, done, missing


def _load_system_prompts(con: duckdb.DuckDBPyConnection, shas: set[str]) -> dict[str, str]:
    if not shas:
        return {}
    found: dict[str, str] = {}
    for sha, raw in con.execute(
        "SELECT system_sha256, raw FROM records WHERE type = 'system_prompt' AND list_contains($shas, system_sha256) "
        "ORDER BY ts", {"shas": sorted(shas)}
    ).fetchall():
        try:
            text = json.loads(raw).get("content")
        except (ValueError, AttributeError):
            continue
        if not isinstance(text, str):
            continue
        # Prefer a record whose text really hashes to its key.
        if hashlib.sha256(text.encode("utf-8")).hexdigest() == sha or sha not in found:
            found[sha] = text
    return found




def plan_replay(
    con: duckdb.DuckDBPyConnection,
    *,
    only_models: list[str] | None = None,
    limit: int | None = None,
    tools: dict[str, list[dict]] | None = None,
    model: str | None = None,
    flatten: bool = False,
) -> ReplayPlan:
    """Select the eligible full-capture turns (the question ``replay_candidates`` of queries/) and rebuild
    their payloads (no network).

    Args:
        con: an analyzer database with classified turns.
        only_models: replay only turns of these logged models (default: GLM models).
        limit: at most this many turns (the earliest first).
        tools: a tools table from :func:`load_tools_file` (default: stand-ins).
        model: the model name to send (default: each turn's logged model).
        flatten: also try the opt-in ``flatten_transcript`` rung.
    """
    # --only-model takes names or LIKE patterns, as --model does in the summary
    wanted = (lambda m: any(like_match(m, p) for p in only_models)) if only_models else is_glm
    rows = [r for r in ask(con, "replay_candidates") if wanted(r[3])]
    not_captured = sum(1 for r in rows if not r[10] or r[11] is None)
    rows = [r for r in rows if r[10] and r[11] is not None]
    docs = []
    shas: set[str] = set()
    for r in rows:
        try:
            doc = json.loads(r[11])
        except ValueError:
            doc = None
        docs.append(doc)
        for m in (doc or {}).get("messages") or []:
            if isinstance(m, dict) and m.get("_dedup") and isinstance(m.get("system_sha256"), str):
                shas.add(m["system_sha256"])
    prompts = _load_system_prompts(con, shas)

    turns: list[ReplayTurn] = []
    skipped: list[SkippedTurn] = []
    for r, doc in zip(rows, docs):
        rid, ts, session, logged_model, origin, trigger, tools_count, thinking, max_tokens, budget = r[:10]
        if limit is not None and len(turns) >= limit:
            break
        messages = (doc or {}).get("messages")
        if not isinstance(messages, list) or not messages:
            skipped.append(SkippedTurn(rid, ts, logged_model, "the request record's messages are not a list"))
            continue
        messages, hydrated, missing = rehydrate(messages, prompts)
        if missing:
            skipped.append(SkippedTurn(rid, ts, logged_model,
                                       f"no system_prompt record for system_sha256 {', '.join(m[:12] for m in missing)}"
                                       " (ingest the chunk files that hold it)"))
            continue
        notes: list[str] = []
        send_model = model or logged_model or str(doc.get("model") or "")
        payload: dict[str, Any] = {"model": send_model, "messages": messages}
        names = tool_names(messages)
        source = "none"
        if tools_count == 0:
            notes.append("the original request offered no tools")
        else:
            chosen = tools_for_origin(tools, origin) if tools else None
            if chosen:
                payload["tools"] = chosen
                source = "file"
            elif names:
                payload["tools"] = stand_in_tools(names)
                source = "stand-in"
                missing_n = (tools_count or 0) - len(names)
                notes.append(f"tools: {len(names)} stand-in(s) ({', '.join(names)})"
                             + (f"; {missing_n} more offered tools never appear in the transcript" if missing_n > 0 else ""))
            else:
                notes.append("tools: none sent (not logged, and no tool names in the transcript)")
        mt = max_tokens if max_tokens is not None else _int(doc.get("max_tokens"))
        if mt is not None:
            payload["max_tokens"] = mt
        if budget is not None:
            payload["thinking_token_budget"] = budget
        if thinking is not None:
            payload = normalize_thinking(payload, send_model, thinking)
        turns.append(ReplayTurn(rid, ts, session, logged_model, origin, trigger, payload, source, hydrated, notes))
    return ReplayPlan(turns, skipped, ALL_RUNGS if flatten else DEFAULT_RUNGS, not_captured, only_models)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# ---------------------------------------------------------------------------
# Sending


class RateLimiter:
    """At most ``rate`` calls per second, spaced evenly (0 or None: no bound).

    Each :meth:`acquire` reserves the next free slot under a lock and sleeps until
    it; ``clock`` and ``sleep`` are injectable for tests.
    """

    def __init__(self, rate: float | None, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.interval = 1.0 / rate if rate else 0.0
        self._clock = clock
        self._sleep = sleep
        self._next: float | None = None
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        """Wait until the next call is allowed by the rate bound."""
        if not self.interval:
            return
        async with self._lock:
            now = self._clock()
            slot = now if self._next is None else max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            await self._sleep(slot - now)


def endpoint_url(endpoint: str) -> str:
    """The chat-completions URL for an endpoint given as that URL or a base URL.

    ``http://host:8000`` and ``http://host:8000/v1`` both become
    ``http://host:8000/v1/chat/completions``; a URL already ending in
    ``/chat/completions`` is kept.
    """
    parts = urlsplit(endpoint.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise AnalyzerError(f"endpoint must be an http(s) URL, got {public_url(endpoint)!r}", ExitCode.USAGE,
                            param="endpoint")
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path = (path or "/v1") + "/chat/completions"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


@dataclass
class TurnOutcome:
    """What the ladder did for one replayed turn."""

    turn: ReplayTurn
    trigger: str | None
    outcome: str
    recovered_at: str | None
    attempts: list[Attempt]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the turn's replay."""
        return {
            "request_id": self.turn.request_id, "ts": iso_utc(self.turn.ts, 'microseconds'), "session_id": self.turn.session_id,
            "model": self.turn.model, "sent_model": self.turn.payload.get("model"),
            "logged_trigger": self.turn.logged_trigger, "tools_source": self.turn.tools_source,
            "notes": self.turn.notes, "trigger": self.trigger, "outcome": self.outcome,
            "recovered_at": self.recovered_at, "attempts": [a.to_dict() for a in self.attempts],
        }


@dataclass
class ReplayReport:
    """The result of :func:`replay`: one outcome per replayed turn, in turn order."""

    endpoint: str  # public (no credentials)
    plan: ReplayPlan
    outcomes: list[TurnOutcome]
    stored_attempts: int

    def per_rung(self) -> list[dict[str, Any]]:
        """Per trigger and rung: reached and recovered (the replay's own tally)."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for o in self.outcomes:
            if o.trigger is None:
                continue
            for a in o.attempts[1:]:
                r = rows.setdefault((o.trigger, a.rung), {"trigger": o.trigger, "rung": a.rung, "reached": 0, "recovered": 0})
                r["reached"] += 1
                r["recovered"] += a.incident_class == "ok"
        order = {r: i for i, r in enumerate(ALL_RUNGS)}
        return sorted(rows.values(), key=lambda r: (r["trigger"], order.get(r["rung"], 99)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the whole replay (what --json prints)."""
        return {
            "endpoint": self.endpoint, "dry_run": False, "rungs": list(self.plan.rungs),
            "turns": [o.to_dict() for o in self.outcomes],
            "skipped": [_skipped_dict(s) for s in self.plan.skipped],
            "not_captured": self.plan.not_captured,
            "per_rung": self.per_rung(),
            "outcomes": dict(Counter(o.outcome for o in self.outcomes)),
            "stored_attempts": self.stored_attempts,
            "not_recovered_from_logs": list(NOT_RECOVERED),
        }


def _skipped_dict(s: SkippedTurn) -> dict[str, Any]:
    return {"request_id": s.request_id, "ts": iso_utc(s.ts, 'microseconds'), "model": s.model, "reason": s.reason}


def check_api_key(key: str, source: str = "the API key") -> str:
    """Refuse a key that cannot go into an HTTP header as it is, without ever showing it.

    A key copied with its line end (``echo $KEY > file``), or holding spaces or
    other control characters, would make the HTTP client raise an error that
    quotes the header (escaped, so a plain scrubber misses it).

    Raises:
        AnalyzerError: (usage) CR, LF, whitespace or another control character in the key.
    """
    bad = [name for name, test in (("a line break (CR or LF)", lambda c: c in "\r\n"),
                                   ("a space or tab", lambda c: c in " \t"),
                                   ("a control character", lambda c: ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0))
           if any(test(c) for c in key)]
    if bad:
        raise AnalyzerError(f"{source} holds {bad[0]} ({len(key)} characters, not shown): remove it "
                            "(a key read from a file often keeps its line end)", ExitCode.USAGE)
    return key


def secret_forms(secret: str) -> list[str]:
    """``secret`` as errors may quote it: raw, stripped, escaped by repr/JSON, URL-encoded (longest first)."""
    from urllib.parse import quote, quote_plus

    forms = {secret, secret.strip(), repr(secret)[1:-1], json.dumps(secret)[1:-1],
             secret.encode("unicode_escape").decode("ascii"), quote(secret, safe=""), quote_plus(secret)}
    return sorted((f for f in forms if len(f) >= 4), key=len, reverse=True)


def scrubber(secret: str | None) -> Callable[[str | None], str | None]:
    """A scrub for texts that may quote ``secret``: every escaped form of it, and credentials in general."""
    forms = secret_forms(secret) if secret else []

    def scrub(text: str | None) -> str | None:
        if text is None:
            return text
        for form in forms:
            text = text.replace(form, "***")
        return scrub_credentials(text)
    return scrub


def store_outcome(con: duckdb.DuckDBPyConnection, o: TurnOutcome, endpoint: str, replayed_at: datetime) -> int:
    """Replace the turn's replay rows with this outcome's attempts; return the row count."""
    t = o.turn
    rows = [(t.request_id, t.ts, t.session_id, t.model, o.trigger, o.outcome, o.recovered_at, i, a.rung, a.status,
             a.incident_class, a.latency_ms, a.finish_reason, a.prompt_tokens, a.completion_tokens, a.error,
             endpoint, replayed_at, bool(a.refused), a.refused_reason) for i, a in enumerate(o.attempts, 1)]
    with transaction(con):
        con.execute("DELETE FROM replay_attempts WHERE request_id = ? AND ts = ?", [t.request_id, t.ts])
        con.executemany(
            f"INSERT INTO replay_attempts ({', '.join(_REPLAY_COLUMNS)}) VALUES ({', '.join('?' * len(_REPLAY_COLUMNS))})",
            rows)
    return len(rows)


async def areplay(
    con: duckdb.DuckDBPyConnection,
    plan: ReplayPlan,
    endpoint: str,
    *,
    api_key: str | None = None,
    concurrency: int = 2,
    rate: float | None = 2.0,
    timeout_s: float = 300.0,
    time_budget_s: float = 120.0,
) -> ReplayReport:
    """Send every planned turn through :func:`arun_ladder`; store each turn's attempts.

    Each turn's rows are written as soon as its ladder finishes (replacing earlier
    replay rows of that turn). ``rate`` bounds every upstream call, rungs included.

    Raises:
        AnalyzerError (ExitCode.UPSTREAM): the endpoint cannot be reached, or
            refused a first call with 401/403/404/405. Turns finished before stay stored.
    """
    import httpx

    if concurrency < 1:
        raise AnalyzerError("concurrency must be at least 1", ExitCode.USAGE, param="concurrency")
    url = endpoint_url(endpoint)
    public = public_url(url)
    if api_key:
        check_api_key(api_key)  # before it goes near a header
    scrub = scrubber(api_key)
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    limiter = RateLimiter(rate)
    # models=None: the turns to replay were chosen already (--only-model), so the
    # proxy's model gate does not apply here.
    settings = LadderSettings(rungs=plan.rungs, models=None, max_attempts=1 + len(plan.rungs),
                              time_budget_s=time_budget_s)
    sem = asyncio.Semaphore(concurrency)
    replayed_at = datetime.now(timezone.utc).replace(tzinfo=None)
    outcomes: dict[str, TurnOutcome] = {}
    stored = 0
    fatal: list[str] = []
    unreachable = (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.ProxyError)

    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)), headers=headers,
                                 limits=httpx.Limits(max_connections=concurrency)) as client:

        async def send(p: dict):
            await limiter.acquire()
            r = await client.post(url, json=p)
            return r.status_code, r.headers, r.content

        async def one(turn: ReplayTurn) -> None:
            nonlocal stored
            async with sem:
                if fatal:
                    return
                t0 = time.monotonic()
                try:
                    result = await arun_ladder(turn.payload, send, settings)
                except unreachable as exc:
                    fatal.append(f"cannot reach the replay endpoint {public}: {type(exc).__name__}: {scrub(str(exc)) or 'no detail'}")
                    return
                except httpx.HTTPError as exc:  # the endpoint misbehaved on the first call: a result
                    outcome = _transport_outcome(turn, exc, int((time.monotonic() - t0) * 1000), scrub)
                else:
                    first = result.attempts[0]
                    if first.status in FATAL_STATUSES:
                        body = result.body.decode("utf-8", "replace") if isinstance(result.body, bytes) else str(result.body)
                        fatal.append(f"the replay endpoint {public} answered {first.status} to the first call "
                                     f"(check the URL, --model and the API key): {scrub(body[:300].strip()) or 'empty body'}")
                        return
                    outcome = _ladder_outcome(turn, result, scrub)
                outcomes[turn.key()] = outcome
                stored += store_outcome(con, outcome, public, replayed_at)

        await asyncio.gather(*(one(t) for t in plan.turns))

    report = ReplayReport(public, plan, [outcomes[t.key()] for t in plan.turns if t.key() in outcomes], stored)
    if fatal:
        done = len(report.outcomes)
        raise AnalyzerError(fatal[0] + (f" ({done} turn(s) replayed and stored before the error)" if done else ""),
                            ExitCode.UPSTREAM)
    return report


def replay(con: duckdb.DuckDBPyConnection, plan: ReplayPlan, endpoint: str, **options: Any) -> ReplayReport:
    """The blocking :func:`areplay` (runs its own event loop)."""
    return asyncio.run(areplay(con, plan, endpoint, **options))


def _ladder_outcome(turn: ReplayTurn, result: LadderResult, scrub) -> TurnOutcome:
    for a in result.attempts:
        a.error = scrub(a.error)
    return TurnOutcome(turn, result.trigger, result.outcome, result.recovered_at, list(result.attempts))


def _transport_outcome(turn: ReplayTurn, exc: BaseException, latency_ms: int, scrub) -> TurnOutcome:
    cls = decide(features_from_exchange(turn.payload, None, None, exc)).incident_class
    att = Attempt(rung=ORIGINAL, status=None, incident_class=cls, latency_ms=latency_ms,
                  error=scrub(exception_text(exc)[:500]))  # as the ladder logs a raised call
    return TurnOutcome(turn, None, TRANSPORT_ERROR, None, [att])


def dry_run_doc(plan: ReplayPlan, url: str | None) -> dict[str, Any]:
    """What a dry run would send: per turn the payload and each rung's shape (what ``--json`` prints)."""
    return {
        "endpoint": public_url(url) if url else None,
        "dry_run": True,
        "rungs": list(plan.rungs),
        "turns": [{
            "request_id": t.request_id, "ts": iso_utc(t.ts, 'microseconds'), "session_id": t.session_id,
            "model": t.model, "sent_model": t.payload.get("model"), "logged_trigger": t.logged_trigger,
            "system_prompts_rehydrated": t.system_prompts, "tools_source": t.tools_source, "notes": t.notes,
            "payloads": plan.rung_summaries(t), "payload": t.payload,
        } for t in plan.turns],
        "skipped": [_skipped_dict(s) for s in plan.skipped],
        "not_captured": plan.not_captured,
        "not_recovered_from_logs": list(NOT_RECOVERED),
    }


def nothing_replayed_doc(plan: ReplayPlan, url: str) -> dict[str, Any]:
    """The report of a replay with no eligible turn (the shape of :meth:`ReplayReport.to_dict`)."""
    return {"endpoint": public_url(url), "dry_run": False, "turns": [],
            "skipped": [_skipped_dict(s) for s in plan.skipped], "not_captured": plan.not_captured,
            "per_rung": [], "outcomes": {}, "stored_attempts": 0, "not_recovered_from_logs": list(NOT_RECOVERED)}


@dataclass(frozen=True)
class ReplayOptions:
    """What ``analyze replay`` was asked; checked when made (the endpoint's URL built, the
    API key read from its environment variable, the tools file read).

    ``endpoint`` is required unless ``dry_run``; ``api_key_env`` names the variable
    holding the key (never the key itself: it would show in a process list);
    ``only_models``: names or LIKE patterns of logged models to replay (default:
    the GLM models); ``model``: the name to send instead of the logged one.

    Raises:
        AnalyzerError: (usage) a bad value, naming its parameter.
    """

    endpoint: str | None = None
    api_key_env: str | None = None
    dry_run: bool = False
    limit: int | None = None
    concurrency: int = 2
    rate: float = 2.0
    model: str | None = None
    only_models: tuple[str, ...] = ()
    tools_file: Path | None = None
    flatten: bool = False
    timeout_s: float = 300.0
    time_budget_s: float = 120.0
    db: Path | None = None
    url: str | None = field(init=False, default=None, repr=False, compare=False)
    api_key: str | None = field(init=False, default=None, repr=False, compare=False)
    tools: dict | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise AnalyzerError("limit must be at least 1", ExitCode.USAGE, param="limit")
        if self.rate is not None and self.rate < 0:
            raise AnalyzerError("rate must be >= 0 (0: no bound)", ExitCode.USAGE, param="rate")
        if self.concurrency < 1:
            raise AnalyzerError("concurrency must be at least 1", ExitCode.USAGE, param="concurrency")
        if not self.dry_run and not self.endpoint:
            raise AnalyzerError("endpoint URL is required (or use a dry run to see what would be sent)",
                                ExitCode.USAGE, param="endpoint")
        api_key = None
        if not self.dry_run and self.api_key_env:
            api_key = os.environ.get(self.api_key_env)
            if not api_key:
                raise AnalyzerError(f"the environment variable {self.api_key_env} is not set or empty",
                                    ExitCode.USAGE, param="api_key_env")
            check_api_key(api_key, f"the API key in ${self.api_key_env}")
        object.__setattr__(self, "url", endpoint_url(self.endpoint) if self.endpoint else None)
        object.__setattr__(self, "api_key", api_key)
        object.__setattr__(self, "tools", load_tools_file(self.tools_file) if self.tools_file else None)


@dataclass
class ReplayRun:
    """What ``analyze replay`` did: the plan, and the report of what was sent (None for a dry
    run or when no turn was eligible); ``doc`` is what ``--json`` prints."""

    plan: ReplayPlan
    url: str | None
    report: ReplayReport | None
    doc: dict[str, Any]
    dry_run: bool


def run_replay(opts: ReplayOptions) -> ReplayRun:
    """``analyze replay``: plan the eligible turns, then (unless a dry run) send, store and report.

    Raises:
        AnalyzerError: (no input) a database without records; (upstream) the endpoint
            cannot be reached or refuses the first call.
    """
    con = connect_writer(opts.db)
    try:
        ensure_turns(con)
        if not con.execute("SELECT count(*) FROM records").fetchall()[0][0]:
            raise AnalyzerError("the database holds no records; run `analyze FILES...` first", ExitCode.NO_INPUT)
        plan = plan_replay(con, only_models=list(opts.only_models) or None, limit=opts.limit, tools=opts.tools,
                           model=opts.model, flatten=opts.flatten)
        if opts.dry_run:
            return ReplayRun(plan, opts.url, None, dry_run_doc(plan, opts.url), True)
        if not plan.turns:
            return ReplayRun(plan, opts.url, None, nothing_replayed_doc(plan, opts.url), False)
        report = replay(con, plan, opts.url, api_key=opts.api_key, concurrency=opts.concurrency,
                        rate=opts.rate or None, timeout_s=opts.timeout_s, time_budget_s=opts.time_budget_s)
    finally:
        con.close()
    return ReplayRun(plan, opts.url, report, report.to_dict(), False)
