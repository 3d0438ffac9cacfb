"""Bounded resources: the memory limit of a lake, spill folders a run owns, odd inputs.

Real processes, real signals: a question that spills is stopped by SIGTERM (what
`timeout` and service managers send) and exits 143 with its spill folder gone; one
killed by SIGKILL leaves its folder, and the next run removes it. A lake reads
under the memory limit a database has. A FIFO or a device as the only input is an
input error (exit 3), not a run over "0 turns".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyzer.core.errors import ExitCode
from analyzer.store.db import connect
from analyzer.store.lake import open_lake
from analyzer.store.spill import run_folder_name, sweep
from tests.support.week import build_week_db
from tests.support.cli import analyze

#: A question that sorts more than the memory limit holds: it spills, for long enough to be signalled.
SPILLS = "SELECT count(*) FROM (SELECT range AS r, hash(range) AS h FROM range(400000000) ORDER BY h)"


@pytest.fixture(scope="module")
def week(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("resources")
    db = build_week_db(tmp / "week.duckdb")
    lake = tmp / "lake"
    p = analyze("export", "--lake", lake, "--db", db)
    assert p.returncode == 0, p.stderr
    return db, lake


def _env(tmp: Path) -> dict:
    return {**os.environ, "ANALYZER_MEMORY_LIMIT": "64MB", "TMPDIR": str(tmp)}


def _runs(parent: Path) -> list[Path]:
    """The run folders under ``parent`` but this test process's own (its connections spill there too)."""
    return sorted(p for p in parent.glob("run-*") if p.name != run_folder_name()) if parent.is_dir() else []


def _start_spilling(args: list[str], parent: Path, env: dict) -> subprocess.Popen:
    """Start `analyze ARGS` and wait until its run folder under ``parent`` holds spilled data."""
    proc = subprocess.Popen([sys.executable, "-m", "analyzer.cli.app", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any(f.is_file() and f.stat().st_size for run in _runs(parent) for f in run.rglob("*")):
            return proc
        time.sleep(0.05)
    proc.kill()
    out, err = proc.communicate()
    pytest.fail(f"the question never spilled into {parent}: {proc.returncode} {err[-2000:]}")


def test_the_lake_reads_under_the_databases_memory_limit(week):
    db, lake = week
    con, lk = connect(db, read_only=True), open_lake(lake)
    try:
        limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        assert lk.execute("SELECT current_setting('memory_limit')").fetchall()[0][0] == limit
        spill = lk.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]
        assert f"/{run_folder_name()}/" in spill and not spill.startswith(os.getcwd())  # not ./.tmp
    finally:
        con.close()
        lk.close()


@pytest.mark.parametrize("where", ["db", "lake"])
def test_sigterm_ends_a_spilling_question_and_removes_its_spill(week, tmp_path, where):
    db, lake = week
    import getpass

    args = ["sql", SPILLS, "--db", str(db)] if where == "db" else ["sql", SPILLS, "--lake", str(lake)]
    parent = Path(f"{db}.tmp") if where == "db" else tmp_path / f"analyzer-spill-{getpass.getuser()}"
    proc = _start_spilling(args, parent, _env(tmp_path))
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)  # within seconds: the statement is interrupted, not waited for
    assert proc.returncode == ExitCode.TERMINATED == 143, err
    assert err == "analyze: error: terminated\n" and out == ""
    assert _runs(parent) == []


def test_a_killed_runs_spill_is_removed_by_the_next_run(week, tmp_path):
    db, _lake = week
    parent = Path(f"{db}.tmp")
    proc = _start_spilling(["sql", SPILLS, "--db", str(db)], parent, _env(tmp_path))
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    left = _runs(parent)
    assert left and any(f.is_file() for f in left[0].rglob("*")), "kill -9 leaves the folder (nothing can run)"
    p = subprocess.run([sys.executable, "-m", "analyzer.cli.app", "sql", "SELECT 1 AS x", "--db", str(db)],
                       capture_output=True, text=True, env=_env(tmp_path), timeout=120)
    assert p.returncode == 0, p.stderr
    assert not any(r.exists() for r in left)  # gone: its process is gone
    assert _runs(parent) == []  # and the new run removed its own on the way out


def test_the_sweep_keeps_live_runs_and_other_hosts(tmp_path):
    mine = tmp_path / run_folder_name()  # this process: alive
    other_host = tmp_path / "run-elsewhere.example-1-0"
    gone = tmp_path / "run-{}-999999999-0".format(run_folder_name().split("-")[1])
    reused = tmp_path / "run-{}-1-42".format(run_folder_name().split("-")[1])  # PID 1 runs, started at another time
    for d in (mine, other_host, gone, reused):
        d.mkdir()
    removed = sweep(tmp_path)
    assert sorted(removed) == sorted([gone, reused])
    assert mine.exists() and other_host.exists()


@pytest.mark.parametrize("make", ["fifo", "device"])
def test_a_fifo_or_a_device_as_the_only_input_is_an_input_error(tmp_path, make):
    if make == "fifo":
        path = tmp_path / "logs.fifo"
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    db = tmp_path / "a.duckdb"
    p = subprocess.run([sys.executable, "-m", "analyzer.cli.app", str(path), "--db", str(db)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == ExitCode.NO_INPUT, p.stderr
    kind = "FIFO" if make == "fifo" else "device"
    assert p.stderr == (f"analyze: error: {path}: not a regular file ({kind}), and nothing else to read; "
                        "pipe a stream to `analyze -`\n")


@pytest.mark.parametrize("where", ["db", "lake"])
def test_out_of_memory_says_what_works(week, tmp_path, where):
    """DuckDB's own hint (`SET memory_limit`, `SET threads`) is refused on a read-only question: the hint
    names the bound a user can raise, and narrowing the question."""
    db, lake = week
    target = ["--db", str(db)] if where == "db" else ["--lake", str(lake)]
    p = subprocess.run([sys.executable, "-m", "analyzer.cli.app", "sql", "SELECT list(range) AS l FROM range(80000000)",
                        *target], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "ANALYZER_MEMORY_LIMIT": "24MB", "TMPDIR": str(tmp_path)})
    assert p.returncode == ExitCode.USAGE, p.stderr
    line = p.stderr.strip()
    assert len(line.splitlines()) == 1 and "Out of Memory" in line, line
    assert "ANALYZER_MEMORY_LIMIT=2GB" in line and "narrow it" in line
    assert "SET " not in line and "threads" not in line
