"""The closed loop, end to end over real HTTP on 127.0.0.1.

client (multi-turn tool-calling sessions, httpx)
  -> the ladder proxy (tests/support/proxy.py: FastAPI + httpx + arun_ladder + log_fields)
  -> the fault-injecting upstream (tools/faulty_upstream.py), answering from a script
then the analyzer ingests the proxy's JSONL log, and its turns, `ladder_attempts`,
`ladder_summary` and the sizing block must say exactly what the script made the
upstream do.

The expectation is computed from the script alone (SESSIONS and the client's
rules below), never from the ladder or the analyzer: which turns carry tool
history, which trigger the ladder, which rung each reaches and recovers at, which
sessions the client abandons, and the tokens each rung's answers cost. The rung
order is the upstream's own (it recognises rungs from a payload's shape).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

import httpx
import pytest

from analyzer.store.db import connect
from analyzer.ingestion.logs import ingest
from analyzer.online import DEFAULT_RUNGS
from analyzer.outputs.summary import build_summary
from analyzer.classification.turns import refresh_turns
from tests.support.proxy import LadderProxy
from tools.faulty_upstream import (
    RUNG_ORDER,
    FaultyUpstream,
    Reply,
    empty_200_stop,
    naked_500,
    ok,
    payload_rung,
    rate_limited,
    tool_call_answer,
)

MODEL = "glm-5"
ORIGIN = "https://tpl.nrp-nautilus.io"
SYSTEM = "You are a geospatial data agent embedded in a web map. Use the tools to query datasets."
TOOLS = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
         for n in ("query", "show_layer", "fly_to")]
# The ladder rungs as the upstream recognises them (default ladder: no flatten).
LADDER = list(RUNG_ORDER[1:4])

# What the upstream answers, per reply kind: (prompt_tokens + completion_tokens) of the body.
OK_TOKENS = 1200 + 42  # ok(): tools.faulty_upstream.completion defaults
EMPTY_TOKENS = 1200 + 1  # empty_200_stop()

# Turn specs, per session in order: (kind, rung). Kinds:
#   tool     a healthy answer calling a tool (the client runs it: tool history from then on)
#   answer   a healthy text answer (the client asks a follow-up)
#   500      a naked 500 until the payload reaches `rung` (None: every rung fails)
#   empty    an empty 200 (finish_reason stop) until `rung` (None: every rung)
#   429      rate limited
T, A = ("tool", None), ("answer", None)


def F(rung):  # noqa: N802 - a naked 500 until `rung`
    return ("500", rung)


def E(rung):  # noqa: N802 - an empty 200 until `rung`
    return ("empty", rung)


SESSIONS: dict[str, list[tuple[str, str | None]]] = {
    "S01": [T, A],
    "S02": [T, T, A],
    "S03": [T, F("tool_choice_none"), A],
    "S04": [T, F("tool_choice_none")],
    "S05": [T, F("drop_tools"), A],
    "S06": [T, T, F("drop_tools")],
    "S07": [T, F("final_answer")],
    "S08": [T, T, F("final_answer"), A],
    "S09": [T, F(None)],
    "S10": [T, T, F(None)],
    "S11": [T, E("tool_choice_none"), A],
    "S12": [T, E("drop_tools")],
    "S13": [T, E(None)],
    "S14": [F("tool_choice_none")],  # 500 without tool history: other-5xx, no ladder
    "S15": [E(None)],  # empty 200 without tool history: not a trigger
    "S16": [T, ("429", None)],  # rate limited: not a trigger
    "S17": [A, A],  # a chat session: no tools used
    "S18": [T, F("tool_choice_none"), T, F("drop_tools"), A],  # two ladders in one session
    "S19": [T, T, T, F(None)],
    "S20": [T, F("final_answer"), T, E("final_answer")],
}


# ---------------------------------------------------------------------------
# The upstream's script


def _session_of(payload: dict) -> str:
    for m in payload.get("messages") or []:
        found = re.search(r"\[session:(S\d+)\]", str(m.get("content") or ""))
        if found:
            return found.group(1)
    raise AssertionError("payload without a session tag")


def script(payload: dict) -> Reply:
    """Answer by (session, turn): the turn is the number of assistant messages so far."""
    sid = _session_of(payload)
    turn = sum(1 for m in payload["messages"] if m.get("role") == "assistant")
    kind, until = SESSIONS[sid][turn]
    if kind == "tool":
        return tool_call_answer("query", '{"sql": "SELECT 1"}')
    if kind == "answer":
        return ok(f"Answer {sid}/{turn}.")
    if kind == "429":
        return rate_limited()
    if until is not None and RUNG_ORDER.index(payload_rung(payload)) >= RUNG_ORDER.index(until):
        return ok(f"Recovered {sid}/{turn}.")
    return naked_500() if kind == "500" else empty_200_stop()


# ---------------------------------------------------------------------------
# The client: geo-agent's loop, reduced


def run_session(client: httpx.Client, url: str, sid: str) -> int:
    """Play one session; return how many requests it sent (it stops at a failure)."""
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"[session:{sid}] Which parks in Marin are protected?"}]
    for i in range(len(SESSIONS[sid])):
        r = client.post(url, json={"model": MODEL, "messages": messages, "tools": TOOLS, "tool_choice": "auto",
                                   "enable_thinking": False, "user": sid},
                        headers={"x-client": "geo-agent/v3.13.1", "origin": ORIGIN})
        if r.status_code != 200:
            return i + 1
        msg = r.json()["choices"][0]["message"]
        if msg.get("tool_calls"):
            call = msg["tool_calls"][0]
            messages = messages + [{"role": "assistant", "content": msg.get("content") or "", "tool_calls": msg["tool_calls"]},
                                   {"role": "tool", "tool_call_id": call["id"], "content": "| name | acres |\n| Marin | 1 |"}]
        elif msg.get("content"):
            messages = messages + [{"role": "assistant", "content": msg["content"]},
                                   {"role": "user", "content": f"And how does that compare with Sonoma? ({i})"}]
        else:
            return i + 1  # an empty answer: the agent gives up
    return len(SESSIONS[sid])


# ---------------------------------------------------------------------------
# The expectation, from the script alone


@dataclass
class Expected:
    session: str
    index: int  # 1-based turn_index
    kind: str
    incident_class: str
    trigger: str | None = None
    rungs: list[str] = field(default_factory=list)  # rungs the ladder tries, in order
    recovered_at: str | None = None
    client_ok: bool = True
    tool_calls: bool = False

    @property
    def upstream_calls(self) -> list[str]:
        return ["original"] + self.rungs


def expected_turns() -> list[Expected]:
    out = []
    for sid, specs in SESSIONS.items():
        history = False
        for i, (kind, until) in enumerate(specs):
            e = Expected(sid, i + 1, kind, "ok")
            if kind == "tool":
                e.tool_calls = True
            elif kind == "429":
                e.incident_class, e.client_ok = "rate-limited", False
            elif kind in ("500", "empty"):
                e.incident_class = ("tool-history-5xx" if history else "other-5xx") if kind == "500" else "empty-200-stop"
                if history:  # the ladder's triggers: 5xx or empty 200 with tool history
                    e.trigger = e.incident_class
                    e.rungs = LADDER[: LADDER.index(until) + 1] if until else list(LADDER)
                    e.recovered_at = until
                e.client_ok = e.recovered_at is not None
            out.append(e)
            if not e.client_ok:
                assert i == len(specs) - 1, f"{sid}: the client stops at turn {i + 1}; drop the turns after it"
                break
            history = history or e.tool_calls
    return out


EXPECTED = expected_turns()


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval, written out independently of the SQL macros."""
    z = 1.959963984540054
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - half) / (1 + z * z / n)), min(1.0, (centre + half) / (1 + z * z / n))


def rung_tokens(e: Expected, rung: str) -> int:
    """Tokens the upstream's answer to this rung carried (0 for a naked 500)."""
    if rung == e.recovered_at:
        return OK_TOKENS
    return EMPTY_TOKENS if e.kind == "empty" else 0


def expected_rungs() -> dict[tuple[str, str], dict]:
    """Per (trigger, rung): ladders started, reached, recovered, cumulative, tokens."""
    ladders = Counter(e.trigger for e in EXPECTED if e.trigger)
    out: dict[tuple[str, str], dict] = {}
    for trigger in ladders:
        so_far = 0
        for rung in LADDER:
            reached = [e for e in EXPECTED if e.trigger == trigger and rung in e.rungs]
            if not reached:
                continue
            recovered = sum(1 for e in reached if e.recovered_at == rung)
            so_far += recovered
            out[(trigger, rung)] = {
                "ladders": ladders[trigger], "reached": len(reached), "recovered": recovered,
                "recovered_so_far": so_far, "tokens": sum(rung_tokens(e, rung) for e in reached)}
    return out


# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """Serve the scripted batch through the proxy, then ingest the proxy's log."""
    tmp = tmp_path_factory.mktemp("closed-loop")
    with FaultyUpstream(script) as upstream, LadderProxy(upstream.chat_url, tmp / "proxy.jsonl") as proxy:
        with httpx.Client(timeout=30) as client:
            sent = {sid: run_session(client, proxy.chat_url, sid) for sid in SESSIONS}
        received = upstream.received
        assert not upstream.script_errors, upstream.script_errors
        records = proxy.records()
    con = connect(tmp / "a.duckdb")
    ingest(con, [str(proxy.log_path)])
    refresh_turns(con)
    yield {"con": con, "sent": sent, "received": received, "records": records, "log": proxy.log_path, "tmp": tmp}
    con.close()


def test_the_batch_is_the_size_intended():
    assert list(DEFAULT_RUNGS) == LADDER  # the ladder under test runs the upstream's rung order
    assert 30 <= len(EXPECTED) <= 60
    assert sum(1 for e in EXPECTED if e.trigger) >= 12
    assert {e.recovered_at for e in EXPECTED if e.trigger} == {*LADDER, None}


def test_the_client_sent_and_the_upstream_received_what_the_script_implies(loop):
    assert loop["sent"] == dict(Counter(e.session for e in EXPECTED))
    per_turn: dict[tuple[str, int], list[str]] = {}
    for r in loop["received"]:
        turn = sum(1 for m in r.payload["messages"] if m.get("role") == "assistant") + 1
        per_turn.setdefault((_session_of(r.payload), turn), []).append(r.rung)
    assert per_turn == {(e.session, e.index): e.upstream_calls for e in EXPECTED}
    assert len([r for r in loop["records"] if r["type"] == "request"]) == len(EXPECTED)


def test_every_turn_is_classified_as_scripted(loop):
    rows = loop["con"].execute(
        "SELECT session_id, turn_index, incident_class, ladder_trigger, ladder_outcome, recovered_at, "
        "tool_history, has_log_fields FROM turns ORDER BY session_id, turn_index").fetchall()
    want = []
    for e in sorted(EXPECTED, key=lambda e: (e.session, e.index)):
        outcome = None if not e.trigger else ("recovered" if e.recovered_at else "exhausted")
        want.append((e.session, e.index, e.incident_class, e.trigger, outcome, e.recovered_at,
                     e.index > 1 and any(x.tool_calls for x in EXPECTED if x.session == e.session and x.index < e.index),
                     True))
    assert rows == want


def test_ladder_attempts_hold_every_call_the_ladder_made(loop):
    rows = loop["con"].execute(
        "SELECT session_id, attempt_no, rung, status, incident_class, source FROM ladder_attempts "
        "ORDER BY session_id, ts, attempt_no").fetchall()
    want = []
    for e in sorted((e for e in EXPECTED if e.trigger), key=lambda e: (e.session, e.index)):
        fail_status = 500 if e.kind == "500" else 200
        for n, rung in enumerate(e.upstream_calls, 1):
            ok_ = rung == e.recovered_at
            want.append((e.session, n, rung, 200 if ok_ else fail_status, "ok" if ok_ else e.trigger, "proxy"))
    assert rows == want


def test_ladder_summary_matches_the_script(loop):
    cols = ("trigger", "rung", "rung_order", "ladders", "reached", "recovered", "conditional_rate",
            "conditional_low", "conditional_high", "recovered_so_far", "cumulative_rate", "cumulative_low",
            "cumulative_high", "extra_tokens", "model", "in_wedged_window", "source")
    rows = [dict(zip(cols, r)) for r in loop["con"].execute(
        f"SELECT {', '.join(cols)} FROM ladder_summary ORDER BY trigger, rung_order").fetchall()]
    want = expected_rungs()
    assert [(r["trigger"], r["rung"]) for r in rows] == sorted(want, key=lambda k: (k[0], LADDER.index(k[1])))
    for r in rows:
        w = want[(r["trigger"], r["rung"])]
        assert (r["model"], r["in_wedged_window"], r["source"]) == (MODEL, False, "proxy")
        assert r["rung_order"] == LADDER.index(r["rung"]) + 2  # attempt 1 is the original call
        assert (r["ladders"], r["reached"], r["recovered"], r["recovered_so_far"]) == (
            w["ladders"], w["reached"], w["recovered"], w["recovered_so_far"])
        assert r["conditional_rate"] == round(w["recovered"] / w["reached"], 4)
        assert r["cumulative_rate"] == round(w["recovered_so_far"] / w["ladders"], 4)
        assert (r["conditional_low"], r["conditional_high"]) == pytest.approx(wilson(w["recovered"], w["reached"]), abs=1e-4)
        assert (r["cumulative_low"], r["cumulative_high"]) == pytest.approx(wilson(w["recovered_so_far"], w["ladders"]), abs=1e-4)
        assert r["extra_tokens"] == w["tokens"]


def _expected_sizing() -> dict:
    triggered = [e for e in EXPECTED if e.trigger]
    by_session: dict[str, list[Expected]] = {}
    for e in EXPECTED:
        by_session.setdefault(e.session, []).append(e)
    tool_sessions = {s for s, turns in by_session.items() if any(t.tool_calls for t in turns)}
    lost = {s for s in tool_sessions if not by_session[s][-1].client_ok}
    lost_eligible = {s for s in lost if by_session[s][-1].trigger}
    # every triggered turn ran through the proxy's ladder: the lost-to-eligible
    # sessions were lost after it ran out of rungs, none without a ladder
    lost_after = {s for s in lost if by_session[s][-1].trigger and not by_session[s][-1].recovered_at}
    saved = {s for s in tool_sessions - lost if any(t.recovered_at for t in by_session[s])}
    recovered = sum(1 for e in triggered if e.recovered_at)
    return {
        "eligible_incidents": len(triggered),
        "eligible_by_trigger": dict(Counter(e.trigger for e in triggered)),
        "wedged_or_down_failures": 0,
        "tool_sessions": len(tool_sessions),
        "sessions_affected": len({e.session for e in triggered}),
        "sessions_lost": len(lost),
        "sessions_lost_to_eligible": len(lost_eligible),
        "sessions_lost_to_wedged_or_down": 0,
        "sessions_lost_without_ladder": len(lost_eligible - lost_after),
        "sessions_lost_after_ladder": len(lost_after),
        "sessions_saved_by_ladder": len(saved),
        "turns_per_lost_session": round(sum(len(by_session[s]) for s in lost) / len(lost), 1),
        "baseline": {"retried-ok": 0, "retried-failed": 0, "moved-on": 0, "session-ended": 0},
        "ladders": len(triggered), "recovered": recovered,
    }


def _check_sizing(s: dict) -> None:
    want = _expected_sizing()
    for key in ("eligible_incidents", "eligible_by_trigger", "wedged_or_down_failures", "tool_sessions",
                "sessions_affected", "sessions_lost", "sessions_lost_to_eligible",
                "sessions_lost_to_wedged_or_down", "sessions_lost_without_ladder", "sessions_lost_after_ladder",
                "sessions_saved_by_ladder", "turns_per_lost_session", "baseline"):
        assert s[key] == want[key], key
    rec = s["ladder_recovery"]
    assert (rec["ladders"], rec["recovered"]) == (want["ladders"], want["recovered"])
    assert rec["rate"] == round(want["recovered"] / want["ladders"], 4)
    assert tuple(rec["interval"]) == pytest.approx(wilson(want["recovered"], want["ladders"]), abs=1e-4)
    assert rec["inside_wedged_windows"] == {"ladders": 0, "recovered": 0}
    rungs = expected_rungs()
    assert [(r["trigger"], r["rung"]) for r in s["ladder_rungs"]] == sorted(
        rungs, key=lambda k: (k[0], LADDER.index(k[1])))
    for r in s["ladder_rungs"]:
        w = rungs[(r["trigger"], r["rung"])]
        assert (r["ladders"], r["reached"], r["recovered"]) == (w["ladders"], w["reached"], w["recovered"])
        assert r["conditional_rate"] == round(w["recovered"] / w["reached"], 4)
        assert r["cumulative_rate"] == round(w["recovered_so_far"] / w["ladders"], 4)
        assert tuple(r["cumulative_interval"]) == pytest.approx(wilson(w["recovered_so_far"], w["ladders"]), abs=1e-4)
    # Lost after every rung failed is measured, never projected: with no session lost
    # without a ladder, the conclusion promises nothing more.
    assert want["sessions_lost_without_ladder"] == 0 and want["sessions_lost_after_ladder"] > 0
    assert (f"The ladder saved {want['sessions_saved_by_ladder']} GLM tool sessions and "
            f"{want['sessions_lost_after_ladder']} were lost after every rung it tried had failed") in s["conclusion"]
    assert "No GLM tool session was lost to a ladder-eligible failure without the ladder" in s["conclusion"]
    assert "would have saved" not in s["conclusion"]


def test_the_sizing_block_matches_the_script(loop):
    _check_sizing(build_summary(loop["con"])["sizing"])


def test_the_command_line_reports_the_same_sizing(loop, capsys):
    import json

    from analyzer.cli.app import main

    try:
        main(["run", str(loop["log"]), "--db", str(loop["tmp"] / "cli.duckdb"), "--json"])
    except SystemExit as exc:
        assert not exc.code
    summary = json.loads(capsys.readouterr().out)
    assert summary["turns"] == len(EXPECTED)
    _check_sizing(summary["sizing"])
