"""Inputs exactly as production writes them, bad files next to good ones, big files in pieces.

Every case builds real-format records, ingests them into a real DuckDB file and
checks that each valid record is stored exactly once and each problem is said.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analyzer.store.db import connect
from analyzer.ingestion.logs import ingest
from analyzer.classification.turns import refresh_turns
from tests.support.cli import wait_until_open
from tests.support.fresh_db import fresh_db
from tests.support.ingesting import run
from tests.support.peak_rss import run_with_peak_rss
from tests.support.records import (
    NAKED_500,
    TOOL_CALL,
    TOOL_RESULT,
    at,
    request,
    response_error,
    response_ok,
    stamp,
    stdout_line,
    write_jsonl,
)
from tests.support.cli import analyze, pipe_of


def _pairs(n: int, start: float = 0.0, session: str = "s-1", prefix: int = 0xb0000000) -> list[dict]:
    recs = []
    for i in range(n):
        rid = f"{prefix + int(start * 100) + i:08x}"
        recs.append(request(rid, at(start + i), session=session, tool_results=TOOL_RESULT if i else None))
        recs.append(response_ok(rid, at(start + i + 0.01), content="answer", session=session))
    return recs


def q(db: Path, sql: str, params=None) -> list[tuple]:
    con = connect(db)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A new, empty analyzer database (a copy: creating one is not what these tests check)."""
    return fresh_db(tmp_path / "analyzer.duckdb")


# -- multi-pod stdout -------------------------------------------------------

def _multi_pod(path: Path, pods: dict[str, list[dict]], *, timestamps: bool, stern: bool = False) -> Path:
    lines = []
    for pod, recs in pods.items():
        lines.append(f"[pod/{pod}/proxy] INFO:     Uvicorn running on http://0.0.0.0:8000" if not stern
                     else f"{pod} proxy INFO:     Uvicorn running on http://0.0.0.0:8000")
        for r in recs:
            ts = f"{stamp(at(0))} " if timestamps else ""
            body = stdout_line(r)
            lines.append(f"{pod} proxy {ts}{body}" if stern else f"[pod/{pod}/proxy] {ts}{body}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("timestamps", [False, True])
@pytest.mark.parametrize("stern", [False, True])
def test_multi_pod_stdout_keeps_the_replica(tmp_path, db, timestamps, stern):
    pods = {"llm-proxy-7d4b9c6f-abcde": _pairs(3, session="s-a"),
            "llm-proxy-7d4b9c6f-fghij": _pairs(2, start=10, session="s-b", prefix=0xc0000000)}
    log = _multi_pod(tmp_path / "all.log", pods, timestamps=timestamps, stern=stern)
    report = run(db, [log])
    assert report.new_records == 10 and report.quarantined == 0
    rows = dict(q(db, "SELECT proxy_pod, count(*) FROM records GROUP BY ALL"))
    assert rows == {"llm-proxy-7d4b9c6f-abcde": 6, "llm-proxy-7d4b9c6f-fghij": 4}
    turns = dict(q(db, "SELECT proxy_pod, count(*) FROM turns GROUP BY ALL"))
    assert turns == {"llm-proxy-7d4b9c6f-abcde": 3, "llm-proxy-7d4b9c6f-fghij": 2}


def test_the_replica_survives_when_the_full_copy_replaces_the_stdout_copy(tmp_path, db):
    recs = _pairs(2, session="s-a")
    log = _multi_pod(tmp_path / "pods.log", {"llm-proxy-1": recs}, timestamps=True)
    run(db, [log])
    chunk = write_jsonl(tmp_path / "s3" / "2026-11-16" / "00-00-00-1.jsonl", recs)
    report = run(db, [chunk])
    assert report.new_records == 0
    assert q(db, "SELECT count(*), count(DISTINCT proxy_pod), min(proxy_pod) FROM records") == [(4, 1, "llm-proxy-1")]


def test_s3_chunk_names_say_the_replica(tmp_path, db):
    chunk = write_jsonl(tmp_path / "2026-11-16" / "14-03-07-llm-proxy-7d4b9c6f-abcde-7-0a1b2c3d.jsonl", _pairs(1))
    old = write_jsonl(tmp_path / "2026-11-16" / "14-03-07-12345.jsonl", _pairs(1, start=5))
    run(db, [chunk, old])
    assert q(db, "SELECT proxy_pod, count(*) FROM records GROUP BY ALL ORDER BY 1 NULLS LAST") == [
        ("llm-proxy-7d4b9c6f-abcde", 2), (None, 2)]


# -- stdout lines that are data --------------------------------------------

def test_stdout_lines_that_are_data_become_proxy_events(tmp_path, db):
    rid = "d0000001"
    lines = [
        "[pod/p-1/proxy] 2026-11-16T10:00:00.000000Z " + stdout_line(request(rid, at(0))),
        f"[pod/p-1/proxy] 2026-11-16T10:06:00.000000Z ⚠️  Slow completion: 312000ms exceeds the 300s client-side "
        f"warning threshold (model=glm-5, request_id={rid}) — the caller may already have given up",
        f"[pod/p-1/proxy] 2026-11-16T10:06:00.100000Z 🧹 Normalized 2 tool-call argument(s) with leaked arg dialect "
        f"(model=glm-5, request_id={rid})",
        "[pod/p-2/proxy] 2026-11-16T11:00:00Z ⚠️  Log buffer exceeded 10000 entries during outage; dropped 37 oldest",
        "[pod/p-2/proxy] 2026-11-16T11:00:01Z ⚠️  S3 flush failed: timeout — 120 entries re-queued for retry",
        "[pod/p-2/proxy] 2026-11-16T11:01:00Z 🚨 Logging imbalance: 40 responses for 52 requests (ratio 0.77 < 0.9)",
        "[pod/p-3/proxy] ⚠️  log_response failed (request still served): TypeError: bad",
    ]
    log = tmp_path / "pods.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = run(db, [log])
    assert report.proxy_events == 6
    rows = q(db, "SELECT kind, proxy_pod, request_id, model, lost, value FROM proxy_events ORDER BY line_no")
    assert rows == [
        ("slow-completion", "p-1", rid, "glm-5", 0, 312000),
        ("normalized-arguments", "p-1", rid, "glm-5", 0, 2),
        ("buffer-dropped", "p-2", None, None, 37, 10000),
        ("flush-failed", "p-2", None, None, 0, 120),
        ("logging-imbalance", "p-2", None, None, 12, 40),
        ("log-response-failed", "p-3", None, None, 1, None),
    ]
    assert q(db, "SELECT sum(lost) FROM proxy_events") == [(50,)]
    assert q(db, "SELECT min(ts) FROM proxy_events")[0][0].isoformat() == "2026-11-16T10:06:00"


def test_data_lines_under_a_stern_prefix_keep_their_replica_and_time(tmp_path, db):
    log = tmp_path / "stern.log"
    log.write_text(
        "llm-proxy-7d4b9c6f-abcde proxy 2026-11-16T10:00:00Z ⚠️  Log buffer exceeded 10000 entries during outage; "
        "dropped 5 oldest\n"
        "llm-proxy-7d4b9c6f-fghij proxy 🚨 Logging imbalance: 10 responses for 12 requests (ratio 0.83 < 0.9)\n"
        "llm-proxy-7d4b9c6f-fghij proxy " + stdout_line(request("d0000009", at(0))) + "\n", encoding="utf-8")
    run(db, [log])
    assert q(db, "SELECT proxy_pod, ts IS NOT NULL, lost FROM proxy_events ORDER BY line_no") == [
        ("llm-proxy-7d4b9c6f-abcde", True, 5), ("llm-proxy-7d4b9c6f-fghij", False, 2)]


def test_a_stdout_log_read_again_after_it_grew_keeps_each_event_once(tmp_path, db):
    log = tmp_path / "pod.log"
    line = "[pod/p-1/proxy] 2026-11-16T11:00:00Z ⚠️  Log buffer exceeded 10000 entries during outage; dropped 3 oldest\n"
    log.write_text(line + stdout_line(request("d000000a", at(0))) + "\n", encoding="utf-8")
    run(db, [log])
    with open(log, "a", encoding="utf-8") as f:
        f.write(stdout_line(response_ok("d000000a", at(0.1), content="x")) + "\n")
    run(db, [log])
    assert q(db, "SELECT count(*), sum(lost) FROM proxy_events") == [(1, 3)]
    assert q(db, "SELECT count(*) FROM records") == [(2,)]


# -- bad files next to good ones --------------------------------------------

def test_each_bad_file_is_skipped_and_said_and_costs_no_other_file(tmp_path, db):
    logs = tmp_path / "logs"
    good = write_jsonl(logs / "good.jsonl", _pairs(3))
    (logs / "garbage-first.jsonl").write_bytes(b"\x00\x01\x02binary\xff\n" + json.dumps(_pairs(1, start=20)[0]).encode() + b"\n")
    (logs / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + json.dumps(_pairs(1, start=30)[0]).encode() + b"\n")
    (logs / "fake.jsonl.gz").write_bytes(b"this is not gzip at all\n")
    full = gzip.compress(("\n".join(json.dumps(r) for r in _pairs(50, start=40)) + "\n").encode())
    (logs / "truncated.jsonl.gz").write_bytes(full[: len(full) // 2])
    (logs / "dangling.jsonl").symlink_to(logs / "nowhere.jsonl")
    (logs / "notes.txt").write_text("remember to rotate the logs\n")
    (logs / "config.json").write_text(json.dumps({"providers": {"nrp": {"url": "http://x"}}}, indent=2))
    (logs / "table.csv").write_text("name,count\nmarin,1\n")
    pq.write_table(pa.table({"a": [1, 2]}), logs / "wrong.parquet")
    os.mkfifo(logs / "fifo.jsonl")
    report = run(db, [logs])
    skipped = {Path(s["path"]).name: s["reason"] for s in report.skipped_files}
    assert set(skipped) == {"fake.jsonl.gz", "truncated.jsonl.gz", "dangling.jsonl", "notes.txt", "wrong.parquet",
                            "config.json", "table.csv"}
    assert "neither Prometheus metrics nor proxy records" in skipped["config.json"]
    assert "not gzip" in skipped["fake.jsonl.gz"] and "dangling" in skipped["dangling.jsonl"]
    assert "lines, which are kept" in skipped["truncated.jsonl.gz"]
    assert "entry" in skipped["wrong.parquet"] and "not a proxy log" in skipped["notes.txt"]
    assert [Path(n["path"]).name for n in report.notes] == ["fifo.jsonl"]
    # the clean files, the record after a garbage first line, the BOM file and what the
    # truncated gzip held before its cut are all in; the garbage line is quarantined
    assert q(db, "SELECT count(*) FROM records WHERE file_id IN (SELECT file_id FROM source_files WHERE path = ?)",
             [str(good)]) == [(6,)]
    names = dict(q(db, "SELECT regexp_extract(path, '[^/]+$'), records FROM source_files"))
    assert names["garbage-first.jsonl"] == 1 and names["bom.jsonl"] == 1 and 0 < names["truncated.jsonl.gz"] < 100
    assert q(db, "SELECT regexp_extract(path, '[^/]+$'), line_no FROM quarantine") == [("garbage-first.jsonl", 1)]
    assert {r[0] for r in q(db, "SELECT regexp_extract(path, '[^/]+$') FROM skipped_files")} == set(skipped)
    assert q(db, "SELECT count(*) FROM turns")[0][0] > 0  # turns are current despite the skips


def test_unreadable_files_and_folders_are_reported(tmp_path):
    """A locked folder and a locked file are reported; root runs the CLI without its
    permission-bypassing capabilities (setpriv), so the kernel really refuses."""
    logs = tmp_path / "logs"
    write_jsonl(logs / "good.jsonl", _pairs(1))
    write_jsonl(logs / "locked" / "x.jsonl", _pairs(1, start=3))
    secret = write_jsonl(logs / "secret.jsonl", _pairs(1, start=6))
    os.chmod(logs / "locked", 0)
    os.chmod(secret, 0)
    prefix = []
    if os.geteuid() == 0:
        prefix = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search"]
    try:
        p = subprocess.run([*prefix, sys.executable, "-m", "analyzer.cli.app", str(logs), "--db", str(fresh_db(tmp_path / "a.duckdb")),
                            "--json"], capture_output=True, text=True)
    finally:
        os.chmod(logs / "locked", 0o755)
        os.chmod(secret, 0o644)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    reasons = {Path(s["path"]).name: s["reason"] for s in doc["ingest"]["skipped_files"]}
    assert "cannot read folder" in reasons["locked"] and "permission denied" in reasons["secret.jsonl"].lower()
    assert doc["ingest"]["new_records"] == 2


def test_the_cli_lists_skipped_files_and_exits_as_documented(tmp_path):
    logs = tmp_path / "logs"
    write_jsonl(logs / "good.jsonl", _pairs(2))
    (logs / "notes.txt").write_text("not a log\n")
    db = fresh_db(tmp_path / "a.duckdb")
    p = analyze(logs, "--db", db, "--json")
    assert p.returncode == 0, p.stderr
    assert "skipped" in p.stderr and "notes.txt" in p.stderr
    doc = json.loads(p.stdout)
    assert [Path(s["path"]).name for s in doc["ingest"]["skipped_files"]] == ["notes.txt"]
    p = analyze(logs, "--db", db, "--strict", "--json")
    assert p.returncode == 8, p.stderr  # --strict: the run completed, something was skipped
    p = analyze(logs / "notes.txt", "--db", db)
    assert p.returncode == 3 and "nothing was ingested" in p.stderr


# -- one reader semantics for every size -----------------------------------

def test_cr_only_line_endings_read_the_same_in_a_small_and_a_big_file(tmp_path, db):
    small = _pairs(20)
    big = _pairs(400, start=100)
    (tmp_path / "small.jsonl").write_bytes(("\r".join(json.dumps(r) for r in small) + "\r").encode())
    (tmp_path / "big.jsonl").write_bytes(("\r".join(json.dumps(r) for r in big) + "\r").encode())
    assert (tmp_path / "big.jsonl").stat().st_size > 64 * 1024
    report = run(db, [tmp_path / "small.jsonl", tmp_path / "big.jsonl"])
    assert report.new_records == 40 + 800 and report.quarantined == 0


def test_a_long_line_is_kept_and_a_longer_one_is_quarantined_without_losing_its_neighbours(tmp_path, db):
    env = dict(os.environ, ANALYZER_MAX_LINE_BYTES=str(2 * 1024 * 1024))
    recs = _pairs(2)
    big = request("e0000001", at(9), messages=[{"role": "user", "content": "z" * (1024 * 1024)}])
    huge = request("e0000002", at(9.5), messages=[{"role": "user", "content": "y" * (5 * 1024 * 1024)}])
    path = write_jsonl(tmp_path / "full.jsonl", [recs[0], big, huge, recs[1]])
    db_path = fresh_db(tmp_path / "a.duckdb")  # a copy of an empty one: creating it is not under test
    # A fresh interpreter reads the bound when it imports the reader; it ingests and classifies as
    # `analyze FILES` does (the commands' writing connection), without loading the whole command line.
    script = ("from analyzer.store.db import connect_writer; from analyzer.ingestion.logs import ingest; "
              "from analyzer.classification.turns import refresh_turns; "
              f"con = connect_writer({str(db_path)!r}); ingest(con, [{str(path)!r}]); refresh_turns(con); con.close()")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert q(db_path, "SELECT count(*) FROM records") == [(3,)]
    rows = q(db_path, "SELECT line_no, reason FROM quarantine")
    assert len(rows) == 1 and rows[0][0] == 3 and "longer than" in rows[0][1]


def test_a_gzip_bomb_is_read_in_bounded_memory_and_the_lines_around_it_are_kept(tmp_path, db):
    recs = _pairs(2)
    path = tmp_path / "bomb.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=9) as g:
        g.write((json.dumps(recs[0]) + "\n").encode())
        zeros = b"0" * (8 * 1024 * 1024)
        for _ in range(48):  # one 384 MB line of zeros from a file of a few hundred KB
            g.write(zeros)
        g.write(b"\n" + (json.dumps(recs[1]) + "\n").encode())
    assert path.stat().st_size < 2 * 1024 * 1024
    script = ("from analyzer.store.db import connect; from analyzer.ingestion.logs import ingest; "
              f"con = connect({str(db)!r}); r = ingest(con, [{str(path)!r}]); print(r.new_records, r.quarantined)")
    done, peak = run_with_peak_rss([sys.executable, "-c", script], text=True, check=True)
    new, bad = map(int, done.stdout.split())
    peak_mb = peak // 2**20
    assert (new, bad) == (2, 1)
    assert peak_mb < 600, f"peak RSS {peak_mb} MB while reading a 384 MB line"


# -- big files in pieces, resumed ---------------------------------------------

@pytest.mark.parametrize("compress", [False, True])
def test_a_big_file_is_many_transactions_and_a_killed_run_resumes_inside_it(tmp_path, compress):
    recs = []
    for k in range(400):
        recs.extend(_pairs(2, start=k * 3, session=f"s-{k}", prefix=0xa0000000 + k * 10))
    path = write_jsonl(tmp_path / ("week.jsonl.gz" if compress else "week.jsonl"), recs, compress=compress)
    reference = fresh_db(tmp_path / "ref.duckdb")
    run(reference, [path])
    expected = q(reference, "SELECT count(*), count(DISTINCT request_id), sum(line_no) FROM records")[0]
    assert expected[0] == 1600

    db = fresh_db(tmp_path / "killed.duckdb")
    env = dict(os.environ, ANALYZER_BATCH_BYTES="30000")  # a batch every ~60 lines
    # Stop the run by an exception inside the ingest after a few committed batches.
    script = f"""
import analyzer.ingestion.logs as ing
from analyzer.store.db import connect
calls = [0]
orig = ing._Ingest.flush
def flush(self):
    calls[0] += 1
    if calls[0] == 6:
        raise SystemExit(9)
    orig(self)
ing._Ingest.flush = flush
con = connect({str(db)!r})
ing.ingest(con, [{str(path)!r}])
"""
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert p.returncode == 9, p.stderr
    part = q(db, "SELECT count(*), max(line_no) FROM records")[0]
    state = q(db, "SELECT complete, lines_done, records FROM source_files")[0]
    assert 0 < part[0] < 1600 and state[0] is False and state[1] == part[1] and state[2] == part[0]
    con = connect(db)
    report = ingest(con, [str(path)])
    refresh_turns(con)
    con.close()
    assert report.files_resumed == 1 and report.new_records == 1600 - part[0]
    assert report.lines == 1600 - state[1]  # resumed where it stopped: nothing read twice
    assert q(db, "SELECT count(*), count(DISTINCT request_id), sum(line_no) FROM records")[0] == expected
    assert q(db, "SELECT complete, lines_done FROM source_files") == [(True, 1600)]


# -- standard input -----------------------------------------------------------

@pytest.mark.parametrize("compress", [False, True])
def test_standard_input_from_a_pipe(tmp_path, compress):
    recs = _pairs(5)
    text = "".join(stdout_line(r) + "\n" for r in recs).encode()
    data = gzip.compress(text) if compress else text
    db = fresh_db(tmp_path / "a.duckdb")
    for arg in ("-", "/dev/stdin"):
        with pipe_of(data) as stdin:  # a real pipe, read in this process
            p = analyze(arg, "--db", db, "--json", stdin=stdin)
        assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["ingest"]["new_records"] == 0 and doc["turns"] == 5  # the second read added nothing
    assert q(db, "SELECT count(*) FROM records") == [(10,)]


@pytest.mark.slow
def test_standard_input_is_committed_as_it_arrives(tmp_path):
    """A live `kubectl logs -f | analyze -`: what arrived is committed while the pipe stays open.

    DuckDB locks the file while the writer runs, so the proof is the hard way:
    records are written, the run is killed with the pipe still open, and the
    database holds them.
    """
    import signal
    import time

    db = tmp_path / "live.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "analyzer.cli.app", "-", "--db", str(db), "--json"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for r in _pairs(3):
            proc.stdin.write((json.dumps(r) + "\n").encode())
        proc.stdin.flush()
        # Timed from the moment the run holds the database open, not from its start: however long the
        # interpreter takes to start, the lines are waiting when it reads, and the idle flush commits
        # them 2 s after the last one.
        wait_until_open(proc, db)
        time.sleep(4)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdin.close()
    assert q(db, "SELECT count(*) FROM records") == [(6,)]


# -- the mirror layout -------------------------------------------------------

def _parquet(path: Path, recs: list[dict], wide: bool) -> None:
    cols = {"ts": [r["timestamp"] for r in recs], "type": [r["type"] for r in recs],
            "request_id": [r.get("request_id") for r in recs], "origin": [r.get("origin") for r in recs],
            "entry": [json.dumps(r) for r in recs]}
    if wide:
        cols.update({"session_id": [r.get("session_id") for r in recs], "model": [r.get("model") for r in recs],
                     "latency_ms": [r.get("latency_ms") for r in recs]})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(cols), path)


def test_the_mirror_layout_counts_each_record_once(tmp_path, db):
    mirror = tmp_path / "mirror"
    today = _pairs(3, start=0, session="s-today")
    overlap = _pairs(2, start=100, session="s-cron")  # the hour around the cron: chunks and Parquet
    daily = _pairs(2, start=200, session="s-daily") + overlap
    monthly = _pairs(2, start=300, session="s-month")
    write_jsonl(mirror / "2026-11-16" / "10-00-00-llm-proxy-a-7-0a1b2c3d.jsonl", today + overlap)
    _parquet(mirror / "consolidated" / "daily" / "2026-11-15.parquet", daily, wide=True)
    _parquet(mirror / "consolidated" / "monthly" / "2026-10.parquet", monthly, wide=False)
    pq.write_table(pa.table({"session_id": ["s"], "turns": [3]}), _mk(mirror / "sessions" / "daily" / "2026-11-15.parquet"))
    pq.write_table(pa.table({"session_id": ["s"], "n": [1]}), _mk(mirror / "session-rollup" / "monthly" / "2026-10.parquet"))
    report = run(db, [mirror])
    assert report.skipped_files == []
    assert sorted(Path(n["path"]).name for n in report.notes) == ["session-rollup", "sessions"]
    assert q(db, "SELECT count(*) FROM records") == [(len(today) + len(overlap) + 4 + len(monthly),)]
    assert report.duplicates == len(overlap)
    assert q(db, "SELECT count(*) FROM turns") == [(9,)]


def _mk(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_prometheus_exports_among_the_logs_are_loaded_as_metrics(tmp_path):
    logs = tmp_path / "logs"
    write_jsonl(logs / "chunk.jsonl", _pairs(2))
    doc = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"__name__": "up", "pod": "glm-5-0", "model_name": "glm-5"},
         "values": [[1763251200 + 30 * i, "1"] for i in range(10)]}]}}
    (logs / "up.json").write_text(json.dumps(doc, indent=2))
    db = fresh_db(tmp_path / "a.duckdb")
    p = analyze(logs, "--db", db, "--json")
    assert p.returncode == 0, p.stderr
    assert "loaded as metrics" in p.stderr
    assert q(db, "SELECT count(*) FROM quarantine") == [(0,)]
    assert q(db, "SELECT count(*) FROM metric_samples WHERE metric = 'up'") == [(10,)]


# -- pairing ------------------------------------------------------------------

def test_an_id_shared_by_two_sessions_and_across_a_month_stays_two_turns(tmp_path, db):
    rid = "abad1dea"
    recs = [
        request(rid, at(0), session="s-one"), response_error(rid, at(0.2), NAKED_500, session="s-one"),
        request(rid, at(0.1), session="s-two"), response_ok(rid, at(0.3), content="fine", session="s-two"),
        # no session (old clients), the same id a month apart
        request(rid, at(0), session=None), response_ok(rid, at(0.5), content="early", session=None),
        request(rid, at(60 * 24 * 30), session=None),
        response_ok(rid, at(60 * 24 * 30 + 1), content="late", tool_calls=TOOL_CALL, session=None),
    ]
    run(db, [write_jsonl(tmp_path / "c.jsonl", recs)])
    rows = q(db, "SELECT session_id, incident_class, latency_ms IS NOT NULL FROM turns ORDER BY ts, session_id")
    assert len(rows) == 4 and all(r[2] for r in rows)
    assert sorted((r[0], r[1]) for r in rows if r[0]) == [("s-one", "other-5xx"), ("s-two", "ok")]


def test_a_response_hours_after_a_request_is_not_its_answer(tmp_path, db):
    rid = "0dd0dd00"
    recs = [request(rid, at(0), session=None), response_ok(rid, at(300), content="x", session=None)]
    run(db, [write_jsonl(tmp_path / "c.jsonl", recs)])
    assert sorted(r[0] for r in q(db, "SELECT incident_class FROM turns")) == ["ok", "unanswered"]


def test_system_prompt_records_are_kept_and_joinable(tmp_path, db):
    sha = "ab" * 32
    sp = {"timestamp": stamp(at(0)), "type": "system_prompt", "origin": "https://app", "system_sha256": sha,
          "content": "You are a helpful geospatial agent."}
    req = request("5a5a5a5a", at(0.1), messages=[{"role": "system", "system_sha256": sha, "content_len": 35, "_dedup": True},
                                                   {"role": "user", "content": "hi"}])
    report = run(db, [write_jsonl(tmp_path / "full.jsonl", [sp, req, response_ok("5a5a5a5a", at(0.2), content="hello")])])
    assert report.quarantined == 0 and report.new_records == 3
    rows = q(db, """SELECT s.raw ->> 'content' FROM records r, records s
                    WHERE r.type = 'request' AND s.type = 'system_prompt'
                      AND s.system_sha256 = r.raw -> '$.messages[0]' ->> 'system_sha256'""")
    assert rows == [("You are a helpful geospatial agent.",)]


def test_a_record_prefix_is_found_anywhere_in_a_head_as_a_search_per_prefix_finds_it():
    """The form of a file is told from its head: the quick test for a stdout record prefix
    (the prefixes' lead bytes first) must answer what a search for each prefix answers."""
    from analyzer.io.sources import KUBECTL, JSONL, RECORD_PREFIXES, _has_record_prefix, detect_text_form

    record = json.dumps({"type": "response", "timestamp": "2026-11-16T10:00:00Z", "request_id": "0000abcd",
                         "content": "ok"})
    ascii_lines = (record + "\n") * 300  # ~30 KB of the proxy's (ASCII) JSON
    heads = [ascii_lines.encode(), b"", ("caf\u00e9 \u2713 done \u2717\n" + ascii_lines).encode(),
             ('{"content": "\U0001f4e5 REQUEST" }\n').encode()]
    for prefix in RECORD_PREFIXES:
        for before in ("", "[pod/glm-proxy-7d9/proxy] ", "2026-11-16T10:00:00.123Z "):
            heads.append((ascii_lines + before + prefix + record + "\n").encode())  # deep in the head
            heads.append((before + prefix + record + "\n" + ascii_lines).encode())
        heads.append((ascii_lines + prefix[:-2]).encode())  # cut short: not a prefix
    for head in heads:
        expected = any(p.encode() in head for p in RECORD_PREFIXES)
        assert _has_record_prefix(head) == expected, head[-80:]
    assert detect_text_form("a.jsonl", heads[0])[0] == JSONL
    assert detect_text_form("a.jsonl", heads[2])[0] == JSONL  # non-ASCII text, no prefix
    assert detect_text_form("a.log", heads[4])[0] == KUBECTL  # a prefix after 30 KB of JSON
