"""SQL text or a ``queries/`` file, resolved, bound and run on the database; its rows as a table, CSV or JSON.

QUERY is either the name of a file of ``queries/`` (a question such as
``failures_by_day``, or a view such as ``turns``), a path to a ``.sql`` file, or
SQL text. ``$name`` placeholders take parameters; a question's declared
parameters that are not given are NULL, which its SQL reads as "no bound".
:func:`check_read_only` is what ``analyze sql`` (:mod:`analyzer.commands.sql`)
runs by default: one reading statement, on a connection that can open no file
and change no setting, so a query can never change the database by accident.

Errors are :class:`~analyzer.errors.AnalyzerError` subclasses with exit code 2
(usage: unknown query, bad or missing parameter, SQL the database rejects).
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Iterable, Mapping, Sequence

import duckdb

from .errors import AnalyzerError, ExitCode
# Stored timestamps are naive UTC (the proxy writes `Z`): the output says so, as the summary's JSON does.
from .isotime import iso_utc as _iso
from .isotime import parse_time
from .safetext import printable
from .queries import QueryFile, load_queries, parse_query_file

FORMATS = ("table", "csv", "json")
# Parameters read as points in time: ISO-8601 text is normalized to naive UTC,
# because DuckDB's CAST(... AS TIMESTAMP) silently drops a UTC offset.
TIME_PARAMS = ("since", "until")
TABLE_CELL_CHARS = 80
_FETCH_ROWS = 2048
# queries/ kinds that exist in the database under their name.
_RELATIONS = ("view", "table")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_PLACEHOLDER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
# String literals, quoted identifiers and comments: no placeholders inside them.
_NOT_CODE = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|/\*.*?\*/", re.S)


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


def substitute_placeholders(sql: str, replacement: str) -> str:
    """``sql`` with every ``$name`` placeholder outside strings and comments replaced.

    ``replacement`` is a :func:`re.sub` template in which ``\\1`` is the name:
    ``substitute_placeholders(sql, r":\\1")`` writes Spark's ``:name`` markers.
    """
    out: list[str] = []
    pos = 0
    for m in _NOT_CODE.finditer(sql):
        out.append(_PLACEHOLDER.sub(replacement, sql[pos:m.start()]))
        out.append(m.group())
        pos = m.end()
    out.append(_PLACEHOLDER.sub(replacement, sql[pos:]))
    return "".join(out)


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
            known = ", ".join(n for n, f in queries.items() if f.kind in _RELATIONS + ("question",))
            raise UnknownQueryError(f"unknown query {text!r}; the queries are: {known} "
                                    "(or pass SQL text, e.g. 'SELECT * FROM turns LIMIT 5')")
        return ResolvedQuery(name_or_sql, placeholders(name_or_sql))
    if q.kind == "macro":
        raise UnknownQueryError(f"{q.name!r} is a macro file ({q.title}), not a query: "
                                "use its functions in SQL text instead")
    if q.kind in _RELATIONS:
        # The view (or materialized table) exists in the database: select from it.
        return ResolvedQuery(f'SELECT * FROM "{q.name}"', (), q)
    return ResolvedQuery(q.sql, placeholders(q.sql), q)


#: What the read-only default runs: one statement that reads (a PRAGMA cannot
#: change a setting: the configuration is locked).
READ_ONLY_STATEMENTS = ("SELECT", "EXPLAIN", "PRAGMA")
#: Settings of a read-only `analyze sql` connection, applied in this order: no file
#: or network access (COPY TO, EXPORT DATABASE, read_csv('http://...'), ATTACH),
#: then the configuration locked (no SET, no extension settings) for the query.
READ_ONLY_SETTINGS = {"enable_external_access": False, "lock_configuration": True}


#: How the read-only refusals say their remedy (``analyze sql`` says ``pass --write``).
_READ_WRITE = {"open the database read-write": "write", "open it read-write": "write"}


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
                           "(open the database read-write to run several)", param="write", names=_READ_WRITE)
    for st in statements:
        kind = st.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise WriteRefused(f"{kind} is not a read-only statement: by default `analyze sql` runs one SELECT, "
                               "EXPLAIN or PRAGMA, and writes no file, changes no setting and loads no extension "
                               "(open the database read-write to allow it)", param="write", names=_READ_WRITE)


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
                           "to allow changes)", param="write", names=_READ_WRITE) from exc
        raise SqlError(f"{query.label} failed: {msg}") from exc


def ask(con: duckdb.DuckDBPyConnection, name: str, params: Mapping[str, Any] | None = None) -> list[tuple]:
    """Every row of the question ``name`` of queries/, run as ``analyze sql NAME`` runs it.

    The library's figures (summary, sizing, report) come from here, so the SQL a
    user reads in queries/ is the SQL behind them. Declared parameters not given
    are NULL.

    Raises:
        UnknownQueryError, QueryParamError, SqlError.
    """
    return execute(con, name, params).fetchall()


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


# ---------------------------------------------------------------------------
# Output


def _round_float(v: float) -> float:
    """Binary noise off a float (``74.69999999999999`` -> ``74.7``): 12 significant digits."""
    return float(f"{v:.12g}")


def _short_float(v: float) -> str:
    """A float for the table: six significant digits (one decimal from 100,000 up)."""
    if not math.isfinite(v):
        return str(v)
    if abs(v) >= 1e5:
        return f"{v:.1f}"
    return repr(float(f"{v:.6g}"))


def _json_value(v: Any) -> Any:
    if isinstance(v, float):
        return _round_float(v) if math.isfinite(v) else None
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (datetime, date, time)):
        return _iso(v)
    if isinstance(v, timedelta):
        return v.total_seconds()
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)  # UUID, and anything else DuckDB may hand back


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (datetime, date, time)):
        return _iso(v)
    if isinstance(v, (dict, list, tuple)):
        return _json_dumps(_json_value(v))
    return str(_json_value(v))


def fetch_rows(cur) -> Iterable[tuple]:
    """Every row of a DuckDB cursor, fetched a batch at a time (a big result never sits in memory)."""
    while True:
        chunk = cur.fetchmany(_FETCH_ROWS)
        if not chunk:
            return
        yield from chunk


def write_csv(columns: Sequence[str], rows: Iterable[tuple], out: IO[str]) -> int:
    """CSV with a header row; NULL is an empty field. Returns the row count."""
    w = csv.writer(out, lineterminator="\n")
    # CSV is data: values go as they are into a file or a pipe, escaped on a terminal.
    shown = printable if _is_terminal(out) else (lambda x: x)
    w.writerow([shown(c) for c in columns])
    n = 0
    for row in rows:
        w.writerow([shown(_text(v)) for v in row])
        n += 1
    return n


def _is_terminal(out: IO[str]) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


# JSON escapes C0 controls itself; C1 controls and bidi characters are escaped too
# (still the same JSON string), so the output is safe on a terminal.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def _json_dumps(value: Any) -> str:
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group(0)):04x}", json.dumps(value, ensure_ascii=False))


def write_json(columns: Sequence[str], rows: Iterable[tuple], out: IO[str]) -> int:
    """A JSON array of objects, one per row, streamed. Returns the row count."""
    n = 0
    out.write("[")
    for row in rows:
        out.write(",\n " if n else "\n ")
        out.write(_json_dumps({c: _json_value(v) for c, v in zip(columns, row)}))
        n += 1
    out.write("\n]\n" if n else "]\n")
    return n


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def write_table(columns: Sequence[str], rows: Iterable[tuple], out: IO[str]) -> int:
    """An aligned plain-text table (numbers right-aligned, long cells cut). Returns the row count."""
    def cell(v: Any) -> str:
        # Log text is untrusted: control characters are shown escaped, never sent to the terminal.
        s = "NULL" if v is None else _short_float(v) if isinstance(v, float) else printable(_text(v))
        return s if len(s) <= TABLE_CELL_CHARS else s[: TABLE_CELL_CHARS - 1] + "…"

    data = [(tuple(cell(v) for v in row), tuple(_numeric(v) for v in row)) for row in rows]
    widths = [len(c) for c in columns]
    for cells, _ in data:
        widths = [max(w, len(c)) for w, c in zip(widths, cells)]
    out.write("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for cells, numeric in data:
        out.write("  ".join(c.rjust(w) if num else c.ljust(w)
                            for c, w, num in zip(cells, widths, numeric)).rstrip() + "\n")
    return len(data)


#: The writer of each ``--format``.
WRITERS = {"table": write_table, "csv": write_csv, "json": write_json}


def list_queries(out: IO[str]) -> int:
    """Print the queries/ files (name, kind, parameters, title) as a table."""
    rows = [(q.name, q.kind, ", ".join(q.params), q.title)
            for q in sorted(load_queries().values(), key=lambda q: (q.kind != "question", q.name))
            if q.kind in _RELATIONS + ("question",)]
    return write_table(("name", "kind", "params", "title"), rows, out)
