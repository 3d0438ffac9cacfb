"""A Parquet lake (``analyze export --lake``) opened as a DuckDB database: the questions run unchanged.

:func:`open_lake` gives an in-memory DuckDB connection in which every relation
of the lake is a view over its Parquet files (the columns the manifest names,
JSON columns restored to JSON), and the catalog's macros and views are created on top, as
:func:`analyzer.store.db.connect` creates them in the database. Every question
of ``queries/``, the summary and the report then read the lake as they read a
database; the materialized relations (``turns``, ``sessions``,
``ladder_baseline``) are read as the lake holds them, not recomputed.

A lake proves itself before it is read: its manifest names this analyzer's
relations with this analyzer's columns (:func:`check_manifest`), and lists every
file with its size, rows and fingerprint, which the reader checks against the
files there (:mod:`analyzer.store.lake_files`). A lake that differs is a
:class:`~analyzer.store.lake_files.LakeError` (exit 2) naming the relation.

The lake's format lives here, beside its reader; :mod:`analyzer.outputs.lake`
writes it.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import duckdb

from analyzer.core.errors import first_line
from analyzer.core.interrupt import track
from analyzer.store.catalog import create_views
from analyzer.store.db import NO_NETWORK_CONFIG, READ_ONLY_SETTINGS, connect, set_session
from analyzer.store.lake_files import PARTITION, LakeError, verify_relation
from analyzer.store.migrations import schema_name

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "NOT_EXPORTED", "PARTITION", "LakeError", "check_lake",
           "check_lake_path", "check_manifest", "lake_schema", "open_lake", "read_manifest"]

MANIFEST = "_manifest.json"
FORMAT = "analyzer-lake"
#: 2: the manifest lists every file of every relation (path, bytes, rows, fingerprint).
FORMAT_VERSION = 2
#: What a relation or column name in a manifest may be (whole: no trailing newline): a
#: manifest is a file anyone could have edited, and its names become folder names and
#: quoted SQL identifiers.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: Characters DuckDB and Spark read as a pattern in a path, even in a list of files: a
#: lake folder named with one would read a look-alike sibling's files.
PATTERN_CHARS = frozenset("*?[]{}")
#: The database's bookkeeping that answers no question: left out of the lake. (``_migrations`` goes
#: in: which schema made the data is part of what the lake says, and the report shows it.)
NOT_EXPORTED = frozenset({"build_state", "forget_pending", "ingest_pending", "summary_cache", "turns_dirty"})


@lru_cache(maxsize=1)
def _schema_of_this_analyzer() -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    con = connect(":memory:")  # the migrations and the catalog's tables, as a new database has them
    try:
        rows = con.execute(
            "SELECT c.table_name, c.column_name, c.data_type FROM duckdb_columns() c "
            "JOIN duckdb_tables() t ON t.table_name = c.table_name AND t.schema_name = c.schema_name "
            "WHERE c.schema_name = 'main' ORDER BY c.table_name, c.column_index").fetchall()
    finally:
        con.close()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, data_type in rows:
        if table not in NOT_EXPORTED:
            tables.setdefault(table, []).append((column, data_type))
    return tuple((t, tuple(cols)) for t, cols in sorted(tables.items()))


def lake_schema() -> dict[str, list[tuple[str, str]]]:
    """The relations a lake of this analyzer's schema holds, each with its ``(column, type)`` pairs in order.

    What an export of a database of today's schema writes (its tables, the
    bookkeeping apart): a reader checks a manifest against it, so a lake missing
    a relation or a column is said before any question reads it.
    """
    return {t: list(cols) for t, cols in _schema_of_this_analyzer()}


def check_lake_path(lake: str | Path, param: str = "lake") -> None:
    """Refuse a lake path with a pattern character in it (``*?[]{}``).

    Raises:
        LakeError: (usage) the path has one; the message says to rename the folder.
    """
    found = sorted(PATTERN_CHARS & set(str(lake)))
    if found:
        raise LakeError(f"{param} {lake}: {' '.join(found)} in a lake's path is read as a pattern by DuckDB "
                        "and Spark (the files of a look-alike folder would be read too); "
                        "use a folder without them", param=param)


def check_manifest(doc: object, where: str, *, any_schema: bool = False) -> dict:
    """``doc`` if it is an analyzer lake's manifest this analyzer reads, with names that are plain names.

    The schema (the last migration of the database it was exported from) must be
    this analyzer's, and so its relations and their columns (:func:`lake_schema`),
    unless ``any_schema`` (a re-export replacing an older lake): the questions read
    the columns of today's schema.

    Raises:
        LakeError: (usage, ``param="lake"``) not a lake's manifest, a newer format (or,
            unless ``any_schema``, an older one), another schema, a relation missing or
            not this analyzer's, columns that are not this analyzer's, or a relation or
            column name that is not a plain name.
    """
    def bad(why: str) -> LakeError:
        return LakeError(f"lake {where}: {why}")

    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise bad(f"{MANIFEST} is not an analyzer lake's")
    if not isinstance(doc.get("format_version"), int) or doc["format_version"] > FORMAT_VERSION:
        raise bad(f"format {doc.get('format_version')!r} is newer than this analyzer reads ({FORMAT_VERSION}); "
                  "upgrade the analyzer")
    tables = doc.get("tables")
    if not isinstance(tables, dict) or not tables:
        raise bad(f"{MANIFEST} lists no relations")
    for table, entry in tables.items():
        if not NAME.fullmatch(str(table)):
            raise bad(f"{MANIFEST} names a relation {table!r}: not a plain name")
        columns = entry.get("columns") if isinstance(entry, dict) else None
        if not isinstance(columns, list) or not all(
                isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c) and NAME.fullmatch(c[0])
                for c in columns):
            raise bad(f"{MANIFEST}: relation {table} has a column that is not a plain [name, type] pair")
    if any_schema:
        return doc
    again = "export it again with this analyzer (`analyze export --lake DIR`)"
    schema = schema_name()
    if doc.get("schema") != schema:
        raise bad(f"exported from a database of schema {doc.get('schema')!r}, this analyzer reads {schema!r}: "
                  f"{again}")
    if doc["format_version"] < FORMAT_VERSION:
        raise bad(f"format {doc['format_version']} lists no files, this analyzer reads format {FORMAT_VERSION}: "
                  f"{again}")
    _check_relations(tables, bad, again)
    return doc


def _check_relations(tables: dict, bad, again: str) -> None:
    """The manifest's relations and columns are this analyzer's (:func:`lake_schema`), none missing, none cut."""
    expected = lake_schema()
    missing = sorted(set(expected) - set(tables))
    if missing:
        raise bad(f"{MANIFEST} lacks relation {missing[0]}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1
                                                               else "") + f" that this analyzer's questions read: "
                  f"{again}")
    unknown = sorted(set(tables) - set(expected))
    if unknown:
        raise bad(f"{MANIFEST} names relation {unknown[0]}, which is not one of this analyzer's: {again}")
    for table, want in expected.items():
        got = [tuple(c) for c in tables[table]["columns"]]
        if got != want:
            lost = [c for c, _t in want if c not in {g[0] for g in got}]
            why = (f"lacks column {lost[0]}" + (f" (and {len(lost) - 1} more)" if len(lost) > 1 else "")
                   if lost else "has columns (or types, or an order) other than this analyzer's")
            raise bad(f"{MANIFEST}: relation {table} {why}: {again}")


def read_manifest(lake_dir: str | Path, *, any_schema: bool = False) -> dict:
    """The manifest of the lake at ``lake_dir``, checked by :func:`check_manifest`.

    Raises:
        LakeError: (usage, ``param="lake"``) no lake there, one of a newer format or
            (unless ``any_schema``) another schema, or names that are not plain names.
    """
    path = Path(lake_dir).expanduser() / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise LakeError(f"lake {lake_dir}: no {MANIFEST}; write one with `analyze export --lake DIR`") from exc
    except (OSError, ValueError) as exc:
        raise LakeError(f"lake {lake_dir}: cannot read {MANIFEST}: {exc}") from exc
    return check_manifest(doc, str(lake_dir), any_schema=any_schema)


def check_lake(lake_dir: str | Path) -> dict:
    """The manifest of the local lake at ``lake_dir``, once its path, manifest and every relation's
    files are checked (what :func:`open_lake` reads, said before any engine starts).

    Raises:
        LakeError: as :func:`open_lake`.
    """
    check_lake_path(lake_dir)
    doc = read_manifest(lake_dir)
    for table, entry in doc["tables"].items():
        verify_relation(lake_dir, table, entry)
    return doc


def open_lake(lake_dir: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection reading the lake at ``lake_dir``, with the catalog's views.

    Every relation is checked against the manifest first
    (:func:`analyzer.store.lake_files.verify_relation`) and reads exactly the files
    checked. Once the views exist and the lake's folder is made the only one the
    connection may reach, the read-only settings of ``analyze sql`` are applied
    (:data:`analyzer.store.db.READ_ONLY_SETTINGS`: no other file, no network, the
    configuration locked), so ``analyze sql --lake`` and ``analyze report --lake``
    read a lake alike. That nothing is written there is the statement check's
    (:func:`analyzer.questions.sqlrun.check_read_only`).

    Raises:
        LakeError: no lake there, a pattern character in its path, another format or
            schema, relations or columns not this analyzer's, odd names in the
            manifest, or files that differ from the manifest's (named by relation).
    """
    check_lake_path(lake_dir)
    doc = read_manifest(lake_dir)
    con = duckdb.connect(config=dict(NO_NETWORK_CONFIG))
    track(con)  # Ctrl-C or SIGTERM stops a long question at once, as on a database
    try:
        set_session(con, None)  # a database's settings: the memory bound, this run's own spill folder
        for table, entry in doc["tables"].items():
            columns = ", ".join(
                f'CAST("{c}" AS JSON) AS "{c}"' if c in entry.get("json_columns", ()) else f'"{c}"'
                for c, _type in entry["columns"])
            files = verify_relation(lake_dir, table, entry, con)
            if not files:
                raise LakeError(f"lake {lake_dir}: relation {table} has no Parquet files")
            try:
                # The files go as values, never into SQL text; the names come from the manifest, checked and quoted.
                con.read_parquet(files, hive_partitioning=False).project(columns).create_view(table)
            except duckdb.Error as exc:
                raise LakeError(f"lake {lake_dir}: relation {table} cannot be read: {first_line(exc)}") from exc
        try:
            create_views(con, materialize=False)
        except duckdb.Error as exc:  # the manifest was checked: a lake this analyzer wrote does not get here
            raise LakeError(f"lake {lake_dir}: the catalog's views cannot be made over it: {first_line(exc)}") from exc
        con.execute("SET allowed_directories = ?", [[str(Path(lake_dir).expanduser().resolve())]])
        for name, value in READ_ONLY_SETTINGS.items():
            con.execute(f"SET {name} = ?", [value])  # in order: lock_configuration comes last
    except BaseException:
        con.close()
        raise
    return con
