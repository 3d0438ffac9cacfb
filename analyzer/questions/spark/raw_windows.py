"""The pods' wedged and down windows for Spark's turns, by the analyzer's own rule, in the driver.

Metric files are small beside the logs (a week: a few MB, a few hundred series),
and the wedge rule (:mod:`analyzer.classification.windows`) is Python over sorted
points, not SQL: the windows are computed here as ``analyze`` computes them, on a
scratch in-memory DuckDB, and the few rows handed to Spark. The rule also reads
the logged requests as demand (a flat counter under logged requests is a
wedge), so the requests' times and models of the models the metrics name are
collected from Spark's records into the scratch database first, as the ingest
would have stored them.

The steps are those of :func:`analyzer.jobs.metrics.load_metrics` (stage the
files, store them, the model map, the windows), called from the layers below it:
the jobs layer sits above this one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analyzer.classification.windows import write_windows
from analyzer.ingestion.metric_stage import store_stage
from analyzer.ingestion.metric_store import store_model_map
from analyzer.ingestion.metrics import stage_metric_files
from analyzer.store.db import connect, transaction

POD_WINDOWS_DDL = ("pod STRING, model_name STRING, kind STRING, start_ts TIMESTAMP_NTZ, end_ts TIMESTAMP_NTZ, "
                   "detail STRING, inferred BOOLEAN")


@dataclass
class Windows:
    """The windows (``pod_windows``' rows, as a DataFrame) and what the rule warned of."""

    pod_windows: DataFrame
    warnings: list[str] = field(default_factory=list)


def pod_windows(spark: SparkSession, records: DataFrame, metrics: list[str] | None, *,
                wedge_window: str | float = "5m", model_map: dict[str, str] | None = None) -> Windows:
    """``pod_windows`` from the metric files ``metrics`` and the logged requests in ``records``.

    No metrics: no windows (as in a database that never loaded any).
    """
    if not metrics:
        return Windows(spark.createDataFrame([], POD_WINDOWS_DDL))

    con = connect(":memory:")
    try:
        staged = stage_metric_files([str(m) for m in metrics])
        try:
            with transaction(con):
                store_stage(con, staged.scratch, staged.series, list(staged.sources))
                store_model_map(con, model_map)
        finally:
            staged.close()
        named = {r[0] for r in con.execute(
            "SELECT DISTINCT model_name FROM metric_series WHERE model_name IS NOT NULL").fetchall()}
        mapping = model_map or {}
        # The log models whose requests are demand for a metric model (the rule maps them the same way).
        logged = sorted({lm for lm, mm in mapping.items() if mm in named} | (named - set(mapping)))
        # Requests are demand; failed responses are what frozen gauges are inferred from.
        demand = (records.where(F.col("model").isin(logged) & ((F.col("type") == "request")
                                                               | F.col("error").isNotNull()))
                  .select("ts", "type", "model", "provider", "latency_ms", "error").collect()) if logged else []
        if demand:
            con.register("_demand", pa.table({
                "ts": pa.array([r.ts for r in demand], pa.timestamp("us")),
                "type": pa.array([r.type for r in demand], pa.string()),
                "model": pa.array([r.model for r in demand], pa.string()),
                "provider": pa.array([r.provider for r in demand], pa.string()),
                "latency_ms": pa.array([r.latency_ms for r in demand], pa.int64()),
                "error": pa.array([r.error for r in demand], pa.string())}))
            try:
                con.execute("""INSERT INTO records (ts, type, model, provider, latency_ms, error, truncated, file_id,
                                                    line_no)
                               SELECT ts, type, model, provider, latency_ms, error, false, 0, row_number() OVER ()
                               FROM _demand""")
            finally:
                con.unregister("_demand")
        with transaction(con):
            result = write_windows(con, wedge_window)
        rows = con.execute("SELECT pod, model_name, kind, start_ts, end_ts, detail, inferred FROM pod_windows "
                           "ORDER BY model_name, pod, start_ts, kind").fetchall()
    finally:
        con.close()
    return Windows(spark.createDataFrame(rows, POD_WINDOWS_DDL), list(result.warnings))
