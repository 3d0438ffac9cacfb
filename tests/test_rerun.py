"""A re-run that finds nothing new prints the last run's output without loading DuckDB (analyzer.rerun).

Each test runs the console script (``python -m analyzer``) in a child process, as
a scheduler does, and records whether the child loaded DuckDB: a replay loads
none. After every change a replay must not survive (a grown, new or touched file,
another writer of the database, a copy of it, another option or environment), and
what a replay prints must be what the full path prints (``ANALYZER_NO_REPLAY=1``).
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from analyzer import rerun
from analyzer.sources import discover_inputs
from tests.support.records import TOOL_RESULT, NAKED_500, at, request, response_error, response_ok, write_jsonl

# Runs the console script in this child and writes {code, duckdb loaded} to argv[1].
_CHILD = ("import json, runpy, sys\n"
          "out, sys.argv = sys.argv[1], ['analyze', *sys.argv[2:]]\n"
          "code = 0\n"
          "try:\n    runpy.run_module('analyzer', run_name='__main__')\n"
          "except SystemExit as end:\n    code = end.code or 0\n"
          "sys.stdout.flush()\n"
          "json.dump({'code': code, 'duckdb': 'duckdb' in sys.modules}, open(out, 'w'))\n")


def _turns(path: Path, first: int, n: int, *, fail: int | None = None) -> Path:
    recs = []
    for i in range(first, first + n):
        rid = f"{0xe0000000 + i:08x}"
        recs.append(request(rid, at(i), tool_results=TOOL_RESULT, session="s1"))
        recs.append(response_error(rid, at(i + 0.1), NAKED_500, session="s1") if i == fail
                    else response_ok(rid, at(i + 0.1), content="ok", session="s1"))
    return write_jsonl(path, recs)


@pytest.fixture()
def logs(tmp_path: Path) -> Path:
    folder = tmp_path / "s3"
    _turns(folder / "2026-11-16" / "14-00-00-proxy-1-00000001.jsonl", 0, 4, fail=2)
    _turns(folder / "2026-11-16" / "14-05-00-proxy-1-00000002.jsonl", 4, 3)
    return folder


class Runner:
    """``analyze LOGS --db DB [ARGS]`` in a child; returns (stdout, stderr, exit code, DuckDB loaded)."""

    def __init__(self, tmp_path: Path, logs: Path):
        self.tmp, self.logs, self.db = tmp_path, logs, tmp_path / "a.duckdb"

    def __call__(self, *args: str, env: dict | None = None) -> tuple[str, str, int, bool]:
        listing = self.tmp / "child.json"
        env = {**os.environ, **(env or {})}
        p = subprocess.run([sys.executable, "-c", _CHILD, str(listing), str(self.logs), "--db", str(self.db), *args],
                           capture_output=True, encoding=env.get("PYTHONIOENCODING", "utf-8"), cwd=self.tmp,
                           timeout=120, env=env)
        child = json.loads(listing.read_text(encoding="utf-8"))
        return p.stdout, p.stderr, child["code"], child["duckdb"]

    def full(self, *args: str) -> str:
        """The same command by the full path: what a replay must print."""
        out, err, code, loaded = self(*args, env={"ANALYZER_NO_REPLAY": "1"})
        assert code == 0 and loaded, err
        return out


@pytest.mark.parametrize("form", [["--json"], []], ids=["json", "table"])
def test_the_run_after_an_ingest_replays_what_the_full_path_prints(tmp_path, logs, form):
    run = Runner(tmp_path, logs)
    first, err, code, loaded = run(*form)
    assert code == 0 and loaded and err == ""
    assert rerun.sidecar(run.db).exists()
    again, err, code, loaded = run(*form)
    assert code == 0 and err == "" and not loaded  # no DuckDB: the record made by the ingest's own re-run
    assert again != first  # this one read nothing ...
    assert again == run.full(*form)  # ... and says what the full path says
    if form:
        ingest = json.loads(again)["ingest"]
        assert (ingest["files_unchanged"], ingest["new_records"]) == (2, 0)
    # Without a record the full path writes one for the next run.
    rerun.sidecar(run.db).unlink()
    out, _, code, loaded = run(*form)
    assert (out, code, loaded) == (again, 0, True) and rerun.sidecar(run.db).exists()
    out, _, code, loaded = run(*form)
    assert (out, code, loaded) == (again, 0, False)


def _replays(run: Runner) -> str:
    out, err, code, loaded = run("--json")
    assert code == 0 and not loaded, err
    return out


def test_every_change_takes_the_full_path(tmp_path, logs):
    run = Runner(tmp_path, logs)
    assert run("--json")[2] == 0
    baseline = _replays(run)
    chunk = logs / "2026-11-16" / "14-05-00-proxy-1-00000002.jsonl"

    def changed(what: str) -> dict:
        out, err, code, loaded = run("--json")
        assert code == 0 and loaded, (what, err)  # the full path, not the old output
        after = _replays(run)
        assert after == run.full("--json"), what
        return json.loads(out)

    with open(chunk, "a", encoding="utf-8") as f:  # a file grows
        f.write(json.dumps(request("e00000ff", at(9), session="s2")) + "\n")
    assert changed("grown")["ingest"]["new_records"] == 1
    _turns(logs / "2026-11-16" / "14-10-00-proxy-1-00000003.jsonl", 20, 2)  # a new file
    assert changed("new file")["ingest"]["files_ingested"] == 1
    st = chunk.stat()
    os.utime(chunk, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched, same bytes
    assert changed("touched")["ingest"]["files_unchanged"] == 3
    records = json.loads(_replays(run))["database"]["records"]
    with duckdb.connect(str(run.db)) as con:  # another writer: a notebook deletes a record
        con.execute("DELETE FROM records WHERE request_id = 'e00000ff'")
    assert changed("another writer")["database"]["records"] == records - 1
    copy = tmp_path / "copy.duckdb"
    shutil.copy2(run.db, copy)
    os.replace(copy, run.db)  # the same bytes and times in a new file
    changed("a copy of the database")
    out, _, code, loaded = run()  # another option (tables, not JSON)
    assert code == 0 and loaded and out.startswith("9 turns")
    assert run("--json")[3]  # and back: the record was the tables'
    now = _replays(run)
    assert now != baseline and json.loads(now)["database"]["records"] == records - 1
    assert run("--json", env={"ANALYZER_BATCH_LINES": "64"})[3]  # another environment


def test_a_damaged_record_takes_the_full_path(tmp_path, logs):
    run = Runner(tmp_path, logs)
    run("--json")
    good = _replays(run)
    side = rerun.sidecar(run.db)
    doc = json.loads(side.read_text(encoding="utf-8"))
    doc["stdout"] = doc["stdout"].replace('"turns"', '"turnz"', 1)  # text that is not what was stored
    side.write_text(json.dumps(doc), encoding="utf-8")
    out, _, code, loaded = run("--json")
    assert (out, code, loaded) == (good, 0, True)
    side.write_text(side.read_text(encoding="utf-8")[:100], encoding="utf-8")  # cut short
    out, _, code, loaded = run("--json")
    assert (out, code, loaded) == (good, 0, True)


def test_no_record_when_the_run_skipped_or_would_read_something(tmp_path, logs):
    (logs / "notes.txt").write_text("not a log at all\n", encoding="utf-8")  # skipped on every run
    run = Runner(tmp_path, logs)
    _, err, code, _ = run("--json")
    assert code == 0 and "skipped" in err and not rerun.sidecar(run.db).exists()
    out, err2, code, loaded = run("--json")
    assert code == 0 and loaded and err2 == err  # the warning again: the full path
    (logs / "notes.txt").unlink()
    run("--json")
    assert rerun.sidecar(run.db).exists()
    found = discover_inputs([str(logs)])
    assert rerun.state([str(logs)], run.db, True, found, rerun.database_identity(run.db)) is not None
    (tmp_path / "a.duckdb.wal").write_bytes(b"")  # uncheckpointed changes would live there
    assert rerun.database_identity(run.db) is None
    assert rerun.state([str(logs)], run.db, True, found, None) is None


def test_on_a_terminal_nothing_is_kept_or_replayed(tmp_path, logs):
    run = Runner(tmp_path, logs)
    run()
    kept = rerun.sidecar(run.db).read_bytes()
    leader, follower = pty.openpty()
    drawn = bytearray()

    def drain() -> None:  # the terminal's reader: a full pty would stop the child
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        p = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "child.json"), str(logs), "--db", str(run.db)],
                           stdout=follower, stderr=subprocess.PIPE, cwd=tmp_path, timeout=120)
    finally:
        os.close(follower)
        reader.join(timeout=10)
        os.close(leader)
    assert b"turns" in drawn
    child = json.loads((tmp_path / "child.json").read_text(encoding="utf-8"))
    assert p.returncode == 0 and child["code"] == 0 and child["duckdb"]  # rich draws for the terminal
    assert rerun.sidecar(run.db).read_bytes() == kept  # nothing kept for it; the pipe's record still holds
    assert not run()[3]


def test_standard_input_is_read_whole_when_a_record_exists(tmp_path, logs):
    run = Runner(tmp_path, logs)
    run("--json")
    assert rerun.sidecar(run.db).exists()
    piped = _turns(tmp_path / "piped" / "more.jsonl", 40, 5)
    with open(piped, "rb") as stdin:  # /dev/stdin is a file that exists: it must not be walked as one
        p = subprocess.run([sys.executable, "-m", "analyzer", "/dev/stdin", "--db", str(run.db), "--json"],
                           stdin=stdin, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["ingest"]["new_records"] == 10  # every line, none eaten by a look at the record


def test_metric_files_among_the_logs_are_loaded_once_and_keep_no_record(tmp_path, logs, monkeypatch, capsys):
    import analyzer.commands.run as run_command

    shutil.copy(Path(__file__).resolve().parent.parent / "sample_logs" / "metrics" / "up.json", logs / "up.json")
    run = Runner(tmp_path, logs)
    for _ in range(2):
        _, err, code, loaded = run("--json")
        assert code == 0 and loaded
        warnings = [ln for ln in err.splitlines() if ln.startswith("analyze: warning:")]
        assert warnings and len(warnings) == len(set(warnings)), err  # each said once
    assert not rerun.sidecar(run.db).exists()

    def loads_again(*args, **kwargs):
        raise AssertionError("a run that loaded metrics made the re-run: it would load them again")

    monkeypatch.setattr(run_command, "_run_again", loads_again)
    (logs / "2026-11-16" / "14-05-00-proxy-1-00000002.jsonl").unlink()  # something to read: the re-run's case
    _turns(logs / "2026-11-16" / "14-06-00-proxy-1-00000004.jsonl", 50, 2)
    summary = run_command.run_main_job(files=[str(logs)], db=run.db, json_out=True, record_rerun=True)
    assert summary["ingest"]["files_ingested"] == 1 and summary["metrics"]["loads"]
    capsys.readouterr()


def test_a_file_that_arrives_during_the_run_is_left_for_the_next(tmp_path, logs):
    """The re-run made at once on the open connection reads nothing: a file new since the plan is not ingested."""
    from analyzer.commands.run import _run_again
    from analyzer.db import connect

    run = Runner(tmp_path, logs)
    run("--json")
    job = dict(strict=False, models=None, since_dt=None, until_dt=None, metrics=None, requested_w=None,
               save_wedge_window=False, prometheus=None, model_map=None, caller_deadline_s=None, selector=None,
               deadline_s=60.0)
    con = connect(run.db)
    try:
        found, summary = _run_again(con, [str(logs)], job)  # nothing new: the re-run's own summary
        assert summary["ingest"]["files_unchanged"] == 2 and len(found.files) == 2
        _turns(logs / "2026-11-16" / "14-10-00-proxy-1-00000009.jsonl", 30, 2)  # arrived meanwhile
        assert _run_again(con, [str(logs)], job) is None
        assert con.execute("SELECT count(*) FROM source_files").fetchall()[0][0] == 2
    finally:
        con.close()
    out, _, _, loaded = run("--json")
    assert loaded and json.loads(out)["ingest"]["files_ingested"] == 1  # told by the next run


def test_a_database_behind_a_link_is_checked_for_its_real_log(tmp_path, logs):
    run = Runner(tmp_path, logs)
    run("--json")
    link = tmp_path / "link.duckdb"
    link.symlink_to(run.db)
    assert rerun.database_identity(link) == rerun.database_identity(run.db) is not None
    (tmp_path / "a.duckdb.wal").write_bytes(b"")  # DuckDB's log is beside the file the link names
    assert rerun.database_identity(link) is None


def test_a_stdout_that_is_not_utf8_gets_what_the_full_path_gives(tmp_path, logs):
    run = Runner(tmp_path, logs)
    env = {"PYTHONIOENCODING": "cp1252"}
    out, err, code, loaded = run(env=env)
    assert code == 0 and loaded, err
    assert "━" not in out and "─" not in out  # rich's boxes for that encoding
    again, err, code, loaded = run(env=env)
    assert code == 0 and not loaded, err
    full, _, _, _ = run(env={**env, "ANALYZER_NO_REPLAY": "1"})
    assert again == full
    assert run()[3]  # another encoding: the full path


def test_the_default_database_is_replayed_by_its_own_record(tmp_path, logs):
    """No --db: $ANALYZER_DB (else ./analyzer.duckdb) is the database, and its record sits beside it."""
    listing = tmp_path / "child.json"
    db = tmp_path / "elsewhere" / "week.duckdb"
    db.parent.mkdir()

    def run(**env: str) -> tuple[str, bool]:
        p = subprocess.run([sys.executable, "-c", _CHILD, str(listing), str(logs), "--json"], capture_output=True,
                           text=True, cwd=tmp_path, timeout=120,
                           env={**{k: v for k, v in os.environ.items() if k != "ANALYZER_DB"}, **env})
        child = json.loads(listing.read_text(encoding="utf-8"))
        assert p.returncode == 0 and child["code"] == 0, p.stderr
        return p.stdout, child["duckdb"]

    assert run(ANALYZER_DB=str(db))[1]
    assert db.with_name("week.duckdb.rerun").exists()
    out, loaded = run(ANALYZER_DB=str(db))
    assert not loaded and json.loads(out)["ingest"]["files_unchanged"] == 2
    out, loaded = run()  # ./analyzer.duckdb: another database, read in full
    assert loaded and json.loads(out)["ingest"]["files_ingested"] == 2 and (tmp_path / "analyzer.duckdb").exists()
    assert not run()[1] and (tmp_path / "analyzer.duckdb.rerun").exists()


def test_a_change_of_the_code_changes_the_code_stamp(tmp_path, monkeypatch):
    """An upgrade (a module rewritten) makes every record stale: the stamp is of the files the summary cache hashes."""
    import analyzer.paths as paths

    module = tmp_path / "module.py"
    module.write_text("X = 1\n", encoding="utf-8")
    real = paths.code_files()
    assert any(p.name == "rerun.py" for p in real) and any(p.suffix == ".sql" for p in real)
    monkeypatch.setattr(paths, "code_files", lambda: [*real, module])
    monkeypatch.setattr(rerun, "_stamp", None)
    before = rerun._code_stamp()
    st = module.stat()
    os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    monkeypatch.setattr(rerun, "_stamp", None)
    assert rerun._code_stamp() != before
