"""The model mapping (``--model-map``), parsed and stored; samples written or forgotten by source.

Loads store samples through :mod:`analyzer.ingestion.metric_stage`; :func:`insert_samples` writes rows of
the ``metric_samples`` view's shape (a test fixture, a notebook), and
:func:`forget_sources` removes what sources loaded.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.ingestion.metric_stage import series_ids_for, source_ids_for


def store_model_map(con: duckdb.DuckDBPyConnection, model_map: dict[str, str] | None) -> None:
    """Record log ``model`` -> metric ``model_name`` overrides (replacing earlier ones).

    Models without an entry match the metric ``model_name`` of the same name.
    """
    for log_model, model_name in (model_map or {}).items():
        con.execute(
            "INSERT OR REPLACE INTO model_map (log_model, model_name) VALUES (?, ?)",
            [str(log_model), str(model_name)],
        )


def parse_model_map(pairs: Iterable[str] | None) -> dict[str, str]:
    """``["glm-5=zai-org/GLM-5", ...]`` (the ``--model-map`` option) as a dict.

    Raises:
        AnalyzerError: (usage) an item that is not ``LOG_MODEL=METRIC_MODEL_NAME``.
    """
    out: dict[str, str] = {}
    for pair in pairs or []:
        log_model, sep, model_name = pair.partition("=")
        if not sep or not log_model.strip() or not model_name.strip():
            raise AnalyzerError(f"want LOG_MODEL=METRIC_MODEL_NAME, got {pair!r}", ExitCode.USAGE, param="model_map")
        out[log_model.strip()] = model_name.strip()
    return out


def insert_samples(con: duckdb.DuckDBPyConnection, rows: Sequence[Sequence]) -> int:
    """Store rows shaped like the ``metric_samples`` view, as they are (no de-duplication); return how many.

    Each row is ``(metric, pod, model_name, instance, job, labels, ts, value, source)``
    with ``labels`` JSON text; the series and sources are found or added.
    """
    import pyarrow as pa

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


def forget_sources(con: duckdb.DuckDBPyConnection, sources: list[str]) -> int:
    """Delete the samples loaded from ``sources`` (and series and sources left empty); return how many.

    Runs inside the caller's transaction, if any.
    """
    if not sources:
        return 0
    n = con.execute("""DELETE FROM metric_points WHERE source_id IN
                       (SELECT source_id FROM metric_sources WHERE list_contains($s, source))""",
                    {"s": sources}).fetchall()[0][0]
    con.execute("DELETE FROM metric_series WHERE series_id NOT IN (SELECT DISTINCT series_id FROM metric_points)")
    con.execute("DELETE FROM metric_sources WHERE list_contains($s, source)", {"s": sources})
    return n
