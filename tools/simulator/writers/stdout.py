"""The proxy pods' stdout, as ``kubectl logs`` shows it.

The startup banner and uvicorn lines; each record as one prefixed line
(``📥 REQUEST: {json}``, ``✓ RESPONSE: {json}``, ``✗ RESPONSE: {json}``) -- with S3
enabled, the stdout copy of the record (:func:`stdout_view`: every string at any depth
cut to 200 characters and marked ``…(+N chars)``, ``messages`` dropped); uvicorn
access lines; ``⚠️`` warnings, ``🧹`` repairs, ``ℹ️`` notes and ``✓ Flushed`` lines.
This is the one model of the proxy's stdout: the tests' record builders use it too.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tools.simulator.models import ENDPOINTS, PROFILES
from tools.simulator.week import SimulatedWeek
from tools.simulator.world import ProxyProcess
from tools.simulator.writers.events import FLUSH_INTERVAL_S, Flusher, source_events

# Proxy constants, as in llm_proxy.py: the log bucket (in ``✓ Flushed`` lines), the
# stdout cut of each string when S3 is enabled, the slow-completion warning threshold.
_LOG_BUCKET = "logs-open-llm-proxy"
_STDOUT_MAX_FIELD = 200
_SLOW_COMPLETION_WARN_MS = 300_000


def stdout_view(entry: dict, max_field: int = _STDOUT_MAX_FIELD) -> dict:
    """The stdout copy of a record when S3 is enabled (``llm_proxy.py``'s ``_stdout_view``).

    Every string, at any depth, longer than ``max_field`` is cut and marked
    ``…(+N chars)``; the ``messages`` array is dropped.
    """

    def shrink(v: Any) -> Any:
        if isinstance(v, str):
            if len(v) > max_field:
                return f"{v[:max_field]}…(+{len(v) - max_field} chars)"
            return v
        if isinstance(v, list):
            return [shrink(x) for x in v]
        if isinstance(v, dict):
            return {k: shrink(x) for k, x in v.items()}
        return v

    return {k: shrink(v) for k, v in entry.items() if k != "messages"}


# ---------------------------------------------------------------------------
# kubectl stdout

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 504: "Gateway Timeout"}
_THINKING_KEY_MODELS = frozenset(m for m, p in PROFILES.items() if p.thinking_key)


def _client_status(rec: dict) -> int | None:
    """The HTTP status the proxy answered the client with (None: the client hung up)."""
    err = rec.get("error")
    if err is None:
        return 200
    if rec.get("provider") in ("unrouted", "streaming-unsupported"):
        return 400
    if err.startswith("Provider returned "):
        status = int(err[18:21])
        return status if status in (400, 401, 402, 403, 429) else 502
    if err.startswith("Request timed out"):
        return 504
    if err.startswith("Client disconnected"):
        return None
    if "API key not configured" in err:
        return 500
    return 502


def _banner(proc: ProxyProcess) -> list[str]:
    lines = ["✓ Loaded configuration from /app/config.json", "=" * 60,
             "🚀 Multi-Provider LLM Proxy Starting", "=" * 60]
    for name, endpoint in ENDPOINTS:
        ok = name not in proc.missing_keys
        lines.append(f"{'✓' if ok else '✗'} {name.upper()}: {endpoint} (key: {'set' if ok else 'MISSING'})")
    lines.append("✓ CACHE_SALT configured - responses isolated from other NRP tenants")
    if proc.version == "ladder":
        lines.append("✓ Fallback ladder (analyzer.online) on for glm-5, glm-4.6: tool_choice_none → drop_tools → "
                     "final_answer → flatten_transcript, length recovery on, max 5 attempts, 120s budget")
    lines.append("=" * 60)
    lines += [f"INFO:     Started server process [{proc.pid}]", "INFO:     Waiting for application startup.",
              "INFO:     Application startup complete.",
              "INFO:     Uvicorn running on http://0.0.0.0:8002 (Press CTRL+C to quit)"]
    return lines


def _client_addr(rid: str) -> str:
    h = int(rid, 16) if rid else 0
    return f"10.244.{3 + h % 3}.{17 + (h >> 4) % 40}:{32768 + (h >> 10) % 28000}"


def stdout_record_line(rec: dict, s3_enabled: bool = True) -> str:
    """The line the proxy prints for one request or response record (no newline).

    ``📥 REQUEST: {json}`` for a request, ``✗ RESPONSE: {json}`` for a response with
    an ``error`` field, ``✓ RESPONSE: {json}`` otherwise; with ``s3_enabled`` the
    JSON is the record's :func:`stdout_view`, else the record itself.
    """
    view = stdout_view(rec) if s3_enabled else rec
    if rec.get("type") == "request":
        return f"📥 REQUEST: {json.dumps(view)}"
    return f"{'✗' if 'error' in rec else '✓'} RESPONSE: {json.dumps(view)}"


def _stdout_lines(rec: dict, s3_enabled: bool) -> list[str]:
    """What the proxy prints for one request or response record, in print order."""
    rid = rec.get("request_id") or ""
    model = rec.get("model")
    if rec.get("type") == "request":
        lines = [stdout_record_line(rec, s3_enabled) + "\n"]
        # Printed while building the upstream payload, after log_request.
        if rec.get("enable_thinking") is not None and model not in _THINKING_KEY_MODELS:
            lines.append(f"ℹ️  enable_thinking requested for '{model}' but no thinking_key configured — ignoring\n")
        return lines
    lines = []
    if rec.get("tool_call_dialect_repaired"):
        lines.append(f"🧹 Normalized {rec['tool_call_dialect_repaired']} tool-call argument(s) with leaked arg "
                     f"dialect (model={model}, request_id={rid})\n")
    latency = rec.get("latency_ms") or 0
    if "error" not in rec and latency > _SLOW_COMPLETION_WARN_MS:
        lines.append(f"⚠️  Slow completion: {latency}ms exceeds the 300s client-side warning threshold "
                     f"(model={model}, request_id={rid}) — the caller may already have given up on this turn "
                     f"and seen a gateway 502/504\n")
    ladder = rec.get("ladder")
    if ladder:
        at = f" at {ladder['recovered_at']}" if ladder.get("recovered_at") else ""
        lines.append(f"⚠️  Fallback ladder: {ladder['trigger']} on {model}: {ladder['outcome']}{at} after "
                     f"{len(ladder['attempts'])} attempts (request_id={rid})\n")
    lines.append(stdout_record_line(rec, s3_enabled) + "\n")
    status = _client_status(rec)
    if status is not None:  # uvicorn's access line, once the answer is sent
        lines.append(f'INFO:     {_client_addr(rid)} - "POST /v1/chat/completions HTTP/1.1" {status} '
                     f"{_REASONS.get(status, '')}\n")
    return lines


def write_kubectl_stdout(
    records: SimulatedWeek | Iterable[dict],
    path: str | os.PathLike,
    s3_enabled: bool = True,
    *,
    flush_interval_s: int = FLUSH_INTERVAL_S,
) -> list[Path]:
    """Write the proxy pods' stdout, as ``kubectl logs`` shows it.

    With a :class:`SimulatedWeek`, ``path`` is a directory and each proxy pod gets
    ``<pod>.log.gz`` (pods are named ``glm-proxy-...``; a pod whose container
    restarted shows both runs). With plain records, ``path`` is one file (gzipped
    when it ends in ``.gz``). Lines: the startup banner and uvicorn lines, then
    ``📥 REQUEST: {json}``, ``✓ RESPONSE: {json}`` / ``✗ RESPONSE: {json}``, uvicorn
    access lines, ``⚠️`` warnings (slow completions, swallowed logging errors, the
    ladder), ``🧹`` tool-call repairs and, with S3 enabled, ``✓ Flushed`` lines. With
    ``s3_enabled`` each string field is cut to 200 characters and ``messages`` is
    dropped (:func:`stdout_view`); ``system_prompt`` records never reach stdout.

    Returns:
        The files written.
    """
    path = Path(path)
    procs, events = source_events(records)
    per_pod = isinstance(records, SimulatedWeek)
    if per_pod:
        path.mkdir(parents=True, exist_ok=True)
    files: dict[str, io.TextIOBase] = {}
    written: list[Path] = []
    flushers: dict[int, Flusher] = {}
    closing = contextlib.ExitStack()

    def out(p: int) -> io.TextIOBase:
        pod = procs[p].pod
        f = files.get(pod)
        if f is None:
            target = path / f"{pod}.log.gz" if per_pod else path
            target.parent.mkdir(parents=True, exist_ok=True)
            raw = closing.enter_context(open(target, "wb"))
            if target.suffix == ".gz":
                # mtime=0 and no file name in the header: byte-identical reruns.
                raw = closing.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0))
            f = closing.enter_context(io.TextIOWrapper(raw, encoding="utf-8", newline="\n"))
            files[pod] = f
            written.append(target)
        return f

    def flush_lines(p: int, items: Iterable[tuple[int, str, int]]) -> None:
        if not s3_enabled:
            return
        f = out(p)
        for _, key, n in items:
            f.write(f"✓ Flushed {n} log entries to s3://{_LOG_BUCKET}/{key}\n")

    with closing:  # closes the text wrappers, gzip streams and files, innermost first
        for ev in events:
            p = ev.process
            if ev.kind == "start":
                flushers[p] = Flusher(procs[p], flush_interval_s)
                out(p).write("\n".join(_banner(procs[p])) + "\n")
                continue
            fl = flushers[p]
            flush_lines(p, fl.due(ev.t_us))
            f = out(p)
            if ev.kind == "exit":
                if ev.note == "deploy":
                    f.write("INFO:     Shutting down\nINFO:     Waiting for application shutdown.\n")
                last = fl.final(ev.t_us)
                # The simulation lets a crashing process flush first, so S3 and stdout
                # keep overlapping completely; then it dies without shutdown lines.
                flush_lines(p, [last] if last else [])
                if ev.note == "deploy":
                    f.write(f"INFO:     Application shutdown complete.\nINFO:     Finished server process "
                            f"[{procs[p].pid}]\n")
                continue
            if ev.kind == "note":
                f.write(ev.note + "\n")
                continue
            rec = ev.record
            fl.count += 1
            kind = rec.get("type")
            if kind == "system_prompt":
                continue  # buffered for S3 only
            f.writelines(_stdout_lines(rec, s3_enabled))
        for p, fl in flushers.items():
            flush_lines(p, fl.due(fl.next_us))
            last = fl.final(None)
            flush_lines(p, [last] if last else [])
    return written
