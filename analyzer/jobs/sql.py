"""``analyze sql``: run SQL text or a ``queries/`` file on the database (or a lake), write the rows.

The database is opened read-only unless ``--write`` is given (see
:mod:`analyzer.questions.sqlrun` for what the read-only default allows); a lake is
always read-only. Read-only, every engine checks the question with the same guard
(:mod:`analyzer.questions.guard`) before it runs. Results go to stdout as a table,
CSV or JSON; the row count and errors go to stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import IO, Any, Mapping

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode, first_line
from analyzer.outputs.rows import FORMATS, WRITERS, list_queries
from analyzer.questions.guard import check_question
from analyzer.questions.sqlrun import check_read_only, fetch_rows, guard_on
from analyzer.store.asking import ResolvedQuery, SqlError, bind_params, execute, resolve, sql_failure
from analyzer.store.db import READ_ONLY_SETTINGS, connect, connect_writer
from analyzer.store.lake import check_lake, check_lake_path, open_lake

#: Where ``analyze sql`` runs: DuckDB (the database or a lake), or Spark (a lake).
ENGINES = ("duckdb", "spark")


def run_sql(
    query: str | None,
    *,
    db: str | Path | None = None,
    params: Mapping[str, Any] | None = None,
    fmt: str = "table",
    write: bool = False,
    list_only: bool = False,
    engine: str = "duckdb",
    lake: str | Path | None = None,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """``analyze sql``: run QUERY on the database and print the result; return the row count.

    Args:
        query: a queries/ name, a .sql path, or SQL text.
        db: the database file (default ``$ANALYZER_DB`` or ./analyzer.duckdb).
        params: ``{"name": value}`` for the query's ``$name`` parameters.
        fmt: ``table``, ``csv`` or ``json``.
        write: open the database read-write (default read-only).
        list_only: print the available queries instead of running one.
        engine: ``duckdb`` (default) or ``spark`` (a local Spark over ``lake``).
        lake: a Parquet lake (``analyze export --lake``) to read instead of ``db``.

    Raises:
        UnknownQueryError, QueryParamError, SqlError (exit 2);
        analyzer.core.errors.DatabaseError (exit 5).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    if list_only:
        return list_queries(out)
    if not query or not query.strip():
        raise AnalyzerError("give a query: SQL text or a name from `analyze sql --list`", ExitCode.USAGE)
    if fmt not in FORMATS:
        raise AnalyzerError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}", ExitCode.USAGE)
    if engine not in ENGINES:
        raise AnalyzerError(f"--engine {engine!r}: expected one of {', '.join(ENGINES)}", ExitCode.USAGE, param="engine")
    if lake is not None and write:
        raise AnalyzerError("--write is not available with --lake: a lake is read, never written", ExitCode.USAGE)
    if lake is not None and db is not None:
        raise AnalyzerError("--db and --lake: give one (a database file or a lake folder)", ExitCode.USAGE)
    if lake is not None and engine == "duckdb" and "://" in str(lake):
        raise AnalyzerError(f"--lake {lake}: DuckDB reads a lake in a local folder; a lake at a URL is read "
                            "with --engine spark", ExitCode.USAGE)
    given = dict(params or {})
    resolved = resolve(query)
    bind_params(resolved, given)  # fail on parameters before touching the database
    if not write:
        check_read_only(resolved.sql, lake=lake is not None)
    if engine == "spark":
        if lake is None:
            raise AnalyzerError("--engine spark reads a lake: pass --lake DIR (write one with "
                                "`analyze export --lake DIR`)", ExitCode.USAGE)
        return _run_on_spark(query, resolved, given, lake=lake, fmt=fmt, out=out, err=err)

    if lake is not None:
        # As read-only as a database: only the lake's folder reachable, and (check_read_only) one reading statement.
        con = open_lake(lake)
    else:
        con = connect_writer(db) if write else connect(db, read_only=True, settings=READ_ONLY_SETTINGS)
    try:
        if not write:  # --write opens the database for anything: the guard is the read-only default's
            guard_on(con, resolved.sql, label=resolved.label, where="the lake" if lake is not None else "the database")
        cur = execute(con, query, given)
        columns = [d[0] for d in (cur.description or [])]
        if not columns:  # a statement without a result set (with --write)
            print("ok", file=err)
            return 0
        try:
            n = WRITERS[fmt](columns, fetch_rows(cur), out)
            out.flush()
        except duckdb.Error as exc:  # errors that surface while rows stream
            raise sql_failure(resolved.label, exc) from exc
        except BrokenPipeError:
            return _reader_left(out)
    finally:
        con.close()
    print(f"({n} row{'s' if n != 1 else ''})", file=err)
    return n


def _run_on_spark(query: str, resolved: ResolvedQuery, given: Mapping[str, Any], *, lake, fmt: str, out: IO[str],
                  err: IO[str]) -> int:
    """QUERY on a local Spark over the lake: the same rows as on the database, written alike."""
    try:
        # Deferred: pyspark (a JVM behind it) is the optional spark extra, loaded only for --engine spark.
        from analyzer.questions.spark import (
            UnsupportedConstruct, lake_relations, local_session, lock_down, question_frame, register_lake,
            relations_read, to_spark_sql)
    except ImportError as exc:
        raise AnalyzerError(f"--engine spark needs pyspark and sqlglot: pip install 'analyzer[spark]' ({exc})",
                            ExitCode.USAGE, param="engine") from exc
    check_lake_path(lake)  # a wrong lake is said before a JVM starts
    if "://" not in str(lake):
        check_lake(lake)
    # The same guard as on DuckDB, on the question's DuckDB SQL (what Spark runs is its translation).
    check_question(resolved.sql, lake_relations(), engine="spark", label=resolved.label, where="the lake")
    try:
        needs = relations_read(to_spark_sql(query))
    except UnsupportedConstruct as exc:
        raise SqlError(f"{resolved.label} cannot run on Spark: {exc}") from exc
    try:
        spark = local_session("analyze-sql", master="local[2]")
    except ImportError as exc:
        raise AnalyzerError(f"--engine spark needs pyspark: pip install 'analyzer[spark]' ({exc})",
                            ExitCode.USAGE, param="engine") from exc
    try:
        lock_down(spark)  # belt and braces: what the guard refuses, Spark could not do either
        try:
            # The lake's own tables (proven against its manifest), as on DuckDB; only the views this question reads.
            register_lake(spark, str(lake), recompute=False, needs=needs)
            df = question_frame(spark, query, **given)
            columns = list(df.columns)
            n = WRITERS[fmt](columns, (tuple(r) for r in df.toLocalIterator()), out)
            out.flush()
        except UnsupportedConstruct as exc:
            raise SqlError(f"{resolved.label} cannot run on Spark: {exc}") from exc
        except (AnalyzerError, BrokenPipeError):
            raise
        except Exception as exc:  # Spark's errors (analysis, execution, a missing file) are the SQL's
            first = first_line(exc)
            raise SqlError(f"{resolved.label} failed on Spark: {first}") from exc
    except BrokenPipeError:
        return _reader_left(out)
    finally:
        spark.stop()
    print(f"({n} row{'s' if n != 1 else ''})", file=err)
    return n


def _reader_left(out: IO[str]) -> int:
    """``analyze sql ... | head``: the reader has all it wants. Later writes to ``out``
    (Python's own flush at exit) go to /dev/null instead of raising again; returns 0."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    return 0
