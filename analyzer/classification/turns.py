"""Bulk classification: the analyzer.online rule applied to every distinct feature row.

The ``turn_features`` view extracts the features in SQL. There are few distinct
feature combinations, so each new one is classified here in Python with
:func:`analyzer.online.decide` and stored in ``feature_labels``; the ``turns`` view
joins the labels back. Error texts are read the same way: each distinct error head
once, by :func:`analyzer.online.parse_error`, into ``error_kinds``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import duckdb

from analyzer.online import (
    CLASSES,
    DEFAULT_CALLER_DEADLINE_S,
    UPSTREAM_FAILURE_CLASSES,
    TurnFeatures,
    decide,
    ladder_trigger,
    parse_error,
)
from analyzer.online.classify import ERROR_HEAD_CHARS
from analyzer.online.ladder import class_trigger
from analyzer.store.catalog import load_queries
from analyzer.store.db import CLASSIFY_MEMORY_LIMIT, insert_rows, memory_bound, transaction

_FEATURE_COLUMNS = (
    "status", "finish_reason", "has_content", "has_tool_calls", "tool_history",
    "has_reasoning", "completion_tokens", "max_tokens", "error_kind", "no_answer", "late",
    "has_reasoning_text", "reasoning_leaked", "reasoning_at_cap", "inferred",
)

#: The `settings` row the `late` feature of queries/turn_features.sql reads.
CALLER_DEADLINE = "caller_deadline_s"


@dataclass
class ClassifyReport:
    """How much classification work a refresh did."""

    new_error_heads: int = 0
    new_feature_rows: int = 0
    rebuilt: str = "none"  # 'all' | 'incremental' | 'none'
    #: :func:`records_signature` of the records the classification now matches
    records_signature: str | None = None



def refresh_error_kinds(con: duckdb.DuckDBPyConnection, records: str = "records") -> int:
    """Parse each error head (of the ``records`` table given) not yet in ``error_kinds``; return how many were new."""
    rows = con.execute(
        f"""
        SELECT DISTINCT r.provider, left(r.error, {ERROR_HEAD_CHARS}) AS head
        FROM {records} r
        WHERE r.type = 'response' AND r.error IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM error_kinds e
                          WHERE e.error_head = left(r.error, {ERROR_HEAD_CHARS})
                            AND e.provider IS NOT DISTINCT FROM r.provider)
        """
    ).fetchall()
    if rows:
        insert_rows(con, "error_kinds", ("provider", "error_head", "error_kind", "status"), error_kind_rows(rows))
    return len(rows)


def error_kind_rows(heads) -> list[tuple]:
    """``error_kinds`` rows ``(provider, error_head, error_kind, status)`` for ``(provider, error_head)`` pairs.

    :func:`analyzer.online.parse_error` over each: what :func:`refresh_error_kinds`
    stores, for any engine that computes the distinct heads itself (Spark).
    """
    return [(provider, head, *parse_error(head, provider)) for provider, head in heads]


def _features_of(row: tuple) -> TurnFeatures:
    d = dict(zip(_FEATURE_COLUMNS, row))
    inferred = tuple(x for x in (d.pop("inferred") or "").split(",") if x)
    return TurnFeatures(**d, inferred=inferred)


def refresh_feature_labels(con: duckdb.DuckDBPyConnection, features: str = "turn_features") -> int:
    """Classify each feature combination (of the ``features`` table given) not yet in ``feature_labels``."""
    cols = ", ".join(_FEATURE_COLUMNS)
    rows = con.execute(
        f"SELECT DISTINCT {cols} FROM {features} EXCEPT SELECT {cols} FROM feature_labels"
    ).fetchall()
    out = feature_label_rows(rows)
    if out:
        insert_rows(con, "feature_labels", FEATURE_LABEL_COLUMNS, out)
    return len(out)


#: The columns of ``feature_labels``: the features, then what the rule decided.
FEATURE_LABEL_COLUMNS = _FEATURE_COLUMNS + ("incident_class", "decision_evidence", "upstream_failure", "ladder_trigger")


def feature_label_rows(rows) -> list[tuple]:
    """``feature_labels`` rows (:data:`FEATURE_LABEL_COLUMNS`) for distinct feature rows (``_FEATURE_COLUMNS``).

    :func:`analyzer.online.decide` and :func:`analyzer.online.ladder_trigger` over
    each: what :func:`refresh_feature_labels` stores, for any engine that computes
    the distinct feature rows itself (Spark).
    """
    out = []
    for row in rows:
        f = _features_of(row)
        d = decide(f)
        out.append((*row, d.incident_class, d.evidence, d.incident_class in UPSTREAM_FAILURE_CLASSES, ladder_trigger(f)))
    return out


#: ``class_labels``: what analyzer.online says of every class a proxy can log, with
#: and without tool history (its wedged/down explanation and its ladder trigger).
CLASS_LABELS: tuple[tuple[str, bool, bool, str | None], ...] = tuple(
    (c, history, c in UPSTREAM_FAILURE_CLASSES, class_trigger(c, history))
    for c in CLASSES for history in (False, True)
)


def refresh_class_labels(con: duckdb.DuckDBPyConnection) -> bool:
    """Make ``class_labels`` say what :data:`CLASS_LABELS` says; return whether it changed."""
    stored = con.execute(
        "SELECT incident_class, tool_history, upstream_failure, ladder_trigger FROM class_labels"
    ).fetchall()
    if sorted(stored, key=repr) == sorted(CLASS_LABELS, key=repr):
        return False
    con.execute("DELETE FROM class_labels")
    insert_rows(con, "class_labels", ("incident_class", "tool_history", "upstream_failure", "ladder_trigger"),
                list(CLASS_LABELS))
    return True


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
    if seconds is None:
        stored = con.execute("SELECT value FROM settings WHERE name = ?", [CALLER_DEADLINE]).fetchall()
        if stored:  # read first: a run that keeps the stored deadline writes nothing
            return float(stored[0][0])
        seconds = DEFAULT_CALLER_DEADLINE_S
    seconds = check_caller_deadline(seconds)
    con.execute("INSERT OR REPLACE INTO settings VALUES (?, ?, now())", [CALLER_DEADLINE, repr(seconds)])
    return seconds


def refresh_turns(con: duckdb.DuckDBPyConnection, *, caller_deadline_s: float | None = None) -> ClassifyReport:
    """Bring the classification up to date with the records (idempotent, incremental).

    Only the turns whose records changed (``turns_dirty``, written by ingestion)
    or whose time falls in a pod window that appeared or vanished are
    re-derived: their features computed once, new feature combinations and error
    heads classified, their rows of ``turns`` replaced. A change of the SQL, of
    the model map, of the settings, or of the records by a writer that marks
    nothing dirty rebuilds everything. ``caller_deadline_s`` sets the deadline
    that makes a slow answer ``late-200`` (stored; default: the stored value,
    else :data:`analyzer.online.DEFAULT_CALLER_DEADLINE_S`).
    """
    if caller_deadline_s is not None:
        check_caller_deadline(caller_deadline_s)  # before any write
    with transaction(con), memory_bound(con, CLASSIFY_MEMORY_LIMIT):
        set_caller_deadline(con, caller_deadline_s)
        return _refresh(con, force=False)


def _refresh(con: duckdb.DuckDBPyConnection, *, force: bool) -> ClassifyReport:
    report = ClassifyReport()
    queries = load_queries()
    refresh_class_labels(con)
    sql_sig = _sql_signature(con, queries)
    known = dict(con.execute("SELECT name, signature FROM build_state").fetchall())
    records_sig = report.records_signature = records_signature(con)
    n_dirty = con.execute("SELECT count(*) FROM turns_dirty").fetchall()[0][0]
    full = (force or known.get("turns_sql") != sql_sig
            or (known.get("records") != records_sig and not n_dirty))
    if not full:
        _mark_window_changes(con)
        n_dirty = con.execute("SELECT count(*) FROM turns_dirty").fetchall()[0][0]
        if not n_dirty:
            return report
    scope = "records" if full else "_turn_records"
    if not full:
        con.execute("""CREATE OR REPLACE TEMP TABLE _dirty_keys AS SELECT DISTINCT turn_key FROM turns_dirty""")
        # The original line (`raw`, most of a record's bytes) is not a feature: copying
        # it made this the costliest statement of an incremental refresh.
        con.execute("""CREATE OR REPLACE TEMP TABLE _turn_records AS
                       SELECT * EXCLUDE (raw) FROM records
                       WHERE coalesce(session_id, '~' || coalesce(request_id, '')) IN (SELECT turn_key FROM _dirty_keys)""")
    report.new_error_heads = refresh_error_kinds(con, scope)
    features = _scoped(queries["turn_features"].sql, "records", scope)
    con.execute(f"CREATE OR REPLACE TEMP TABLE _turn_features AS {features}")
    report.new_feature_rows = refresh_feature_labels(con, "_turn_features")
    turns_sql = _scoped(queries["turns"].sql, "turn_features", "_turn_features")
    if full:
        con.execute(f"CREATE OR REPLACE TABLE turns AS {turns_sql}")
    else:
        con.execute("DELETE FROM turns WHERE coalesce(session_id, '~' || coalesce(request_id, '')) IN (SELECT turn_key FROM _dirty_keys)")
        # A dirty session is re-derived whole (all its records were read), so these
        # rows are every turn of the dirty sessions: the session tables read them.
        con.execute(f"CREATE OR REPLACE TEMP TABLE _dirty_turns AS {turns_sql}")
        con.execute("INSERT INTO turns BY NAME SELECT * FROM _dirty_turns")
        con.execute("DROP TABLE _turn_records")
    con.execute("DROP TABLE _turn_features")
    _refresh_session_tables(con, queries, full=full)
    if not full:
        con.execute("DROP TABLE _dirty_keys")
    con.execute("DELETE FROM turns_dirty")
    con.execute("DELETE FROM turns_windows")
    con.execute("INSERT INTO turns_windows SELECT DISTINCT model_name, kind, start_ts, end_ts FROM pod_windows")
    for name, sig in (("turns_sql", sql_sig), ("records", records_sig)):
        con.execute("INSERT OR REPLACE INTO build_state VALUES (?, ?, now())", [name, sig])
    report.rebuilt = "all" if full else "incremental"
    return report


#: Tables derived from ``turns`` one session at a time (``-- table:`` files of
#: queries/). A summary reads them several times over; as views they were computed
#: from every turn each time, so the summary of a month cost a month however little
#: had changed. Kept as tables, a refresh re-derives only the sessions it touched.
SESSION_TABLES = ("sessions", "ladder_baseline")


def _refresh_session_tables(con: duckdb.DuckDBPyConnection, queries, *, full: bool) -> None:
    for name in SESSION_TABLES:
        sql = queries[name].sql
        if full:
            con.execute(f'CREATE OR REPLACE TABLE "{name}" AS {sql}')
            continue
        # a session's key in turns_dirty is its session_id
        con.execute(f'DELETE FROM "{name}" WHERE session_id IN (SELECT turn_key FROM _dirty_keys)')
        con.execute(f'INSERT INTO "{name}" BY NAME {_scoped(sql, "turns", "_dirty_turns")}')
    if not full:
        con.execute("DROP TABLE _dirty_turns")


def _scoped(sql: str, table: str, scope: str) -> str:
    """The SQL reading ``scope`` where it reads ``table`` (``FROM table`` only)."""
    if scope == table:
        return sql
    pattern = re.compile(rf"\bFROM {table}\b")
    if not pattern.search(sql):
        raise RuntimeError(f"expected the SQL to read FROM {table}")
    return pattern.sub(f"FROM {scope}", sql)


# Turns inside a pod window that appeared or vanished since the last build:
# their window classes may change.
_WINDOW_CHANGES = """
INSERT INTO turns_dirty
SELECT DISTINCT coalesce(t.session_id, '~' || coalesce(t.request_id, ''))
FROM turns t
JOIN ((SELECT model_name, kind, start_ts, end_ts FROM pod_windows
       EXCEPT SELECT * FROM turns_windows)
      UNION ALL
      (SELECT * FROM turns_windows
       EXCEPT SELECT model_name, kind, start_ts, end_ts FROM pod_windows)) w
  ON w.model_name = t.metric_model
 AND coalesce(t.response_ts, t.ts) BETWEEN w.start_ts AND w.end_ts
"""


# Whether any window appeared or vanished: two EXCEPTs over the (few) windows.
_WINDOWS_CHANGED = """
SELECT EXISTS (SELECT model_name, kind, start_ts, end_ts FROM pod_windows EXCEPT SELECT * FROM turns_windows)
    OR EXISTS (SELECT * FROM turns_windows EXCEPT SELECT model_name, kind, start_ts, end_ts FROM pod_windows)
"""


def _mark_window_changes(con: duckdb.DuckDBPyConnection) -> None:
    # The join with every turn only when some window changed: a re-run whose windows
    # are as they were (every re-run that loads no metrics) need not read the turns.
    if con.execute(_WINDOWS_CHANGED).fetchall()[0][0]:
        con.execute(_WINDOW_CHANGES)


# BIGINT per row (an INTEGER file id times 1000003 plus a line number cannot
# overflow it), HUGEINT in the sum: the same figure as HUGEINT rows gave, in a third
# of the time (it is computed on every run).
_RECORDS_SIGNATURE = """
SELECT concat_ws('|', count(*), coalesce(sum(file_id::BIGINT * 1000003 + line_no), 0)) FROM records
"""


def records_signature(con: duckdb.DuckDBPyConnection) -> str:
    """The records as the classification knows them: their count and a sum over (file, line).

    :func:`refresh_turns` returns it (``ClassifyReport.records_signature``) for
    callers that key on the records too (the summary cache), so it is summed once.
    """
    return con.execute(_RECORDS_SIGNATURE).fetchall()[0][0]


def _sql_signature(con: duckdb.DuckDBPyConnection, queries) -> str:
    """What a full rebuild depends on besides the records: the SQL, the model map, the settings."""
    mapping, settings = con.execute(
        "SELECT coalesce(md5(string_agg(log_model || '=' || model_name, ',' ORDER BY log_model)), ''), "
        "(SELECT coalesce(string_agg(name || '=' || value, ',' ORDER BY name), '') FROM settings) FROM model_map"
    ).fetchall()[0]
    sql = "".join(queries[name].sql for name in ("turn_features", "turns", *SESSION_TABLES))
    return hashlib.md5((sql + mapping + settings + repr(CLASS_LABELS)).encode()).hexdigest()


def is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the ``turns`` table matches the records and windows (a read-only check)."""
    known = dict(con.execute("SELECT name, signature FROM build_state").fetchall())
    if known.get("turns_sql") != _sql_signature(con, load_queries()):
        return False
    if known.get("records") != records_signature(con):
        return False
    if con.execute("SELECT count(*) FROM turns_dirty").fetchall()[0][0]:
        return False
    return not con.execute(_WINDOWS_CHANGED).fetchall()[0][0]


def ensure_turns(con: duckdb.DuckDBPyConnection, *, force: bool = False) -> bool:
    """Bring ``turns`` up to date if anything it reads changed; return whether it did.

    Writes nothing when it is current, so it is safe on a read-only connection
    that :func:`is_current` approved.
    """
    if not force and is_current(con):
        return False
    with transaction(con), memory_bound(con, CLASSIFY_MEMORY_LIMIT):
        set_caller_deadline(con, None)
        _refresh(con, force=force)
    return True

