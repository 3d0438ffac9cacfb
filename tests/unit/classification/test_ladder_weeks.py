"""A week in which the ladder ran: the logged class wins, the sizing splits, before vs after.

The records are what a proxy using analyzer.online writes (``run_ladder`` and
``log_fields`` against a scripted upstream), beside legacy records of the days
before it shipped, ingested into a real DuckDB file.
"""

from __future__ import annotations

import json

import pytest

from analyzer.store.db import connect
from analyzer.ingestion.logs import ingest
from analyzer.online import log_fields, run_ladder
from analyzer.outputs.summary import build_summary
from analyzer.classification.turns import refresh_turns
from tests.support.records import (
    DONE_ANSWER,
    NAKED_500,
    TOOL_PAYLOAD,
    TOOL_RESULT,
    at,
    request,
    response_error,
    response_ok,
    write_jsonl,
)
from tests.support.cli import analyze

DAY = 24 * 60  # minutes


def _send(recover: bool):
    """A naked 500 for the original call; with ``recover``, every rung answers."""
    def send(payload):
        if "tools" in payload and payload.get("tool_choice") != "none":
            return 500, {"content-length": "0"}, b""
        return (200, {}, DONE_ANSWER) if recover else (500, {"content-length": "0"}, b"")
    return send


def _session(name: str, minute: float, last: dict, *, model: str = "glm-5", first: dict | None = None) -> list[dict]:
    """A two-turn tool session: an ok turn (with the log fields ``first``), then ``last``
    (a response record for request id ...-2)."""
    rid1, rid2 = f"{name}-1", f"{name}-2"
    return [
        request(rid1, at(minute), session=name, model=model, tool_results=TOOL_RESULT),
        response_ok(rid1, at(minute + 0.1), content="fine", session=name, model=model, extra=first),
        request(rid2, at(minute + 1), session=name, model=model, tool_results=TOOL_RESULT),
        {**last, "request_id": rid2, "session_id": name, "model": model},
    ]


def _week() -> list[dict]:
    recs: list[dict] = []
    # Before the ladder shipped (no log fields): 10 tool sessions, 4 lost to a naked 500.
    for i in range(10):
        ts = at(i * 10 + 1.1)
        last = response_error("x", ts, NAKED_500) if i < 4 else response_ok("x", ts, content="ok")
        recs += _session(f"B{i}", i * 10, last)
    # After: 10 tool sessions logged by a proxy running the ladder.
    ok = run_ladder(TOOL_PAYLOAD, lambda p: (200, {}, DONE_ANSWER))  # a healthy answer: one call
    ok_fields = log_fields(TOOL_PAYLOAD, ok.status, ok.body, ok)
    for i in range(10):
        minute = DAY + i * 10
        ts = at(minute + 1.1)
        if i == 0:  # the ladder recovered: saved
            lad = run_ladder(TOOL_PAYLOAD, _send(True))
            last = response_ok("x", ts, content="Done.", extra=log_fields(TOOL_PAYLOAD, lad.status, lad.body, lad))
        elif i == 1:  # every rung failed: lost after the ladder
            lad = run_ladder(TOOL_PAYLOAD, _send(False))
            last = response_error("x", ts, NAKED_500, extra=log_fields(TOOL_PAYLOAD, lad.status, lad.body, lad))
        elif i == 2:
            # The proxy saw a read timeout after 3 s and logged `timeout`; the text alone
            # reads as a connect timeout (short). The logged class wins.
            fields = log_fields(TOOL_PAYLOAD, None, None, error=TimeoutError("read timed out"), latency_ms=3028)
            assert fields["incident_class"] == "timeout"
            last = response_error("x", ts, "Request timed out after 3028ms", extra=fields)
        elif i == 3:  # a class this analyzer does not know: the derived class is kept
            last = response_ok("x", ts, content="ok", extra={**ok_fields, "incident_class": "banana"})
        else:
            last = response_ok("x", ts, content="ok", extra=ok_fields)
        recs += _session(f"A{i}", minute, last, first=ok_fields)
    # A model the proxy's gate left the ladder off for: neither before nor after.
    off = {**ok_fields, "ladder_armed": False}
    recs += _session("Q0", DAY + 200, response_ok("x", at(DAY + 201.1), content="ok", extra=off), model="qwen3",
                     first=off)
    # A session whose only log fields are a failed call's, with no ladder result to say
    # whether the ladder was armed: the records do not tell its era.
    cancelled = log_fields(TOOL_PAYLOAD, None, None, error="Client disconnected/cancelled after 900ms")
    assert cancelled["ladder_armed"] is None
    recs += _session("U0", DAY + 300, response_error("x", at(DAY + 301.1), "Client disconnected/cancelled after 900ms",
                                                     extra=cancelled))
    return recs


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ladder-weeks")
    path = tmp / "w.duckdb"
    logs = write_jsonl(tmp / "week.jsonl", _week())
    con = connect(path)
    ingest(con, [str(logs)])
    refresh_turns(con)
    con.close()
    return path, logs


@pytest.fixture(scope="module")
def con(db):
    c = connect(db[0])
    yield c
    c.close()


def test_the_logged_class_wins_and_disagreements_are_counted(con):
    rows = {r[0]: r[1:] for r in con.execute(
        "SELECT session_id, incident_class, rule_class, class_source, class_disagrees FROM turns "
        "WHERE turn_index = 2 AND session_id IN ('A2', 'A3', 'A4', 'B0')").fetchall()}
    assert rows["A2"] == ("timeout", "connect-timeout", "logged", True)
    # an unknown logged class is not trusted: the rule's class, and counted
    assert rows["A3"] == ("ok", "ok", "derived", True)
    assert rows["A4"] == ("ok", "ok", "logged", False)
    assert rows["B0"] == ("tool-history-5xx", "tool-history-5xx", "derived", False)

    logged = build_summary(con)["logged_classes"]
    assert logged["disagreements"] == 2
    assert {(d["logged_class"], d["derived_class"], d["turns"]) for d in logged["pairs"]} == {
        ("timeout", "connect-timeout", 1), ("banana", "ok", 1)}
    # both turns of A0-A9 but A3's last (an unknown class), both of Q0, and U0's last
    assert logged["turns"] == 10 + 9 + 2 + 1


def test_sizing_splits_without_after_and_saved(con):
    s = build_summary(con)["sizing"]
    assert s["sessions_lost"] == 4 + 1 + 1 + 1  # B0-B3, A1 (exhausted), A2 (timeout), U0 (cancelled)
    assert s["sessions_lost_without_ladder"] == 4
    assert s["sessions_lost_after_ladder"] == 1
    assert s["sessions_saved_by_ladder"] == 1
    # the projection covers the four lost without a ladder, never the exhausted one
    assert "of 4 GLM tool sessions lost to ladder-eligible failures without it" in s["conclusion"]
    assert "The ladder saved 1 GLM tool session and 1 was lost after every rung" in s["conclusion"]


def test_before_and_after_by_what_the_records_say(con):
    eras = dict(con.execute("SELECT session_id, ladder_era FROM sessions").fetchall())
    assert {eras[f"B{i}"] for i in range(10)} == {"without-ladder"}
    assert {eras[f"A{i}"] for i in range(10)} == {"with-ladder"}
    assert eras["Q0"] == "ladder-off"
    assert eras["U0"] == "ladder-unknown"  # left out of both eras

    ba = build_summary(con)["sizing"]["before_after"]
    assert (ba["tool_sessions_without"], ba["tool_sessions_with"]) == (10, 10)
    rows = {r["lost_class"]: r for r in ba["classes"]}
    assert list(rows)[0] == "all"
    allr = rows["all"]
    assert (allr["lost_without"], allr["per_100_without"], allr["lost_with"], allr["per_100_with"]) == (4, 40.0, 2, 20.0)
    assert allr["change_per_100"] == -20.0
    # Wilson 95% for 4/10 is [16.82, 68.73]; Newcombe's interval for the change holds 0
    assert (allr["per_100_without_low"], allr["per_100_without_high"]) == pytest.approx((16.82, 68.73), abs=0.01)
    assert allr["change_low"] < -20.0 < 0.0 < allr["change_high"]
    assert (rows["tool-history-5xx"]["lost_without"], rows["tool-history-5xx"]["lost_with"]) == (4, 1)
    assert (rows["timeout"]["lost_without"], rows["timeout"]["lost_with"]) == (0, 1)


def test_json_output_carries_the_split(db, tmp_path):
    _path, logs = db
    proc = analyze(logs, "--db", tmp_path / "j.duckdb", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["sizing"]["sessions_lost_after_ladder"] == 1
    assert out["sizing"]["before_after"]["classes"][0]["lost_class"] == "all"
    assert out["logged_classes"]["disagreements"] == 2


def test_prompt_growth_per_thinking_mode(tmp_path, ingested):
    # Thinking on: each turn's prompt is 1,000 tokens more; off: 200 more.
    recs = []
    for mode, step in ((True, 1000), (False, 200)):
        for s in range(3):
            name = f"{'on' if mode else 'off'}{s}"
            for k in range(4):
                rid = f"{name}-{k}"
                m = (0 if mode else 500) + s * 30 + k
                recs.append(request(rid, at(m), session=name, tool_results=TOOL_RESULT, enable_thinking=mode))
                recs.append(response_ok(rid, at(m + 0.1), content="ok", session=name,
                                        prompt_tokens=5000 + k * step))
    con = ingested(recs)
    from analyzer.store.asking import ask

    rows = ask(con, "prompt_growth", {})
    per_mode = {r[0]: (r[5], r[6]) for r in rows}
    assert per_mode == {"on": (1000.0, 12), "off": (200.0, 12)}
    assert [(r[1], r[3]) for r in rows if r[0] == "on"] == [(1, 5000), (2, 6000), (3, 7000), (4, 8000)]
    con.close()


def test_a_refused_rung_is_not_counted_as_reached(tmp_path, ingested):
    # GLM-5.3-like: the upstream refuses tool_choice "none" with a 400; drop_tools recovers.
    def send(payload):
        if payload.get("tool_choice") == "none":
            return 400, {}, b'{"error": {"message": "tool_choice none is not supported"}}'
        if "tools" in payload:
            return 500, {"content-length": "0"}, b""
        return 200, {}, DONE_ANSWER

    recs = []
    for i in range(3):
        lad = run_ladder(TOOL_PAYLOAD, send)
        assert lad.recovered_at == "drop_tools" and [a.refused for a in lad.attempts] == [False, True, False]
        extra = log_fields(TOOL_PAYLOAD, lad.status, lad.body, lad)
        rid = f"r{i}"
        recs += [request(rid, at(i * 10), session=f"R{i}", tool_results=TOOL_RESULT),
                 response_ok(rid, at(i * 10 + 0.1), content="Done.", session=f"R{i}", extra=extra)]
    con = ingested(recs)
    rungs = {r["rung"]: r for r in build_summary(con)["sizing"]["ladder_rungs"]}
    assert (rungs["tool_choice_none"]["reached"], rungs["tool_choice_none"]["refused"]) == (0, 3)
    assert rungs["tool_choice_none"]["conditional_rate"] is None
    assert (rungs["drop_tools"]["reached"], rungs["drop_tools"]["recovered"], rungs["drop_tools"]["refused"]) == (3, 3, 0)
    assert con.execute("SELECT count(*) FROM ladder_attempts WHERE refused").fetchall()[0][0] == 3
    con.close()
