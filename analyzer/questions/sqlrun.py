"""What ``analyze sql`` and the notebook run: the read-only default, and results as frames or rows.

:func:`check_read_only` is what ``analyze sql`` (:mod:`analyzer.cli.sql`) runs by
default: one reading statement, on a connection that can open no file and change
no setting, so a query can never change the database by accident. Resolving and
binding a query is :mod:`analyzer.store.asking`; writing rows as a table, CSV or
JSON is :mod:`analyzer.outputs.rows`.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.store.asking import READ_WRITE, SqlError, bind_params, resolve

_FETCH_ROWS = 2048


#: What the read-only default runs: one statement that reads (a PRAGMA cannot
#: change a setting: the configuration is locked).
READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN", "PRAGMA")
#: Settings of a read-only `analyze sql` connection, applied in this order: no file
#: or network access (COPY TO, EXPORT DATABASE, read_csv('http://...'), ATTACH),
#: then the configuration locked (no SET, no extension settings) for the query.
READ_ONLY_SETTINGS = {"enable_external_access": False, "lock_configuration": True}


class WriteRefused(AnalyzerError):
    """SQL that is more than one reading statement, refused by the read-only default (``param="write"``)."""

    exit_code = ExitCode.USAGE


def check_read_only(sql: str) -> None:
    """Refuse what the read-only default does not run: several statements, or one that is not a read.

    Raises:
        WriteRefused: more than one statement, or a COPY, EXPORT, SET, INSTALL/LOAD,
            ATTACH, CREATE, INSERT ... (all need the database opened read-write:
            ``analyze sql --write``).
        SqlError: the SQL does not parse.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise SqlError(f"the SQL failed: {str(exc).strip()}") from exc
    if len(statements) > 1:
        raise WriteRefused(f"the SQL holds {len(statements)} statements; `analyze sql` runs one per call "
                           "(open the database read-write to run several)", param="write", names=READ_WRITE)
    for st in statements:
        kind = st.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise WriteRefused(f"{kind} is not a read-only statement: by default `analyze sql` runs one SELECT, "
                               "EXPLAIN or PRAGMA, and writes no file, changes no setting and loads no extension "
                               "(open the database read-write to allow it)", param="write", names=READ_WRITE)


def frame(con: duckdb.DuckDBPyConnection, name_or_sql: str, params: Mapping[str, Any] | None = None):
    """Resolve QUERY, bind its parameters and return the result as a polars DataFrame.

    A statement without a result (``CREATE ...``) gives what DuckDB reports for it.

    Raises:
        UnknownQueryError, QueryParamError, SqlError.
    """
    query = resolve(name_or_sql)
    values = bind_params(query, dict(params or {}))
    try:
        # A relation converts to polars without the extra copy of a cursor's result.
        rel = con.sql(query.sql, params=values or None)
        if rel is None:
            import polars as pl

            return pl.DataFrame()
        return rel.pl()
    except duckdb.Error as exc:
        msg = str(exc).strip()
        if "read-only" in msg:
            msg += " (the database is opened read-only; open it with read_only=False to change it)"
        raise SqlError(f"{query.label} failed: {msg}") from exc


def fetch_rows(cur) -> Iterable[tuple]:
    """Every row of a DuckDB cursor, fetched a batch at a time (a big result never sits in memory)."""
    while True:
        chunk = cur.fetchmany(_FETCH_ROWS)
        if not chunk:
            return
        yield from chunk
