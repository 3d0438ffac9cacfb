"""Rows of a question as an aligned table, CSV or JSON: ``analyze sql --format``; or as dicts
(:func:`records`, for the summary's and the report's questions with many columns).

Log text is untrusted: a table escapes control characters, CSV on a terminal
does too, and JSON escapes C1 controls and bidi characters as well as C0.
"""

from __future__ import annotations

import csv
import json
import math
import re
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import IO, Any, Iterable, Sequence

import duckdb

# Stored timestamps are naive UTC (the proxy writes `Z`): the output says so, as the summary's JSON does.
from analyzer.core.isotime import iso_utc as _iso
from analyzer.core.safetext import printable
from analyzer.store.asking import RELATIONS, execute
from analyzer.store.catalog import load_queries

FORMATS = ("table", "csv", "json")
TABLE_CELL_CHARS = 80


def records(con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Run a question of queries/ (the same path as ``analyze sql NAME``) as a list of dicts, one per row."""
    cur = execute(con, name, params)
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, row)) for row in cur.fetchall()]


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


def json_value(v: Any) -> Any:
    """A value as the JSON format writes it: a float rounded (none when not finite), a DECIMAL an int when
    whole, else a float, times as ISO text, maps and lists with their values so."""
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
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)  # UUID, and anything else DuckDB may hand back


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (dict, list, tuple)):
        return _json_dumps(json_value(v))
    return str(json_value(v))


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
        out.write(_json_dumps({c: json_value(v) for c, v in zip(columns, row)}))
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
            if q.kind in RELATIONS + ("question",)]
    return write_table(("name", "kind", "params", "title"), rows, out)
