"""`--metrics` as a shell hands it over, through the real command line (a subprocess, real files).

``analyze logs/*.jsonl --metrics metrics/*.json`` reaches the program as
``--metrics m1.json m2.json m3.json``: every file after ``--metrics`` up to the
next option is metrics, the form repeats, and a mistake (no log file left, a log
given as metrics, a missing path) is an error before any work, never absorbed.
Progress shows on a terminal (a real pty) and not when piped.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from tests.support.records import NAKED_500, NAKED_500_HEADERS, TOOL_RESULT, request, response_error, write_jsonl
from tests.support.metric_phases import phases, t_of
from tests.support.repo import REPO
from tests.support.cli import Ran
from tests.support.cli import analyze as run_analyze

ROOT = REPO


def analyze(*args: str, cwd: Path) -> Ran:
    # The scenarios are 15 s scrapes with a 2 minute wedge window (tests/support/metric_phases.py).
    return run_analyze(*args, "--wedge-window", "2m", cwd=cwd)


def _matrix(name, labels, points):
    return {"metric": {"__name__": name, **labels}, "values": [[t, str(v)] for t, v in points]}


def write_week(tmp_path: Path) -> tuple[Path, list[Path]]:
    """Logs with a tool-history 500 inside a wedge, and the metrics as three query_range files."""
    timeline = phases(("busy", 10), ("wedged", 20), ("busy", 10))  # wedged from scrape 9 to 30
    labels = {"pod": "p1", "namespace": "llm", "model_name": "glm-5", "engine": "0"}
    m = tmp_path / "metrics"
    m.mkdir()
    files = []
    for name, points in (
        ("vllm:generation_tokens_total", [(t, v) for t, v, _r in timeline]),
        ("vllm:num_requests_running", [(t, r) for t, _v, r in timeline]),
        ("up", [(t, 1) for t, _v, _r in timeline]),
    ):
        lab = {"pod": "p1", "namespace": "llm"} if name == "up" else labels
        path = m / f"{name.replace(':', '_')}.json"
        path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                                  "result": [_matrix(name, lab, points)]}}))
        files.append(path)
    logs = tmp_path / "logs"
    logs.mkdir()
    ts = datetime.fromtimestamp(t_of(15), tz=timezone.utc)  # inside the wedge
    write_jsonl(logs / "a.jsonl", [request("000000a1", ts, tool_results=TOOL_RESULT),
                                   response_error("000000a1", ts, NAKED_500, headers=NAKED_500_HEADERS)])
    write_jsonl(logs / "b.jsonl", [request("000000b1", ts, session="s-2", tool_results=TOOL_RESULT),
                                   response_error("000000b1", ts, NAKED_500, headers=NAKED_500_HEADERS)])
    return logs, files


def _summary(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_metrics_a_b_c_reads_every_file_as_metrics(tmp_path):
    logs, files = write_week(tmp_path)
    out = _summary(analyze(str(logs / "a.jsonl"), str(logs / "b.jsonl"), "--metrics", *map(str, files),
                           "--db", "x.duckdb", "--json", cwd=tmp_path))
    [load] = out["metrics"]["loads"]
    assert sorted(Path(s).name for s in load["sources"]) == sorted(f.name for f in files)
    assert out["ingest"]["quarantined"] == 0 and out["quarantined_lines"] == 0  # nothing taken for a log
    assert out["classes"]["wedged-pod"]["count"] == 2
    [episode] = out["metrics"]["episodes"]
    assert (episode["pod"], episode["kind"], episode["failed_turns"]) == ("llm/p1", "wedged", 2)


def test_repeated_and_folder_forms_load_the_same(tmp_path):
    logs, files = write_week(tmp_path)
    repeated = _summary(analyze(str(logs), "--db", "r.duckdb", "--json",
                                *[a for f in files for a in ("--metrics", str(f))], cwd=tmp_path))
    folder = _summary(analyze(str(logs), "--metrics", str(files[0].parent), "--db", "f.duckdb", "--json",
                              cwd=tmp_path))
    mixed = _summary(analyze(str(logs), "--metrics", str(files[0]), "--json", "--db", "m.duckdb",
                             "--metrics", str(files[1]), str(files[2]), cwd=tmp_path))
    for s in (repeated, folder, mixed):
        assert s["metrics"]["loads"][0]["samples_new"] == 120, s["metrics"]["loads"]
        assert s["classes"]["wedged-pod"]["count"] == 2


def test_no_log_file_left_is_said(tmp_path):
    logs, files = write_week(tmp_path)
    proc = analyze("--metrics", *map(str, files), str(logs), "--db", "x.duckdb", cwd=tmp_path)
    assert proc.returncode == 2
    assert "no log files given" in proc.stderr and "before --metrics" in proc.stderr
    assert not (tmp_path / "x.duckdb").exists()


def test_a_log_given_as_metrics_is_said_before_any_work(tmp_path):
    logs, files = write_week(tmp_path)
    proc = analyze(str(logs / "a.jsonl"), "--metrics", str(files[0]), str(logs / "b.jsonl"), "--db", "x.duckdb",
                   cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "b.jsonl: this is a proxy log, not a metrics file" in proc.stderr
    assert not (tmp_path / "x.duckdb").exists()  # nothing ingested, no database made


def test_a_missing_metrics_path_is_said_before_any_work(tmp_path):
    logs, _files = write_week(tmp_path)
    proc = analyze(str(logs), "--metrics", str(tmp_path / "nope" / "*.json"), "--db", "x.duckdb", cwd=tmp_path)
    assert proc.returncode == 3 and "no such metrics file" in proc.stderr
    assert not (tmp_path / "x.duckdb").exists()


def test_selector_without_prometheus_is_a_usage_error(tmp_path):
    logs, _files = write_week(tmp_path)
    proc = analyze(str(logs), "--prometheus-selector", 'namespace="llm"', "--db", "x.duckdb", cwd=tmp_path)
    assert proc.returncode == 2 and "--prometheus-selector needs --prometheus" in proc.stderr


def _run_on_pty(args: list[str], cwd: Path) -> tuple[int, bytes]:
    """Run analyze with stderr (and stdin) on a real pty; stdout piped. Returns (exit code, pty bytes)."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "analyzer.cli.app", *args, "--wedge-window", "2m"], cwd=cwd, env=env,
                            stdin=slave,
                            stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=30), seen


def test_progress_shows_on_a_terminal_and_not_when_piped(tmp_path):
    logs, files = write_week(tmp_path)
    code, seen = _run_on_pty([str(logs), "--metrics", *map(str, files), "--db", "t.duckdb"], tmp_path)
    assert code == 0, seen[-2000:]
    assert b"metrics vllm_" in seen or b"pod windows" in seen, seen[-2000:]
    piped = analyze(str(logs), "--metrics", *map(str, files), "--db", "p.duckdb", cwd=tmp_path)
    assert piped.returncode == 0 and "pod windows" not in piped.stderr and "metrics vllm_" not in piped.stderr


# ---------------------------------------------------------------------------
# Metrics are read after the logs: a file that does not parse, a Ctrl-C while one is read


def _spill_dirs(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("analyzer-spill-*/run-*/metrics-*"))


def test_a_file_that_does_not_parse_fails_after_the_logs_and_stores_no_metric(tmp_path):
    """The logs are ingested and committed; nothing of the metrics is stored; the scratch database is gone."""
    import duckdb

    from analyzer.core.errors import ExitCode

    logs, files = write_week(tmp_path)
    bad = tmp_path / "metrics" / "broken.json"
    bad.write_text('{"status": "success", "data": {"resultType": "matrix", "result": [')
    scratch_tmp = tmp_path / "tmp"
    scratch_tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch_tmp)}
    proc = subprocess.run([sys.executable, "-m", "analyzer.cli.app", str(logs), "--db", "a.duckdb", "--json",
                           "--metrics", *map(str, files), str(bad)], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120)
    assert proc.returncode == ExitCode.NO_INPUT and "broken.json: not a valid prometheus-json metrics file" in proc.stderr, proc.stderr
    con = duckdb.connect(str(tmp_path / "a.duckdb"), read_only=True)
    try:
        lines = sum(len(p.read_text().splitlines()) for p in logs.iterdir())
        assert con.execute("SELECT count(*) FROM records").fetchall() == [(lines,)]
        assert con.execute("SELECT count(*) FROM metric_points").fetchall() == [(0,)]
    finally:
        con.close()
    assert list(scratch_tmp.iterdir()) == []


def test_metric_files_among_the_logs_load_with_the_metrics_files(tmp_path):
    """A Prometheus export passed among the logs joins the --metrics files in one load."""
    logs, files = write_week(tmp_path)
    (logs / "up.json").write_bytes(files[2].read_bytes())  # `up`, passed among the logs
    out = _summary(analyze(str(logs), "--metrics", str(files[0]), str(files[1]), "--db", "x.duckdb", "--json",
                           cwd=tmp_path))
    [load] = out["metrics"]["loads"]
    assert sorted(Path(s).name for s in load["sources"]) == sorted(f.name for f in files)
    assert load["samples_new"] == 120 and out["classes"]["wedged-pod"]["count"] == 2


def test_ctrl_c_while_a_big_csv_is_read_exits_130_and_leaves_nothing(tmp_path):
    """A real SIGINT while DuckDB reads a big CSV into the scratch database: the read stops at
    once (the scratch connection is interrupted like every other), nothing of the metrics is
    stored, and the spill folders are gone."""
    import signal

    import duckdb

    from analyzer.core.errors import ExitCode

    logs, _files = write_week(tmp_path)
    csv = tmp_path / "samples.csv"
    labels = '"{""namespace"": ""llm"", ""pod"": ""glm-5-0"", ""model_name"": ""glm-5"", ""engine"": ""0""}"'
    with open(csv, "w") as f:  # read for longer than the signal takes to come
        f.write("timestamp,metric,labels,value\n")
        f.writelines(f"{1794787200 + i * 15},vllm:generation_tokens_total,{labels},{i * 7}\n" for i in range(1_200_000))
    scratch_tmp = tmp_path / "tmp"
    scratch_tmp.mkdir()
    db = tmp_path / "a.duckdb"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch_tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "analyzer.cli.app", str(logs), "--db", str(db), "--json",
                             "--metrics", str(csv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)
    deadline = time.monotonic() + 60
    while not _spill_dirs(scratch_tmp) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)  # the reading has begun (its scratch database spills into the run's folder)
    assert proc.poll() is None, "the run ended before the signal"
    proc.send_signal(signal.SIGINT)
    # Ends within seconds: the interrupted read is not taken for a file DuckDB cannot read
    # (which would read the 1.2 million rows again in Python, for most of a minute).
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == ExitCode.INTERRUPTED and err == "analyze: error: interrupted\n" and out == ""
    assert list(scratch_tmp.iterdir()) == []  # the scratch database's spill folder is gone, the run's too
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM metric_points").fetchall() == [(0,)]
    finally:
        con.close()
