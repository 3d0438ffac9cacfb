"""`analyze LOGS --metrics FILES` reads the metric files while the logs are ingested
(analyzer.ingestion.metrics_ahead): the same database and summary as reading them after, the
same failures, and nothing left behind when the run fails or a file does not parse."""

from __future__ import annotations

import glob
import gzip
import os
import tempfile
import threading
from pathlib import Path

import duckdb
import pytest

import analyzer.ingestion.metrics_ahead as ahead_module
from analyzer.cli import run as run_command
from analyzer.core.errors import InputError
from analyzer.jobs import main_job
from analyzer.jobs.main_job import RunOptions
from analyzer.io.sources import SourceFile
from tests.e2e.test_metrics_cli import write_week

# What differs between two runs of one command: when and how long.
_VOLATILE = {"elapsed_s", "seconds", "ingested_at", "generated_at", "path", "db", "database", "sources", "next"}


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _tables(db) -> dict:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT * EXCLUDE ({skip}) FROM {t} ORDER BY ALL").fetchall() for t, skip in (
            ("metric_points", "source_id"), ("metric_series", "labels"), ("pod_windows", "detail"),
            ("turns", "request_id"))}
    finally:
        con.close()


def _spill_dirs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "analyzer-metrics-*")))


def _metrics_threads() -> list[str]:
    """The metrics' reading threads still alive (given a moment to end after handing over)."""
    import time

    deadline = time.monotonic() + 5
    while True:
        alive = [t.name for t in threading.enumerate() if t.name.startswith("analyzer-metrics")]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.01)


def _run(logs, files, db, capsys):
    summary = run_command.run_main_job(RunOptions(files=(str(logs),), db=db, json_out=True,
                                                  metrics=tuple(str(f) for f in files), wedge_window="2m"))
    capsys.readouterr()
    return summary


def test_reading_ahead_gives_what_reading_after_gives(tmp_path, monkeypatch, capsys):
    logs, files = write_week(tmp_path)
    started = []
    real = ahead_module.StagingAhead

    class Counted(real):
        def __init__(self, paths):
            started.append(list(paths))
            super().__init__(paths)

    monkeypatch.setattr(ahead_module, "StagingAhead", Counted)

    monkeypatch.setattr(main_job, "StagingAhead", Counted)  # as main_job imported it
    ahead = _run(logs, files, tmp_path / "ahead.duckdb", capsys)
    assert started == [[str(f) for f in files]]  # small logs: read ahead
    monkeypatch.setattr(ahead_module, "worth_staging_ahead", lambda *a: False)
    monkeypatch.setattr(main_job, "worth_staging_ahead", lambda *a: False)  # as main_job imported it
    after = _run(logs, files, tmp_path / "after.duckdb", capsys)
    assert len(started) == 1
    assert _stable(ahead) == _stable(after)
    assert ahead["metrics"]["loads"][0]["samples_new"] > 0
    assert ahead["classes"].get("wedged-pod")  # the windows were made from what was read ahead
    assert _tables(tmp_path / "ahead.duckdb") == _tables(tmp_path / "after.duckdb")
    assert any(w[2] == "wedged" for w in _tables(tmp_path / "ahead.duckdb")["pod_windows"])
    assert not _metrics_threads()


def test_a_file_that_does_not_parse_fails_after_the_logs_and_leaves_nothing(tmp_path, capsys):
    logs, files = write_week(tmp_path)
    bad = tmp_path / "metrics" / "broken.json"
    bad.write_text('{"status": "success", "data": {"resultType": "matrix", "result": [')
    spills = _spill_dirs()
    with pytest.raises(InputError) as failed:
        _run(logs, [*files, bad], tmp_path / "a.duckdb", capsys)
    assert "broken.json" in str(failed.value)
    con = duckdb.connect(str(tmp_path / "a.duckdb"), read_only=True)
    try:  # the logs were ingested, as when the files were read after them; no metric was stored
        lines = sum(len(p.read_text().splitlines()) for p in logs.iterdir())
        assert con.execute("SELECT count(*) FROM records").fetchall() == [(lines,)]
        # (a signal during the database's creation leaves it for the next run to finish)
        made = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'metric_points'"
                           ).fetchall()[0][0]
        assert not made or con.execute("SELECT count(*) FROM metric_points").fetchall() == [(0,)]
    finally:
        con.close()
    assert _spill_dirs() == spills and not _metrics_threads()


def test_a_failed_ingest_stops_the_reading_and_closes_it(tmp_path, capsys):
    logs, files = write_week(tmp_path)
    with open(logs / "a.jsonl", "a") as f:
        f.write("{not json\n")
    spills = _spill_dirs()
    with pytest.raises(InputError):
        run_command.run_main_job(RunOptions(files=(str(logs),), db=tmp_path / "s.duckdb", json_out=True, strict=True,
                                            metrics=tuple(str(f) for f in files), wedge_window="2m"))
    assert _spill_dirs() == spills and not _metrics_threads()


def test_only_beside_small_logs_and_files_duckdb_reads(tmp_path):
    def f(path, size, form=None):
        s = SourceFile(path=path, size=size, mtime=0.0)
        s._form = form
        return s

    csv = tmp_path / "m.csv"
    csv.write_text("timestamp,metric,labels,value\n1794787200,up,\"{}\",1\n")
    scrape = tmp_path / "m.prom"
    scrape.write_text('up{pod="p1"} 1 1794787200000\n')
    m, small, limit = [str(csv)], [f("/l/a.jsonl", 1000)], ahead_module.AHEAD_LOG_BYTES
    assert ahead_module.worth_staging_ahead(m, small)
    assert not ahead_module.worth_staging_ahead([], small)
    assert not ahead_module.worth_staging_ahead(None, small)
    assert ahead_module.worth_staging_ahead(m, [f("/l/a.jsonl", limit)])
    assert not ahead_module.worth_staging_ahead(m, [f("/l/a.jsonl", limit // 2), f("/l/b.jsonl", limit // 2 + 1)])
    assert not ahead_module.worth_staging_ahead(m, [f("/l/a.jsonl.gz", limit // 5)])  # inflates
    # ... as does a gzip file named otherwise (`gzip > week.log`), told by its first bytes
    packed, plain = tmp_path / "week.log", tmp_path / "plain.log"  # (sizes as listed, not as written)
    packed.write_bytes(gzip.compress(b"{}\n"))
    plain.write_bytes(b"{}\n")
    assert not ahead_module.worth_staging_ahead(m, [f(str(packed), limit // 5)])
    assert ahead_module.worth_staging_ahead(m, [f(str(plain), limit // 5)])
    known = f("/l/known.log", limit // 5, "jsonl")  # its head was read: what it said counts, unread again
    known.compressed = True
    assert not ahead_module.worth_staging_ahead(m, [known])
    assert not ahead_module.worth_staging_ahead(m, [f("<stdin>", 0, "stdin")])
    # (the log paths do not exist: asking a log's form would fail on them, and looking
    # at a log's first bytes finds none, so it is not compressed)
    assert not ahead_module.worth_staging_ahead([str(scrape)], small)  # parsed in Python: nothing stops it
    assert not ahead_module.worth_staging_ahead([str(csv), str(scrape)], small)
    assert not ahead_module.worth_staging_ahead([str(tmp_path / "missing.csv")], small)  # the load says so


def _big_csv(path, rows: int) -> None:
    labels = '"{""namespace"": ""llm"", ""pod"": ""glm-5-0"", ""model_name"": ""glm-5"", ""engine"": ""0""}"'
    with open(path, "w") as f:
        f.write("timestamp,metric,labels,value\n")
        f.writelines(f"{1794787200 + i * 15},vllm:generation_tokens_total,{labels},{i * 7}\n" for i in range(rows))


def test_ctrl_c_while_the_metrics_are_read_ahead_exits_130_and_leaves_nothing(tmp_path):
    """A real SIGINT while the logs are ingested and the metric files are still being read."""
    import signal
    import subprocess
    import sys
    import time

    from analyzer.core.errors import ExitCode
    from tests.support.terminal import ROOT
    from tests.e2e.test_operator_cli import _big_logs

    logs = _big_logs(tmp_path / "logs")
    csv = tmp_path / "samples.csv"
    _big_csv(csv, 1_200_000)  # read for longer than the signal takes to come
    scratch_tmp = tmp_path / "tmp"
    scratch_tmp.mkdir()
    db = tmp_path / "a.duckdb"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch_tmp), "ANALYZER_BATCH_BYTES": "600000"}
    proc = subprocess.Popen([sys.executable, "-m", "analyzer.cli.app", str(logs), "--db", str(db), "--json",
                             "--metrics", str(csv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)
    deadline = time.monotonic() + 60
    while (not list(scratch_tmp.glob("analyzer-spill-*/run-*/metrics-*")) and time.monotonic() < deadline
           and proc.poll() is None):
        time.sleep(0.01)  # the reading has begun (its scratch database spills into the run's folder)
    while not Path(f"{db}.wal").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)  # and the database is being written (its schema, or the logs' first batch)
    assert proc.poll() is None, "the run ended before the signal"
    proc.send_signal(signal.SIGINT)
    # Ends within seconds: the interrupted read is not taken for a file DuckDB cannot
    # read (which would read the 1.2 million rows again in Python, for most of a minute).
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == ExitCode.INTERRUPTED and err == "analyze: error: interrupted\n" and out == ""
    assert list(scratch_tmp.iterdir()) == []  # the scratch database's spill folder is gone, the run's too
    con = duckdb.connect(str(db), read_only=True)
    try:
        # (a signal during the database's creation leaves it for the next run to finish)
        made = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'metric_points'"
                           ).fetchall()[0][0]
        assert not made or con.execute("SELECT count(*) FROM metric_points").fetchall() == [(0,)]
    finally:
        con.close()


def test_metric_files_among_the_logs_join_what_was_read_ahead(tmp_path, monkeypatch, capsys):
    """A Prometheus export among the logs is read into the same stage, once: as reading after gives."""
    logs, files = write_week(tmp_path)
    (logs / "up.json").write_bytes(files[2].read_bytes())  # `up`, passed among the logs
    runs = {}
    for name, ahead in (("ahead", True), ("after", False)):
        if not ahead:
            monkeypatch.setattr(ahead_module, "worth_staging_ahead", lambda *a: False)
            monkeypatch.setattr(main_job, "worth_staging_ahead", lambda *a: False)  # as main_job imported it
        runs[name] = _run(logs, files[:2], tmp_path / f"{name}.duckdb", capsys)
    assert _stable(runs["ahead"]) == _stable(runs["after"])
    assert [len(m["sources"]) for m in runs["ahead"]["metrics"]["loads"]] == [3]
    assert _tables(tmp_path / "ahead.duckdb") == _tables(tmp_path / "after.duckdb")


def test_a_failed_run_does_not_wait_for_a_file_read_in_python(tmp_path):
    """A small text scrape (parsed in Python, which no interrupt stops) is read after the logs:
    a failed ingest fails the run before the scrape's parse starts, not when it would end.

    The command runs as a real process through a wrapper that notes each call of the
    Python parser (`analyzer.io.metric_formats.parse_exposition`) in a file: the
    same run without the bad line calls it (the wrapper is in place), the failing
    run never does. No clock is read.
    """
    import subprocess
    import sys

    from analyzer.core.errors import ExitCode
    from tests.support.terminal import ROOT

    logs, _files = write_week(tmp_path)
    scrape = tmp_path / "scrape.prom"  # under the size that streams through DuckDB: prometheus-client parses it
    with open(scrape, "w") as f:
        f.writelines(f'vllm:generation_tokens_total{{pod="p{i % 50}",model_name="glm-5",engine="0"}} {i} '
                     f"{1794787200000 + i * 15000}\n" for i in range(2_000))
    scratch_tmp = tmp_path / "tmp"
    scratch_tmp.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch_tmp)}
    wrapper = ("import sys\n"
               "marker = sys.argv[1]\n"
               "import analyzer.io.metric_formats as formats\n"
               "real = formats.parse_exposition\n"
               "def noted(*args, **kwargs):\n"
               "    open(marker, 'a').write('parse\\n')\n"
               "    return real(*args, **kwargs)\n"
               "formats.parse_exposition = noted\n"
               "from analyzer.cli.app import main\n"
               "sys.argv = ['analyze', *sys.argv[2:]]\n"
               "main()\n")

    def run(db: str, marker: Path, *extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", wrapper, str(marker), str(logs), "--db", str(tmp_path / db),
                               "--json", "--metrics", str(scrape), *extra], capture_output=True, text=True, env=env,
                              timeout=300)

    good = run("good.duckdb", tmp_path / "good.calls")
    assert good.returncode == 0, good.stderr
    assert (tmp_path / "good.calls").read_text() == "parse\n"  # the scrape goes through the Python parser
    with open(logs / "a.jsonl", "a") as f:
        f.write("{not json\n")  # --strict fails the ingest on it
    p = run("a.duckdb", tmp_path / "bad.calls", "--strict")
    assert p.returncode == ExitCode.BAD_INPUT and "--strict" in p.stderr, p.stderr
    assert not (tmp_path / "bad.calls").exists()  # it failed before the parse began
    assert list(scratch_tmp.iterdir()) == []


def test_abandoned_while_a_file_is_read_no_further_file_is_read(tmp_path):
    """abandon() while a file is being read: no further file is read, the scratch
    database is closed and the thread ends."""
    _, files = write_week(tmp_path)
    assert len(files) >= 2
    begun: list[str] = []
    first_begun, go_on = threading.Event(), threading.Event()

    class Held(ahead_module.StagingAhead):
        def _before_file(self, done, total, what):
            begun.append(what)
            if len(begun) == 1:
                first_begun.set()
                assert go_on.wait(20)  # held before reading the first file
            super()._before_file(done, total, what)

    spills = _spill_dirs()
    ahead = Held([str(f) for f in files])
    assert first_begun.wait(20)
    stopper = threading.Thread(target=ahead.abandon)
    stopper.start()
    while not ahead._stopped:  # abandon() has asked the reading to stop ...
        threading.Event().wait(0.01)
    go_on.set()  # ... and only then does the first file's reading go on
    stopper.join(20)
    assert not stopper.is_alive() and not _metrics_threads()
    # The file held when abandon() came is read or interrupted; no file after the next is
    # asked for (the next one, if asked, is refused).
    assert 1 <= len(begun) <= 2 < len(files)
    assert _spill_dirs() <= spills  # the scratch database and its spill folder are gone


def test_connections_are_tracked_from_threads_while_a_sigint_walks_them():
    """interrupt.track from worker threads (the stores, the metrics' reading) while the SIGINT
    watcher interrupts every tracked connection: neither may fail."""
    from analyzer.core import interrupt
    class FakeConnection:  # what the watcher calls on a tracked DuckDB connection
        interrupted = 0

        def interrupt(self):
            FakeConnection.interrupted += 1

    kept = [FakeConnection() for _ in range(20_000)]
    for con in kept:
        interrupt.track(con)
    errors: list[BaseException] = []
    stop = threading.Event()

    def tracking():
        try:
            while not stop.is_set():
                batch = [FakeConnection() for _ in range(200)]
                for con in batch:
                    interrupt.track(con)
                del batch  # collected: the set shrinks too
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    workers = [threading.Thread(target=tracking) for _ in range(3)]
    for w in workers:
        w.start()
    try:
        for _ in range(30):
            interrupt._interrupt_connections()
    except BaseException as exc:  # noqa: BLE001
        errors.append(exc)
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert not errors
    assert FakeConnection.interrupted >= 30 * len(kept)
