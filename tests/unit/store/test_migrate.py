"""Migrations run forward from the very first schema and keep the data."""

from __future__ import annotations

import duckdb

from analyzer.store.db import MIGRATIONS, connect


def test_migrates_from_the_first_schema_forward(tmp_path):
    path = tmp_path / "old.duckdb"
    old = duckdb.connect(str(path))
    old.execute("CREATE TABLE _migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    name, first = MIGRATIONS[0]
    first(old)
    old.execute("INSERT INTO _migrations VALUES (?, now())", [name])
    old.execute("INSERT INTO source_files (file_id, path, form) VALUES (1, '/logs/a.jsonl', 'jsonl')")
    old.close()

    con = connect(path)
    applied = [r[0] for r in con.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]
    assert applied == sorted(n for n, _ in MIGRATIONS)
    assert con.execute("SELECT path FROM source_files").fetchall() == [("/logs/a.jsonl",)]
    con.close()
    # opening again applies nothing new
    con = connect(path)
    assert con.execute("SELECT count(*) FROM _migrations").fetchall()[0][0] == len(MIGRATIONS)
    con.close()


def test_migration_names_are_unique_and_ordered():
    names = [n for n, _ in MIGRATIONS]
    assert names == sorted(names) and len(set(names)) == len(names)
