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
from pathlib import Path

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
    if "spark.pyspark.python" in conf:  # read from the environment when the context starts, as spark-submit sets it
        os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not launched by spark-submit
        master = "local[*]"
    spark = _session(app_name, master, conf)
    if "spark.sql.shuffle.partitions" not in conf:
        spark.conf.set("spark.sql.shuffle.partitions", str(2 * spark.sparkContext.defaultParallelism))
    return spark


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
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark

