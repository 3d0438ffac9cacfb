"""`analyze replay` against a real fault-injecting upstream on 127.0.0.1.

A small full-capture log (system prompts de-duplicated into `system_prompt`
records) holds four eligible failed GLM turns, each tagged `[case:X]` in its
first user message; the upstream reads the tag and the payload's shape and
answers as scripted per case, so the expected attempts follow from the script.
Turns that must not be replayed sit beside them: a healthy turn, a failure
logged without `messages`, a non-GLM failure, and one whose system prompt record
was never ingested.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

from analyzer.cli.app import main
from analyzer.store.db import connect
from analyzer.core.errors import ExitCode
from analyzer.ingestion.logs import ingest
from analyzer.online import DEFAULT_RUNGS
from analyzer.core.urls import public_url
from analyzer.jobs.replay import RateLimiter, endpoint_url
from analyzer.classification.turns import refresh_turns
from tests.support.records import NAKED_500, at, request, response_error, response_ok, stamp, write_jsonl
from tools.faulty_upstream import (
    RUNG_ORDER,
    Reply,
    always,
    completion,
    empty_200_stop,
    hang_up,
    naked_500,
    ok,
    payload_rung,
)
from tests.support.cli import analyze
from tools.loopback import free_port

PROMPT = ("You are the Conservation Almanac assistant, a geospatial data agent embedded in a web map. "
          "Answer questions about protected lands by querying datasets and drawing layers.\n") * 3
SHA = hashlib.sha256(PROMPT.encode()).hexdigest()
ORIGIN = "https://tpl.nrp-nautilus.io"
SECRET = "sk-replay-test-3f9a1c77e2b04d5e"

# case -> (model, failure the upstream answers before recovery, rung that recovers or None)
CASES = {
    "A": ("glm-5", naked_500, "tool_choice_none"),
    "B": ("glm-5", naked_500, "drop_tools"),
    "C": ("glm-5", empty_200_stop, "final_answer"),
    "D": ("glm-4.6", naked_500, None),
}
RID = {"A": "a0000001", "B": "b0000002", "C": "c0000003", "D": "d0000004"}
LOGGED_TRIGGER = {"A": "tool-history-5xx", "B": "tool-history-5xx", "C": "empty-200-stop", "D": "tool-history-5xx"}
FAILURE_CLASS = {naked_500: "tool-history-5xx", empty_200_stop: "empty-200-stop"}
TRANSCRIPT_TOOLS = ["query", "show_layer"]


def transcript(case: str, sha: str = SHA) -> list[dict]:
    """A full-capture prompt: de-duplicated system message, two tool rounds, a question."""
    return [
        {"role": "system", "system_sha256": sha, "content_len": len(PROMPT), "_dedup": True},
        {"role": "user", "content": f"Which parks in Marin are protected? [case:{case}]"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call-{case}-1", "type": "function",
             "function": {"name": "query", "arguments": '{"sql": "SELECT 1"}'}}]},
        {"role": "tool", "tool_call_id": f"call-{case}-1", "content": "| name | acres |\n|---|---|\n| Marin | 1 |"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call-{case}-2", "type": "function", "function": {"name": "show_layer", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": f"call-{case}-2", "content": "layer shown"},
    ]


def case_of(payload: dict) -> str:
    for m in payload.get("messages") or []:
        found = re.search(r"\[case:(\w+)\]", str(m.get("content") or ""))
        if found:
            return found.group(1)
    raise AssertionError("a replayed payload lost its case tag")


def scripted(payload: dict) -> Reply:
    """The upstream's script: fail each case until its recovery rung."""
    _model, failure, recover_at = CASES[case_of(payload)]
    if recover_at is not None and RUNG_ORDER.index(payload_rung(payload)) >= RUNG_ORDER.index(recover_at):
        return ok("Marin has 3 protected parks.")
    return failure()


def expected_attempts(case: str) -> list[tuple]:
    """(attempt_no, rung, status, class) the script implies for a case."""
    _model, failure, recover_at = CASES[case]
    fail_status = 500 if failure is naked_500 else 200
    out = [(1, "original", fail_status, FAILURE_CLASS[failure])]
    for i, rung in enumerate(DEFAULT_RUNGS, 2):
        if rung == recover_at:
            out.append((i, rung, 200, "ok"))
            break
        out.append((i, rung, fail_status, FAILURE_CLASS[failure]))
    return out


def expected_outcome(case: str) -> tuple[str, str, str | None]:
    """(trigger, outcome, recovered_at) for a case."""
    _model, failure, recover_at = CASES[case]
    return FAILURE_CLASS[failure], ("recovered" if recover_at else "exhausted"), recover_at


def _records() -> list[dict]:
    recs: list[dict] = []
    # Not replayable: its system prompt record was never ingested (earliest, so --limit must skip it).
    recs.append(request("e0000000", at(1), session="S-missing", messages=transcript("A", sha="0" * 64)))
    recs.append(response_error("e0000000", at(1.1), NAKED_500, session="S-missing"))
    recs.append({"timestamp": stamp(at(2)), "type": "system_prompt", "origin": ORIGIN,
                 "system_sha256": SHA, "content": PROMPT})
    for k, case in enumerate(CASES):
        model = CASES[case][0]
        rid, ts, sess = RID[case], at(10 + k * 10), f"S-{case}"
        recs.append(request(rid, ts, session=sess, model=model, message_count=6, messages=transcript(case)))
        if LOGGED_TRIGGER[case] == "empty-200-stop":
            recs.append(response_ok(rid, at(10 + k * 10 + 0.1), content="", completion_tokens=1,
                                    session=sess, model=model))
        else:
            recs.append(response_error(rid, at(10 + k * 10 + 0.1), NAKED_500, session=sess, model=model))
    # Not eligible / not replayable by default:
    recs.append(request("f0000001", at(60), session="S-ok", messages=transcript("A")))  # healthy
    recs.append(response_ok("f0000001", at(60.1), content="All good.", session="S-ok"))
    recs.append(request("f0000002", at(70), session="S-legacy", tool_results=[{"tool_call_id": "x", "content": "r"}]))
    recs.append(response_error("f0000002", at(70.1), NAKED_500, session="S-legacy"))  # no messages
    recs.append(request("f0000003", at(80), session="S-qwen", model="qwen3", messages=transcript("A")))
    recs.append(response_error("f0000003", at(80.1), NAKED_500, session="S-qwen", model="qwen3"))  # not GLM
    return recs


@pytest.fixture(scope="module")
def template_db(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("replay")
    log = write_jsonl(tmp / "logs" / "capture.jsonl", _records())
    path = tmp / "template.duckdb"
    con = connect(path)
    try:
        ingest(con, [str(log)])
        refresh_turns(con)
        eligible = con.execute("SELECT count(*) FROM turns WHERE ladder_trigger IS NOT NULL").fetchall()[0][0]
        assert eligible == 7  # 4 cases + missing prompt + legacy + qwen3
    finally:
        con.close()
    return path


@pytest.fixture
def db(template_db, tmp_path) -> Path:
    path = tmp_path / "a.duckdb"
    shutil.copy(template_db, path)
    return path


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    """Run `analyze ...` in-process: (exit code, stdout, stderr)."""
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def replay_rows(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT request_id, attempt_no, rung, status, incident_class, trigger, outcome, recovered_at, endpoint "
            "FROM replay_attempts ORDER BY request_id, attempt_no").fetchall()
    finally:
        con.close()


def expected_rows(cases, endpoint: str) -> list[tuple]:
    out = []
    for case in sorted(cases, key=lambda c: RID[c]):
        trigger, outcome, recovered_at = expected_outcome(case)
        for n, rung, status, cls in expected_attempts(case):
            out.append((RID[case], n, rung, status, cls, trigger, outcome, recovered_at, endpoint))
    return out


# ---------------------------------------------------------------------------


def test_dry_run_sends_nothing_and_shows_each_rung(db, upstream, capsys):
    upstream.script = scripted
    code, out, err = run_cli(capsys, "replay", "--db", str(db), "--dry-run", "--endpoint", upstream.url)
    assert code == 0, err
    assert upstream.count == 0
    for case in CASES:
        assert RID[case] in out
    for rid in ("f0000001", "f0000002", "f0000003"):
        assert rid not in out
    assert "skipped e0000000" in out and "no system_prompt record" in out
    assert "1 more eligible turn(s) were not captured in full mode" in out
    for rung in ("original", *DEFAULT_RUNGS):
        assert rung in out
    assert "stand-in" in out and "tool definitions" in out  # says what is not recovered
    assert replay_rows(db) == []

    code, out, err = run_cli(capsys, "replay", "--db", str(db), "--dry-run", "--json", "--flatten")
    assert code == 0, err
    doc = json.loads(out)
    assert upstream.count == 0
    assert [t["request_id"] for t in doc["turns"]] == [RID[c] for c in CASES]
    first = doc["turns"][0]
    assert [p["rung"] for p in first["payloads"]] == ["original", *DEFAULT_RUNGS, "flatten_transcript"]
    assert [p["tools"] for p in first["payloads"]] == [2, 2, 0, 0, 0]
    assert first["payloads"][1]["tool_choice"] == "none"
    assert first["payload"]["messages"][0] == {"role": "system", "content": PROMPT}


def test_replay_stores_the_attempts_the_upstream_was_scripted_to_give(db, upstream, capsys):
    upstream.script = scripted
    code, out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url + "/v1",
                             "--rate", "0", "--json")
    assert code == 0, err
    doc = json.loads(out)
    endpoint = f"{upstream.url}/v1/chat/completions"
    assert doc["endpoint"] == endpoint
    assert replay_rows(db) == expected_rows(CASES, endpoint)
    assert upstream.count == sum(len(expected_attempts(c)) for c in CASES)
    per_case: dict[str, list[str]] = {}
    for r in upstream.received:
        per_case.setdefault(case_of(r.payload), []).append(r.rung)
    assert per_case == {c: [a[1] for a in expected_attempts(c)] for c in CASES}
    assert doc["outcomes"] == {"recovered": 3, "exhausted": 1}

    con = duckdb.connect(str(db), read_only=True)
    try:
        # The replayed ladders read like production ones, marked `replay`.
        got = con.execute("SELECT source, count(*) FROM ladder_attempts GROUP BY ALL").fetchall()
        assert got == [("replay", upstream.count)]
        summary = {(m, t, r): (ladders, reached, rec) for m, t, r, ladders, reached, rec in con.execute(
            "SELECT model, trigger, rung, ladders, reached, recovered FROM ladder_summary WHERE source = 'replay'"
        ).fetchall()}
    finally:
        con.close()
    expected: dict[tuple, list[int]] = {}
    ladders: dict[tuple, int] = {}
    for case in CASES:
        model, trigger = CASES[case][0], expected_outcome(case)[0]
        ladders[(model, trigger)] = ladders.get((model, trigger), 0) + 1
        for _n, rung, _s, cls in expected_attempts(case)[1:]:
            e = expected.setdefault((model, trigger, rung), [0, 0])
            e[0] += 1
            e[1] += cls == "ok"
    assert summary == {k: (ladders[k[:2]], v[0], v[1]) for k, v in expected.items()}


def test_payload_is_rebuilt_with_the_system_prompt_rehydrated(db, upstream, capsys):
    upstream.script = scripted
    code, _out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--rate", "0",
                              "--limit", "1")
    assert code == 0, err
    original = upstream.received[0].payload
    assert upstream.received[0].rung == "original"
    assert original["model"] == "glm-5"
    assert original["messages"][0] == {"role": "system", "content": PROMPT}
    assert original["messages"][1:] == transcript("A")[1:]
    assert "_dedup" not in json.dumps(original) and "system_sha256" not in json.dumps(original)
    # tools are not logged: stand-ins named after the transcript's tools
    assert [t["function"]["name"] for t in original["tools"]] == TRANSCRIPT_TOOLS
    assert "tool_choice" not in original and "max_tokens" not in original
    # enable_thinking: false: both GLM keys off, and no clear_thinking (nothing to keep or clear)
    assert original["chat_template_kwargs"] == {"enable_thinking": False, "thinking": False}


def test_model_override_and_tools_file(db, upstream, capsys, tmp_path):
    upstream.script = scripted
    real_tools = [{"type": "function", "function": {"name": n, "description": f"the real {n}",
                                                    "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}}}}
                  for n in ("query", "show_layer", "fly_to")]
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({ORIGIN: real_tools, "*": []}))
    code, out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.chat_url, "--rate", "0",
                             "--limit", "1", "--model", "zai-org/GLM-5-FP8", "--tools", str(tools))
    assert code == 0, err
    original = upstream.received[0].payload
    assert original["model"] == "zai-org/GLM-5-FP8"
    assert original["tools"] == real_tools
    # the stored model is the logged one, so the replay groups with the turn it replays
    assert {r[0] for r in replay_rows(db)} == {RID["A"]}
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT DISTINCT model FROM replay_attempts").fetchall() == [("glm-5",)]
    con.close()

    bad = tmp_path / "bad.json"
    bad.write_text('{"x": [1, 2]}')
    code, _out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--tools", str(bad))
    assert code == ExitCode.USAGE and "--tools" in err


def test_api_key_is_a_bearer_header_and_appears_nowhere_else(db, upstream, tmp_path):
    upstream.script = scripted
    env = {**os.environ, "REPLAY_TEST_KEY": SECRET}
    cmd = [sys.executable, "-m", "analyzer.cli.app", "replay", "--db", str(db), "--endpoint", upstream.url,
           "--api-key-env", "REPLAY_TEST_KEY", "--rate", "0"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert upstream.count == sum(len(expected_attempts(c)) for c in CASES)
    assert {r.headers.get("authorization") for r in upstream.received} == {f"Bearer {SECRET}"}
    p2 = subprocess.run(cmd + ["--json"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p2.returncode == 0, p2.stderr
    for text in (p.stdout, p.stderr, p2.stdout, p2.stderr):
        assert SECRET not in text
    con = duckdb.connect(str(db), read_only=True)
    try:
        columns = con.execute(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c "
            "JOIN information_schema.tables t USING (table_schema, table_name) "
            "WHERE t.table_type = 'BASE TABLE' AND c.table_schema = 'main'").fetchall()
        assert ("replay_attempts", "endpoint") in columns
        for table, column in columns:
            hits = con.execute(f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS VARCHAR) LIKE ?',
                               [f"%{SECRET}%"]).fetchall()[0][0]
            assert hits == 0, f"{table}.{column} holds the API key"
    finally:
        con.close()
    assert SECRET.encode() not in db.read_bytes()
    assert not any(SECRET in f.read_text(errors="replace") for f in tmp_path.rglob("*") if f.is_file() and f != db)


def test_a_key_variable_that_is_not_set_is_a_usage_error(db, upstream, capsys, monkeypatch):
    monkeypatch.delenv("REPLAY_TEST_UNSET", raising=False)
    code, _out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url,
                              "--api-key-env", "REPLAY_TEST_UNSET")
    assert code == ExitCode.USAGE and "REPLAY_TEST_UNSET" in err
    assert upstream.count == 0


def test_a_failing_endpoint_is_a_result_every_ladder_exhausted(db, upstream, capsys):
    upstream.script = always(naked_500)
    code, out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--rate", "0")
    assert code == 0, err
    rows = replay_rows(db)
    assert {r[0] for r in rows} == set(RID.values())
    assert {r[6] for r in rows} == {"exhausted"} and {r[7] for r in rows} == {None}
    assert [r[2] for r in rows if r[0] == RID["A"]] == ["original", *DEFAULT_RUNGS]
    assert {r[3] for r in rows} == {500}
    assert upstream.count == 4 * (1 + len(DEFAULT_RUNGS))
    assert "exhausted 4" in out


def test_an_unreachable_endpoint_is_a_clear_error(db):
    port = free_port()  # nothing listens on it
    p = analyze("replay", "--db", db, "--endpoint", f"http://user:pw@127.0.0.1:{port}/v1?token=abc")
    assert p.returncode == ExitCode.UPSTREAM
    assert f"cannot reach the replay endpoint http://127.0.0.1:{port}/v1/chat/completions" in p.stderr
    assert "Traceback" not in p.stderr and "pw@" not in p.stderr and "token=abc" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert replay_rows(db) == []


def test_a_first_call_refused_with_404_stops_the_replay(db, upstream, capsys):
    body = json.dumps({"object": "error", "message": "The model `glm-5` does not exist.", "code": 404})
    upstream.script = always(Reply(404, body.encode(), (("content-type", "application/json"),)))
    code, _out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--concurrency", "1")
    assert code == ExitCode.UPSTREAM
    assert "answered 404" in err and "--model" in err and "does not exist" in err
    assert upstream.count == 1
    assert replay_rows(db) == []


def test_limit_and_idempotence(db, upstream, capsys):
    upstream.script = scripted
    endpoint = f"{upstream.url}/v1/chat/completions"
    code, _out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--rate", "0",
                              "--limit", "2")
    assert code == 0, err
    assert replay_rows(db) == expected_rows("AB", endpoint)  # the earliest two replayable turns
    assert upstream.count == len(expected_attempts("A")) + len(expected_attempts("B"))

    code, _out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--rate", "0")
    assert code == 0, err
    assert replay_rows(db) == expected_rows(CASES, endpoint)  # replaced, not doubled
    code, _out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--rate", "0")
    assert replay_rows(db) == expected_rows(CASES, endpoint)

    # A replay against another behaviour replaces the earlier outcome of each turn.
    upstream.reset(always(ok))
    code, out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--rate", "0")
    assert code == 0, err
    rows = replay_rows(db)
    assert [(r[0], r[1], r[2], r[4], r[5], r[6]) for r in rows] == [
        (RID[c], 1, "original", "ok", None, "not-triggered") for c in sorted(CASES, key=RID.get)]
    assert "did not fail again on replay" in out
    con = duckdb.connect(str(db), read_only=True)
    try:
        # A failure that does not reproduce counts in no recovery rate.
        assert con.execute("SELECT count(*) FROM ladder_summary").fetchall() == [(0,)]
    finally:
        con.close()


def test_a_transport_failure_of_the_first_call_is_stored_as_a_result(db, upstream, capsys):
    upstream.script = always(hang_up)
    code, _out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--rate", "0",
                              "--limit", "1")
    assert code == 0, err
    rows = replay_rows(db)
    assert [(r[0], r[2], r[3], r[5], r[6]) for r in rows] == [(RID["A"], "original", None, None, "transport-error")]


def test_concurrency_is_bounded(db, upstream, capsys):
    lock = threading.Lock()
    state = {"now": 0, "max": 0}

    def script(payload: dict) -> Reply:
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
        time.sleep(0.02)
        with lock:
            state["now"] -= 1
        return naked_500()

    for n in (1, 2):
        state["max"] = 0
        upstream.reset(script)
        code, _out, err = run_cli(capsys, "replay", "--db", str(db), "--endpoint", upstream.url, "--rate", "0",
                                  "--concurrency", str(n))
        assert code == 0, err
        assert upstream.count == 4 * (1 + len(DEFAULT_RUNGS))
        assert 1 <= state["max"] <= n


def test_rate_limiter_spaces_calls_evenly():
    now = [100.0]
    slept: list[float] = []

    async def fake_sleep(s: float) -> None:
        slept.append(round(s, 9))

    async def run() -> None:
        limiter = RateLimiter(4.0, clock=lambda: now[0], sleep=fake_sleep)
        for _ in range(3):
            await limiter.acquire()  # reserved at t = 100, 100.25, 100.5
        now[0] = 101.0  # the clock moved past the reservations: no wait
        await limiter.acquire()
        await limiter.acquire()  # next slot is 101.25
        unbounded = RateLimiter(0, clock=lambda: now[0], sleep=fake_sleep)
        for _ in range(5):
            await unbounded.acquire()

    asyncio.run(run())
    assert slept == [0.25, 0.5, 0.25]


def test_endpoint_urls_and_what_is_stored_of_them():
    assert endpoint_url("http://h:8000") == "http://h:8000/v1/chat/completions"
    assert endpoint_url("http://h:8000/v1/") == "http://h:8000/v1/chat/completions"
    assert endpoint_url("https://gw.example/openai/v1/chat/completions") == "https://gw.example/openai/v1/chat/completions"
    assert public_url("https://u:secret@gw.example:8443/v1/chat/completions?key=k#x") == \
        "https://gw.example:8443/v1/chat/completions"
    from analyzer.core.errors import AnalyzerError

    with pytest.raises(AnalyzerError) as err:
        endpoint_url("ftp://h/v1")
    assert err.value.exit_code == ExitCode.USAGE


def test_endpoint_is_required_unless_dry_run(db, capsys):
    code, _out, err = run_cli(capsys, "replay", "--db", str(db))
    assert code == ExitCode.USAGE and "--endpoint" in err


def test_only_model_selects_other_models(db, upstream, capsys):
    upstream.script = always(completion("fine"))
    code, out, err = run_cli(capsys, "replay", "--db", str(db), "--dry-run", "--json", "--only-model", "qwen3")
    assert code == 0, err
    assert [t["request_id"] for t in json.loads(out)["turns"]] == ["f0000003"]
    assert upstream.count == 0
