"""The small populated week the SQL-layer tests share (queries, sql CLI, export, lake, notebook, Spark).

Three days (2026-11-16 .. 18), two models, three client versions, and at least one
turn of each class the questions single out; ``build_week_db`` ingests it into a real
DuckDB file, adds a wedged window and classifies.
"""

from __future__ import annotations

import json
from pathlib import Path

from analyzer.classification.turns import refresh_turns
from analyzer.ingestion.logs import ingest
from analyzer.online import log_fields, run_ladder
from analyzer.store.db import connect
from tests.support.records import (
    NAKED_500,
    NAKED_500_HEADERS,
    TOOL_CALL,
    TOOL_RESULT,
    at,
    request,
    response_error,
    response_ok,
    write_jsonl,
)

DAY = 24 * 60  # minutes

V13, V14 = "geo-agent/v3.13.1", "geo-agent/v3.14.0"
TOOLS_PAYLOAD = {
    "model": "glm-5", "max_tokens": 2048, "tools": [{"type": "function", "function": {"name": "query"}}],
    "messages": [{"role": "user", "content": "q"},
                 {"role": "assistant", "content": None,
                  "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "query", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": "rows"}],
}


def answer(content="", finish="stop", tokens=12):
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 900, "completion_tokens": tokens}}).encode()


def turn(rid, minute, session, *, model="glm-5", client=V13, req=None, resp=None, **kw):
    """A request and its response (``resp`` is response_ok/response_error, or None: unanswered)."""
    common = {"session": session, "model": model, "client": client}
    recs = [request(rid, at(minute), **common, **(req or {}))]
    if resp is not None:
        recs.append(resp(rid, at(minute + 0.05), **common, **kw))
    return recs


def ladder_extra(recover: bool):
    """log_fields of a real analyzer.online ladder run: recovered at drop_tools, or exhausted."""
    def send(payload):
        if "tools" in payload or not recover:
            return 500, {"content-length": "0"}, b""
        return 200, {}, answer("Final answer.")
    result = run_ladder(TOOLS_PAYLOAD, send)
    return log_fields(TOOLS_PAYLOAD, result.status, result.body, result)


def week_records() -> list[dict]:
    """Proxy records of a small three-day week (2026-11-16 .. 18)."""
    length_fields = log_fields({**TOOLS_PAYLOAD, "max_tokens": 4096}, 200, answer("", "length", 4096))
    r: list[dict] = []
    # Day 1: a tool session that fails once and recovers by the client's retry,
    # one that dies on a naked 500, a healthy qwen3 session, and a session that
    # ends on reasoning eating the whole budget (new-format record).
    r += turn("a0000001", 0, "s-a", resp=response_ok, tool_calls=TOOL_CALL)
    r += turn("a0000002", 1, "s-a", req={"tool_results": TOOL_RESULT}, resp=response_error, error=NAKED_500,
               headers=NAKED_500_HEADERS)
    r += turn("a0000003", 1.2, "s-a", req={"tool_results": TOOL_RESULT}, resp=response_ok, content="Here.")
    r += turn("b0000001", 5, "s-b", resp=response_ok, tool_calls=TOOL_CALL)
    r += turn("b0000002", 6, "s-b", req={"tool_results": TOOL_RESULT}, resp=response_error, error=NAKED_500,
               headers=NAKED_500_HEADERS)
    r += turn("c0000001", 10, "s-c", model="qwen3", client=V14, resp=response_ok, content="Hi.")
    r += turn("c0000002", 11, "s-c", model="qwen3", client=V14, resp=response_ok, content="Sure.")
    r += turn("d0000001", 20, "s-d", req={"enable_thinking": True}, resp=response_ok, reasoning="Let me think " * 50,
               completion_tokens=4096, extra=length_fields)
    # Day 2: a ladder that recovered, a ladder that did not, a timeout inside a
    # wedged window (inserted below), an unanswered request without a client.
    r += turn("e0000001", DAY, "s-e", client=V14, req={"tool_results": TOOL_RESULT}, resp=response_ok,
               content="Final answer.", extra=ladder_extra(True))
    r += turn("e0000002", DAY + 2, "s-e", client=V14, req={"tool_results": TOOL_RESULT}, resp=response_error,
               error=NAKED_500, extra=ladder_extra(False))
    r += turn("f0000001", DAY + 30, "s-f", resp=response_error, error="Request timed out after 1200000ms",
               latency_ms=1_200_000)
    r += turn("g0000001", DAY + 40, "s-g", model="qwen3", client=None, resp=None)
    # Day 3: a 429, a legacy empty 200 with tool history, a legacy length turn
    # (tokens at the round cap with a reasoning trace at the log's cap), healthy turns.
    r += turn("h0000001", 2 * DAY, "s-h", model="qwen3", client=V14, resp=response_error,
               error='Provider returned 429: {"error": {"message": "Rate limit exceeded", "code": 429}}')
    r += turn("h0000002", 2 * DAY + 1, "s-h", model="qwen3", client=V14, resp=response_ok, content="Done.")
    r += turn("i0000001", 2 * DAY + 5, "s-i", req={"tool_results": TOOL_RESULT}, resp=response_ok,
               completion_tokens=1)
    r += turn("j0000001", 2 * DAY + 9, "s-j", req={"enable_thinking": True}, resp=response_ok,
               reasoning="Hmm " * 1000, completion_tokens=2048)  # a trace at the proxy's 4,000-character cap
    r += turn("k0000001", 2 * DAY + 12, "s-k", client=V14, resp=response_ok, content="All good.")
    return r


WEDGED_WINDOW = (at(DAY + 25), at(DAY + 35))


def build_week_db(path: Path) -> Path:
    """Ingest ``week_records()`` into a database at ``path``, add a wedged window, classify."""
    logs = write_jsonl(path.parent / f"{path.stem}-logs" / "2026-11-16" / "14-00-00-proxy-1-0a1b2c3d.jsonl",
                       week_records())
    con = connect(path)
    try:
        ingest(con, [str(logs)])
        con.execute("INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail) VALUES ('glm-5-0', 'glm-5', 'wedged', ?, ?, 'flat counter, 3 running')",
                    list(WEDGED_WINDOW))
        refresh_turns(con)
    finally:
        con.close()
    return path
