"""`analyze` as an operator's tool, driven through the real command: Unix habits, a database
that says what it holds, errors in one line with their exit codes, safe terminal output.

Terminal cases run on a real pty; the closed pipe is a real `| head -1`; Ctrl-C is a
real SIGINT sent to a running ingest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from analyzer.core.errors import ExitCode
from tests.support.records import (
    NAKED_500, T0, TOOL_RESULT, at, request, response_error, response_ok, write_jsonl, write_stdout,
)
from tests.support.terminal import ROOT, analyze_on_pty
from tests.support.cli import Ran, wait_until_open
from tests.support.cli import analyze as run_analyze


def analyze(*args: str, env: dict | None = None, **kw) -> Ran:
    """The command as a user runs it from the repository (in this process: tests/support/cli.py); ``env`` adds
    to the environment."""
    return run_analyze(*args, env={**os.environ, **(env or {})}, cwd=kw.pop("cwd", ROOT), **kw)


def one_error_line(p: subprocess.CompletedProcess) -> str:
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("analyze: error: "), p.stderr
    assert "Traceback" not in p.stderr
    return lines[0]


def _week_records(model_b: str = "qwen3", day0: datetime = T0, prefix: int = 0xd0000000) -> list[dict]:
    recs = []
    for i in range(6):
        rid = f"{prefix + i:08x}"
        model = "glm-5" if i < 4 else model_b
        ts = day0 + timedelta(days=i)
        recs.append(request(rid, ts, model=model, tool_results=TOOL_RESULT, session=f"s{prefix}-{i}"))
        if i in (1, 2):
            recs.append(response_error(rid, ts + timedelta(seconds=5), NAKED_500, model=model, session=f"s{prefix}-{i}"))
        else:
            recs.append(response_ok(rid, ts + timedelta(seconds=5), content="ok", model=model, session=f"s{prefix}-{i}"))
    return recs


@pytest.fixture
def week(tmp_path: Path) -> Path:
    """Six turns over six days (glm-5 x4, qwen3 x2), in an S3-like folder."""
    return write_jsonl(tmp_path / "s3" / "2026-11-16" / "14-00-00-proxy-1-0a1b2c3d.jsonl", _week_records())


def _ingested_week(week: Path, db: Path) -> Path:
    """``week`` ingested into a new database ``db`` by the command."""
    p = analyze(str(week), "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    return db


@pytest.fixture(scope="module")
def _built_week_db(tmp_path_factory) -> Path:
    """The week ingested once for the module (an ingest is most of a second; copying the file, milliseconds).
    Its log lives in the module's own folder: a test whose checks name the log's path or its source
    folder uses ``own_week_db``."""
    tmp = tmp_path_factory.mktemp("week")
    week = write_jsonl(tmp / "s3" / "2026-11-16" / "14-00-00-proxy-1-0a1b2c3d.jsonl", _week_records())
    return _ingested_week(week, tmp / "week.duckdb")


@pytest.fixture
def week_db(_built_week_db, tmp_path) -> Path:
    """A copy of the module's week database, the test's own to write to."""
    return Path(shutil.copy(_built_week_db, tmp_path / "week.duckdb"))


@pytest.fixture
def own_week_db(week, tmp_path) -> Path:
    """The test's ``week`` ingested into a database of its own (the stored paths are the test's)."""
    return _ingested_week(week, tmp_path / "week.duckdb")


# ---------------------------------------------------------------------------
# 1. Unix habits


def test_version_short_help_and_readable_metavars():
    from analyzer import __version__

    for flag in ("--version", "-V"):
        p = analyze(flag)
        assert p.returncode == 0 and p.stdout.strip() == f"analyze {__version__}"
    p = analyze("-h")
    assert p.returncode == 0 and "forget" in p.stdout and "--version" in p.stdout
    p = analyze("run", "-h")
    assert p.returncode == 0
    # a plain typer app: typer shows an argument's type beside it (FILES <list[str]>), the options' metavars as given
    assert "{files}" not in p.stdout
    assert "[FILES]..." in p.stdout and "--since TIME" in p.stdout and "--db PATH" in p.stdout
    p = analyze("sql", "-h")
    assert p.returncode == 0 and "--param NAME=VALUE" in p.stdout


def test_a_mistyped_command_says_did_you_mean(tmp_path):
    p = analyze("reprot", "--db", str(tmp_path / "a.duckdb"))
    assert p.returncode == ExitCode.USAGE
    assert "did you mean `analyze report`?" in one_error_line(p)
    assert not (tmp_path / "a.duckdb").exists()


def test_a_closed_pipe_ends_quietly_with_0(week, week_db):
    db = str(week_db)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    py = f"{sys.executable} -m analyzer.cli.app"
    logs = week.parent.parent  # a small folder new to the database (the sample logs took seconds to ingest)
    for cmd in (f"{py} --db {db} | head -1",
                # the console script's own parse (its output fits the pipe's buffer: the exit code
                # and a quiet stderr are checked here; a broken pipe by the cases above, same guard)
                f"{sys.executable} -m analyzer {logs} --db {db} | head -1",
                f"{py} sql 'SELECT * FROM range(200000)' --db {db} | head -1",
                f"{py} sql 'SELECT * FROM turns' --db {db} 2>&1 | head -1",
                f"{py} --db {db} --json | head -1"):
        p = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd}"], capture_output=True, text=True, env=env)
        assert p.returncode == 0, (cmd, p.stderr)
        assert len(p.stdout.splitlines()) == 1 and p.stderr == "", (cmd, p.stderr)


def _big_logs(folder: Path, files: int = 24, pairs: int = 1000) -> Path:
    for f in range(files):
        recs = []
        for i in range(pairs):
            rid = f"{f:03x}{i:05x}"
            ts = T0 + timedelta(seconds=f * 3000 + i * 2)
            recs.append(request(rid, ts, session=f"s{f}-{i // 10}"))
            recs.append(response_ok(rid, ts + timedelta(seconds=1), content="answer " * 20, session=f"s{f}-{i // 10}"))
        write_jsonl(folder / "2026-11-16" / f"{f:02d}-00-00-p-1-0a1b2c{f:02x}.jsonl", recs)
    return folder


@pytest.fixture(scope="module")
def big_logs(tmp_path_factory) -> Path:
    """The 24 logs the interrupted ingests read, written once for both (they only read them)."""
    return _big_logs(tmp_path_factory.mktemp("big") / "big")


# The console script's module (python -m analyzer) and the CLI module itself: the same typer app.
@pytest.mark.parametrize("entry", ["analyzer", "analyzer.cli.app"])
def test_sigint_during_ingest_exits_130_in_one_line_and_keeps_the_database_consistent(tmp_path, big_logs, entry):
    logs = big_logs
    db = tmp_path / "big.duckdb"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANALYZER_BATCH_BYTES": "600000"}  # many small transactions
    proc = subprocess.Popen([sys.executable, "-m", entry, str(logs), "--db", str(db), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not Path(f"{db}.wal").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)  # the first batch is being written
    time.sleep(0.5)
    assert proc.poll() is None, "the ingest ended before the signal: make the input bigger"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.INTERRUPTED == 130
    assert err == "analyze: error: interrupted\n" and out == ""

    con = duckdb.connect(str(db), read_only=True)
    try:
        files, registered, stored, orphans = con.execute(
            """SELECT (SELECT count(*) FROM source_files), (SELECT coalesce(sum(records), 0) FROM source_files),
                      (SELECT count(*) FROM records),
                      (SELECT count(*) FROM records WHERE file_id NOT IN (SELECT file_id FROM source_files))""").fetchall()[0]
    finally:
        con.close()
    assert files < 24 and registered == stored and orphans == 0  # committed batches whole, nothing of the rest
    p = analyze(str(logs), "--db", str(db), "--json", env={"ANALYZER_BATCH_BYTES": "600000"})
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    # the next run reads what was not committed: nothing lost, nothing doubled
    assert summary["ingest"]["new_records"] == 2 * 24 * 1000 - stored and summary["turns"] == 24 * 1000


def _cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) a process has used, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("args", [
    ["sql", "SELECT sum(hash(range)) FROM range(100000000000)"],
    ["sql", "CREATE TABLE big AS SELECT range AS r, hash(range) AS h FROM range(3000000000)", "--write"],
])
def test_sigint_stops_a_long_statement_at_once(week_db, args):
    """DuckDB does not return to Python during a statement: the signal interrupts it."""
    proc = subprocess.Popen([sys.executable, "-m", "analyzer.cli.app", *args, "--db", str(week_db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    wait_until_open(proc, week_db)
    # The statement is running once the process has spent half a CPU-second past the opening (the
    # opening itself takes milliseconds): a signal before that would not test an interruption.
    start, deadline = _cpu_seconds(proc.pid), time.monotonic() + 60
    while _cpu_seconds(proc.pid) - start < 0.5 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)  # ends within seconds, not when the statement would
    assert proc.returncode == 130 and err == "analyze: error: interrupted\n"
    p = analyze("sql", "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'big'",
                "-f", "json", "--db", str(week_db))
    assert json.loads(p.stdout) == [{"n": 0}]


def test_relative_times_and_a_reversed_range(week_db):
    db = str(week_db)
    p = analyze("--db", db, "--since", "3650d", "--until", "1h", "--json")  # the data is in the past
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["turns"] == 6 and s["filters"]["since"] and s["filters"]["until"]
    p = analyze("--db", db, "--since", "1h", "--json")  # nothing logged in the last hour
    assert p.returncode == 0 and json.loads(p.stdout)["turns"] == 0
    for since, until in (("2026-11-19", "2026-11-18"), ("24h", "48h"), ("2026-11-18", "2026-11-18")):
        p = analyze("--db", db, "--since", since, "--until", until)
        assert p.returncode == ExitCode.USAGE
        assert "is not before --until" in one_error_line(p)


def test_model_patterns_and_an_unknown_model(week_db):
    db = str(week_db)
    p = analyze("--db", db, "--model", "glm5")
    assert p.returncode == ExitCode.USAGE
    line = one_error_line(p)
    assert "--model 'glm5' matches no model" in line and "did you mean 'glm-5'?" in line
    assert "glm-5 (4 turns)" in line and "qwen3 (2 turns)" in line
    for pattern, turns in (("glm%", 4), ("GLM-5", 4), ("qwen_", 2), ("%", 6)):  # ILIKE, as in `analyze sql`
        p = analyze("--db", db, "--model", pattern, "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout)["turns"] == turns, pattern
    p = analyze("sql", "SELECT count(*) AS n FROM turns WHERE model ILIKE $model", "-p", "model=glm%",
                "-f", "json", "--db", db)
    assert json.loads(p.stdout) == [{"n": 4}]


def test_every_figure_of_a_filtered_summary_is_filtered_or_says_so(week_db, tmp_path):
    bad = tmp_path / "bad" / "chunk.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"type": "request", "timestamp": "2026-11-16T14:00:00.000000Z", "request_id": "zz"}\n{cut\n')
    p = analyze(str(bad), "--db", str(week_db), "--model", "glm-5")
    assert p.returncode == 0, p.stderr
    assert "filtered: models glm-5" in p.stdout
    assert "across the selected models the ladder could address 2 turns" in p.stdout
    assert "across all models" not in p.stdout
    assert "not filtered: quarantined lines are counted over the whole database" in p.stdout
    assert "1 malformed lines quarantined (in the whole database)" in p.stdout
    assert "this run ingested 1 file(s)" in p.stdout
    p = analyze("--db", str(week_db))
    assert "across all models" in p.stdout and "filtered:" not in p.stdout


# ---------------------------------------------------------------------------
# 2./3. The summary from the database alone, and what the database holds


def test_summary_from_the_database_alone(week_db, tmp_path):
    p = analyze("--db", str(week_db), "--model", "qwen3", "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["turns"] == 2 and s["filters"]["models"] == ["qwen3"] and "ingest" not in s
    assert s["database"]["files"] == 1 and s["database"]["records"] == 12
    p = analyze("--db", str(week_db))
    assert p.returncode == 0 and "the database holds 1 file(s) (1 JSONL) from 1 source(s): " in p.stdout
    assert "  records 2026-11-16 .. 2026-11-21\n" in p.stdout
    p = analyze("--db", str(tmp_path / "none.duckdb"), "--model", "glm-5")
    assert p.returncode == ExitCode.USAGE and "no database at" in one_error_line(p)
    assert not (tmp_path / "none.duckdb").exists()


def test_a_disjoint_period_and_a_new_source_are_reported(week, own_week_db, tmp_path):
    later = write_jsonl(tmp_path / "s3" / "2026-12-14" / "14-00-00-proxy-1-0a1b2c3e.jsonl",
                        _week_records(day0=T0 + timedelta(days=28), prefix=0xd1000000))
    p = analyze(str(later), "--db", str(own_week_db), "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert [n for n in s["notes"] if "a period apart from what the database held (2026-11-16 .. 2026-11-21)" in n]
    assert s["database"]["periods"] == [{"first_day": "2026-11-16", "last_day": "2026-11-21"},
                                        {"first_day": "2026-12-14", "last_day": "2026-12-19"}]
    p = analyze("--db", str(own_week_db))
    assert "in 2 separate periods" in p.stdout
    stdout_copy = write_stdout(tmp_path / "kubectl" / "glm-proxy-1.log", _week_records())
    p = analyze(str(stdout_copy), "--db", str(own_week_db))
    assert p.returncode == 0, p.stderr
    assert "note: this run added 1 new source(s): " + str(tmp_path / "kubectl") in p.stdout
    assert "period apart" not in p.stdout


def _pods_metrics(path: Path, pods=("glm-5-7d4b9c6f-abcde", "glm-5-7d4b9c6f-fghij"),
                  flats=((30, 50), (100, 120))) -> Path:
    """Two pods of glm-5 over three hours: each one's generation counter flat for 20 minutes under demand."""
    t0 = int(T0.timestamp())
    lines = ["timestamp,metric,labels,value"]
    for pod, (a, b) in zip(pods, flats):
        total = 0
        for step in range(3 * 3600 // 15 + 1):
            flat = a <= step * 15 / 60 < b
            total += 0 if flat else 100
            labels = f'"model_name=glm-5,pod={pod}"'
            lines += [f"{t0 + step * 15},up,{labels},1",
                      f"{t0 + step * 15},vllm:generation_tokens_total,{labels},{total}",
                      f"{t0 + step * 15},vllm:num_requests_running,{labels},{2 if flat else 1}"]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def _built_pods_db(tmp_path_factory) -> Path:
    """The two pods' logs and metrics ingested once for the module (``pods_db`` copies it)."""
    tmp_path = tmp_path_factory.mktemp("pods")
    recs = []
    for i in range(90):
        rid = f"{0xe0000000 + i:08x}"
        recs.append(request(rid, at(i * 2), model="glm-5", tool_results=TOOL_RESULT, session=f"s{i // 5}"))
        failed = 15 <= i < 25 or 50 <= i < 60  # inside the flat periods
        recs.append(response_error(rid, at(i * 2 + 0.1), NAKED_500, model="glm-5", session=f"s{i // 5}") if failed
                    else response_ok(rid, at(i * 2 + 0.1), content="ok", model="glm-5", session=f"s{i // 5}"))
    logs = write_jsonl(tmp_path / "pods" / "logs.jsonl", recs)
    db = tmp_path / "pods.duckdb"
    p = analyze(str(logs), "--metrics", str(_pods_metrics(tmp_path / "m.csv")), "--db", str(db))
    assert p.returncode == 0, p.stderr
    return db


@pytest.fixture
def pods_db(_built_pods_db, tmp_path) -> Path:
    """A copy of the module's two-pods database, the test's own to write to."""
    return Path(shutil.copy(_built_pods_db, tmp_path / "pods.duckdb"))


def _windows(db: Path) -> list:
    p = analyze("sql", "SELECT pod, kind, start_ts, end_ts FROM pod_windows ORDER BY ALL", "-f", "json", "--db", str(db))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_a_one_off_wedge_window_leaves_the_stored_windows_alone(pods_db):
    stored = _windows(pods_db)
    assert [w["kind"] for w in stored] == ["wedged", "wedged"]
    p = analyze("--db", str(pods_db), "--wedge-window", "1h", "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert s["metrics"]["episodes"] == [] and s["classes"].get("wedged-pod") is None  # no 20-min flat is a 1 h wedge
    assert s["metrics"]["wedge_window_s"] == 3600 and s["metrics"]["wedge_window_stored"] is False
    assert [n for n in s["notes"] if "for this run only use --wedge-window 1h" in n]
    assert _windows(pods_db) == stored  # later commands see what the database keeps
    p = analyze("--db", str(pods_db), "--json")
    assert json.loads(p.stdout)["classes"]["wedged-pod"]["count"] == 20
    p = analyze("--db", str(pods_db), "--wedge-window", "1h", "--save-wedge-window", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["metrics"]["wedge_window_stored"] is True
    assert _windows(pods_db) == []
    p = analyze("sql", "SELECT value FROM settings WHERE name = 'pod_windows.wedge_window_s'", "-f", "json",
                "--db", str(pods_db))
    assert json.loads(p.stdout) == [{"value": "3600.0"}]


def test_forget_by_path_and_by_range_and_rederive(week, own_week_db, tmp_path):
    # the kubectl copy of the same records, and a malformed line of its own
    kube = write_stdout(tmp_path / "kubectl" / "glm-proxy-1.log", _week_records())
    with kube.open("a") as f:
        f.write('✓ RESPONSE: {"cut\n')
    p = analyze(str(kube), "--db", str(own_week_db), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["quarantined_lines"] == 1

    p = analyze("forget", str(week.parent.parent), "--db", str(own_week_db), "--dry-run")
    assert p.returncode == 0 and "would forget 1 file(s): 12 records" in p.stdout
    p = analyze("forget", str(week.parent.parent), "--db", str(own_week_db), "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["files"] == [str(week)] and r["records"] == 12 and r["reread"] == [str(kube)]
    # the kubectl copies come back: the same summary as a database of the kubectl file alone
    alone = tmp_path / "alone.duckdb"
    expected = json.loads(analyze(str(kube), "--db", str(alone), "--json").stdout)
    got = json.loads(analyze("--db", str(own_week_db), "--json").stdout)
    for key in ("turns", "sessions", "classes", "quarantined_lines"):
        assert got[key] == expected[key], key
    assert [s["source"] for s in got["database"]["sources"]] == [str(kube.parent)]

    p = analyze("forget", str(kube), "--db", str(own_week_db), "--json")
    r = json.loads(p.stdout)
    assert r["quarantined"] == 1 and r["records"] == 12
    got = json.loads(analyze("sql", "SELECT (SELECT count(*) FROM records) AS r, (SELECT count(*) FROM quarantine) AS q, "
                             "(SELECT count(*) FROM source_files) AS f", "-f", "json", "--db", str(own_week_db)).stdout)
    assert got == [{"r": 0, "q": 0, "f": 0}]

    p = analyze("forget", "no/such/file.jsonl", "--db", str(own_week_db))
    assert p.returncode == ExitCode.USAGE and "no file in the database matches" in one_error_line(p)
    p = analyze("forget", "--db", str(own_week_db))
    assert p.returncode == ExitCode.USAGE


def test_forget_by_time_range(week, week_db, tmp_path):
    later = write_jsonl(tmp_path / "s3" / "2026-12-14" / "14-00-00-proxy-1-0a1b2c3e.jsonl",
                        _week_records(day0=T0 + timedelta(days=28), prefix=0xd1000000))
    assert analyze(str(later), "--db", str(week_db)).returncode == 0
    p = analyze("forget", "--since", "2026-12-01", "--db", str(week_db), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["files"] == [str(later)]
    s = json.loads(analyze("--db", str(week_db), "--json").stdout)
    assert s["turns"] == 6 and s["database"]["periods"] == [{"first_day": "2026-11-16", "last_day": "2026-11-21"}]
    p = analyze("forget", "--since", "2026-11-18", "--until", "2026-11-19", "--db", str(week_db), "--json")
    r = json.loads(p.stdout)
    assert r["files"] == [] and r["kept_straddling"] == 1


# ---------------------------------------------------------------------------
# 4. Databases refused before anything is written; errors in one line


def _tables(path: Path) -> set[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    finally:
        con.close()


def test_a_foreign_or_newer_database_is_refused_before_anything_is_written(week, week_db, tmp_path):
    foreign = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE invoices (id INTEGER)")
    con.close()
    for args in ([str(week)], ["sql", "SELECT 1"], ["report"], ["forget", "x"]):
        argv = [*args, "--db", str(foreign)]
        p = analyze(*argv)
        assert p.returncode == ExitCode.DATABASE, (args, p.stderr)
        assert "not an analyzer database (it holds invoices)" in one_error_line(p)
    assert _tables(foreign) == {"invoices"}

    con = duckdb.connect(str(week_db))
    con.execute("INSERT INTO _migrations VALUES ('999_from_the_future', now())")
    con.close()
    before = _tables(week_db)
    p = analyze(str(week), "--db", str(week_db))
    assert p.returncode == ExitCode.DATABASE
    assert "written by a newer analyzer (schema 999_from_the_future unknown" in one_error_line(p)
    assert _tables(week_db) == before


def test_a_sqlite_file_is_refused_without_any_network_or_extension(week, tmp_path):
    lite = tmp_path / "notes.db"
    s = sqlite3.connect(lite)
    s.execute("CREATE TABLE t (a)")
    s.commit()
    s.close()
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
    for args in ([str(week)], ["sql", "SELECT 1"]):
        p = analyze(*args, "--db", str(lite), env=env)
        assert p.returncode == ExitCode.DATABASE
        assert "it is a SQLite database, not an analyzer database" in one_error_line(p)
    assert not (home / ".duckdb").exists()  # no extension was fetched or installed
    from analyzer.store.db import connect

    con = connect(tmp_path / "ours.duckdb")
    try:
        settings = dict(con.execute("SELECT name, value FROM duckdb_settings() WHERE name IN "
                                    "('autoinstall_known_extensions', 'autoload_known_extensions')").fetchall())
    finally:
        con.close()
    assert settings == {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}


def test_errors_are_one_line_and_whole_under_analyzer_debug(week_db):
    p = analyze("sql", "SELEC 1", "--db", str(week_db))
    assert p.returncode == ExitCode.USAGE and "syntax error" in one_error_line(p)
    assert "LINE 1" not in p.stderr and "^" not in p.stderr
    p = analyze("sql", "SELEC 1", "--db", str(week_db), env={"ANALYZER_DEBUG": "1"})
    assert "LINE 1: SELEC 1" in p.stderr and "^" in p.stderr


def test_unwritable_outputs_and_a_full_disk_exit_9_in_one_line(week, week_db, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    p = analyze("report", "--db", str(week_db), "--since", "2026-11-16", "--until", "2026-11-22",
                "-o", str(a_file / "report.html"))
    assert p.returncode == ExitCode.CANNOT_WRITE == 9
    assert f"cannot write {a_file}" in one_error_line(p)
    p = analyze("export", "--lake", str(a_file / "lake"), "--db", str(week_db))
    assert p.returncode == ExitCode.CANNOT_WRITE and "cannot write" in one_error_line(p)

    # A full disk, for real: the kernel refuses writes past a file-size limit (EFBIG).
    import resource

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))

    # A process of its own: the limit is on the process.
    p = subprocess.run([sys.executable, "-m", "analyzer.cli.app", str(ROOT / "sample_logs" / "s3"), "--db",
                        str(tmp_path / "full.duckdb")], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=small_disk)
    assert p.returncode == ExitCode.CANNOT_WRITE and "File too large" in one_error_line(p)


def test_a_full_tmpfs_exits_9(week, tmp_path):
    """ENOSPC from a real 1 MB tmpfs, where the machine lets us mount one (root)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root; the file-size limit test covers the code path")
    try:
        p = analyze(str(ROOT / "sample_logs" / "s3"), "--db", str(mnt / "a.duckdb"))
        assert p.returncode == ExitCode.CANNOT_WRITE and "No space left on device" in one_error_line(p)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


# ---------------------------------------------------------------------------
# 5./6. Terminal output: no control characters, no credentials, distinguishable names


EVIL = "glm-\x1b]0;PWNED\x07\x1b[2J"


def test_no_control_characters_or_credentials_reach_the_terminal(tmp_path):
    models = [EVIL, "glm-x PGPASSWORD=hunter2", "qwen\u202eevil"]
    recs = []
    for i, m in enumerate(models):
        rid = f"{0xf0000000 + i:08x}"
        recs += [request(rid, at(i), model=m), response_ok(rid, at(i + 0.1), content="ok", model=m)]
    logs = write_jsonl(tmp_path / "evil" / "x.jsonl", recs)
    db = tmp_path / "evil.duckdb"
    code, screen = analyze_on_pty(str(logs), "--db", str(db))
    assert code == 0, screen
    assert "\x1b]0;" not in screen and "\x07" not in screen and "\x1b[2J" not in screen and "\u202e" not in screen
    assert "glm-\\x1b]0;PWNED\\x07\\x1b[2J" in re.sub(r"\x1b\[[0-9;]*m", "", screen)
    assert "hunter2" not in screen and "PGPASSWORD=[REDACTED]" in screen
    # `analyze sql` escapes them as well, in a table and in CSV on the terminal
    for fmt in ("table", "csv"):
        code, screen = analyze_on_pty("sql", "SELECT DISTINCT model FROM turns ORDER BY model", "-f", fmt,
                                      "--db", str(db))
        assert code == 0 and "\x1b]0;" not in screen and "\x07" not in screen and "\\x1b]0;PWNED" in screen
    # an error that quotes log text is one line and escaped too
    code, screen = analyze_on_pty("--db", str(db), "--model", "\x1b[2Jnope")
    assert code == ExitCode.USAGE and "\x1b[2J" not in screen and "\\x1b[2Jnope" in screen


def test_two_pods_stay_whole_at_80_columns(pods_db):
    code, screen = analyze_on_pty("--db", str(pods_db), cols=80)
    assert code == 0, screen
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen)
    # too wide for 80 columns: the table stacks, each pod's whole name first on its row
    assert re.search(r"^  glm-5-7d4b9c6f-abcde  ", plain, re.M) and re.search(r"^  glm-5-7d4b9c6f-fghij  ", plain, re.M)
    assert "…" not in plain and max(len(line) for line in plain.splitlines()) <= 80
    code, wide = analyze_on_pty("--db", str(pods_db), cols=160)  # room enough: a table with the whole names
    rows = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", wide).splitlines() if " min │" in line]
    assert len(rows) == 2 and "│ glm-5-7d4b9c6f-abcde " in rows[0] and "│ glm-5-7d4b9c6f-fghij " in rows[1]


def test_sql_rounds_floats(week_db):
    p = analyze("sql", "SELECT 74.7::DOUBLE - 1e-14 AS x, 0.1 + 0.2 AS y, 1/3 AS z", "--db", str(week_db))
    assert p.returncode == 0
    assert p.stdout.splitlines()[2].split() == ["74.7", "0.3", "0.333333"]
    p = analyze("sql", "SELECT 74.7::DOUBLE - 1e-14 AS x", "-f", "json", "--db", str(week_db))
    assert json.loads(p.stdout) == [{"x": 74.7}] and "74.69999" not in p.stdout


# ---------------------------------------------------------------------------
# 6. The replay key


@pytest.mark.parametrize("key", ["sk-live-SECRETVALUE42\n", "sk-live-SECRETVALUE42\r", "sk-live SECRETVALUE42"])
def test_a_replay_key_with_cr_lf_or_space_is_refused_unseen(week_db, key):
    p = analyze("replay", "--endpoint", "http://127.0.0.1:9/v1", "--api-key-env", "VLLM_KEY", "--db", str(week_db),
                env={"VLLM_KEY": key})
    assert p.returncode == ExitCode.USAGE
    line = one_error_line(p)
    assert "the API key in $VLLM_KEY holds" in line and "SECRETVALUE" not in p.stderr + p.stdout
    p = analyze("sql", "SELECT count(*) AS n FROM replay_attempts", "-f", "json", "--db", str(week_db))
    assert json.loads(p.stdout) == [{"n": 0}]


def test_the_replay_scrubber_removes_every_escaped_form_of_the_key():
    from urllib.parse import quote

    from analyzer.jobs.replay import scrubber

    key = "sk-live-SECRET/VALUE+42"
    scrub = scrubber(key)
    for text in (f"Illegal header value b'Bearer {key}'", repr(key), json.dumps(key), quote(key, safe=""),
                 f"auth={quote(key)}"):
        assert "SECRET" not in scrub(text), text


# ---------------------------------------------------------------------------
# 7. `analyze sql` read-only means read-only


@pytest.mark.parametrize("sql,message", [
    ("SELECT 1; SELECT 2", "holds 2 statements"),
    ("COPY (SELECT 1) TO '{out}'", "COPY is not a read-only statement"),
    ("EXPORT DATABASE '{out}'", "EXPORT is not a read-only statement"),
    ("SET threads = 1", "SET is not a read-only statement"),
    ("INSTALL httpfs", "INSTALL is not a read-only statement"),
    ("LOAD httpfs", "LOAD is not a read-only statement"),
    ("ATTACH '{out}' AS x", "ATTACH is not a read-only statement"),
    ("PRAGMA threads = 1", "SET is not a read-only statement"),
    ("PRAGMA enable_profiling", "PRAGMA enable_profiling is not one a question may run"),
    ("SELECT * FROM read_csv('{secret}')", "calls read_csv(), which is not a function a question may call"),
    ("SELECT * FROM 'http://127.0.0.1:9/x.csv'", "which is not a relation or view of the database"),
])
def test_sql_read_only_refuses_writes_settings_files_and_network(week_db, tmp_path, sql, message):
    out = tmp_path / "out"
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    p = analyze("sql", sql.format(out=out, secret=secret), "--db", str(week_db))
    assert p.returncode == ExitCode.USAGE
    assert message in one_error_line(p)
    assert not out.exists()


def test_sql_write_runs_several_statements(week_db):
    p = analyze("sql", "CREATE TABLE notes AS SELECT 1 AS x; INSERT INTO notes VALUES (2)", "--write",
                "--db", str(week_db))
    assert p.returncode == 0, p.stderr
    p = analyze("sql", "SELECT sum(x) AS s FROM notes", "-f", "json", "--db", str(week_db))
    assert json.loads(p.stdout) == [{"s": 3}]


@pytest.mark.parametrize("args,message", [
    (["run", "--bogus", "x"], "No such option: --bogus (`analyze run -h` lists the options)"),
    (["export"], "Missing option '--lake'"),
    (["replay", "--limit", "many"], "Invalid value for '--limit'"),
])
def test_usage_errors_are_one_line_with_exit_2(args, message):
    p = analyze(*args)
    assert p.returncode == ExitCode.USAGE
    assert message in one_error_line(p)


def test_sql_json_escapes_c1_controls_and_bidi(week_db):
    p = analyze("sql", "SELECT chr(155) || '2J' || chr(8238) AS s", "-f", "json", "--db", str(week_db))
    assert p.returncode == 0
    assert "\x9b" not in p.stdout and "\u202e" not in p.stdout
    assert json.loads(p.stdout) == [{"s": "\x9b2J\u202e"}]  # the same value, escaped


SECRET_TEXTS = {
    "hunter2pg": "psql: connection failed: PGPASSWORD=hunter2pg psql -h db",
    "s3cr3tflag": "mysql --password s3cr3tflag -u root failed",
    "SECRETTAIL99": "upstream said 401 for Authorization: Bearer abc:SECRETTAIL99",
    "tokURLenc42": "redirect to /cb?x=1%26access_token%3DtokURLenc42%26state%3Dz",
    "cookieval77": "echoed header Cookie: session=cookieval77; theme=dark",
}


def test_one_redactor_for_the_report_and_the_terminal(tmp_path):
    recs = []
    for i, (secret, text) in enumerate(SECRET_TEXTS.items()):
        rid = f"{0xc0000000 + i:08x}"
        recs.append(request(rid, at(i), session="s-leak", tool_results=TOOL_RESULT))
        recs.append(response_error(rid, at(i + 0.1), f"Provider returned 500: {text}", session="s-leak"))
    model = "glm-5 PGPASSWORD=modelsecret1"
    recs += [request("c00000ff", at(9), model=model), response_ok("c00000ff", at(9.1), content="ok", model=model)]
    logs = write_jsonl(tmp_path / "leaks" / "x.jsonl", recs)
    db = tmp_path / "leaks.duckdb"
    code, screen = analyze_on_pty(str(logs), "--db", str(db), cols=200)
    assert code == 0, screen
    assert "modelsecret1" not in screen and "PGPASSWORD=[REDACTED]" in screen
    out = tmp_path / "r.html"
    p = analyze("report", "--db", str(db), "--since", "2026-11-16", "--until", "2026-11-17", "-o", str(out))
    assert p.returncode == 0, p.stderr
    html = out.read_text(encoding="utf-8")
    assert "s-leak" in html  # the failing session is shown ...
    for secret in [*SECRET_TEXTS, "modelsecret1"]:
        assert secret not in html, secret  # ... without a credential
    for kept in ("PGPASSWORD=[REDACTED]", "--password [REDACTED]", "Bearer [REDACTED]", "access_token%3D[REDACTED]",
                 "session=[REDACTED]"):
        assert kept in html.replace("&#34;", '"').replace("&#39;", "'"), kept
