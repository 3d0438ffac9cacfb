"""``analyze sql``: run SQL text or a ``queries/`` file on the database, print the result.

The database is opened read-only unless ``--write`` is given (see
:mod:`analyzer.questions.sqlrun` for what the read-only default allows). Results go to
stdout as a table, CSV or JSON; the row count and errors go to stderr.
"""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Mapping, Sequence

import duckdb

from analyzer.cli.options import naming
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.outputs.rows import FORMATS, WRITERS, list_queries
from analyzer.questions.sqlrun import READ_ONLY_SETTINGS, check_read_only, fetch_rows
from analyzer.store.asking import QueryParamError, SqlError, bind_params, execute, resolve
from analyzer.store.db import connect, connect_writer


def run_sql(
    query: str | None,
    *,
    db: str | Path | None = None,
    params: Mapping[str, Any] | Sequence[str] | None = None,
    fmt: str = "table",
    write: bool = False,
    list_only: bool = False,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """``analyze sql``: run QUERY on the database and print the result; return the row count.

    Args:
        query: a queries/ name, a .sql path, or SQL text.
        db: the database file (default ``$ANALYZER_DB`` or ./analyzer.duckdb).
        params: ``{"name": value}``, or ``["name=value", ...]`` as given to ``--param``.
        fmt: ``table``, ``csv`` or ``json``.
        write: open the database read-write (default read-only).
        list_only: print the available queries instead of running one.

    Raises:
        UnknownQueryError, QueryParamError, SqlError (exit 2);
        analyzer.core.errors.DatabaseError (exit 5).
    """
    # The read-only refusals' remedy (``open the database read-write``), as this command says it.
    with _param_flags(), naming(write="pass --write"):
        return _run_sql(query, db=db, params=params, fmt=fmt, write=write, list_only=list_only, out=out, err=err)


def _run_sql(query, *, db, params, fmt, write, list_only, out, err) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    if list_only:
        return list_queries(out)
    if not query or not query.strip():
        raise AnalyzerError("give a query: SQL text or a name from `analyze sql --list`", ExitCode.USAGE)
    if fmt not in FORMATS:
        raise AnalyzerError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}", ExitCode.USAGE)
    given = parse_param_args(params) if isinstance(params, (list, tuple)) else dict(params or {})
    resolved = resolve(query)
    bind_params(resolved, given)  # fail on parameters before touching the database
    if not write:
        check_read_only(resolved.sql)

    con = connect_writer(db) if write else connect(db, read_only=True, settings=READ_ONLY_SETTINGS)
    try:
        cur = execute(con, query, given)
        columns = [d[0] for d in (cur.description or [])]
        if not columns:  # a statement without a result set (with --write)
            print("ok", file=err)
            return 0
        try:
            n = WRITERS[fmt](columns, fetch_rows(cur), out)
            out.flush()
        except duckdb.Error as exc:  # errors that surface while rows stream
            raise SqlError(f"{resolved.label} failed: {str(exc).strip()}") from exc
        except BrokenPipeError:  # `analyze sql ... | head`: the reader has all it wants
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
            return 0
    finally:
        con.close()
    print(f"({n} row{'s' if n != 1 else ''})", file=err)
    return n


@contextmanager
def _param_flags() -> Iterator[None]:
    """A query's missing parameters, said as the ``--param`` options that give them."""
    try:
        yield
    except QueryParamError as exc:
        if exc.missing:
            exc.args = (f"{exc}: pass {' '.join(f'--param {p}=VALUE' for p in exc.missing)}", *exc.args[1:])
            exc.missing = ()
        raise


def parse_param_args(items: Iterable[str] | None) -> dict[str, str | None]:
    """``["k=v", ...]`` from ``--param`` into a dict; an empty value is NULL.

    Raises:
        analyzer.store.asking.QueryParamError: an item without ``=`` or with an invalid name.
    """
    out: dict[str, str | None] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("$")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise QueryParamError(f"--param {item!r}: expected NAME=VALUE")
        out[key] = value if value != "" else None
    return out
