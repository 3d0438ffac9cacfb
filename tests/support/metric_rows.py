"""Metric samples written straight into a database, for tests that need exact samples without a file."""

from __future__ import annotations

from typing import Sequence

import duckdb
import pyarrow as pa

from analyzer.ingestion.metric_stage import series_ids_for, source_ids_for


def insert_samples(con: duckdb.DuckDBPyConnection, rows: Sequence[Sequence]) -> int:
    """Store rows shaped like the ``metric_samples`` view, as they are (no de-duplication); return how many.

    Each row is ``(metric, pod, model_name, instance, job, labels, ts, value, source)``
    with ``labels`` JSON text; the series and sources are found or added as a load does.
    """
    if not rows:
        return 0
    keys = list(dict.fromkeys((r[0], r[5], r[1], r[2], r[3], r[4]) for r in rows))
    series_ids, _ = series_ids_for(con, keys)
    by_key = dict(zip(keys, series_ids))
    sources = list(dict.fromkeys(r[8] for r in rows if r[8] is not None))
    by_source = dict(zip(sources, source_ids_for(con, sources))) if sources else {}
    con.register("_metric_rows_in", pa.table({
        "series_id": pa.array([by_key[(r[0], r[5], r[1], r[2], r[3], r[4])] for r in rows], pa.int32()),
        "ts": pa.array([r[6] for r in rows], pa.timestamp("us")),
        "value": pa.array([r[7] for r in rows], pa.float64()),
        "source_id": pa.array([by_source.get(r[8]) for r in rows], pa.int32())}))
    try:
        return con.execute("INSERT INTO metric_points SELECT series_id, ts, value, source_id FROM _metric_rows_in"
                           ).fetchall()[0][0]
    finally:
        con.unregister("_metric_rows_in")
