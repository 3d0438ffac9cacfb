"""Ingestion into a real DuckDB file: every input form, dedup, quarantine, re-runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from analyzer.store.db import connect
from analyzer.core.errors import InputError
from tests.support.fresh_db import fresh_db
from tests.support.ingesting import run
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
    write_stdout,
)


def _pairs(n: int, start: float = 0.0, session: str = "s-1") -> list[dict]:
    recs = []
    for i in range(n):
        rid = f"{0xa0000000 + int(start * 100) + i:08x}"
        recs.append(request(rid, at(start + i), session=session, message_count=2 + 2 * i,
                            tool_results=TOOL_RESULT if i else None))
        recs.append(response_ok(rid, at(start + i + 0.01), content="" if i % 2 else "answer",
                                tool_calls=TOOL_CALL if i % 2 else None, session=session))
    return recs


def _count(con, sql: str, params=None) -> int:
    return con.execute(sql, params or []).fetchall()[0][0]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A new, empty analyzer database (a copy: creating one is not what these tests check)."""
    return fresh_db(tmp_path / "analyzer.duckdb")


def test_s3_jsonl_and_kubectl_copies_count_once(tmp_path, db):
    recs = _pairs(6)
    s3 = write_jsonl(tmp_path / "s3/2026-11-16/14-00-00-proxy-1-abcdef12.jsonl", recs)
    stdout = write_stdout(tmp_path / "kubectl/pod.log", recs)
    report = run(db, [s3, stdout])
    assert report.records == 24 and report.new_records == 12 and report.duplicates == 12
    assert report.free_text > 0 and report.quarantined == 0
    con = connect(db)
    assert _count(con, "SELECT count(*) FROM records") == 12
    assert _count(con, "SELECT count(*) FROM turns") == 6
    # line numbers point at the file's real lines
    row = con.execute(
        "SELECT r.line_no, r.raw FROM records r JOIN source_files f USING (file_id) "
        "WHERE f.form = 'kubectl' ORDER BY r.line_no LIMIT 1").fetchall()
    assert not row  # the S3 copy was ingested first and kept
    con.close()


def test_gzip_parquet_directories_and_globs(tmp_path, db):
    recs = _pairs(4)
    write_jsonl(tmp_path / "logs/a.jsonl.gz", recs[:4], compress=True)
    write_stdout(tmp_path / "logs/pod.log.gz", recs[4:6])  # gzipped: the name ends in .gz
    # the consolidated Parquet tier, legacy columns only, the record in `entry`
    pq = tmp_path / "consolidated/daily/2026-11-16.parquet"
    pq.parent.mkdir(parents=True)
    c = duckdb.connect()
    c.execute("CREATE TABLE t (ts VARCHAR, type VARCHAR, request_id VARCHAR, origin VARCHAR, entry VARCHAR)")
    for r in recs[6:]:
        c.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [r["timestamp"], r["type"], r["request_id"], r["origin"], json.dumps(r)])
    c.execute(f"COPY t TO '{pq}' (FORMAT parquet)")
    c.close()
    report = run(db, [tmp_path / "logs", str(tmp_path / "consolidated/**/*.parquet")])
    assert report.files_ingested == 3
    con = connect(db)
    assert _count(con, "SELECT count(*) FROM records") == 8
    forms = dict(con.execute("SELECT form, sum(records) FROM source_files GROUP BY form").fetchall())
    assert forms == {"jsonl": 4, "kubectl": 2, "parquet": 2}
    assert _count(con, "SELECT count(*) FROM turns WHERE response_ts IS NOT NULL") == 4
    con.close()


def test_truncated_stdout_copy_is_marked_and_replaced_by_the_full_copy(tmp_path, db):
    long_answer = "x" * 900
    recs = [request("aaaa0001", at(0)), response_ok("aaaa0001", at(0.1), content=long_answer)]
    stdout = write_stdout(tmp_path / "pod.log", recs, truncate=True)
    run(db, [stdout])
    con = connect(db)
    assert con.execute("SELECT truncated, content_chars FROM records WHERE type = 'response'").fetchall() == [(True, 200 + len("…(+700 chars)"))]
    con.close()
    run(db, [write_jsonl(tmp_path / "s3.jsonl", recs)])
    con = connect(db)
    assert con.execute("SELECT truncated, content_chars FROM records WHERE type = 'response'").fetchall() == [(False, 900)]
    assert _count(con, "SELECT count(*) FROM records") == 2
    con.close()


def test_full_copy_first_then_truncated_copy_adds_nothing(tmp_path, db):
    recs = [request("aaaa0002", at(0)), response_ok("aaaa0002", at(0.1), content="y" * 500)]
    run(db, [write_jsonl(tmp_path / "s3.jsonl", recs)])
    report = run(db, [write_stdout(tmp_path / "pod.log", recs, truncate=True)])
    assert report.new_records == 0
    con = connect(db)
    assert con.execute("SELECT bool_or(truncated) FROM records").fetchall() == [(False,)]
    con.close()


def test_malformed_lines_are_quarantined_with_file_and_line(tmp_path, db):
    good = _pairs(3)
    path = tmp_path / "chunk.jsonl"
    lines = [json.dumps(r) for r in good]
    lines.insert(2, "this is not json")
    lines.insert(4, json.dumps({"hello": "world"}))
    lines.append(json.dumps(good[0])[:57])  # the process died mid-write
    path.write_text("\n".join(lines) + "\n")
    stdout = tmp_path / "pod.log"
    stdout.write_text("INFO:     started\n📥 REQUEST: {\"type\": \"request\", \"timestamp\": \n✓ RESPONSE: " + json.dumps(good[1]) + "\n")
    report = run(db, [path, stdout])
    assert report.quarantined == 4
    con = connect(db)
    rows = con.execute("SELECT path, line_no, reason, snippet FROM quarantine ORDER BY path, line_no").fetchall()
    assert [(Path(p).name, n) for p, n, _, _ in rows] == [("chunk.jsonl", 3), ("chunk.jsonl", 5), ("chunk.jsonl", 9), ("pod.log", 2)]
    reasons = [r for _, _, r, _ in rows]
    assert reasons[0].startswith("malformed JSON") and reasons[1].startswith("not a proxy record")
    assert rows[0][3] == "this is not json"
    assert _count(con, "SELECT count(*) FROM records") == 6  # nothing good was lost
    con.close()


def test_strict_fails_and_leaves_the_database_unchanged(tmp_path, db):
    path = tmp_path / "chunk.jsonl"
    path.write_text(json.dumps(_pairs(1)[0]) + "\n{broken\n")
    with pytest.raises(InputError, match=r"chunk.jsonl:2: malformed JSON"):
        run(db, [path], strict=True)
    con = connect(db)
    assert _count(con, "SELECT count(*) FROM records") == 0
    assert _count(con, "SELECT count(*) FROM source_files") == 0
    con.close()


def test_rerun_is_idempotent_and_new_days_are_incremental(tmp_path, db):
    day1 = write_jsonl(tmp_path / "logs/2026-11-16/10-00-00-1.jsonl", _pairs(5))
    first = run(db, [tmp_path / "logs"])
    assert first.new_records == 10
    again = run(db, [tmp_path / "logs"])
    assert again.files_ingested == 0 and again.files_unchanged == 1 and again.new_records == 0
    write_jsonl(tmp_path / "logs/2026-11-17/10-00-00-1.jsonl", _pairs(3, start=1440, session="s-2"))
    more = run(db, [tmp_path / "logs"])
    assert more.files_ingested == 1 and more.files_unchanged == 1 and more.new_records == 6
    # touching a file without changing it reads nothing
    os.utime(day1, (time.time() + 5, time.time() + 5))
    touched = run(db, [tmp_path / "logs"])
    assert touched.files_ingested == 0
    con = connect(db)
    assert _count(con, "SELECT count(*) FROM records") == 16
    assert _count(con, "SELECT count(*) FROM turns") == 8
    con.close()


def test_a_growing_stdout_log_is_read_again_without_doubling(tmp_path, db):
    recs = _pairs(6)
    log = write_stdout(tmp_path / "pod.log", recs[:6])
    run(db, [log])
    write_stdout(log, recs)  # the pod wrote more
    report = run(db, [log])
    assert report.files_ingested == 1 and report.new_records == 6
    con = connect(db)
    assert _count(con, "SELECT count(*) FROM records") == 12
    con.close()


def test_schema_drift_across_files(tmp_path, db):
    old = [request("bbbb0001", at(0), session=None, client=None, enable_thinking=None),
           response_error("bbbb0001", at(0.1), NAKED_500, session=None, client=None)]
    for r in old:
        r.pop("client")  # a field missing entirely
    new = [request("bbbb0002", at(1)),
           response_ok("bbbb0002", at(1.1), content="ok", extra={"finish_reason": "stop", "upstream_status": 200,
                                                                "log_fields_version": 1, "brand_new_field": {"x": 1}})]
    odd = [request("bbbb0003", at(2)), response_ok("bbbb0003", at(2.1), content="ok")]
    odd[0]["message_count"] = "twelve"  # a field of an unexpected type
    odd[1]["tokens"] = None  # null in the whole file
    run(db, [write_jsonl(tmp_path / "old.jsonl", old), write_jsonl(tmp_path / "new.jsonl", new),
             write_jsonl(tmp_path / "odd.jsonl", odd)])
    con = connect(db)
    assert _count(con, "SELECT count(*) FROM records") == 6
    assert _count(con, "SELECT count(*) FROM quarantine") == 0
    raw = con.execute("SELECT raw FROM records WHERE request_id = 'bbbb0002' AND type = 'response'").fetchall()[0][0]
    assert json.loads(raw)["brand_new_field"] == {"x": 1}  # nothing is lost
    assert con.execute("SELECT message_count FROM records WHERE request_id = 'bbbb0003' AND type = 'request'").fetchall() == [(None,)]
    con.close()


def test_very_large_lines(tmp_path, db):
    big = [{"role": "user", "content": "z" * (6 * 1024 * 1024)},
           {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "q", "arguments": "{}"}}]},
           {"role": "tool", "tool_call_id": "c1", "content": "rows"}]
    recs = [request("cccc0001", at(0), messages=big), response_error("cccc0001", at(0.1), NAKED_500, headers=NAKED_500_HEADERS)]
    run(db, [write_jsonl(tmp_path / "full.jsonl", recs)])
    con = connect(db)
    assert con.execute("SELECT has_messages, messages_tool_history FROM records WHERE type = 'request'").fetchall() == [(True, True)]
    assert con.execute("SELECT incident_class, tool_history_source FROM turns").fetchall() == [("tool-history-5xx", "messages")]
    con.close()


def test_missing_inputs_and_strangers_are_clear_errors(tmp_path, db):
    with pytest.raises(InputError, match="no such file"):
        run(db, [tmp_path / "nope.jsonl"])
    stranger = tmp_path / "notes.txt"
    stranger.write_text("Dear diary,\ntoday I analyzed logs.\n")
    report = run(db, [stranger])  # a stranger's file is skipped and said, never fatal to the run
    assert [Path(s["path"]).name for s in report.skipped_files] == ["notes.txt"]
    assert "not a proxy log" in report.skipped_files[0]["reason"]


def test_interrupted_run_leaves_a_consistent_database_and_the_next_run_completes(tmp_path):
    """Kill -9 an ingestion mid-way: what committed is whole, the rest comes next run."""
    logs = tmp_path / "logs"
    for d in range(12):
        recs = []
        for k in range(300):
            recs.extend(_pairs(1, start=d * 1440 + k * 2, session=f"s-{d}-{k}"))
        write_jsonl(logs / f"2026-11-{16 + d % 7}/chunk-{d:02d}.jsonl", recs)
    reference = fresh_db(tmp_path / "reference.duckdb")
    run(reference, [logs])
    ref = connect(reference)
    expected = ref.execute("SELECT count(*), count(DISTINCT file_id) FROM records").fetchall()[0]
    ref.close()

    db = tmp_path / "killed.duckdb"
    wal = Path(str(db) + ".wal")
    env = dict(os.environ, ANALYZER_BATCH_BYTES="20000")  # many small transactions: ~15 s for the whole run
    killed_mid_run = False
    for _attempt in range(3):
        for leftover in (db, wal):
            if leftover.exists():
                leftover.unlink()
        # The ingest as `analyze FILES` runs it (the commands' writing connection), without loading the
        # whole command line first (over a second of imports on a loaded machine).
        script = ("from analyzer.store.db import connect_writer; from analyzer.ingestion.logs import ingest; "
                  "from analyzer.classification.turns import refresh_turns; "
                  f"con = connect_writer({str(db)!r}); ingest(con, [{str(logs)!r}]); refresh_turns(con); con.close()")
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=env)
        # Kill it once its write-ahead log holds a dozen finished batches (~0.5 MB of the several MB the whole run
        # writes; the first ~0.2 MB are the new database's tables and batches stored but not yet finished): the
        # run is then surely under way and far from done, whatever the machine's load did to its start-up.
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if wal.exists() and wal.stat().st_size > 500_000:
                break
            time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            con = connect(db)
            files, recs = con.execute("SELECT count(*), coalesce(sum(records), 0) FROM source_files").fetchall()[0]
            if 0 < files < 12:
                killed_mid_run = True
                # every record belongs to a registered file, and every registered file is complete
                assert _count(con, "SELECT count(*) FROM records WHERE file_id NOT IN (SELECT file_id FROM source_files)") == 0
                assert _count(con, "SELECT count(*) FROM records") == recs
                con.close()
                break
            con.close()
        else:
            proc.wait()
    assert killed_mid_run, "could not interrupt the run mid-way"
    run(db, [logs])
    con = connect(db)
    assert con.execute("SELECT count(*), count(DISTINCT file_id) FROM records").fetchall()[0] == expected
    con.close()


def test_invalid_utf8_and_nul_bytes_lose_no_good_line(tmp_path, db):
    """Files DuckDB refuses as text are read in Python: good lines kept, bad ones quarantined."""
    recs = _pairs(2)
    lines = [json.dumps(r).encode() for r in recs]
    lines[1] = lines[1].replace(b'"answer"', b'"ans\xffwer"')  # invalid UTF-8 inside a string
    path = tmp_path / "damaged.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n" + b"\x00" * 40 + b"\n")
    report = run(db, [path])
    assert report.records == 4 and report.quarantined == 1
    con = connect(db)
    assert con.execute("SELECT line_no FROM quarantine").fetchall() == [(5,)]
    assert con.execute("SELECT count(*) FROM records").fetchall()[0][0] == 4
    con.close()


def test_file_names_with_glob_characters_are_read_exactly_once(tmp_path, db):
    """DuckDB reads paths as glob patterns: `day[1].jsonl` must not match `day1.jsonl`."""
    write_jsonl(tmp_path / "logs/day[1].jsonl", _pairs(2))
    write_jsonl(tmp_path / "logs/day1.jsonl", _pairs(3, start=100, session="s-2"))
    report = run(db, [tmp_path / "logs"])
    assert report.records == 10 and report.new_records == 10
    con = connect(db)
    per_file = dict((Path(p).name, n) for p, n in con.execute(
        "SELECT f.path, count(r.line_no) FROM source_files f LEFT JOIN records r USING (file_id) GROUP BY ALL").fetchall())
    assert per_file == {"day[1].jsonl": 4, "day1.jsonl": 6}
    assert con.execute("SELECT count(*), count(DISTINCT (file_id, line_no)) FROM records").fetchall() == [(10, 10)]
    con.close()


def test_timestamps_with_an_offset_are_stored_in_utc_and_deduplicate(tmp_path, db):
    rec = request("abcd0001", at(0))
    shifted = dict(rec, timestamp=rec["timestamp"].replace("T14:", "T16:").replace("Z", "+02:00"))
    run(db, [write_jsonl(tmp_path / "a.jsonl", [rec]), write_jsonl(tmp_path / "b.jsonl", [shifted])])
    con = connect(db)
    assert con.execute("SELECT count(*), min(ts) FROM records").fetchall() == [(1, at(0).replace(tzinfo=None))]
    con.close()


MESSAGE_CASES = [
    [{"role": "user", "content": "q"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": []}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": None,
      "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}],
    [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c", "content": "rows"}],
    [{"role": "function", "name": "f", "content": "rows"}],
    [{"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}],
    [{"role": "assistant", "content": "x", "function_call": None}],
    [{"role": "user", "content": "q", "tool_calls": [{"id": "c"}]}],
]


@pytest.fixture(scope="module")
def messages_db(tmp_path_factory) -> Path:
    """One request per case of MESSAGE_CASES (request id ``eeee000N`` for case N), ingested together.

    Each line is parsed and judged on its own (json_transform with the record's fixed
    shape), so one run holds every case as a run of each alone would."""
    tmp = tmp_path_factory.mktemp("messages")
    recs = [request(f"eeee{i:04d}", at(i), messages=m) for i, m in enumerate(MESSAGE_CASES)]
    db = fresh_db(tmp / "analyzer.duckdb")
    run(db, [write_jsonl(tmp / "m.jsonl", recs)])
    return db


@pytest.mark.parametrize("messages", MESSAGE_CASES)
def test_sql_tool_history_from_messages_agrees_with_the_online_rule(messages_db, messages):
    """The one SQL copy of a rule (ingestion's messages_tool_history) must say what
    analyzer.online.has_tool_history says."""
    from analyzer.online import has_tool_history

    rid = f"eeee{MESSAGE_CASES.index(messages):04d}"
    con = connect(messages_db, read_only=True)
    try:
        assert con.execute("SELECT messages_tool_history FROM records WHERE request_id = ?", [rid]
                           ).fetchall() == [(has_tool_history(messages),)]
    finally:
        con.close()


COUNTED_CASES = [
    (None, None), ([], 0), ([{"tool_call_id": "c1", "content": "rows"}], 1),
    ([{"tool_call_id": "c1", "content": "x" * 30_000}, {"tool_call_id": "c2", "content": "{\"a\": [1]}"}], 2),
    ([1, "two", None, [3]], 4), ("not a list", None), ({"tool_call_id": "c1"}, None), (7, None),
]


@pytest.fixture(scope="module")
def counted_db(tmp_path_factory) -> tuple[Path, Path]:
    """A request and its response per case of COUNTED_CASES (request id ``cccc000N`` for case N, the
    value as both lists), ingested together; the database and the log file."""
    tmp = tmp_path_factory.mktemp("counted")
    recs = []
    for i, (value, _) in enumerate(COUNTED_CASES):
        rid = f"cccc{i:04d}"
        recs += [request(rid, at(2 * i), tool_results=value),
                 response_ok(rid, at(2 * i + 1), content="ok", extra={"tool_calls": value})]
    path = write_jsonl(tmp / "c.jsonl", recs)
    db = fresh_db(tmp / "analyzer.duckdb")
    run(db, [path])
    return db, path


@pytest.mark.parametrize("value, count", COUNTED_CASES)
def test_counted_lists_keep_the_record_whatever_shape_they_have(counted_db, value, count):
    """tool_results_this_turn and tool_calls are counted, never stored: any JSON value
    gives its element count when it is a list, NULL otherwise, and the record itself
    (its other columns and its raw line) is kept as it was read."""
    db, path = counted_db
    i = COUNTED_CASES.index((value, count))
    con = connect(db, read_only=True)
    try:
        rows = con.execute("SELECT type, tool_results_count, tool_call_count, model, raw FROM records "
                           "WHERE request_id = ? ORDER BY ts", [f"cccc{i:04d}"]).fetchall()
    finally:
        con.close()
    assert [r[:4] for r in rows] == [("request", count, None, "glm-5"), ("response", None, count, "glm-5")]
    assert [r[4] for r in rows] == path.read_text().splitlines()[2 * i: 2 * i + 2]
