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
from analyzer.store.db import connect, insert_rows, registered, transaction
from analyzer.store.holdings import WEDGE_WINDOW_SETTING

POD_WINDOWS_DDL = ("pod STRING, model_name STRING, kind STRING, start_ts TIMESTAMP_NTZ, end_ts TIMESTAMP_NTZ, "
                   "detail STRING, inferred BOOLEAN")


#: The metric relations of the database the windows are computed from (on the scratch DuckDB).
METRIC_RELATIONS = ("metric_sources", "metric_series", "metric_points", "model_map")


@dataclass
class Windows:
    """The windows (``pod_windows``' rows, as a DataFrame), what the rule warned of, and the metrics.

    ``metrics`` holds the metric relations as the database would store them
    (:data:`METRIC_RELATIONS`, Arrow tables in the driver: the ``labels`` JSON as
    text), empty when there were none; ``wedge_window_s`` the wedge window the
    windows were computed with (None when none were).
    """

    pod_windows: DataFrame
    warnings: list[str] = field(default_factory=list)
    metrics: dict[str, pa.Table] = field(default_factory=dict)
    wedge_window_s: float | None = None


def pod_windows(spark: SparkSession, records: DataFrame, metrics: list[str] | None, *,
                wedge_window: str | float = "5m", model_map: dict[str, str] | None = None,
                stored: dict[str, pa.Table] | None = None) -> Windows:
    """``pod_windows`` from the metric files ``metrics`` and the logged requests in ``records``.

    ``stored``: metric relations stored before (a lake's, :data:`METRIC_RELATIONS`):
    the files are stored on top of them as ``analyze`` stores a later load (a
    sample already stored is not stored again, a series is found again by its
    labels), and the windows are computed over all. No metrics, none stored and
    no model map: no windows (as in a database that never loaded any).
    """
    stored = {k: v for k, v in (stored or {}).items() if v is not None and v.num_rows}
    if not metrics and not stored and not model_map:
        return Windows(spark.createDataFrame([], POD_WINDOWS_DDL))

    con = connect(":memory:")
    try:
        _seed(con, stored)
        staged = stage_metric_files([str(m) for m in metrics or []])
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
        if demand:  # one file of them (0), numbered from 1
            insert_rows(con, "records", ("ts", "type", "model", "provider", "latency_ms", "error", "truncated",
                                         "file_id", "line_no"),
                        [(*r, False, 0, line_no) for line_no, r in enumerate(demand, 1)])
        with transaction(con):
            result = write_windows(con, wedge_window)
        rows = con.execute("SELECT pod, model_name, kind, start_ts, end_ts, detail, inferred FROM pod_windows "
                           "ORDER BY model_name, pod, start_ts, kind").fetchall()
        tables = {name: con.sql(f"SELECT * REPLACE (CAST(labels AS VARCHAR) AS labels) FROM {name}" if
                                name == "metric_series" else f"SELECT * FROM {name}").to_arrow_table()
                  for name in METRIC_RELATIONS}
        wedge_s = float(con.execute("SELECT value FROM settings WHERE name = ?", [WEDGE_WINDOW_SETTING]).fetchall()[0][0])
    finally:
        con.close()
    return Windows(spark.createDataFrame(rows, POD_WINDOWS_DDL), list(result.warnings), tables, wedge_s)


def _seed(con, stored: dict[str, pa.Table]) -> None:
    """The metric relations stored before, into the scratch database (the labels back to JSON)."""
    for name in METRIC_RELATIONS:
        if name in stored:
            cols = ", ".join(f'"{c}"' for c in stored[name].column_names)
            select = cols.replace('"labels"', 'CAST("labels" AS JSON)')
            with registered(con, "_stored", stored[name]):
                con.execute(f"INSERT INTO {name} ({cols}) SELECT {select} FROM _stored")
