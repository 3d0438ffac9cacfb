"""The schema's mechanism: a new database gets schema.sql, a migration appended after it runs
once on new and existing databases alike (all or nothing), and a database this analyzer
cannot bring up to date is refused before anything is written to it.

The migrations here are appended in the test, as the first one after the release will be.
(That a new database has every relation the queries read: tests/unit/questions/test_queries.py
runs every view and question on one.)
"""

from __future__ import annotations

import duckdb
import pytest

from analyzer.core.errors import DatabaseError
from analyzer.store import migrations
from analyzer.store.db import connect
from analyzer.store.migrations import BASELINE, schema_name


def _recorded(db) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]
    finally:
        con.close()


def _columns(con, table: str) -> list[str]:
    return [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]


def _append(monkeypatch, *steps) -> list[str]:
    """Append ``(name, sql)`` steps to the migrations; return the list of the names run, in order."""
    ran = []

    def step(name, sql):
        def run(con):
            ran.append(name)
            con.execute(sql)
        return name, run

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, *(step(n, s) for n, s in steps)])
    return ran


def test_a_new_database_gets_the_baseline_once(tmp_path):
    db = tmp_path / "new.duckdb"
    connect(db).close()
    connect(db).close()
    assert _recorded(db) == [BASELINE]


def test_an_appended_migration_runs_once_and_keeps_the_data(tmp_path, monkeypatch):
    db = tmp_path / "a.duckdb"
    con = connect(db)
    con.execute("INSERT INTO source_files (file_id, path, form) VALUES (1, '/logs/a.jsonl', 'jsonl')")
    con.close()

    ran = _append(monkeypatch, ("901_notes", "ALTER TABLE source_files ADD COLUMN note VARCHAR"))
    assert schema_name() == "901_notes"
    con = connect(db)
    assert _columns(con, "source_files")[-1] == "note"
    assert con.execute("SELECT path, note FROM source_files").fetchall() == [("/logs/a.jsonl", None)]
    con.close()
    connect(db).close()
    assert ran == ["901_notes"]
    assert _recorded(db) == [BASELINE, "901_notes"]


def test_a_new_database_gets_the_baseline_then_every_migration(tmp_path, monkeypatch):
    ran = _append(monkeypatch, ("901_notes", "ALTER TABLE source_files ADD COLUMN note VARCHAR"),
                  ("902_tags", "CREATE TABLE tags (name VARCHAR PRIMARY KEY)"))
    db = tmp_path / "new.duckdb"
    con = connect(db)
    assert "note" in _columns(con, "source_files") and _columns(con, "tags") == ["name"]
    con.close()
    assert ran == ["901_notes", "902_tags"]
    assert _recorded(db) == [BASELINE, "901_notes", "902_tags"]


def test_a_failing_migration_leaves_the_database_as_it_was(tmp_path, monkeypatch):
    db = tmp_path / "a.duckdb"
    connect(db).close()
    _append(monkeypatch, ("901_notes", "ALTER TABLE source_files ADD COLUMN note VARCHAR"),
            ("902_broken", "ALTER TABLE no_such_table ADD COLUMN x INTEGER"))
    with pytest.raises(DatabaseError, match="not a usable analyzer database"):
        connect(db)
    assert _recorded(db) == [BASELINE]
    con = duckdb.connect(str(db), read_only=True)
    assert "note" not in _columns(con, "source_files")  # 901 went back with 902
    con.close()


def test_a_database_of_a_newer_analyzer_is_refused(tmp_path, monkeypatch):
    db = tmp_path / "a.duckdb"
    with monkeypatch.context() as m:
        _append(m, ("901_notes", "ALTER TABLE source_files ADD COLUMN note VARCHAR"))
        connect(db).close()
    for read_only in (False, True):
        with pytest.raises(DatabaseError, match="written by a newer analyzer .*901_notes"):
            connect(db, read_only=read_only)


def test_a_database_of_a_pre_release_build_is_refused_before_anything_is_written(tmp_path):
    # What a build before v0.1.0 made: its own steps recorded (001_initial ... 011_forget_pending).
    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE _migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    con.execute("INSERT INTO _migrations VALUES ('001_initial', now()), ('011_forget_pending', now())")
    con.execute("CREATE TABLE records (ts TIMESTAMP)")
    con.close()
    for read_only in (False, True):
        with pytest.raises(DatabaseError) as err:
            connect(db, read_only=read_only)
        assert str(err.value) == (f"{db} was made by a pre-release build of the analyzer; rebuild it from its "
                                  "logs into a new file: analyze LOGS --db NEW.duckdb")
    assert _recorded(db) == ["001_initial", "011_forget_pending"]
    con = duckdb.connect(str(db), read_only=True)
    assert [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()] == [
        "_migrations", "records"]
    con.close()
