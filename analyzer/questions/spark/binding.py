"""A question's parameters as Spark named-parameter values: bound, never pasted into the SQL.

The values are checked and defaulted as on DuckDB (:func:`analyzer.store.asking.bind_params`:
a declared parameter not given is NULL, ``since``/``until`` are ISO 8601 in UTC),
then given the form Spark's literals need:

* times go as ISO text: Spark would read a naive ``datetime`` in the driver's
  local zone; the questions cast them (``CAST(:since AS TIMESTAMP)``);
* lists go as Python lists (Spark arrays); a list written as text (``--param
  models=[glm-5, glm-4.6]`` on the command line) is read as DuckDB reads it;
* intervals (``--param width='1 hour'``) go as ``timedelta`` (Spark day-time
  intervals), the text read as DuckDB reads it, so both engines bucket alike.
"""

from __future__ import annotations

from datetime import date, datetime
from functools import lru_cache
from typing import Any, Mapping

import duckdb
import sqlglot
from sqlglot import exp

from analyzer.core.errors import first_line
from analyzer.store.asking import QueryParamError, ResolvedQuery, bind_params


@lru_cache(maxsize=256)
def _cast_types(duckdb_sql: str) -> dict[str, str]:
    """What each ``$name`` of ``duckdb_sql`` is cast to where it is cast (``INTERVAL``, ``VARCHAR[]``)."""
    out: dict[str, str] = {}
    for stmt in sqlglot.parse(duckdb_sql, read="duckdb"):
        if stmt is None:
            continue
        for cast in stmt.find_all(exp.Cast):
            if isinstance(cast.this, exp.Placeholder):
                out.setdefault(cast.this.name, cast.to.sql(dialect="duckdb").upper())
    return out


def _read_as_duckdb(value: str, type_sql: str, name: str) -> Any:
    # DuckDB itself reads the text, so a value means the same on both engines.
    try:
        with duckdb.connect() as con:
            return con.execute(f"SELECT CAST(? AS {type_sql})", [value]).fetchall()[0][0]
    except duckdb.Error as exc:
        raise QueryParamError(f"parameter {name}: {value!r} is not a {type_sql}: {first_line(exc)}") from exc


def spark_value(value: Any, cast_to: str | None = None, name: str = "") -> Any:
    """One parameter value in the form a Spark named parameter takes."""
    if isinstance(value, str) and cast_to is not None and (cast_to == "INTERVAL" or cast_to.endswith("[]")):
        value = _read_as_duckdb(value, cast_to, name)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else list(value)
        return [spark_value(v) for v in items]
    return value  # a timedelta as it is: a Spark day-time interval


def spark_args(query: ResolvedQuery, given: Mapping[str, Any], duckdb_sql: str | None = None) -> dict[str, Any]:
    """The named-parameter values for ``query`` on Spark: ``{name: value}``, every placeholder bound.

    ``duckdb_sql`` is the question's DuckDB text (default ``query.sql``), read for
    the types its parameters are cast to.

    Raises:
        QueryParamError: a parameter the query does not take or needs, or a value
            that is not of its type.
    """
    types = _cast_types(duckdb_sql or query.sql)
    return {k: spark_value(v, types.get(k), k) for k, v in bind_params(query, dict(given)).items()}
