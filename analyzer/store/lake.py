"""A Parquet lake (``analyze export --lake``) opened as a DuckDB database: the questions run unchanged.

:func:`open_lake` gives an in-memory DuckDB connection in which every relation
of the lake is a view over its Parquet files (the columns the manifest names,
JSON columns restored to JSON), and the catalog's macros and views are created on top, as
:func:`analyzer.store.db.connect` creates them in the database. Every question
of ``queries/``, the summary and the report then read the lake as they read a
database; the materialized relations (``turns``, ``sessions``,
``ladder_baseline``) are read as the lake holds them, not recomputed.

The lake's format lives here, beside its reader; :mod:`analyzer.outputs.lake`
writes it.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.store.catalog import create_views
from analyzer.store.db import MIGRATIONS, connect

MANIFEST = "_manifest.json"
FORMAT = "analyzer-lake"
FORMAT_VERSION = 1
#: The hive partition column of the partitioned relations (not one of their columns).
PARTITION = "day"
#: What a relation or column name in a manifest may be (whole: no trailing newline): a
#: manifest is a file anyone could have edited, and its names become folder names and
#: quoted SQL identifiers.
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: Characters DuckDB and Spark read as a pattern in a path, even in a list of files: a
#: lake folder named with one would read a look-alike sibling's files.
PATTERN_CHARS = frozenset("*?[]{}")
#: The database's bookkeeping that answers no question: left out of the lake. (``_migrations`` goes
#: in: which schema made the data is part of what the lake says, and the report shows it.)
NOT_EXPORTED = frozenset({"build_state", "ingest_pending", "summary_cache", "turns_dirty"})


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
        AnalyzerError: (usage) the path has one; the message says to rename the folder.
    """
    found = sorted(PATTERN_CHARS & set(str(lake)))
    if found:
        raise AnalyzerError(f"{param} {lake}: {' '.join(found)} in a lake's path is read as a pattern by DuckDB "
                            "and Spark (the files of a look-alike folder would be read too); "
                            "use a folder without them", ExitCode.USAGE, param=param)


def check_manifest(doc: object, where: str, *, any_schema: bool = False) -> dict:
    """``doc`` if it is an analyzer lake's manifest this analyzer reads, with names that are plain names.

    The schema (the last migration of the database it was exported from) must be
    this analyzer's, unless ``any_schema`` (a re-export replacing an older lake):
    the questions read the columns of today's schema.

    Raises:
        AnalyzerError: (usage, ``param="lake"``) not a lake's manifest, a newer format,
            another schema, or a relation or column name that is not a plain name.
    """
    def bad(why: str) -> AnalyzerError:
        return AnalyzerError(f"lake {where}: {why}", ExitCode.USAGE, param="lake")

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
    schema = MIGRATIONS[-1][0]
    if not any_schema and doc.get("schema") != schema:
        raise bad(f"exported from a database of schema {doc.get('schema')!r}, this analyzer reads {schema!r}: "
                  "export it again with this analyzer (`analyze export --lake DIR`)")
    return doc


def read_manifest(lake_dir: str | Path, *, any_schema: bool = False) -> dict:
    """The manifest of the lake at ``lake_dir``, checked by :func:`check_manifest`.

    Raises:
        AnalyzerError: (usage, ``param="lake"``) no lake there, one of a newer format or
            (unless ``any_schema``) another schema, or names that are not plain names.
    """
    path = Path(lake_dir).expanduser() / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise AnalyzerError(f"lake {lake_dir}: no {MANIFEST}; write one with `analyze export --lake DIR`",
                            ExitCode.USAGE, param="lake") from exc
    except (OSError, ValueError) as exc:
        raise AnalyzerError(f"lake {lake_dir}: cannot read {MANIFEST}: {exc}", ExitCode.USAGE, param="lake") from exc
    return check_manifest(doc, str(lake_dir), any_schema=any_schema)


def table_files(lake_dir: str | Path, table: str, entry: dict) -> list[str]:
    """``table``'s Parquet files in the lake (partitioned ones one folder deeper), as a list: a
    folder name with ``[`` or ``*`` in it is a name, not a pattern."""
    base = Path(lake_dir).expanduser().resolve() / table
    found = base.glob(f"{PARTITION}=*/*.parquet") if entry.get("partition") else base.glob("*.parquet")
    return sorted(str(p) for p in found)


def open_lake(lake_dir: str | Path, *, settings: dict | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection reading the lake at ``lake_dir``, with the catalog's views.

    ``settings``: DuckDB settings applied with ``SET`` once the views exist, in order,
    after the lake's folder is made the only one the connection may reach
    (``analyze sql`` passes its read-only settings: no other file, no network,
    the configuration locked; that nothing is written there is its statement
    check's, :func:`analyzer.questions.sqlrun.check_read_only`).

    Raises:
        AnalyzerError: no lake there, a pattern character in its path, a newer format or
            another schema, odd names in the manifest, or a relation whose files are missing.
    """
    check_lake_path(lake_dir)
    doc = read_manifest(lake_dir)
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET enable_progress_bar = false")
        for table, entry in doc["tables"].items():
            columns = ", ".join(
                f'CAST("{c}" AS JSON) AS "{c}"' if c in entry.get("json_columns", ()) else f'"{c}"'
                for c, _type in entry["columns"])
            files = table_files(lake_dir, table, entry)
            if not files:
                raise AnalyzerError(f"lake {lake_dir}: relation {table} has no Parquet files", ExitCode.USAGE,
                                    param="lake")
            try:
                # The files go as values, never into SQL text; the names come from the manifest, checked and quoted.
                con.read_parquet(files, hive_partitioning=False).project(columns).create_view(table)
            except duckdb.Error as exc:
                raise AnalyzerError(f"lake {lake_dir}: relation {table} cannot be read: "
                                    f"{str(exc).splitlines()[0]}", ExitCode.USAGE, param="lake") from exc
        create_views(con, materialize=False)
        if settings:
            con.execute("SET allowed_directories = ?", [[str(Path(lake_dir).expanduser().resolve())]])
            for name, value in settings.items():  # in order: lock_configuration comes last
                con.execute(f"SET {name} = ?", [value])
    except BaseException:
        con.close()
        raise
    return con
