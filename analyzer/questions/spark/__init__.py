"""Past one machine: the questions of ``queries/`` on Spark SQL.

``analyze export --lake DIR`` writes every relation a question reads as Parquet
with a manifest. On Spark, :func:`register_lake` registers the lake's tables,
then creates the catalog's views and recomputes its materialized tables (turns,
sessions, ladder_baseline) from their SQL; :func:`run_question` answers any
question of ``queries/``::

    from analyzer.questions.spark import local_session, register_lake, run_question

    spark = local_session()                       # or your cluster's SparkSession
    register_lake(spark, "s3a://lake/analyzer/")  # the export, wherever it lives
    rows = run_question(spark, "classes_by_day", model="glm%")

The SQL is the DuckDB SQL of ``queries/`` translated by sqlglot, with the
catalog's macros inlined and the project's rewrite rules applied
(:mod:`analyzer.questions.spark.sql`); two questions have hand-written Spark
versions in ``queries/spark/``. docs/spark.md says what is exact, how to run on a
cluster, and what it costs. tests/e2e/test_spark_gate.py runs every
question and view on DuckDB and on Spark over the same data and fails on any
difference.

pyspark is not a dependency of the analyzer: install the ``spark`` extra
(``pip install 'analyzer[spark]'``) where Spark runs.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from analyzer.questions.spark.lake import lake_relations, question_frame, register_lake, run_question
from analyzer.questions.spark.lockdown import LOCKED_CONF, lock_down
from analyzer.questions.spark.sql import UnsupportedConstruct, relations_read, spark_sql, to_spark_sql, transpile

__all__ = ["UnsupportedConstruct", "cluster_session", "lake_relations", "local_session", "lock_down",
           "question_frame", "register_lake", "relations_read", "run_question", "spark_sql", "to_spark_sql",
           "transpile"]


def local_session(app_name: str = "analyzer", master: str = "local[1]"):
    """A small local SparkSession set up like the analyzer's DuckDB: UTC, timestamps without zone.

    ``spark.sql.timestampType = TIMESTAMP_NTZ`` makes ``CAST(x AS TIMESTAMP)`` mean
    what it means in DuckDB (the lake's times are UTC times without a zone). SQL on
    files is off (:data:`analyzer.questions.spark.lockdown.LOCKED_CONF`): a question
    reads registered relations only.
    """
    return _session(app_name, master, {"spark.sql.shuffle.partitions": "1"})


def cluster_session(master: str | None = None, app_name: str = "analyzer", conf: dict[str, str] | None = None):
    """A SparkSession on ``master`` set up as :func:`local_session` sets one up, for work that is spread.

    ``master``: a cluster's URL (``spark://host:7077``, ``yarn``, ``k8s://...``) or
    ``local[N]``; None under ``spark-submit`` takes the one it was given (else
    ``local[*]``). ``conf``: Spark settings, applied last (``spark.pyspark.python``
    names the executors' Python, as spark-submit's ``--conf`` does). A shuffle
    spreads over twice the cores Spark has, unless ``conf`` says otherwise.
    """
    conf = dict(conf or {})
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        master = "local[*]"
    spark = _session(app_name, master, conf)
    if "spark.sql.shuffle.partitions" not in conf:
        spark.conf.set("spark.sql.shuffle.partitions", str(2 * spark.sparkContext.defaultParallelism))
    return spark


def _local_python() -> str:
    """The executors' Python of a session on this machine: ``$PYSPARK_PYTHON``, else this interpreter.

    pyspark's own default is ``python3`` from PATH, which need not hold the analyzer
    or duckdb (an ``analyze`` installed with pipx, a venv run without activating it):
    every question then failed in its executors with ``No module named 'duckdb'``.
    """
    return os.environ.get("PYSPARK_PYTHON") or sys.executable


@contextmanager
def _executors_python(python: str | None) -> Iterator[None]:
    """``PYSPARK_PYTHON`` set to ``python`` while a session's context starts (pyspark reads it then, once), and
    as it was after: one session's executors' Python is not every later session's in the process."""
    if python is None:
        yield
        return
    saved = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = python
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = saved


def _session(app_name: str, master: str | None, conf: dict[str, str]):
    import getpass
    import tempfile

    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in LOCKED_CONF.items():
        builder = builder.config(key, value)
    if master is not None:
        builder = builder.master(master)
    builder = (
        builder.appName(app_name)
        # Only temp views are made, but Spark creates its warehouse folder anyway: in the
        # temp folder, not as ./spark-warehouse wherever `analyze sql` ran.
        .config("spark.sql.warehouse.dir",
                str(Path(tempfile.gettempdir()) / f"analyzer-spark-warehouse-{getpass.getuser()}"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.timestampType", "TIMESTAMP_NTZ")
        # Adaptive execution re-plans each stage as it runs: worth it on a cluster's
        # big joins, pure overhead on one machine's small lake.
        .config("spark.sql.adaptive.enabled", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    # The executors' Python: the conf's, as spark-submit's --conf gives it; on this machine, ours.
    python = conf.get("spark.pyspark.python")
    if python is None and master is not None and master.startswith("local"):
        python = _local_python()
    with _executors_python(python):
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

