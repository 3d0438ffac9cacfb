"""Every question of queries/ asked on DuckDB and on Spark, and the two answers compared.

The Spark gate (tests/e2e/test_spark_gate.py) and the cluster-built lake
(tests/e2e/test_lake_build_cluster.py) ask every question, view and table in two
parameter sets (:data:`PARAM_SETS`: every declared parameter NULL, and every one
:data:`BOUND`) with :func:`on_duckdb` and :func:`on_spark`, and compare with
:func:`difference`: the same columns, each of the same JSON type
(:func:`json_kind`), the same rows sorted, floats within 1e-9 relative.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from analyzer.outputs.rows import json_value
from analyzer.questions.spark import question_frame
from analyzer.store.asking import execute
from tests.support.questions import QUERIES

#: Every parameter a question declares, bound (the second parameter set). Lists bind
#: as lists, intervals as text DuckDB reads, times with a fractional second.
BOUND = {
    "since": "2026-11-16T00:00:00.250Z",
    "until": "2026-11-19T00:00:00Z",
    "model": "%",
    "models": ["glm-5", "glm-4.6", "qwen3"],
    "width": "1 hour",
    "limit": 3,
    "last_turns": 2,
    "dimension": "origin",
    "min_calls": 3,
    "kinds": ["buffer-dropped", "slow-completion", "log-response-failed"],
    "gap_s": 600,
    "min_turns": 2,
    "source": "proxy",
    "triggers": ["tool-history-5xx"],
    "sessions": ["s-a", "s-e", "s-p"],
    "pod": "vllm/glm-5-0",
    "model_name": "glm-5",
    "metrics": ["vllm:generation_tokens_total", "vllm:num_requests_running"],
}
PARAM_SETS = ("null", "bound")

#: Questions whose bound `limit` draws a sample by a hash only DuckDB computes: on
#: Spark the same number of rows, each one of the unlimited answer's.
SAMPLES = {"thinking_points"}


def plain(v):
    """A value as `analyze sql -f json` prints it (:func:`analyzer.outputs.rows.json_value`): a DECIMAL
    as an int when whole, else a float; MAP/struct as sorted items."""
    if isinstance(v, Decimal):
        return json_value(v)
    if isinstance(v, dict):
        return tuple(sorted((str(k), plain(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(plain(x) for x in v)
    return v


_DECIMAL = re.compile(r"DECIMAL\((\d+),\s*(\d+)\)")
_NUMBER_KINDS = {"DOUBLE": "float", "FLOAT": "float", "REAL": "float",
                 **dict.fromkeys(("TINYINT", "SMALLINT", "INTEGER", "INT", "BIGINT", "HUGEINT", "UTINYINT",
                                  "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT", "LONG", "SHORT", "BYTE"), "int")}


def json_kind(type_text: str) -> str:
    """What a column of this type prints as in JSON, on either engine (DuckDB's type or Spark's simpleString).

    ``float`` (DOUBLE: ``14.0``), ``int`` (the integers and DECIMAL(p, 0): ``14``),
    ``decimal`` (DECIMAL(p, s): ``14`` when whole, else ``14.5``), and the others by name
    (text, bool, time, date, map<...>).
    """
    t = type_text.strip().upper()
    if t.startswith("MAP"):
        inner = t[t.index("(" if "(" in t else "<") + 1:-1]
        key, _, value = inner.partition(",")
        return f"map<{json_kind(key)},{json_kind(value)}>"
    if t.endswith("[]") or t.startswith("ARRAY<"):
        return f"list<{json_kind(t[:-2] if t.endswith('[]') else t[6:-1])}>"
    m = _DECIMAL.fullmatch(t)
    if m:
        return "int" if m.group(2) == "0" else "decimal"
    if t in _NUMBER_KINDS:
        return _NUMBER_KINDS[t]
    return {"VARCHAR": "text", "STRING": "text", "JSON": "text", "BOOLEAN": "bool", "TIMESTAMP": "time",
            "TIMESTAMP_NTZ": "time", "DATE": "date"}.get(t, t.lower())


def _sort_key(row: tuple) -> str:
    return repr(tuple(f"{v:.6g}" if isinstance(v, float) else v for v in row))


def same(a, b) -> bool:
    """The same JSON value: of the same JSON type (``14`` is not ``14.0``), floats within 1e-9 relative."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b or (a == b and type(a) is type(b))
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def difference(duck: tuple[list, list, list], spark: tuple[list, list, list]) -> str | None:
    """None when the answers are the same (columns, their JSON types, rows), else what differs first."""
    (dcols, drows, dkinds), (scols, srows, skinds) = duck, spark
    if dcols != scols:
        return f"columns differ: DuckDB {dcols}, Spark {scols}"
    kinds = [(c, d, s) for c, d, s in zip(dcols, dkinds, skinds) if d != s]
    if kinds:
        return "columns print as other JSON types: " + ", ".join(f"{c} (DuckDB {d}, Spark {s})" for c, d, s in kinds)
    if len(drows) != len(srows):
        return f"{len(drows)} rows on DuckDB, {len(srows)} on Spark"
    for x, y in zip(sorted(drows, key=_sort_key), sorted(srows, key=_sort_key)):
        if not same(x, y):
            return f"first differing row:\n  DuckDB {x}\n  Spark  {y}"
    return None


def params(name: str, param_set: str) -> dict:
    """The parameters ``name`` is asked with in ``param_set``: none (``null``) or every one it declares, bound."""
    declared = QUERIES[name].params if QUERIES[name].kind == "question" else ()
    return {p: BOUND[p] for p in declared} if param_set == "bound" else {}


def on_duckdb(con, name: str, params: dict) -> tuple[list, list, list]:
    """Columns, rows (as the JSON format prints them) and JSON kinds of ``name`` asked on DuckDB."""
    cur = execute(con, name, params)
    cols = [d[0] for d in cur.description]
    kinds = [json_kind(str(d[1])) for d in cur.description]
    return cols, [tuple(plain(v) for v in r) for r in cur.fetchall()], kinds


def on_spark(spark, name: str, params: dict) -> tuple[list, list, list]:
    """Columns, rows (as the JSON format prints them) and JSON kinds of ``name`` asked on Spark."""
    df = question_frame(spark, name, **params)
    kinds = [json_kind(f.dataType.simpleString()) for f in df.schema.fields]
    return df.columns, [tuple(plain(v) for v in r) for r in df.collect()], kinds
