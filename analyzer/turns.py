"""Bulk classification: the analyzer.online rule applied to every distinct feature row.

The ``turn_features`` view extracts the features in SQL. There are few distinct
feature combinations, so each new one is classified here in Python with
:func:`analyzer.online.decide` and stored in ``feature_labels``; the ``turns`` view
joins the labels back. Error texts are read the same way: each distinct error head
once, by :func:`analyzer.online.parse_error`, into ``error_kinds``.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from .db import transaction
from .online import (
    DEFAULT_CALLER_DEADLINE_S,
    UPSTREAM_FAILURE_CLASSES,
    TurnFeatures,
    decide,
    ladder_trigger,
    parse_error,
)
from .online.classify import ERROR_HEAD_CHARS

_FEATURE_COLUMNS = (
    "status", "finish_reason", "has_content", "has_tool_calls", "tool_history",
    "has_reasoning", "completion_tokens", "max_tokens", "error_kind", "no_answer", "late", "inferred",
)

#: The `settings` row the `late` feature of queries/turn_features.sql reads.
CALLER_DEADLINE = "caller_deadline_s"


@dataclass
class ClassifyReport:
    """How much classification work a refresh did."""

    new_error_heads: int = 0
    new_feature_rows: int = 0


def refresh_error_kinds(con: duckdb.DuckDBPyConnection) -> int:
    """Parse each error head not yet in ``error_kinds``; return how many were new."""
    rows = con.execute(
        f"""
        SELECT DISTINCT r.provider, left(r.error, {ERROR_HEAD_CHARS}) AS head
        FROM records r
        WHERE r.type = 'response' AND r.error IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM error_kinds e
                          WHERE e.error_head = left(r.error, {ERROR_HEAD_CHARS})
                            AND e.provider IS NOT DISTINCT FROM r.provider)
        """
    ).fetchall()
    if rows:
        out = [(provider, head, *parse_error(head, provider)) for provider, head in rows]
        insert_rows(con, "error_kinds", ("provider", "error_head", "error_kind", "status"), out)
    return len(rows)


def _features_of(row: tuple) -> TurnFeatures:
    d = dict(zip(_FEATURE_COLUMNS, row))
    inferred = tuple(x for x in (d.pop("inferred") or "").split(",") if x)
    return TurnFeatures(**d, inferred=inferred)


def refresh_feature_labels(con: duckdb.DuckDBPyConnection) -> int:
    """Classify each feature combination not yet in ``feature_labels``; return the count."""
    cols = ", ".join(_FEATURE_COLUMNS)
    rows = con.execute(
        f"SELECT DISTINCT {cols} FROM turn_features EXCEPT SELECT {cols} FROM feature_labels"
    ).fetchall()
    out = []
    for row in rows:
        f = _features_of(row)
        d = decide(f)
        out.append((*row, d.incident_class, d.evidence, d.incident_class in UPSTREAM_FAILURE_CLASSES, ladder_trigger(f)))
    if out:
        insert_rows(con, "feature_labels",
                    _FEATURE_COLUMNS + ("incident_class", "decision_evidence", "upstream_failure", "ladder_trigger"), out)
    return len(out)


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Insert many Python rows at once (through Arrow; executemany is row by row)."""
    import pyarrow as pa

    types = {name: con.execute(
        "SELECT data_type FROM duckdb_columns() WHERE table_name = ? AND column_name = ?", [table, name]
    ).fetchall()[0][0] for name in columns}
    arrow = pa.table({name: [r[i] for r in rows] for i, name in enumerate(columns)})
    con.register("_rows_to_insert", arrow)
    try:
        select = ", ".join(f'CAST("{c}" AS {types[c]})' for c in columns)
        con.execute(f'INSERT INTO {table} ({", ".join(columns)}) SELECT {select} FROM _rows_to_insert')
    finally:
        con.unregister("_rows_to_insert")


def check_caller_deadline(seconds: object) -> float:
    """A caller deadline in seconds as a positive finite float, or ValueError."""
    import math

    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or seconds <= 0:
        raise ValueError(f"the caller deadline must be a positive number of seconds, got {seconds!r}")
    return float(seconds)


def set_caller_deadline(con: duckdb.DuckDBPyConnection, seconds: float | None) -> float:
    """Store the caller deadline (``seconds``, or keep the stored one, else the default); return it.

    An otherwise-ok answer slower than this is ``late-200``. Changing it re-labels
    the turns on the next refresh.
    """
    if seconds is not None:
        con.execute("INSERT OR REPLACE INTO settings VALUES (?, ?, now())",
                    [CALLER_DEADLINE, check_caller_deadline(seconds)])
    else:
        con.execute("INSERT OR IGNORE INTO settings VALUES (?, ?, now())",
                    [CALLER_DEADLINE, DEFAULT_CALLER_DEADLINE_S])
    return con.execute("SELECT value FROM settings WHERE name = ?", [CALLER_DEADLINE]).fetchall()[0][0]


def refresh_turns(con: duckdb.DuckDBPyConnection, *, caller_deadline_s: float | None = None) -> ClassifyReport:
    """Bring the classification up to date with the records (idempotent, incremental).

    Classifies new error heads and feature combinations, then rebuilds the
    materialized ``turns`` table if anything it reads changed. ``caller_deadline_s``
    sets the deadline that makes a slow answer ``late-200`` (stored; default: the
    stored value, else :data:`analyzer.online.DEFAULT_CALLER_DEADLINE_S`).
    """
    if caller_deadline_s is not None:
        check_caller_deadline(caller_deadline_s)  # before any write
    with transaction(con):
        set_caller_deadline(con, caller_deadline_s)
        report = ClassifyReport()
        # Labels depend on the records only: skip the distinct-feature scan when
        # no record changed since the last refresh (a re-run with no new files).
        from .queries import load_queries

        features_sql = load_queries()["turn_features"].sql
        records_sig = con.execute(_RECORDS_SIGNATURE).fetchall()[0][0] + "|" + _md5(features_sql)
        known = con.execute("SELECT signature FROM build_state WHERE name = 'labels'").fetchall()
        if not known or known[0][0] != records_sig:
            report.new_error_heads = refresh_error_kinds(con)
            report.new_feature_rows = refresh_feature_labels(con)
            con.execute("INSERT OR REPLACE INTO build_state VALUES ('labels', ?, now())", [records_sig])
        ensure_turns(con)
    return report


_RECORDS_SIGNATURE = """
SELECT concat_ws('|', count(*), coalesce(sum(file_id::HUGEINT * 1000003 + line_no), 0),
                 (SELECT string_agg(name || '=' || value, ',' ORDER BY name) FROM settings)) FROM records
"""

_SIGNATURE = """
SELECT concat_ws('|',
    (""" + _RECORDS_SIGNATURE + """),
    (SELECT count(*) FROM feature_labels),
    (SELECT count(*) FROM error_kinds),
    (SELECT count(*) FROM pod_windows),
    (SELECT coalesce(sum(epoch(start_ts) + 7 * epoch(end_ts)), 0) FROM pod_windows),
    (SELECT coalesce(md5(string_agg(log_model || '=' || model_name, ',' ORDER BY log_model)), '') FROM model_map),
    md5($sql))
"""


def _md5(text: str) -> str:
    import hashlib

    return hashlib.md5(text.encode()).hexdigest()


def is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the labels and the ``turns`` table match the records (read-only check)."""
    from .queries import load_queries

    queries = load_queries()
    try:
        labels = con.execute(_RECORDS_SIGNATURE).fetchall()[0][0] + "|" + _md5(queries["turn_features"].sql)
        turns = con.execute(_SIGNATURE, {"sql": queries["turn_features"].sql + queries["turns"].sql}).fetchall()[0][0]
        known = dict(con.execute("SELECT name, signature FROM build_state").fetchall())
    except duckdb.Error:  # an older schema: not current until migrated and rebuilt
        return False
    return known.get("labels") == labels and known.get("turns") == turns


def ensure_turns(con: duckdb.DuckDBPyConnection, *, force: bool = False) -> bool:
    """Rebuild the materialized ``turns`` table if its inputs changed; return whether it did.

    The inputs are the records, the labels, the metric windows, the model map and
    the SQL of queries/turn_features.sql and queries/turns.sql; their signature is kept in ``build_state``.
    """
    from .queries import load_queries

    queries = load_queries()
    q = queries["turns"]
    signature = con.execute(_SIGNATURE, {"sql": queries["turn_features"].sql + q.sql}).fetchall()[0][0]
    known = con.execute("SELECT signature FROM build_state WHERE name = 'turns'").fetchall()
    if not force and known and known[0][0] == signature:
        return False
    con.execute(f"CREATE OR REPLACE TABLE turns AS {q.sql}")
    con.execute("INSERT OR REPLACE INTO build_state VALUES ('turns', ?, now())", [signature])
    return True


# Older name, kept for callers written against it.
snapshot_turns = ensure_turns
