"""A folder of LiteLLM's logging payloads ingested into a real DuckDB file and classified.

Each payload is one call: a request and a response on its line; a call's retries
and fallbacks share its call id and are one turn; bad objects are quarantined
with their file and line, and nothing is counted twice.
"""

from __future__ import annotations

import json
import shutil

import pytest

from analyzer.core.errors import ExitCode, InputError
from analyzer.store.asking import ask
from analyzer.store.db import connect
from tools import litellm_payloads as L
from tests.support.cli import analyze, pipe_of
from tests.support.fresh_db import fresh_db
from tests.support.ingesting import run

NAKED_500 = L.error(500, "InternalServerError", "litellm.InternalServerError: InternalServerError: "
                                                "Hosted_vllmException - ")


def _week() -> tuple[list[dict], dict[str, str]]:
    """Payloads of one afternoon, and each call's class as the rule must give it."""
    t = L.T0
    calls: list[tuple[str, list[dict]]] = []

    def call(cls: str, *payloads: dict) -> None:
        calls.append((cls, list(payloads)))

    call("ok", L.payload(call_id="ok-1", start=t))
    call("tool-history-5xx", L.payload(call_id="th5-1", start=t + 60, status="failure", error_information=NAKED_500,
                                       headers={"date": "Mon, 16 Nov 2026 14:01:00 GMT"}))
    call("other-5xx", L.payload(call_id="o5-1", start=t + 120, status="failure", error_information=NAKED_500,
                                messages=[{"role": "user", "content": "hi"}], tools=None, user="sess-2"))
    call("empty-200-stop", L.payload(call_id="e2-1", start=t + 180, response=L.answer("", completion_tokens=1)))
    call("answer-in-reasoning", L.payload(call_id="air-1", start=t + 240,
                                          response=L.answer("", reasoning="Texas holds 61,883 acres.")))
    call("length-with-no-content", L.payload(call_id="len-1", start=t + 300,
                                             response=L.answer(None, finish_reason="length",
                                                               reasoning="Let me think. " * 40,
                                                               completion_tokens=1024)))
    call("reasoning-leaked", L.payload(call_id="leak-1", start=t + 360,
                                       response=L.answer("The user wants the total.</think>Texas.")))
    call("no-answer-200", L.payload(call_id="na-1", start=t + 420,
                                    response={"id": "x", "object": "chat.completion", "choices": []}))
    call("connection-error", L.payload(call_id="ce-1", start=t + 480, status="failure", error_information=L.error(
        500, "InternalServerError", "litellm.InternalServerError: InternalServerError: Hosted_vllmException - "
                                    "Server disconnected")))
    # LiteLLM's own fallback: the first attempt failed (logged), the fallback answered (logged): one turn, ok
    call("ok", L.payload(call_id="fb-1", start=t + 540, status="failure", error_information=NAKED_500),
         L.payload(call_id="fb-1", start=t + 545, model_group="glm-5-backup", fallbacks=1,
                   api_base="http://vllm-glm-1:8000/v1"))
    # a retry that failed again: one turn, its last answer
    call("tool-history-5xx", L.payload(call_id="rt-1", start=t + 600, status="failure", error_information=NAKED_500),
         L.payload(call_id="rt-1", start=t + 603, response=L.answer("")))
    truth = {cid: cls for cls, ps in calls for cid in {p["litellm_call_id"] for p in ps}}
    truth["rt-1"] = "empty-200-stop"  # the client got the retry's empty answer
    return [p for _, ps in calls for p in ps], truth


def _classes(db) -> dict[str, str]:
    con = connect(db, read_only=True)
    try:
        return dict(con.execute("SELECT request_id, incident_class FROM turns").fetchall())
    finally:
        con.close()


def test_every_call_is_one_turn_in_the_class_its_content_says(tmp_path):
    payloads, truth = _week()
    L.write_objects(tmp_path / "logs", payloads)
    report = run(fresh_db(tmp_path / "a.duckdb"), [tmp_path / "logs"])
    assert report.records == 2 * len(payloads) and report.lines == len(payloads) and report.quarantined == 0
    assert _classes(tmp_path / "a.duckdb") == truth
    con = connect(tmp_path / "a.duckdb", read_only=True)
    try:
        # the fallback's turn is the first request's (model glm-5) with the last answer, on its deployment
        row = con.execute("SELECT model, proxy_pod, status FROM turns WHERE request_id = 'fb-1'").fetchall()
        assert row == [("glm-5", "vllm-glm-0:8000", 200)]
        assert con.execute("SELECT count(*) FROM records WHERE gateway = 'litellm'").fetchall()[0][0] == 26
        # the calls LiteLLM retried or fell back on, with their first attempt (the question, as asked by name)
        rows = [(r[0], *r[4:]) for r in ask(con, "gateway_attempts", {})]
        assert rows == [("fb-1", 2, "Provider returned 500: ", "vllm-glm-0:8000", "vllm-glm-1:8000", "ok"),
                        ("rt-1", 2, "Provider returned 500: ", "vllm-glm-0:8000", "vllm-glm-0:8000",
                         "empty-200-stop")]
        # tool history from the transcript LiteLLM logged
        assert con.execute("SELECT tool_history_source FROM turns WHERE request_id = 'th5-1'").fetchall() == \
            [("messages",)]
    finally:
        con.close()


def test_the_attempts_of_a_call_are_the_ones_its_turn_holds(tmp_path):
    """A call id seen again two hours later is another call (turn_features pairs within an hour):
    gateway_attempts lists only the call whose turn holds two answers, once."""
    t = L.T0
    payloads = [L.payload(call_id="again-1", start=t), L.payload(call_id="again-1", start=t + 7200),
                L.payload(call_id="rt-2", start=t + 60, status="failure", error_information=NAKED_500),
                L.payload(call_id="rt-2", start=t + 63)]
    L.write_objects(tmp_path / "logs", payloads)
    db = fresh_db(tmp_path / "a.duckdb")
    run(db, [tmp_path / "logs"])
    con = connect(db, read_only=True)
    try:
        turns = con.execute("SELECT request_id, count(*) FROM turns GROUP BY 1 ORDER BY 1").fetchall()
        assert turns == [("again-1", 2), ("rt-2", 1)]
        assert [(r[0], r[4]) for r in ask(con, "gateway_attempts", {})] == [("rt-2", 2)]
    finally:
        con.close()


def test_bad_objects_are_quarantined_with_file_and_line_and_nothing_is_read_twice(tmp_path):
    payloads, truth = _week()
    logs = tmp_path / "logs"
    paths = L.write_objects(logs, payloads[:4])
    # the rest as one flush of LiteLLM's s3_batch_file_upload (.jsonl), a bad line at line 3
    lines = [json.dumps(p) for p in payloads[4:]]
    lines.insert(2, '{"id": "cut-off", "startTime": 17948')
    (logs / "2026-11-16" / "batch_14-05-00_0a1b.jsonl").write_text("\n".join(lines) + "\n")
    # an object cut off in the upload, and a stray JSON document that is no payload at all
    cut = json.dumps(L.payload(call_id="cut"))
    (logs / "2026-11-16" / "time-14-09-00-000000_bad.json").write_text(cut[:len(cut) // 2])
    (logs / "2026-11-16" / "settings.json").write_text('{"call_type": "acompletion"}')
    # the same objects copied elsewhere: one record each, whatever the path
    shutil.copytree(logs / "2026-11-16", tmp_path / "copy")
    db = fresh_db(tmp_path / "a.duckdb")
    report = run(db, [logs, tmp_path / "copy"])
    assert _classes(db) == truth
    assert report.new_records == 2 * len(payloads) and report.duplicates == 2 * len(payloads)
    con = connect(db, read_only=True)
    try:
        bad = {(p.split("/")[-2] + "/" + p.split("/")[-1], n, r[:40]) for p, n, r in con.execute(
            "SELECT path, line_no, reason FROM quarantine").fetchall()}
        assert bad == {("2026-11-16/batch_14-05-00_0a1b.jsonl", 3, "malformed JSON (invalid or cut-off line)"),
                       ("copy/batch_14-05-00_0a1b.jsonl", 3, "malformed JSON (invalid or cut-off line)"),
                       ("2026-11-16/time-14-09-00-000000_bad.json", 1, "malformed JSON (invalid or cut-off line)"),
                       ("copy/time-14-09-00-000000_bad.json", 1, "malformed JSON (invalid or cut-off line)")}
        assert {p.split("/")[-1] for p, in con.execute("SELECT path FROM skipped_files").fetchall()} == \
            {"settings.json"}
        forms = set(con.execute("SELECT DISTINCT form FROM source_files").fetchall())
        assert forms == {("litellm",)}
        lines_done = con.execute("SELECT lines FROM source_files WHERE path LIKE '%logs/%batch_%'").fetchall()
        assert lines_done == [(len(lines),)]
    finally:
        con.close()
    again = run(db, [logs, tmp_path / "copy"])  # a re-run reads nothing
    assert again.files_unchanged == len(paths) * 2 + 4 and again.records == 0  # (settings.json: skipped again)
    assert _classes(db) == truth


def test_strict_stops_on_a_bad_object(tmp_path):
    logs = tmp_path / "logs"
    L.write_objects(logs, [L.payload(call_id="a")])
    (logs / "2026-11-16" / "time-14-09-00-000000_bad.json").write_text('{"id": "x", "startTime": 1794837600.5, '
                                                                        '"call_type": "aembedding"}')
    with pytest.raises(InputError) as exc:
        run(fresh_db(tmp_path / "a.duckdb"), [logs], strict=True)
    assert exc.value.exit_code == ExitCode.BAD_INPUT and "time-14-09-00-000000_bad.json:1" in str(exc.value)


def test_payloads_on_standard_input_gzip_included(tmp_path):
    """`... | analyze -`: LiteLLM's JSON lines, gzip-compressed, told from their first bytes."""
    import gzip

    payloads, truth = _week()
    data = gzip.compress("".join(json.dumps(p) + "\n" for p in payloads).encode())
    db = tmp_path / "a.duckdb"
    # stdin's bytes are under test: a real pipe holding them, read by the command in this process
    with pipe_of(data) as stdin:
        p = analyze("-", "--db", db, "--json", stdin=stdin)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ingest"]["new_records"] == 2 * len(payloads)
    assert _classes(db) == truth
