"""Builders for proxy log records in the shapes the real proxy writes.

Shapes follow the proxy's records as docs/log-format.md describes them: key
order, `Z` timestamps with microseconds, error texts. The files they are written
to (S3 chunk lines, `kubectl logs` stdout with the S3-mode truncation) come from
the simulator's writers (:mod:`tools.simulator.writers`), so the tests and the
synthetic week share one model of the proxy's output.
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterable

from tools.simulator.writers import chunk_line, stdout_record_line, write_kubectl_stdout

T0 = datetime(2026, 11, 16, 14, 0, 0, tzinfo=timezone.utc)


def stamp(dt: datetime) -> str:
    """The proxy's timestamp format."""
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _common(kind: str, rid: str, ts: datetime, *, session: str | None, model: str, provider: str,
            client: str | None, origin: str | None) -> dict[str, Any]:
    return {
        "timestamp": stamp(ts), "type": kind, "request_id": rid, "session_id": session,
        "client": client, "provider": provider, "model": model, "origin": origin,
    }


def request(rid: str, ts: datetime, *, session: str | None = "s-1", model: str = "glm-5",
            provider: str = "nrp", client: str | None = "geo-agent/v3.13.1",
            origin: str | None = "https://tpl.nrp-nautilus.io", message_count: int = 2,
            tools_count: int = 5, enable_thinking: bool | None = False,
            question: str = "How much land is protected?", this_turn: str | None = None,
            tool_results: list | None = None, messages: list | None = None) -> dict[str, Any]:
    """A request record; ``tool_results`` fills tool_results_this_turn."""
    rec = _common("request", rid, ts, session=session, model=model, provider=provider, client=client, origin=origin)
    rec.update({
        "message_count": message_count, "tools_count": tools_count, "enable_thinking": enable_thinking,
        "user_question": question, "user_message_this_turn": this_turn or question,
        "tool_results_this_turn": tool_results,
    })
    if messages is not None:
        rec["messages"] = messages
    return rec


def response_ok(rid: str, ts: datetime, *, content: str = "", tool_calls: list | None = None,
                reasoning: str = "", completion_tokens: int = 50, prompt_tokens: int = 9000,
                latency_ms: int = 900, extra: dict | None = None, **common: Any) -> dict[str, Any]:
    """A success response record (200 from the upstream)."""
    rec = _common("response", rid, ts, **_defaults(common))
    rec.update({
        "latency_ms": latency_ms,
        "has_content": bool(content), "has_tool_calls": bool(tool_calls),
        "has_reasoning_content": bool(reasoning),
        "content": content, "reasoning_content": reasoning,
        "content_preview": content[:200], "reasoning_content_preview": reasoning[:200],
    })
    if tool_calls:
        rec["tool_calls"] = tool_calls
    rec["tokens"] = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                     "completion_tokens": completion_tokens, "prompt_tokens_details": None}
    if extra:
        rec.update(extra)
    return rec


def response_error(rid: str, ts: datetime, error: str, *, headers: dict | None = None,
                   latency_ms: int = 60, extra: dict | None = None, **common: Any) -> dict[str, Any]:
    """A failure response record with the proxy's error text."""
    rec = _common("response", rid, ts, **_defaults(common))
    rec.update({"latency_ms": latency_ms, "error": error})
    if headers is not None:
        rec["upstream_headers"] = headers
    if extra:
        rec.update(extra)
    return rec


def _defaults(common: dict) -> dict:
    out = {"session": "s-1", "model": "glm-5", "provider": "nrp", "client": "geo-agent/v3.13.1",
           "origin": "https://tpl.nrp-nautilus.io"}
    out.update(common)
    return out


NAKED_500 = "Provider returned 500: "
NAKED_500_HEADERS = {"date": "Mon, 16 Nov 2026 15:41:06 GMT", "content-length": "0"}
TOOL_RESULT = [{"tool_call_id": "chatcmpl-tool-1", "content": "| name | total |\n|---|---|\n| Marin | 1 |"}]
TOOL_CALL = [{"name": "query", "arguments": "{\"sql\": \"SELECT 1\"}"}]

# A chat-completions payload with tool history and tools offered (ladder-eligible
# when it fails), and a healthy upstream answer to it.
TOOL_PAYLOAD = {
    "model": "glm-5", "max_tokens": 2048, "tools": [{"type": "function", "function": {"name": "query"}}],
    "messages": [{"role": "user", "content": "q"},
                 {"role": "assistant", "content": None,
                  "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "query", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "rows"}],
}
DONE_ANSWER = json.dumps({"choices": [{"message": {"content": "Done."}, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 900, "completion_tokens": 12}}).encode()


def write_jsonl(path: Path, records: Iterable[dict], *, compress: bool = False) -> Path:
    """Write records as an S3 chunk file (one JSON object per line), gzipped if ``compress``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(chunk_line(r) + "\n" for r in records)
    if compress:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def stdout_line(rec: dict, *, truncate: bool = False) -> str:
    """One kubectl stdout line for a record; ``truncate``: as printed with S3 enabled."""
    return stdout_record_line(rec, s3_enabled=truncate)


def write_stdout(path: Path, records: Iterable[dict], *, truncate: bool = False) -> Path:
    """Write records as one proxy pod's `kubectl logs` output (gzipped when ``path`` ends in .gz).

    The simulator's stdout writer: the startup banner and uvicorn lines, each record's
    prefixed line with the access line after a response, and with ``truncate`` (S3
    enabled) every string cut at 200 characters at any depth, ``messages`` dropped
    and ``✓ Flushed`` lines.
    """
    write_kubectl_stdout(records, path, s3_enabled=truncate)
    return path


def at(minutes: float) -> datetime:
    """T0 plus some minutes."""
    return T0 + timedelta(minutes=minutes)
