"""Ground truth: what each request of the simulated week was meant to be.

A :class:`Truth` row per request id (its intended class, model, provider, time,
session, tool history, the turn it retries, the ladder's run); the design's rule
applied to the simulated outcome (:func:`intended_class`); and
:func:`write_ground_truth`, the JSON file tests and the sample week compare the
analyzer's classification with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from tools.simulator.clock import iso_seconds


# What the truth reads of an outcome and of a week, named by what they offer: the
# modules that define them (faults, week) import this one.
class _Outcome(Protocol):
    kind: str
    status: int | None
    tool_calls: Any
    finish: str | None
    content: Any
    shape: str


class _Week(Protocol):
    seed: int
    sessions: int
    start: Any
    end: Any
    episodes: Any
    non_episodes: Any
    processes: Any

    def events(self) -> Iterable[Any]: ...


class Truth(NamedTuple):
    """What one request (one ``request_id``) was meant to be.

    ``cls`` is the intended class; ``tool_history`` whether the transcript carried
    tool history anywhere; ``retry_of`` the request id of the failed turn this one
    repeats (same session, message count and user message); ``ladder`` the ladder's
    ``{trigger, outcome, recovered_at}`` on ladder days when it triggered.
    """

    request_id: str
    cls: str
    model: str
    provider: str
    ts: str
    session_id: str | None
    tool_history: bool
    retry_of: str | None
    ladder: dict | None

    def to_json(self) -> dict[str, Any]:
        """The truth row as a JSON-ready dict (without the request id)."""
        return {
            "class": self.cls,
            "model": self.model,
            "provider": self.provider,
            "ts": self.ts,
            "session_id": self.session_id,
            "tool_history": self.tool_history,
            "retry_of": self.retry_of,
            "ladder": self.ladder,
        }


def intended_class(out: _Outcome, *, window: str | None, tool_history: bool, finish_logged: bool) -> str:
    """The class a request was meant to have, from the outcome of its original call.

    ``window`` is the episode (``"wedged"``/``"down"``) the model's pod was in when
    the call started (None for models without a pod, or outside a window);
    ``finish_logged`` whether the proxy logs the finish reason (the ladder days).
    """
    k = out.kind
    if k == "cancel":
        return "client-cancelled"
    if k == "rejected":
        return "client-error"
    if k == "config":
        return "other-5xx"
    upstream_failure = k in ("timeout", "connect", "reset") or (k == "http" and out.status >= 500)
    if window is not None and upstream_failure:
        return "wedged-pod" if window == "wedged" else "pod-down"
    if k == "timeout":
        return "timeout"
    if k in ("connect", "reset"):
        return "connection-error"
    if k == "http":
        if out.status == 429:
            return "rate-limited"
        if out.status < 500:
            return "client-error"
        return "tool-history-5xx" if tool_history else "other-5xx"
    return answer_class(out, finish_logged)


def answer_class(out: _Outcome, finish_logged: bool) -> str:
    """The class of a 200 answer.

    A GLM parser's shapes (``out.shape``): the scratchpad leaked into the content is
    ``reasoning-leaked`` (the user saw it), the answer filed as reasoning
    ``answer-in-reasoning``.
    """
    if out.tool_calls and finish_logged and out.finish == "stop":
        return "tool-call-stop-mismatch"
    if out.shape == "leaked":
        return "reasoning-leaked"
    if out.tool_calls or out.content:
        return "ok"
    if out.finish == "length":
        return "length-with-no-content"
    return "answer-in-reasoning" if out.shape == "in-reasoning" else "empty-200-stop"


def ladder_truth(result: Any) -> dict | None:
    """The ladder part of a truth row: trigger, outcome, rung and attempts (None: no trigger)."""
    if result is None or result.trigger is None:
        return None
    return {"trigger": result.trigger, "outcome": result.outcome, "recovered_at": result.recovered_at,
            "attempts": len(result.attempts)}


# ---------------------------------------------------------------------------
# Ground truth


def write_ground_truth(
    week: _Week,
    path: str | os.PathLike,
    *,
    malformed: Iterable[dict] = (),
) -> dict[str, Any]:
    """Write what the week was meant to contain, as JSON, for tests.

    Keys: ``seed``, ``sessions``, ``start``, ``end``, ``episodes`` (wedged/down
    windows: kind, model_name, pod, start, end), ``non_episodes`` (the quiet night,
    the restart, the scrape gap), ``proxy_processes``, ``malformed`` (damaged S3
    lines, from :func:`write_s3_chunks`), ``requests`` (``request_id`` -> class,
    model, provider, request timestamp, session, tool history, ``retry_of``,
    ``ladder``; one line each, in request order), then ``class_counts`` (per model)
    and ``totals``. Streams the requests; the counts come last.

    Returns:
        ``{"class_counts": ..., "totals": ...}``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[str, dict[str, int]] = {}
    totals = {"records": 0, "request": 0, "response": 0, "system_prompt": 0, "truth": 0}
    sessions: set = set()
    head = {
        "generator": "tools.simulator",
        "seed": week.seed,
        "sessions": week.sessions,
        "start": iso_seconds(week.start),
        "end": iso_seconds(week.end),
        "episodes": [e.to_json() for e in week.episodes],
        "non_episodes": [e.to_json() for e in week.non_episodes],
        "proxy_processes": [p.to_json() for p in week.processes],
        "malformed": list(malformed),
    }
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("{\n")
        for k, v in head.items():
            f.write(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
        f.write('  "requests": {')
        first = True
        for ev in week.events():
            if ev.record is not None:
                totals["records"] += 1
                totals[ev.record["type"]] += 1
                if ev.record.get("session_id"):
                    sessions.add(ev.record["session_id"])
            tr = ev.truth
            if tr is None:
                continue
            totals["truth"] += 1
            by_model = counts.setdefault(tr.model, {})
            by_model[tr.cls] = by_model.get(tr.cls, 0) + 1
            f.write(("\n" if first else ",\n") + f"    {json.dumps(tr.request_id)}: {json.dumps(tr.to_json())}")
            first = False
        f.write("\n  },\n")
        class_counts = {m: dict(sorted(c.items())) for m, c in sorted(counts.items())}
        totals["sessions_with_id"] = len(sessions)
        f.write(f'  "class_counts": {json.dumps(class_counts)},\n')
        f.write(f'  "totals": {json.dumps(totals)}\n')
        f.write("}\n")
    return {"class_counts": class_counts, "totals": totals}
