"""Hostile records a real proxy can write, through the real CLI into a real DuckDB file.

A lone surrogate escape, a record of tens of megabytes, a time no log can hold,
and a file rewritten in place with its size and modification time kept: each is
stored or quarantined with its reason, the run and every later one completes,
and nothing is stored twice.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import duckdb

from tests.support.records import at, request, response_ok, write_stdout
from tests.support.peak_rss import run_with_peak_rss
from tests.support.cli import analyze


def _analyze(cwd: Path, *args: str, timeout: int = 180):
    """The command, run in ``cwd`` in this process (tests/support/cli.py)."""
    return analyze(*args, cwd=cwd)


def _pairs(n: int, start: int = 0, session: str = "s-1") -> list[dict]:
    recs = []
    for i in range(n):
        rid = f"{0xc0000000 + start * 100 + i:08x}"
        recs.append(request(rid, at(start + i), session=session))
        recs.append(response_ok(rid, at(start + i + 0.01), content="answer", session=session))
    return recs


def _write(path: Path, recs: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in recs), encoding="utf-8")
    return path


def _q(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_records_timed_outside_the_log_times_are_quarantined_and_later_runs_work(tmp_path):
    recs = _pairs(6)
    for i, stamp in ((0, "10000-01-01T00:00:00.000000Z"), (2, "0000-01-01T00:00:00.000000Z"),
                     (4, "-0001-01-01T00:00:00.000000Z"), (6, "9999-12-31T00:00:00.000000Z"),
                     (8, "infinity")):
        recs[i]["timestamp"] = stamp
    _write(tmp_path / "logs/a.jsonl", recs)
    db = tmp_path / "a.duckdb"
    p = _analyze(tmp_path, "logs", "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["ingest"]["quarantined"] == 5 and summary["ingest"]["new_records"] == 7
    reasons = dict(_q(db, "SELECT line_no, reason FROM quarantine"))
    assert sorted(reasons) == [1, 3, 5, 7, 9]
    assert reasons[1] == "timestamp 10000-01-01T00:00:00.000000Z is not a log time (outside 2000-01-01 .. 2100-01-01)"
    assert "0000-01-01" in reasons[3] and "-0001-01-01" in reasons[5] and "9999-12-31" in reasons[7]
    assert _q(db, "SELECT min(ts)::VARCHAR, max(ts)::VARCHAR FROM records")[0][0].startswith("2026-11-16")
    # the responses of the quarantined requests are turns of their own: classified
    assert _q(db, "SELECT count(*) FROM turns")[0][0] == 6
    # the summary, the report's default week and a re-run all complete
    for args in (("logs", "--db", str(db)), ("report", "--db", str(db), "-o", str(tmp_path / "r.html")),
                 ("logs", "--db", str(db), "--json")):
        p = _analyze(tmp_path, *args)
        assert p.returncode == 0, (args, p.stderr)
    assert "2026-W47" in (tmp_path / "r.html").read_text(encoding="utf-8")


def test_a_lone_surrogate_escape_is_replaced_and_the_record_kept(tmp_path):
    recs = _pairs(3)
    recs[1]["content"] = "broken \ud83d emoji"  # json.dumps writes "broken \\ud83d emoji"
    recs[2]["user_message_this_turn"] = "half \udc00 and a whole \U0001f600"
    line = json.dumps(recs[1])
    assert "\\ud83d" in line
    _write(tmp_path / "logs/s3/2026-11-16/14-00-00-proxy-1-abcdef12.jsonl", recs)
    write_stdout(tmp_path / "logs/kubectl/pod.log", recs[:2])  # the stdout copies: the same records
    db = tmp_path / "a.duckdb"
    p = _analyze(tmp_path, "logs", "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    ing = json.loads(p.stdout)["ingest"]
    assert ing["quarantined"] == 0 and ing["new_records"] == 6 and ing["mended"] == 3
    assert _q(db, "SELECT count(*) FROM quarantine") == [(0,)]
    assert _q(db, "SELECT raw ->> 'content', content_chars FROM records WHERE request_id = 'c0000000' AND type = 'response'") == [
        ("broken \ufffd emoji", 14)]
    assert _q(db, "SELECT raw ->> 'user_message_this_turn' FROM records WHERE request_id = 'c0000001' AND type = 'request'") == [
        ("half \ufffd and a whole \U0001f600",)]
    # every turn classified, the mended response's among them
    assert _q(db, "SELECT count(*), count(*) FILTER (WHERE request_id = 'c0000000' AND incident_class IS NOT NULL) "
                  "FROM turns") == [(3, 1)]
    p = _analyze(tmp_path, "logs", "--db", str(db), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["ingest"]["new_records"] == 0
    assert _q(db, "SELECT count(*) FROM records") == [(6,)]


def _session_file(path: Path, session: str, pairs: int) -> Path:
    recs = []
    for i in range(pairs):
        rid = f"{i:08x}"
        recs.append(request(rid, at(i * 0.1), session=session, question="q" * 300))
        recs.append(response_ok(rid, at(i * 0.1 + 0.01), content="a" * 300, session=session))
    return _write(path, recs)


def _rewrite_keeping_size_and_mtime(path: Path, after: int, old: str, new: str) -> None:
    """Records from byte ``after`` on get session ``new`` for ``old`` (as long): same size, mtime put back."""
    st = path.stat()
    data = path.read_bytes()
    changed = data[:after] + data[after:].replace(old.encode(), new.encode())
    assert len(changed) == len(data) and changed != data
    path.write_bytes(changed)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def test_a_file_rewritten_with_its_size_and_mtime_kept_is_read_again(tmp_path):
    small = _session_file(tmp_path / "logs/small.jsonl", "s-small", 20)  # < 64 KiB
    gap = _session_file(tmp_path / "logs/gap.jsonl", "s-gapp", 50)  # 64..128 KiB: past the first 64 KiB
    big = _session_file(tmp_path / "logs/big.jsonl", "s-bigg", 3000)  # > 1 MiB: sampled
    assert small.stat().st_size < 65536 < gap.stat().st_size < 131072 and big.stat().st_size > 2 * 2**20
    db = tmp_path / "a.duckdb"
    p = _analyze(tmp_path, "logs", "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ingest"]["new_records"] == 2 * (20 + 50 + 3000)
    _rewrite_keeping_size_and_mtime(small, 0, "s-small", "s-smal2")
    _rewrite_keeping_size_and_mtime(gap, 70000, "s-gapp", "s-gap2")
    _rewrite_keeping_size_and_mtime(big, 2**20, "s-bigg", "s-big2")  # the second MiB on
    p = _analyze(tmp_path, "logs", "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    ing = json.loads(p.stdout)["ingest"]
    assert ing["files_ingested"] == 3 and ing["files_unchanged"] == 0
    rows = dict(_q(db, "SELECT session_id, count(*) FROM records GROUP BY ALL"))
    assert rows["s-smal2"] == 40 and rows["s-small"] == 40  # the old records stay; the new ones are added
    assert rows["s-gap2"] > 0 and rows["s-big2"] > 0
    total = sum(rows.values())
    # nothing stored twice: a re-run, a touch and a chmod read nothing new
    for step in ("again", "touch", "chmod"):
        if step == "touch":
            os.utime(big, None)
        if step == "chmod":
            os.chmod(gap, 0o600)
        p = _analyze(tmp_path, "logs", "--db", str(db), "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["ingest"]["new_records"] == 0, step
    assert _q(db, "SELECT count(*) FROM records") == [(total,)]
    p = _analyze(tmp_path, "logs", "--db", str(db), "--json")
    assert json.loads(p.stdout)["ingest"]["files_unchanged"] == 3


def test_a_55_mib_record_is_quarantined_with_its_size_and_the_rest_is_stored(tmp_path):
    recs = _pairs(3)
    recs[1]["content"] = "x" * (55 * 2**20)  # a valid record: one huge answer
    _write(tmp_path / "logs/a.jsonl", recs)
    _write(tmp_path / "logs/b.jsonl", _pairs(3, start=10, session="s-2"))
    db = tmp_path / "a.duckdb"
    p, peak = run_with_peak_rss([sys.executable, "-m", "analyzer", "logs", "--db", str(db), "--json"],
                                cwd=tmp_path, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    ing = json.loads(p.stdout)["ingest"]
    assert (ing["new_records"], ing["quarantined"], ing["long_lines"], ing["files_ingested"]) == (11, 1, 1, 2)
    assert peak < 2**30, f"peak RSS {peak / 2**20:.0f} MiB"
    (line_no, reason), = _q(db, "SELECT line_no, reason FROM quarantine")
    assert line_no == 2 and reason.startswith("line of 57,67") and "ANALYZER_MAX_LINE_BYTES" in reason
    assert _q(db, "SELECT count(*) FROM turns") == [(6,)]
    p = _analyze(tmp_path, "logs", "--db", str(db))
    assert p.returncode == 0 and "1 malformed lines quarantined" in p.stdout and "line of 57,67" in p.stdout
    assert _q(db, "SELECT count(*) FROM records") == [(11,)] and _q(db, "SELECT count(*) FROM quarantine") == [(1,)]
