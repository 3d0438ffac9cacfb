"""Questions of the catalog resolved, bound and run: what every layer above asks the store.

QUERY is either the name of a file of ``queries/`` (a question such as
``failures_by_day``, or a view such as ``turns``), a path to a ``.sql`` file, or
SQL text. ``$name`` placeholders take parameters; a question's declared
parameters that are not given are NULL, which its SQL reads as "no bound".
:func:`ask` is how the library's figures come from ``queries/``.

Errors are :class:`~analyzer.core.errors.AnalyzerError` subclasses with exit code 2
(usage: unknown query, bad or missing parameter, SQL the database rejects).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.isotime import parse_time
from analyzer.store.catalog import QueryFile, load_queries, parse_query_file
from analyzer.store.db import MEMORY_LIMIT

# Parameters read as points in time: ISO-8601 text is normalized to naive UTC,
# because DuckDB's CAST(... AS TIMESTAMP) silently drops a UTC offset.
TIME_PARAMS = ("since", "until")
# queries/ kinds that exist in the database under their name.
RELATIONS = ("view", "table")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_PLACEHOLDER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# String literals, quoted identifiers and comments: no placeholders inside them.
_NOT_CODE = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.S)
#: How the read-only refusals say their remedy (``analyze sql`` says ``pass --write``).
READ_WRITE = {"open the database read-write": "write", "open it read-write": "write"}


class UnknownQueryError(AnalyzerError):
    """QUERY looks like a name, but no file of queries/ has it."""

    exit_code = ExitCode.USAGE


class QueryParamError(AnalyzerError):
    """A ``$name`` parameter is missing, malformed, or not one the query takes."""

    exit_code = ExitCode.USAGE
    #: The parameters the query needs and was not given (the error is about those).
    missing: tuple[str, ...] = ()


class SqlError(AnalyzerError):
    """DuckDB rejected the SQL (syntax, unknown table or column, a write in read-only mode...)."""

    exit_code = ExitCode.USAGE


@dataclass(frozen=True)
class ResolvedQuery:
    """What will run: the SQL, its placeholders, and the queries/ file it came from (if any)."""

    sql: str
    placeholders: tuple[str, ...]
    source: QueryFile | None = None

    @property
    def label(self) -> str:
        """How errors name the query."""
        return f"query {self.source.name!r}" if self.source else "the SQL"


def placeholders(sql: str) -> tuple[str, ...]:
    """The ``$name`` placeholders of ``sql`` (outside strings and comments), in order."""
    found: list[str] = []
    for name in _PLACEHOLDER.findall(_NOT_CODE.sub(" ", sql)):
        if name not in found:
            found.append(name)
    return tuple(found)


def resolve(name_or_sql: str) -> ResolvedQuery:
    """Turn QUERY (a queries/ name, a .sql path, or SQL text) into the SQL to run.

    Raises:
        UnknownQueryError: a bare name that no queries/ file has.
    """
    text = name_or_sql.strip()
    queries = load_queries()
    q: QueryFile | None = queries.get(text)
    if q is None and text.endswith(".sql") and "\n" not in text and Path(text).is_file():
        try:
            q = parse_query_file(Path(text))
        except ValueError:  # a plain SQL file without our header
            sql = Path(text).read_text(encoding="utf-8")
            return ResolvedQuery(sql, placeholders(sql))
    if q is None:
        if _NAME.match(text):
            known = ", ".join(n for n, f in queries.items() if f.kind in RELATIONS + ("question",))
            raise UnknownQueryError(f"unknown query {text!r}; the queries are: {known} "
                                    "(or pass SQL text, e.g. 'SELECT * FROM turns LIMIT 5')")
        return ResolvedQuery(name_or_sql, placeholders(name_or_sql))
    if q.kind == "macro":
        raise UnknownQueryError(f"{q.name!r} is a macro file ({q.title}), not a query: "
                                "use its functions in SQL text instead")
    if q.kind in RELATIONS:
        # The view (or materialized table) exists in the database: select from it.
        return ResolvedQuery(f'SELECT * FROM "{q.name}"', (), q)
    return ResolvedQuery(q.sql, placeholders(q.sql), q)


def _time_value(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return parse_time(value, name)
    except AnalyzerError as exc:
        raise QueryParamError(f"parameter {name}: not an ISO-8601 date or time: {value!r}") from exc


def bind_params(query: ResolvedQuery, given: Mapping[str, Any]) -> dict[str, Any]:
    """The parameter values to pass: checked against the query's placeholders.

    A question's declared parameters that are not given are NULL. ``since`` and
    ``until`` given as text are parsed as ISO 8601 (UTC unless an offset is given).

    Raises:
        QueryParamError: a parameter the query does not take, or one it needs and
            does not declare as optional.
    """
    used = query.placeholders
    declared = query.source.params if query.source else ()
    extra = sorted(set(given) - set(used))
    if extra:
        takes = ", ".join(used) if used else "no parameters"
        raise QueryParamError(f"{query.label} has no parameter {', '.join(extra)} (it takes: {takes})")
    missing = [p for p in used if p not in given and p not in declared]
    if missing:
        err = QueryParamError(f"{query.label} needs parameter {', '.join('$' + p for p in missing)}")
        err.missing = tuple(missing)  # `analyze sql` says which --param to pass
        raise err
    out = {p: given.get(p) for p in used}
    for p in TIME_PARAMS:
        if p in out:
            out[p] = _time_value(p, out[p])
    return out


def sql_failure(label: str, exc: duckdb.Error) -> SqlError:
    """The error to raise for a query DuckDB failed: its message, with what helps the operator.

    DuckDB's out-of-memory message suggests ``SET memory_limit``, ``SET threads`` and
    the like, which a read-only question may not run (its configuration is
    locked): the hint says what works instead.
    """
    msg = str(exc).strip()
    if isinstance(exc, duckdb.OutOfMemoryException) or msg.startswith("Out of Memory Error"):
        first = msg.split("Possible solutions", 1)[0].strip()
        return SqlError(f"{label} failed: {first}: the question needs more memory than the bound "
                        f"(ANALYZER_MEMORY_LIMIT, now {MEMORY_LIMIT}) and spilling allows; narrow it (a shorter "
                        "since/until, fewer columns, an aggregate rather than a list) or raise the bound "
                        "(ANALYZER_MEMORY_LIMIT=2GB analyze sql ...)")
    return SqlError(f"{label} failed: {msg}")


def execute(con: duckdb.DuckDBPyConnection, name_or_sql: str, params: Mapping[str, Any] | None = None):
    """Resolve QUERY, bind its parameters and run it; return the DuckDB cursor.

    Raises:
        UnknownQueryError, QueryParamError, SqlError (``param="write"`` when a
            read-only connection refused a change).
    """
    query = resolve(name_or_sql)
    values = bind_params(query, dict(params or {}))
    try:
        return con.execute(query.sql, values) if values else con.execute(query.sql)
    except duckdb.Error as exc:
        msg = str(exc).strip()
        if "read-only" in msg:
            raise SqlError(f"{query.label} failed: {msg} (the database is opened read-only; open it read-write "
                           "to allow changes)", param="write", names=READ_WRITE) from exc
        raise sql_failure(query.label, exc) from exc


def ask(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any] | None = None) -> list[tuple]:
    """Every row of the question ``name`` of queries/, run as ``analyze sql NAME`` runs it.

    The library's figures (summary, sizing, report) come from here, so the SQL a
    user reads in queries/ is the SQL behind them. Declared parameters not given
    are NULL.

    Raises:
        UnknownQueryError, QueryParamError, SqlError.
    """
    return execute(con, name, params).fetchall()
