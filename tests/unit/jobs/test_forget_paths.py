"""`analyze forget PATH` names files the way the user typed them when ingesting.

Ingestion registers a file by its real path; the user may name it through a
symlinked folder or relative to the working directory, as the docs' examples do
(`sample_logs/` linked into a clone).
"""

from __future__ import annotations

from analyzer.jobs.forget import select_files
from analyzer.store.db import connect
from tests.support.ingesting import run
from tests.support.records import at, request, response_ok, write_jsonl


def test_a_file_ingested_through_a_symlink_is_found_by_that_name(tmp_path, monkeypatch):
    real = write_jsonl(tmp_path / "real" / "2026-11-16" / "a.jsonl",
                       [request("r1", at(0)), response_ok("r1", at(1))])
    work = tmp_path / "work"
    work.mkdir()
    (work / "logs").symlink_to(tmp_path / "real")
    monkeypatch.chdir(work)
    db = tmp_path / "a.duckdb"
    run(db, ["logs/2026-11-16"])
    con = connect(db)
    try:
        for typed in ("logs/2026-11-16", "logs/2026-11-16/a.jsonl", str(work / "logs"), "logs/*/a.jsonl"):
            chosen, _ = select_files(con, [typed])
            assert list(chosen.values()) == [str(real.resolve())], typed
    finally:
        con.close()
