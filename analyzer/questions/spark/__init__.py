"""Past one machine: the portable questions of ``queries/`` on Spark SQL.

``analyze export --parquet DIR`` writes the classified turns as Parquet
partitioned by day. Any engine that reads hive-partitioned Parquet can then
answer the questions; the portable ones (:data:`PORTABLE`) are plain SQL over
``turns`` and run on Spark SQL unchanged but for the parameter markers (DuckDB's
``$name`` becomes Spark's ``:name``)::

    from analyzer.questions.spark import local_session, register_turns, run_question

    spark = local_session()                      # or your cluster's SparkSession
    register_turns(spark, "s3a://lake/glm-turns/")   # the export, wherever it lives
    rows = run_question(spark, "classes_by_day", model="glm%")

pyspark is not a dependency of the analyzer: install it where Spark runs.
tests/unit/questions/test_spark.py runs these questions on Spark in local mode and on DuckDB
over the same export and checks the counts agree.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from analyzer.store.asking import bind_params, resolve, substitute_placeholders

#: Questions written in the SQL that DuckDB and Spark SQL share (no macros,
#: QUALIFY, GROUP BY ALL, list functions or DuckDB-only aggregates).
PORTABLE = ("classes_by_day", "failures_by_day", "failures_by_client")


def to_spark_sql(sql: str) -> str:
    """``$name`` placeholders (outside strings and comments) as Spark's ``:name`` markers."""
    return substitute_placeholders(sql, r":\1")


def local_session(app_name: str = "analyzer", master: str = "local[1]"):
    """A small local SparkSession set up like the analyzer's DuckDB: UTC, timestamps without zone.

    ``spark.sql.timestampType = TIMESTAMP_NTZ`` makes ``CAST(x AS TIMESTAMP)`` mean
    what it means in DuckDB (the export's ``ts`` is a UTC time without a zone).
    """
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.timestampType", "TIMESTAMP_NTZ")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def register_turns(spark, parquet_dir: str, view: str = "turns") -> None:
    """Register the export at ``parquet_dir`` (hive ``day=`` folders) as a temp view."""
    spark.read.parquet(str(parquet_dir)).createOrReplaceTempView(view)


def _spark_value(v: Any) -> Any:
    # Times go as text: Spark would read a naive datetime in the driver's local zone.
    if isinstance(v, datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, date):
        return v.isoformat()
    return v


def run_question(spark, name_or_sql: str, **params: Any) -> list[dict[str, Any]]:
    """Run a ``queries/`` question (or SQL text) on Spark SQL; return the rows as dicts.

    Parameters bind exactly as :func:`analyzer.query` binds them (declared ones
    default to NULL, ``since``/``until`` parsed as ISO 8601 in UTC).
    """
    query = resolve(name_or_sql)
    values = {k: _spark_value(v) for k, v in bind_params(query, params).items()}
    df = spark.sql(to_spark_sql(query.sql), args=values) if values else spark.sql(query.sql)
    return [row.asDict() for row in df.collect()]
