"""A re-run that finds nothing new (`analyze DIR --db X --json` again): what it loads and prints.

It starts in a fraction of a second because it imports only what it uses: no
pydantic (typer's option coercion), no rich (nothing is drawn with --json), no
asyncio (the async ladder), no pyarrow (nothing is read). The figures are
benchmarks/ingest.py's ``noop`` row; here only what would make them slow again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from analyzer.store.db import connect
from analyzer.ingestion.logs import ingest
from analyzer.outputs.summary_cache import cached_summary
from analyzer.classification.turns import records_signature, refresh_turns
from tests.support.cli import Ran
from tests.support.cli import analyze
from tests.support.records import NAKED_500, TOOL_RESULT, at, request, response_error, response_ok, write_jsonl

# The notebook's DataFrame library: the command line imports every command's job at its
# top (no import of the package's own modules hides inside a function), but polars loads
# only when a question is asked for a DataFrame.
NOT_NEEDED = ("polars",)

# The CLI run in-process, then the modules it loaded written to a file (stdout is the summary).
_RUN_AND_LIST_MODULES = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["analyze", *sys.argv[2:]]
try:
    runpy.run_module("analyzer.cli.app", run_name="__main__")
except SystemExit as end:
    code = end.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _chunks(folder: Path) -> Path:
    for n in range(4):
        recs = []
        for i in range(3):
            rid = f"{0xe0000000 + n * 10 + i:08x}"
            t = at(n * 60 + i)
            recs.append(request(rid, t, tool_results=TOOL_RESULT, session=f"s{n}"))
            recs.append(response_error(rid, at(n * 60 + i + 0.1), NAKED_500, session=f"s{n}") if i == 1
                        else response_ok(rid, at(n * 60 + i + 0.1), content="ok", session=f"s{n}"))
        write_jsonl(folder / "2026-11-16" / f"14-0{n}-00-proxy-1-{n:08x}.jsonl", recs)
    return folder


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    listing = tmp_path / "modules.json"
    p = subprocess.run([sys.executable, "-c", _RUN_AND_LIST_MODULES, str(listing), *args],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    return p, json.loads(listing.read_text(encoding="utf-8"))


def _here(tmp_path: Path, *args: str) -> Ran:
    """The command in this process (tests/support/cli.py): for what a run prints, where the modules a
    fresh interpreter loads are not looked at (the summary cache is in the database, not the process)."""
    return analyze(*args, cwd=tmp_path)


def _top(modules: list[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_a_rerun_with_nothing_new_imports_only_what_it_uses(tmp_path):
    logs, db = _chunks(tmp_path / "s3"), str(tmp_path / "a.duckdb")
    first, loaded_first = _run(tmp_path, str(logs), "--db", db, "--json")
    assert first.returncode == 0 and loaded_first["code"] in (0, None), first.stderr
    assert json.loads(first.stdout)["ingest"]["files_ingested"] == 4
    assert "pyarrow" in _top(loaded_first["modules"])  # the check sees a module that was used

    again, loaded = _run(tmp_path, str(logs), "--db", db, "--json")
    assert again.returncode == 0 and loaded["code"] in (0, None), again.stderr
    summary = json.loads(again.stdout)
    assert summary["ingest"]["files_unchanged"] == 4 and summary["ingest"]["new_records"] == 0
    assert summary["turns"] == 12 and summary["classes"]["tool-history-5xx"]["count"] == 4
    assert sorted(_top(loaded["modules"]) & set(NOT_NEEDED)) == []
    assert "duckdb" in _top(loaded["modules"]) and "typer" in _top(loaded["modules"])


def test_the_rerun_prints_what_a_fresh_summary_prints(tmp_path):
    """The re-run's summary (from the summary cache) is the one computed from the tables,
    apart from this run's own parts (its ingest report and metric loads)."""
    logs, db = _chunks(tmp_path / "s3"), str(tmp_path / "a.duckdb")
    first = _here(tmp_path, str(logs), "--db", db, "--json")
    again = _here(tmp_path, str(logs), "--db", db, "--json")
    stored = _here(tmp_path, "--db", db, "--json")  # no files: the summary of what the database holds
    a, b, c = (json.loads(p.stdout) for p in (first, again, stored))
    for doc in (a, b):
        doc.pop("ingest")
        assert doc["metrics"].pop("loads") == []
    assert a == b == c
    # the table form too: everything but the ingest line is the same
    table = _here(tmp_path, str(logs), "--db", db)
    plain = _here(tmp_path, "--db", db)
    assert table.returncode == 0 and "this run ingested 0 file(s) (4 unchanged)" in table.stdout
    assert [ln for ln in table.stdout.splitlines() if not ln.startswith("this run ingested")] == plain.stdout.splitlines()


def test_a_rerun_that_finds_a_new_chunk_says_what_the_database_holds_now(tmp_path):
    """The re-run's 'what the database holds' is taken again as soon as a file was read."""
    logs, db = _chunks(tmp_path / "s3"), str(tmp_path / "a.duckdb")
    first = _here(tmp_path, str(logs), "--db", db, "--json")
    later = logs / "2026-11-18" / "09-00-00-proxy-1-0000000a.jsonl"
    write_jsonl(later, [request("e00000ff", at(2 * 24 * 60), session="s9"),
                        response_ok("e00000ff", at(2 * 24 * 60 + 0.1), content="ok", session="s9")])
    again = _here(tmp_path, str(logs), "--db", db, "--json")
    before, after = json.loads(first.stdout)["database"], json.loads(again.stdout)["database"]
    assert (before["files"], after["files"]) == (4, 5) and after["records"] == before["records"] + 2
    assert [p["first_day"] for p in after["periods"]] == ["2026-11-16", "2026-11-18"]
    assert any("a period apart" in n for n in json.loads(again.stdout)["notes"])


def test_the_summary_cache_takes_the_refreshs_records_signature_for_its_own(tmp_path):
    """A run sums the records once: the summary cache keys on the signature the refresh
    returns, the very one it computes itself when not given it."""
    con = connect(tmp_path / "a.duckdb")
    try:
        ingest(con, [str(_chunks(tmp_path / "s3"))])
        classified = refresh_turns(con)
        assert classified.records_signature == records_signature(con) != ""
        builds = []

        def build(con, **filters):
            builds.append(filters)
            return {"turns": 12}

        assert cached_summary(con, build) == {"turns": 12} and len(builds) == 1
        assert cached_summary(con, build, records_signature=classified.records_signature) == {"turns": 12}
        assert len(builds) == 1  # the same key: a hit
        cached_summary(con, build, records_signature=classified.records_signature + "0")
        assert len(builds) == 2  # other records, another key
    finally:
        con.close()

