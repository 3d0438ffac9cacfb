"""A Parquet lake (``analyze export --lake``) opened as a DuckDB database: the questions run unchanged.

:func:`open_lake` gives an in-memory DuckDB connection in which every relation
of the lake is a view over its Parquet files (the columns and types the manifest
names, JSON restored), and the catalog's macros and views are created on top, as
:func:`analyzer.store.db.connect` creates them in the database. Every question
of ``queries/``, the summary and the report then read the lake as they read a
database; the materialized relations (``turns``, ``sessions``,
``ladder_baseline``) are read as the lake holds them, not recomputed.

The lake's format lives here, beside its reader; :mod:`analyzer.outputs.lake`
writes it.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.store.catalog import create_views

MANIFEST = "_manifest.json"
FORMAT = "analyzer-lake"
FORMAT_VERSION = 1
#: The hive partition column of the partitioned relations (not one of their columns).
PARTITION = "day"


def read_manifest(lake_dir: str | Path) -> dict:
    """The manifest of the lake at ``lake_dir``.

    Raises:
        AnalyzerError: (usage, ``param="lake"``) no lake there, or one of a newer format.
    """
    path = Path(lake_dir).expanduser() / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise AnalyzerError(f"lake {lake_dir}: no {MANIFEST}; write one with `analyze export --lake DIR`",
                            ExitCode.USAGE, param="lake") from exc
    except (OSError, ValueError) as exc:
        raise AnalyzerError(f"lake {lake_dir}: cannot read {MANIFEST}: {exc}", ExitCode.USAGE, param="lake") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise AnalyzerError(f"lake {lake_dir}: {MANIFEST} is not an analyzer lake's", ExitCode.USAGE, param="lake")
    if not isinstance(doc.get("format_version"), int) or doc["format_version"] > FORMAT_VERSION:
        raise AnalyzerError(f"lake {lake_dir}: format {doc.get('format_version')!r} is newer than this analyzer "
                            f"reads ({FORMAT_VERSION}); upgrade the analyzer", ExitCode.USAGE, param="lake")
    return doc


def table_files(lake_dir: str | Path, table: str, entry: dict) -> str:
    """The glob of ``table``'s Parquet files in the lake (partitioned ones one folder deeper)."""
    base = Path(lake_dir).expanduser().resolve() / table
    return str(base / f"{PARTITION}=*" / "*.parquet") if entry.get("partition") else str(base / "*.parquet")


def open_lake(lake_dir: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection reading the lake at ``lake_dir``, with the catalog's views.

    Raises:
        AnalyzerError: no lake there, a newer format, or a relation whose files are missing.
    """
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
            try:
                # The glob goes as a value, never into SQL text; the names come from the manifest, quoted.
                con.read_parquet(files, hive_partitioning=False).project(columns).create_view(table)
            except duckdb.Error as exc:
                raise AnalyzerError(f"lake {lake_dir}: relation {table} cannot be read ({files}): "
                                    f"{str(exc).splitlines()[0]}", ExitCode.USAGE, param="lake") from exc
        create_views(con, materialize=False)
    except BaseException:
        con.close()
        raise
    return con
