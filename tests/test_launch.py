"""The console script parses the main job's plain form itself, and prints what typer's path prints.

``analyze FILES... [--db PATH] [--json]`` (files that exist) is run by
:mod:`analyzer.launch` without loading typer; any other command line goes to
:mod:`analyzer.cli`. These tests run both ways (``python -m analyzer`` and
``python -m analyzer.cli``) on the same arguments and compare stdout, stderr and
the exit code, and check which command lines take the short way.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from analyzer.cli import app
from analyzer.launch import COMMANDS, plain_main_job
from tests.support.records import NAKED_500, TOOL_RESULT, at, request, response_error, response_ok, write_jsonl


def _logs(folder: Path) -> Path:
    recs = []
    for i in range(4):
        rid = f"{0xd0000000 + i:08x}"
        recs.append(request(rid, at(i), tool_results=TOOL_RESULT, session="s1"))
        recs.append(response_error(rid, at(i + 0.1), NAKED_500, session="s1") if i == 2
                    else response_ok(rid, at(i + 0.1), content="ok", session="s1"))
    write_jsonl(folder / "2026-11-16" / "14-00-00-proxy-1-00000001.jsonl", recs)
    (folder / "notes.txt").write_text("not a log at all\n", encoding="utf-8")
    return folder


def _both(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The same command line by the console script's way and by typer's, each on its own copy of the database."""
    out = []
    for way in ("analyzer", "analyzer.cli"):
        run_dir = tmp_path / way
        run_dir.mkdir(exist_ok=True)
        argv = [a.replace("{dir}", str(run_dir)) for a in args]
        out.append(subprocess.run([sys.executable, "-m", way, *argv], capture_output=True, text=True,
                                  cwd=tmp_path, timeout=120))
    return out[0], out[1]


def _same(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess, tmp_path: Path) -> None:
    today = datetime.now(timezone.utc)
    days = "|".join(d.strftime("%Y-%m-%d") for d in (today, today - timedelta(days=1)))

    def norm(text: str) -> str:  # the folders, and when each run read its files
        text = text.replace(str(tmp_path / "analyzer.cli"), "DIR").replace(str(tmp_path / "analyzer"), "DIR")
        return re.sub(rf"(?:{days})[T ][0-9:.]+Z?", "NOW", text)

    assert (a.returncode, norm(a.stderr)) == (b.returncode, norm(b.stderr))
    assert norm(a.stdout) == norm(b.stdout)


def test_commands_are_the_apps():
    assert sorted(COMMANDS) == sorted(c.name for c in app.registered_commands)


def test_the_plain_main_job_and_nothing_else_takes_the_short_way(tmp_path):
    logs = _logs(tmp_path / "s3")
    db = str(tmp_path / "a.duckdb")
    assert plain_main_job([str(logs), "--db", db, "--json"]) == ([str(logs)], Path(db), True)
    assert plain_main_job([f"--db={db}", str(logs)]) == ([str(logs)], Path(db), False)
    assert plain_main_job([str(logs), str(logs / "notes.txt")]) == ([str(logs), str(logs / "notes.txt")], None, False)
    for args in ([], ["--db", db], [str(logs), "--strict"], [str(logs), "--metrics", str(logs)],
                 [str(tmp_path / "s3" / "*.jsonl")], ["-"], ["report", "--db", db], [str(logs), "--db"],
                 [str(logs), "--db", ""], [str(logs), "--", "x"], [str(logs), "--help"], ["s3://bucket/x"],
                 [str(tmp_path / "missing.jsonl")], [str(logs), "-h"], ["--version"], ["/dev/stdin"],
                 [str(logs), "/dev/fd/0"]):
        assert plain_main_job(args) is None, args


@pytest.mark.parametrize("form", ["json", "table"])
def test_both_ways_print_the_same(tmp_path, form):
    logs = _logs(tmp_path / "s3")
    extra = ["--json"] if form == "json" else []
    first = _both(tmp_path, str(logs / "2026-11-16"), "--db", "{dir}/a.duckdb", *extra)
    _same(*first, tmp_path)
    assert first[0].returncode == 0, first[0].stderr
    if form == "json":
        assert json.loads(first[0].stdout)["ingest"]["new_records"] == 8
    again = _both(tmp_path, str(logs / "2026-11-16"), "--db={dir}/a.duckdb", *extra)  # nothing new
    _same(*again, tmp_path)
    # a file that is no log: skipped, with the same warning, the same exit code
    skipped = _both(tmp_path, str(logs), "--db", "{dir}/b.duckdb", *extra)
    _same(*skipped, tmp_path)
    assert "notes.txt" in skipped[0].stderr


def test_both_ways_fail_the_same(tmp_path):
    (tmp_path / "x.duckdb").write_text("not a database\n", encoding="utf-8")
    logs = _logs(tmp_path / "s3")
    bad_db = _both(tmp_path, str(logs / "2026-11-16"), "--db", str(tmp_path / "x.duckdb"))
    _same(*bad_db, tmp_path)
    assert bad_db[0].returncode != 0 and bad_db[0].stderr.startswith("analyze: error: ")
    only_text = _both(tmp_path, str(logs / "notes.txt"), "--db", "{dir}/c.duckdb", "--json")
    _same(*only_text, tmp_path)
    assert only_text[0].returncode != 0


def test_the_short_way_loads_no_typer(tmp_path):
    logs = _logs(tmp_path / "s3")
    code = ("import json, runpy, sys\n"
            "out, sys.argv = sys.argv[1], ['analyze', *sys.argv[2:]]\n"
            "try:\n    runpy.run_module('analyzer', run_name='__main__')\n"
            "except SystemExit as end:\n    code = end.code\n"
            "json.dump({'code': code, 'modules': sorted(sys.modules)}, open(out, 'w'))\n")
    listing = tmp_path / "modules.json"
    args = [str(logs / "2026-11-16"), "--db", str(tmp_path / "a.duckdb"), "--json"]
    for opens_duckdb in (True, False):  # the first run; again, nothing changed: its output replayed (analyzer.rerun)
        p = subprocess.run([sys.executable, "-c", code, str(listing), *args], capture_output=True, text=True,
                           cwd=tmp_path, timeout=120)
        loaded = json.loads(listing.read_text(encoding="utf-8"))
        assert p.returncode == 0 and loaded["code"] in (0, None), p.stderr
        top = {m.split(".")[0] for m in loaded["modules"]}
        assert ("duckdb" in top) == opens_duckdb and not top & {"typer", "click", "pydantic", "rich"}
    (tmp_path / "x.duckdb").write_text("not a database\n", encoding="utf-8")  # and when it fails
    p = subprocess.run([sys.executable, "-c", code, str(listing), str(logs), "--db", str(tmp_path / "x.duckdb")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    loaded = json.loads(listing.read_text(encoding="utf-8"))
    assert loaded["code"] not in (0, None) and p.stderr.startswith("analyze: error: ") and p.stderr.count("\n") == 1
    assert not {m.split(".")[0] for m in loaded["modules"]} & {"typer", "click"}
    help_run = subprocess.run([sys.executable, "-m", "analyzer", "--help"], capture_output=True, text=True, timeout=60)
    assert help_run.returncode == 0 and "Usage: analyze" in help_run.stdout  # everything else: typer's
