"""A stored copy of the last summaries, so a re-run that changed nothing prints at once.

The summary is a pure function of the database's contents, the filters and the
code that computes it. The key hashes all three (cheap aggregates stand for the
contents: record signature, windows, settings, quarantine, skipped files, proxy
events, metric samples); any change makes a new key and the summary is computed
again. Only the parts computed from the database are kept: a run's own ingest
report and metric loads are added by the caller.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Callable

import duckdb

from analyzer.classification.turns import records_signature as _records_of
from analyzer.core.paths import code_files
from analyzer.store.db import transaction

# The records (analyzer.classification.turns.records_signature), then one aggregate per row of
# the other tables, in one statement: as scalar subqueries of one SELECT DuckDB
# ran them three times slower (planned as a chain of cross joins).
_STATE = """
SELECT part, value FROM (
    SELECT 2 AS part, (SELECT count(*) FROM turns)::VARCHAR AS value
    UNION ALL SELECT 3, (SELECT coalesce(md5(string_agg(concat_ws(',', pod, model_name, kind, start_ts, end_ts, detail),
                                                        ';' ORDER BY pod, model_name, kind, start_ts)), '')
                         FROM pod_windows)
    UNION ALL SELECT 4, (SELECT coalesce(string_agg(name || '=' || value, ',' ORDER BY name), '') FROM settings)
    UNION ALL SELECT 5, (SELECT coalesce(string_agg(log_model || '=' || model_name, ',' ORDER BY log_model), '')
                         FROM model_map)
    UNION ALL SELECT 6, (SELECT count(*) FROM quarantine)::VARCHAR
    UNION ALL SELECT 7, (SELECT concat_ws(',', count(*), max(seen_at)) FROM skipped_files)
    UNION ALL SELECT 8, (SELECT concat_ws(',', count(*), coalesce(sum(lost), 0)) FROM proxy_events)
    UNION ALL SELECT 9, (SELECT count(*) FROM metric_samples)::VARCHAR
    UNION ALL SELECT 10, (SELECT count(*) FROM replay_attempts)::VARCHAR
) ORDER BY part
"""

_code_hash: str | None = None


def _code() -> str:
    """A hash of the code and SQL that make a summary (so an upgrade recomputes it)."""
    global _code_hash
    if _code_hash is None:
        h = hashlib.md5()
        for p in code_files():
            h.update(p.read_bytes())
        _code_hash = h.hexdigest()
    return _code_hash


def _key(con: duckdb.DuckDBPyConnection, filters: dict[str, Any], records: str | None) -> str:
    if records is None:
        records = _records_of(con)
    state = "|".join([records, *(str(value) for _, value in con.execute(_STATE).fetchall())])
    return hashlib.md5(json.dumps([_code(), state, filters], default=str).encode()).hexdigest()


def cached_summary(con: duckdb.DuckDBPyConnection, build: Callable[..., dict], *,
                   models: list[str] | None = None, since: datetime | None = None,
                   until: datetime | None = None, records_signature: str | None = None) -> dict:
    """``build(con, models=..., since=..., until=...)``, or its stored result for the same state and filters.

    ``records_signature``: :func:`analyzer.classification.turns.records_signature`, when the caller
    has it from a refresh just done (else it is computed here).
    """
    filters = {"models": models, "since": since, "until": until}
    key = _key(con, filters, records_signature)
    hit = con.execute("SELECT summary FROM summary_cache WHERE key = ?", [key]).fetchall()
    if hit:
        return json.loads(hit[0][0])
    summary = build(con, **filters)
    text = json.dumps(summary, default=str)
    with transaction(con):
        con.execute("DELETE FROM summary_cache WHERE built_at < now() - INTERVAL 30 DAY OR key = ?", [key])
        con.execute("INSERT INTO summary_cache VALUES (?, ?, now())", [key, text])
    return json.loads(text)  # the same types a cache hit gives
