"""The ingest's connection writes row groups of its own size, and falls back to DuckDB's.

DuckDB sets a database's row group size when it attaches a file, so the ingest's
connection (``connect(..., row_groups=N)``) attaches the file to an in-memory
database and uses it. These tests check what that must keep: the same database
name and data as a plain open, cursors that reach it, spilling beside the file,
a clean file after close, and a plain open when the process holds the file.
"""

from __future__ import annotations

import subprocess
import sys

from analyzer.db import DEFAULT_ROW_GROUP_ROWS, connect, row_group_rows, use_same_database
from analyzer.errors import DatabaseError


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
        # spills beside the file, as a plain open does (not to ./.tmp)
        assert con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0] == str(db) + ".tmp"
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
