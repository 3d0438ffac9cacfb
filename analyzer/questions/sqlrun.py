"""What ``analyze sql`` and the notebook run: the read-only default, and results as frames or rows.

:func:`check_read_only` is what ``analyze sql`` (:mod:`analyzer.jobs.sql`) and
``analyzer.query`` run by default: one reading statement, on a connection that can
open no file and change no setting, so a query can never change the database by
accident. :func:`guard_on` then checks what the question references
(:mod:`analyzer.questions.guard`: the database's relations, allowed functions).
Resolving and binding a query is :mod:`analyzer.store.asking`; writing rows as a
table, CSV or JSON is :mod:`analyzer.outputs.rows`.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.questions.guard import check_question
from analyzer.store.asking import READ_WRITE, SqlError, bind_params, resolve, sql_failure

__all__ = ["READ_ONLY_STATEMENTS", "WriteRefused", "check_read_only", "duckdb_relations", "fetch_rows", "frame",
           "guard_on"]

_FETCH_ROWS = 2048


#: What the read-only default runs: one statement that reads (a PRAGMA cannot
#: change a setting: the configuration is locked).
READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN", "PRAGMA")


class WriteRefused(AnalyzerError):
    """SQL that is more than one reading statement, refused by the read-only default (``param="write"``)."""

    exit_code = ExitCode.USAGE


def check_read_only(sql: str, *, lake: bool = False) -> None:
    """Refuse what the read-only default does not run: several statements, or one that is not a read.

    ``lake``: the SQL is for a lake, which is never written: the refusal says so
    instead of offering a read-write database.

    Raises:
        WriteRefused: more than one statement, or a COPY, EXPORT, SET, INSTALL, LOAD,
            ATTACH, CREATE, INSERT ... (all need the database opened read-write:
            ``analyze sql --write``).
        SqlError: the SQL does not parse.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise SqlError(f"the SQL failed: {str(exc).strip()}") from exc
    if len(statements) > 1:
        if lake:
            raise WriteRefused(f"the SQL holds {len(statements)} statements; a lake answers one per call")
        raise WriteRefused(f"the SQL holds {len(statements)} statements; `analyze sql` runs one per call "
                           "(open the database read-write to run several)", param="write", names=READ_WRITE)
    for st in statements:
        kind = _statement_kind(st)
        if kind not in READ_ONLY_STATEMENTS:
            said = (f"{kind} is not a read-only statement: a question runs one SELECT, EXPLAIN or PRAGMA, and "
                    "writes no file, changes no setting and loads no extension")
            if lake:
                raise WriteRefused(f"{said}; a lake is read, never written")
            raise WriteRefused(f"{said} (open the database read-write to allow it)", param="write", names=READ_WRITE)


def _statement_kind(statement) -> str:
    """DuckDB's kind of a statement, as the user wrote it where DuckDB's name is another's
    (DuckDB files INSTALL under LOAD)."""
    kind = statement.type.name
    if kind == "LOAD":
        words = str(getattr(statement, "query", "") or "").split()
        if words and words[0].upper() in ("INSTALL", "FORCE"):
            return "INSTALL"
    return kind


def duckdb_relations(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables and views of ``con``'s database (and its temporary ones): what a question may read."""
    return [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE NOT internal "
        "UNION SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]


def guard_on(con: duckdb.DuckDBPyConnection, sql: str, *, label: str = "the SQL",
             where: str = "the database") -> None:
    """:func:`analyzer.questions.guard.check_question` of ``sql`` against ``con``'s relations.

    Raises:
        analyzer.questions.guard.QuestionRefused: (exit 2) a file, another database,
            a function off the allow-list.
    """
    check_question(sql, duckdb_relations(con), engine="duckdb", label=label, where=where)


def frame(con: duckdb.DuckDBPyConnection, name_or_sql: str, params: Mapping[str, Any] | None = None, *,
          guarded: bool = False):
    """Resolve QUERY, bind its parameters and return the result as a polars DataFrame.

    A statement without a result (``CREATE ...``) gives what DuckDB reports for it.
    ``guarded``: the question is read-only (:func:`check_read_only`) and references
    only the database's relations and allowed functions (:func:`guard_on`).

    Raises:
        UnknownQueryError, QueryParamError, SqlError, WriteRefused,
        analyzer.questions.guard.QuestionRefused.
    """
    query = resolve(name_or_sql)
    values = bind_params(query, dict(params or {}))
    if guarded:
        check_read_only(query.sql)
        guard_on(con, query.sql, label=query.label)
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
        raise sql_failure(query.label, exc) from exc


def fetch_rows(cur) -> Iterable[tuple]:
    """Every row of a DuckDB cursor, fetched a batch at a time (a big result never sits in memory)."""
    while True:
        chunk = cur.fetchmany(_FETCH_ROWS)
        if not chunk:
            return
        yield from chunk
