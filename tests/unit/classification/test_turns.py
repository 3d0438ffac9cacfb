"""Every class from log records, legacy and new-format, through the real views."""

from __future__ import annotations

import json

import pytest

from analyzer.store.db import connect
from analyzer.ingestion.logs import ingest
from analyzer.online import log_fields, run_ladder
from analyzer.classification.turns import refresh_turns
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
from tests.support.fresh_db import fresh_connection  # an empty database, copied: 0.02 s, not 0.27 s

RATE_LIMIT = 'Provider returned 429: {"error": {"message": "Rate limit exceeded", "code": 429}}'


def _turn(rid, minute, resp, *, req_kw=None, **resp_kw):
    req = request(rid, at(minute), **(req_kw or {}))
    if resp is None:
        return [req]
    return [req, resp(rid, at(minute + 0.05), **resp_kw)]


# (request_id, records, expected class, expected evidence)
LEGACY_CASES = [
    ("00000001", _turn("00000001", 0, response_ok, content="Here you go."), "ok", "logged"),
    ("00000002", _turn("00000002", 1, response_ok, tool_calls=TOOL_CALL), "ok", "logged"),
    ("00000003", _turn("00000003", 2, response_error, req_kw={"tool_results": TOOL_RESULT}, error=NAKED_500,
                       headers=NAKED_500_HEADERS), "tool-history-5xx", "inferred"),
    ("00000004", _turn("00000004", 3, response_error, req_kw={"session": "s-fresh"}, error=NAKED_500,
                       session="s-fresh"), "other-5xx", "inferred"),
    ("00000005", _turn("00000005", 4, response_ok, req_kw={"tool_results": TOOL_RESULT}, completion_tokens=1),
     "empty-200-stop", "inferred"),
    # A round cap with a trace at the proxy's 4,000-character cap: the reasoning ate the budget.
    ("00000006", _turn("00000006", 5, response_ok, req_kw={"enable_thinking": True},
                       reasoning=("Let me think about the schema again. " * 120)[:4000], completion_tokens=2048),
     "length-with-no-content", "inferred"),
    ("00000007", _turn("00000007", 6, response_error, error="Request timed out after 1200000ms"), "timeout", "logged"),
    ("00000008", _turn("00000008", 7, response_error, error="ConnectError: All connection attempts failed"),
     "connection-error", "logged"),
    ("00000009", _turn("00000009", 8, response_error, error=RATE_LIMIT), "rate-limited", "inferred"),
    ("0000000a", _turn("0000000a", 9, response_error, error='Provider returned 401: {"error": "bad key"}'),
     "client-error", "inferred"),
    ("0000000b", _turn("0000000b", 10, response_error, req_kw={"provider": "unrouted", "model": "gpt-9"},
                       error="Unknown model 'gpt-9': no provider configured", provider="unrouted", model="gpt-9"),
     "client-error", "logged"),
    ("0000000c", _turn("0000000c", 11, response_error, req_kw={"provider": "streaming-unsupported"},
                       error="Streaming is not supported by this proxy. Set stream: false.",
                       provider="streaming-unsupported"), "client-error", "logged"),
    ("0000000d", _turn("0000000d", 12, response_error,
                       error="Client disconnected/cancelled after 30512ms (upstream still pending)"),
     "client-cancelled", "logged"),
    ("0000000e", _turn("0000000e", 13, None), "unanswered", "logged"),
    ("0000000f", _turn("0000000f", 14, response_error, error="OPENROUTER API key not configured on server"),
     "other-5xx", "inferred"),
    # GLM as it fails today, in the records the proxy writes without log fields.
    # The glm45 parser filed the answer as reasoning (sgl-project/sglang#37645).
    ("00000010", _turn("00000010", 15, response_ok, req_kw={"tool_results": TOOL_RESULT},
                       reasoning="Texas holds 61,883 protected acres near the listed tracts.", completion_tokens=37),
     "answer-in-reasoning", "inferred"),
    # Usage that lies (mistral-vibe#1116): 0 completion tokens beside the text.
    ("00000011", _turn("00000011", 16, response_ok, reasoning="Weighing the GAP codes. " * 90, completion_tokens=0),
     "answer-in-reasoning", "inferred"),
    # A round cap whose whole (short) trace was logged: the count is no length evidence.
    ("00000012", _turn("00000012", 17, response_ok, reasoning="The answer is 42 acres.", completion_tokens=512),
     "answer-in-reasoning", "inferred"),
    # Thinking off on a template without an off switch (vllm-project/vllm#54744).
    ("00000013", _turn("00000013", 18, response_ok, req_kw={"enable_thinking": False},
                       content="The user wants totals.</think>The total is 61,883 acres."),
     "reasoning-leaked", "logged"),
    ("00000014", _turn("00000014", 19, response_ok, content="\n<think>Plan the query.</think>\nDone."),
     "reasoning-leaked", "logged"),
    # Tags quoted inside an answer are not a leak.
    ("00000015", _turn("00000015", 20, response_ok, content="Wrap it as <think>...</think> in the prompt."),
     "ok", "logged"),
]


def _new_format(status, body_doc, payload_tools=True, tool_history=True, max_tokens=4096):
    """A response record's extra fields as analyzer.online.log_fields writes them."""
    messages = [{"role": "user", "content": "q"}]
    if tool_history:
        messages += [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                      "function": {"name": "query", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "rows"}]
    payload = {"model": "glm-5", "messages": messages, "max_tokens": max_tokens}
    if payload_tools:
        payload["tools"] = [{"type": "function", "function": {"name": "query"}}]
    return log_fields(payload, status, json.dumps(body_doc).encode() if body_doc else b"")


def _choice(content="", tool_calls=None, finish="stop", tokens=10, reasoning=None):
    msg = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    return {"choices": [{"message": msg, "finish_reason": finish}], "usage": {"completion_tokens": tokens}}


OPENAI_CALL = [{"id": "c9", "type": "function", "function": {"name": "query", "arguments": "{}"}}]


def _repaired_fields():
    """log_fields of an answer whose leaked think block the ladder split out."""
    payload = {"model": "glm-5", "messages": [{"role": "user", "content": "2+2?"}]}
    leaked = json.dumps(_choice("Simple.</think>4")).encode()
    result = run_ladder(payload, lambda p: (200, {}, leaked))
    assert result.reasoning_repaired
    return log_fields(payload, result.status, result.body, result)

NEW_CASES = [
    ("10000001", _turn("10000001", 30, response_ok, content="fine", extra=_new_format(200, _choice("fine"))), "ok", "logged"),
    ("10000002", _turn("10000002", 31, response_error, error=NAKED_500, extra=_new_format(500, None)),
     "tool-history-5xx", "logged"),
    ("10000003", _turn("10000003", 32, response_ok, extra=_new_format(200, _choice(""))), "empty-200-stop", "logged"),
    ("10000004", _turn("10000004", 33, response_ok, reasoning="hmm",
                       extra=_new_format(200, _choice("", finish="length", tokens=4096))),
     "length-with-no-content", "logged"),
    ("10000005", _turn("10000005", 34, response_ok, tool_calls=TOOL_CALL,
                       extra=_new_format(200, _choice("Let me look.", OPENAI_CALL, finish="stop"))),
     "tool-call-stop-mismatch", "logged"),
    ("10000006", _turn("10000006", 35, response_error, error=NAKED_500,
                       extra=_new_format(500, None, tool_history=False)), "other-5xx", "logged"),
    ("10000007", _turn("10000007", 36, response_ok, reasoning="61,883 acres.",
                       extra=_new_format(200, _choice("", reasoning="61,883 acres.", tokens=0))),
     "answer-in-reasoning", "logged"),
    # The proxy split the leaked block out (the record holds the repaired answer).
    ("10000008", _turn("10000008", 37, response_ok, content="4", reasoning="Simple.",
                       extra=_repaired_fields()), "reasoning-leaked", "logged"),
]


@pytest.fixture(scope="module")
def classified(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("turns")
    records = [r for _, recs, _, _ in LEGACY_CASES + NEW_CASES for r in recs]
    db = tmp / "a.duckdb"
    con = connect(db)
    ingest(con, [str(write_jsonl(tmp / "week.jsonl", records))])
    refresh_turns(con)
    rows = {r[0]: r[1:] for r in con.execute("SELECT request_id, incident_class, evidence FROM turns").fetchall()}
    yield con, rows
    con.close()


@pytest.mark.parametrize("rid,records,expected,evidence", LEGACY_CASES + NEW_CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in LEGACY_CASES + NEW_CASES])
def test_each_class(classified, rid, records, expected, evidence):
    _, rows = classified
    assert rows[rid] == (expected, evidence)


def test_tool_history_from_earlier_turns_of_the_session(tmp_path, ingested):
    """A legacy 5xx whose own turn carries no tool results, after a tool call earlier in the session."""
    recs = (_turn("20000001", 0, response_ok, req_kw={"session": "s-x"}, tool_calls=TOOL_CALL, session="s-x")
            + _turn("20000002", 1, response_ok, req_kw={"session": "s-x", "tool_results": TOOL_RESULT},
                    content="Here.", session="s-x")
            + _turn("20000003", 2, response_error, req_kw={"session": "s-x"}, error=NAKED_500, session="s-x")
            # the same shape in a session with no tool use, and with no session id
            + _turn("20000004", 3, response_error, req_kw={"session": "s-y"}, error=NAKED_500, session="s-y")
            + _turn("20000005", 4, response_error, req_kw={"session": None}, error=NAKED_500, session=None))
    con = ingested(recs)
    got = dict((r[0], r[1:]) for r in con.execute(
        "SELECT request_id, incident_class, tool_history_source, evidence, ladder_trigger FROM turns").fetchall())
    assert got["20000003"] == ("tool-history-5xx", "earlier_turns", "inferred", "tool-history-5xx")
    assert got["20000004"] == ("other-5xx", "none", "inferred", None)
    assert got["20000005"] == ("other-5xx", "none", "inferred", None)
    con.close()


def test_an_error_is_never_ok_when_request_and_response_name_different_providers(ingested):
    """The error's kind is read per (response provider, text): a request record naming
    another provider (a renamed route, a hostile or mixed log) must not turn it into `ok`."""
    con = ingested([request("30000001", at(0), provider="nrp"),
                    response_error("30000001", at(0), "Streaming is not supported by this proxy",
                                   provider="streaming-unsupported", latency_ms=0),
                    request("30000002", at(5), provider="nrp"),
                    response_error("30000002", at(6), "ConnectError: All connection attempts failed",
                                   provider="nrp-b", latency_ms=3)])
    got = dict(con.execute("SELECT request_id, incident_class FROM turns").fetchall())
    assert got == {"30000001": "client-error", "30000002": "connection-error"}
    con.close()


def test_ladder_records_written_by_the_real_module(tmp_path, ingested):
    """Records carrying log_fields from a real run_ladder: classified by the original attempt."""
    payload = {"model": "glm-5", "max_tokens": 1024, "tools": [{"type": "function", "function": {"name": "q"}}],
               "messages": [{"role": "user", "content": "q"},
                            {"role": "assistant", "content": None, "tool_calls": OPENAI_CALL},
                            {"role": "tool", "tool_call_id": "c9", "content": "rows"}]}

    def send(p):
        if "tools" in p:
            return 500, {}, b""
        return 200, {}, json.dumps(_choice("Final answer.")).encode()

    result = run_ladder(payload, send)
    extra = log_fields(payload, result.status, result.body, result)
    recs = [request("30000001", at(0), tool_results=TOOL_RESULT),
            response_ok("30000001", at(0.1), content="Final answer.", extra=extra)]
    con = ingested(recs)
    row = con.execute("SELECT incident_class, evidence, ladder_trigger, ladder_outcome, recovered_at, recovered_class, status "
                      "FROM turns").fetchall()
    assert row == [("tool-history-5xx", "logged", "tool-history-5xx", "recovered", "drop_tools", "ok", 500)]
    con.close()


def test_window_classes_override_upstream_failures_only(classified):
    con, _ = classified
    con.execute("DELETE FROM pod_windows")
    con.execute("INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail) VALUES ('glm-5-0', 'glm-5', 'wedged', ?, ?, 'test')", [at(1.5), at(3.5)])
    con.execute("INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail) VALUES ('glm-5-0', 'glm-5', 'down', ?, ?, 'test')", [at(6.5), at(7.5)])
    refresh_turns(con)  # new windows: the turns table is rebuilt
    got = dict((r[0], r[1:]) for r in con.execute(
        "SELECT request_id, incident_class, ladder_trigger FROM turns WHERE request_id IN "
        "('00000002', '00000003', '00000004', '00000008')").fetchall())
    con.execute("DELETE FROM pod_windows")
    refresh_turns(con)
    assert got["00000002"] == ("ok", None)  # a success inside a wedged window stays ok
    assert got["00000003"] == ("wedged-pod", None)  # not ladder-eligible: no retry fixes a wedged pod
    assert got["00000004"] == ("wedged-pod", None)
    assert got["00000008"] == ("pod-down", None)


def test_incidents_and_sessions_views(classified):
    con, rows = classified
    n_incidents = con.execute("SELECT count(*) FROM incidents").fetchall()[0][0]
    assert n_incidents == sum(1 for c, _ in rows.values() if c != "ok")
    s = con.execute("SELECT turns, ended_on_failure FROM sessions WHERE session_id = 's-fresh'").fetchall()
    assert s == [(1, True)]


def test_is_current_tells_when_the_turns_table_is_stale(tmp_path):
    from analyzer.classification.turns import is_current

    con = fresh_connection(tmp_path / "a.duckdb")
    ingest(con, [str(write_jsonl(tmp_path / "a.jsonl", _turn("40000001", 0, response_ok, content="hi")))])
    assert not is_current(con)
    refresh_turns(con)
    assert is_current(con)
    con.execute("INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail) VALUES ('p', 'glm-5', 'wedged', ?, ?, 'test')", [at(0), at(1)])
    assert not is_current(con)
    con.close()


def test_window_flags_match_their_definition_across_days(tmp_path):
    """in_wedged_window / in_down_window: some window of the kind, of the turn's
    metric model, holds the turn's time (bounds included), whichever day it falls on.

    The flags are looked up per model and day; windows crossing midnight, lasting
    days, overlapping each other, or of another model must give what the plain
    definition (an EXISTS over pod_windows) gives.
    """
    con = fresh_connection(tmp_path / "w.duckdb")
    minutes = [-1, 0, 0.5, 599.5, 600, 600.5, 601, 1439.9, 1440, 1440.1, 2879, 4320.2, 5000]
    records = []
    for i, m in enumerate(minutes):  # T0 is 14:00: minute 600 is midnight
        rid = f"{0x70000000 + i:08x}"
        records += [request(rid, at(m)), response_error(rid, at(m), NAKED_500, headers=NAKED_500_HEADERS)]
    records += [request("7fffffff", at(601), model="other"),
                response_error("7fffffff", at(601), NAKED_500, model="other")]
    ingest(con, [str(write_jsonl(tmp_path / "w.jsonl", records))])
    windows = [("wedged", 0, 600),          # ends at midnight, both bounds held
               ("wedged", 599.5, 601),      # crosses midnight, overlaps the one before
               ("down", 600.5, 2879),       # two days and more
               ("down", 4320.1, 4320.3)]    # a moment on a later day
    for kind, a, b in windows:
        con.execute("INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail) VALUES ('glm-5-0', 'glm-5', ?, ?, ?, 'test')", [kind, at(a), at(b)])
    refresh_turns(con)
    got = con.execute("""
        SELECT request_id, in_wedged_window, in_down_window,
               EXISTS (SELECT 1 FROM pod_windows w WHERE w.kind = 'wedged' AND w.model_name = t.metric_model
                       AND coalesce(t.response_ts, t.ts) BETWEEN w.start_ts AND w.end_ts),
               EXISTS (SELECT 1 FROM pod_windows w WHERE w.kind = 'down' AND w.model_name = t.metric_model
                       AND coalesce(t.response_ts, t.ts) BETWEEN w.start_ts AND w.end_ts)
        FROM turns t ORDER BY request_id""").fetchall()
    con.close()
    assert len(got) == len(minutes) + 1
    assert [g[1:3] for g in got] == [g[3:5] for g in got]
    flags = {g[0]: g[1:3] for g in got}
    assert flags["70000000"] == (False, False)      # a minute before the first window
    assert flags["70000001"] == (True, False)       # on its start
    assert flags["70000004"] == (True, False)       # midnight: the end of one, inside the other
    assert flags["70000006"] == (True, True)        # past midnight, in both kinds
    assert flags["70000009"] == (False, True)       # the next day, inside the long window
    assert flags["7000000a"] == (False, True)       # on the long window's last minute
    assert flags["7000000b"] == (False, True)       # the moment window on a later day
    assert flags["7000000c"] == (False, False)
    assert flags["7fffffff"] == (False, False)      # another model's turn at the same time
