"""The ingest's connection writes row groups of its own size, and falls back to DuckDB's.

DuckDB sets a database's row group size when it attaches a file, so the ingest's
connection (``connect(..., row_groups=N)``) attaches the file to an in-memory
database and uses it. These tests check what that must keep: the same database
name and data as a plain open, cursors that reach it, spilling beside the file,
a clean file after close, and a plain open when the process holds the file. The
commands that write open the file so too: a checkpoint through DuckDB's row group
size would merge, so rewrite, every table the ingest wrote.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from analyzer.store.db import DEFAULT_ROW_GROUP_ROWS, connect, row_group_rows, use_same_database
from analyzer.core.errors import DatabaseError
from analyzer.store.spill import run_folder_name
from tests.support.repo import REPO


def _storage(con, table: str) -> tuple[int, int]:
    """(row groups, most rows in one) of ``table``."""
    return con.execute("SELECT count(DISTINCT row_group_id), max(count) FROM pragma_storage_info(?)",
                       [table]).fetchall()[0]


def test_row_groups_of_the_given_size_in_a_file_a_plain_open_reads(tmp_path):
    db = tmp_path / "week.duckdb"
    con = connect(db, row_groups=2048)
    try:
        assert row_group_rows(con) == 2048
        assert con.execute("SELECT current_database()").fetchall() == [("week",)]
        # spills beside the file, as a plain open does (not to ./.tmp), in this run's own folder there
        spill = con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]
        assert spill == str(tmp_path / "week.duckdb.tmp" / run_folder_name())
        con.execute("CREATE TABLE t AS SELECT range AS i FROM range(10000)")
        assert _storage(con, "t") == (5, 2048)
        cur = con.cursor()  # starts in DuckDB's in-memory database ...
        use_same_database(cur, "week")  # ... until told
        assert cur.execute("SELECT count(*) FROM records").fetchall() == [(0,)]
        cur.close()
    finally:
        con.close()
    assert not (tmp_path / "week.duckdb.wal").exists()  # checkpointed on close
    plain = connect(db, read_only=True)
    try:
        assert row_group_rows(plain) == DEFAULT_ROW_GROUP_ROWS
        assert plain.execute("SELECT current_database(), sum(i) FROM t").fetchall() == [("week", 49995000)]
        assert plain.execute("SELECT count(*) FROM turns").fetchall() == [(0,)]  # views bind as before
    finally:
        plain.close()


def test_a_file_this_process_holds_is_opened_in_the_same_instance(tmp_path):
    db = tmp_path / "week.duckdb"
    held = connect(db)  # a notebook's connection
    try:
        con = connect(db, row_groups=2048)
        try:
            assert row_group_rows(con) == DEFAULT_ROW_GROUP_ROWS
            con.execute("CREATE TABLE t AS SELECT 1 AS i")
        finally:
            con.close()
        assert held.execute("SELECT i FROM t").fetchall() == [(1,)]  # one instance: it sees the write
    finally:
        held.close()


def test_a_file_named_like_duckdbs_own_databases_opens(tmp_path):
    for name in ("memory", "temp", "system", "main"):
        con = connect(tmp_path / f"{name}.duckdb", row_groups=2048)
        try:
            con.execute("CREATE TABLE t AS SELECT range AS i FROM range(5000)")
        finally:
            con.close()
        again = connect(tmp_path / f"{name}.duckdb", read_only=True)  # it was the file that was written
        try:
            assert again.execute("SELECT count(*) FROM _migrations").fetchall()[0][0] > 0
            assert again.execute("SELECT count(*) FROM t").fetchall() == [(5000,)]
        finally:
            again.close()


def test_a_locked_file_fails_as_before(tmp_path):
    db = tmp_path / "week.duckdb"
    connect(db).close()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); sys.stdin.read()", str(db)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        try:
            connect(db, row_groups=2048)
        except DatabaseError as exc:
            assert "cannot open database" in str(exc) and "lock" in str(exc).lower()
        else:
            raise AssertionError("a file locked by another process opened")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


# --- the commands that write open the file with the ingest's row groups -------

SAMPLE = REPO / "sample_logs"


def _ingested_unclassified(db, monkeypatch, rows: int = 2048):
    """The sample week ingested in row groups of ``rows`` (the commands' size, here), not classified.

    Returns (row groups, most rows in one) of ``records``."""
    import analyzer.store.db

    from analyzer.ingestion.logs import ingest

    monkeypatch.setattr(analyzer.store.db, "INGEST_ROW_GROUP_ROWS", rows)  # the commands read it when they open
    con = connect(db, row_groups=rows)
    try:
        ingest(con, [str(SAMPLE / "s3"), str(SAMPLE / "kubectl")])
        shape = _storage(con, "records")
    finally:
        con.close()
    assert shape[0] > 1 and shape[1] <= rows
    return shape


@pytest.fixture(scope="module")
def ingested_week(tmp_path_factory):
    """The sample week ingested once in row groups of 2,048 rows, unclassified (each test writes a copy)."""
    db = tmp_path_factory.mktemp("row-groups") / "week.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        _ingested_unclassified(db, mp)
    return db


def _copy_of(week, db, monkeypatch, rows: int = 2048):
    """``week`` copied to ``db``, with the commands opening files in row groups of ``rows`` as it was written."""
    import analyzer.store.db

    monkeypatch.setattr(analyzer.store.db, "INGEST_ROW_GROUP_ROWS", rows)  # the commands read it when they open
    shutil.copy(week, db)  # closed after the ingest: no WAL beside it
    return db


def _records_shape(db):
    con = connect(db, read_only=True)
    try:
        return _storage(con, "records")
    finally:
        con.close()


def test_a_write_through_duckdbs_row_groups_merges_the_ingests_at_checkpoint(tmp_path, ingested_week, monkeypatch):
    """Why the commands below open as the ingest does: DuckDB's checkpoint merges row
    groups that fit in fewer of its connection's size, rewriting the table."""
    db = _copy_of(ingested_week, tmp_path / "week.duckdb", monkeypatch)
    plain = connect(db)  # DuckDB's row groups, 122,880 rows
    try:
        plain.execute("CREATE TABLE notes AS SELECT 1 AS x")
    finally:
        plain.close()  # the checkpoint
    assert _records_shape(db)[1] > 2048  # the ingest's row groups merged into bigger ones


def test_analyze_sql_write_keeps_the_ingests_row_groups(tmp_path, ingested_week, monkeypatch, capsys):
    from analyzer.cli.app import main

    db = _copy_of(ingested_week, tmp_path / "week.duckdb", monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        main(["sql", "CREATE TABLE notes AS SELECT 1 AS x", "--write", "--db", str(db)])
    assert not exit_info.value.code, capsys.readouterr().err
    # Its checkpoint may merge the short row groups some batches end in, never into
    # bigger ones than the ingest's: full ones are not rewritten.
    assert _records_shape(db)[1] <= 2048


def test_a_report_that_classifies_first_keeps_the_ingests_row_groups(tmp_path, ingested_week, monkeypatch, capsys):
    from analyzer.cli.app import main

    db = _copy_of(ingested_week, tmp_path / "week.duckdb", monkeypatch)
    out = tmp_path / "report.html"
    with pytest.raises(SystemExit) as exit_info:
        main(["report", "--db", str(db), "-o", str(out)])
    assert not exit_info.value.code, capsys.readouterr().err
    assert out.stat().st_size > 0
    con = connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM turns").fetchall()[0][0] > 0  # it wrote the classification
    finally:
        con.close()
    assert _records_shape(db)[1] <= 2048
