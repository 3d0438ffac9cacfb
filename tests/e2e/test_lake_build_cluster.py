"""`analyze lake build` on a real Spark standalone cluster: the sample week's lake, as `analyze` makes it.

A master and two workers (pyspark's own ``spark-class`` daemons, one core each)
run on 127.0.0.1 for the module (tools.spark_cluster). Their executors'
Python cannot import the analyzer: it has no site-packages, only a folder of this
environment's other packages, and no PYTHONPATH of ours; the first test proves
it on the cluster itself, and that the zip the command ships is what they import.

The command then builds the sample week's lake on the cluster from the raw files
(S3 chunks, gzipped kubectl stdout, metrics) in two runs, as a daily job would:
six days' chunks submitted with spark-submit (``analyzer/spark_submit.py``), then
the sixth day again with the seventh, the stdout and the metrics by ``analyze lake
build --master``. The lake must equal, relation for relation (columns, types,
rows), the one `analyze` + `analyze export --lake` writes from the whole week at
once, but for the columns that say when a run wrote a row
(tests.support.lakes.RUN_COLUMNS); every question and view of the gate (both
parameter sets) must answer on it, through DuckDB and through Spark (local, in
this process), as on the database, JSON types included. The builds' drivers are
processes of their own, as on a cluster: a driver's JVM starts with the
cluster's settings, and one this process started for another test would be
reused. The daemons are stopped by their process ids at the end.
(tests/unit/outputs/test_spark_lake.py: the days a run leaves alone are kept.)

Skipped only on a developer machine without pyspark or Java; under CI (env CI
set) a missing engine is a failure, not a skip.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.spark

from tests.support.services import need_spark  # noqa: E402

need_spark(module=True)

from analyzer.outputs.lake import export_lake  # noqa: E402
from analyzer.store.db import connect  # noqa: E402
from analyzer.store.lake import open_lake  # noqa: E402
from tests.support.cli import analyze  # noqa: E402
from tests.support.lakes import lake_differences  # noqa: E402
from tests.support.repo import REPO  # noqa: E402
from tools.spark_cluster import StandaloneCluster, spark_home  # noqa: E402
from analyzer.questions.spark import local_session, register_lake  # noqa: E402
from tests.support.questions import RUNNABLE  # noqa: E402
from tests.support.spark_questions import PARAM_SETS, SAMPLES, difference, on_duckdb, on_spark, params  # noqa: E402

SAMPLE = REPO / "sample_logs"
LOGS = [str(SAMPLE / "s3"), str(SAMPLE / "kubectl")]
METRICS = [str(SAMPLE / "metrics")]
DAYS = sorted(p.name for p in (SAMPLE / "s3").iterdir())

#: Run by a driver of the cluster: what the executors import, without and with the shipped zip.
PROBE = """
import importlib.util, json, sys, tempfile
from analyzer.questions.spark import cluster_session
from analyzer.questions.spark.ship import ship_package

def where(_):
    import importlib.util, sys
    spec = importlib.util.find_spec("analyzer")
    return {"analyzer": spec.origin if spec else None, "duckdb": importlib.util.find_spec("duckdb") is not None,
            "no_site": sys.flags.no_site, "path": sys.path}

spark = cluster_session(sys.argv[1], "probe")
try:
    before = spark.sparkContext.parallelize(range(2), 2).map(where).collect()
    with tempfile.TemporaryDirectory() as tmp:
        ship_package(spark, tmp)
        after = spark.sparkContext.parallelize(range(2), 2).map(where).collect()
    print(json.dumps({"before": before, "after": after}))
finally:
    spark.stop()
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with StandaloneCluster(tmp_path_factory.mktemp("spark-cluster")) as c:
        yield c
    assert all(p.poll() is not None for p in c.processes), "a Spark daemon outlived the test"


@pytest.fixture(scope="module")
def duckdb_lake(tmp_path_factory):
    """The sample week through `analyze` (ingest, metrics, classification) and `analyze export --lake`."""
    tmp = tmp_path_factory.mktemp("duck-week")
    p = analyze(*LOGS, "--metrics", *METRICS, "--db", tmp / "week.duckdb", "--json", cwd=tmp)
    assert p.returncode == 0, p.stderr[-2000:]
    con = connect(tmp / "week.duckdb", read_only=True)
    try:
        export_lake(con, tmp / "lake")
    finally:
        con.close()
    return tmp / "week.duckdb", tmp / "lake"


@pytest.fixture(scope="module")
def built(cluster, tmp_path_factory):
    """The sample week's lake built on the cluster in two runs, as a daily job builds it: the chunks of
    the first six days through spark-submit (``analyzer/spark_submit.py``), then the sixth day again,
    the seventh, every replica's stdout and the metrics through ``analyze lake build --master``.
    (lake, each run's JSON report, seconds of the second run)."""
    tmp = tmp_path_factory.mktemp("cluster-lake")
    lake = tmp / "lake"
    submit = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url,
              str(REPO / "analyzer" / "spark_submit.py")]
    # The driver is this environment's Python (the analyzer installed, its SQL files beside it); the
    # executors' is the cluster's, which cannot import the analyzer.
    env = {**cluster.driver_env(), "PYSPARK_DRIVER_PYTHON": sys.executable}
    first = subprocess.run([*submit, *[str(SAMPLE / "s3" / d) for d in DAYS[:6]], "--lake", str(lake), "--json"],
                           capture_output=True, text=True, env=env, cwd=tmp, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:] + cluster.logs()
    started = time.perf_counter()
    second = subprocess.run([sys.executable, "-m", "analyzer", "lake", "build", str(SAMPLE / "s3" / DAYS[5]),
                             str(SAMPLE / "s3" / DAYS[6]), str(SAMPLE / "kubectl"), "--metrics", *METRICS,
                             "--lake", str(lake), "--master", cluster.url, "--json"],
                            capture_output=True, text=True, env=cluster.driver_env(), cwd=tmp, timeout=900)
    seconds = time.perf_counter() - started
    assert second.returncode == 0, second.stderr[-3000:] + cluster.logs()
    return lake, json.loads(first.stdout), json.loads(second.stdout), seconds


def test_the_executors_import_the_analyzer_only_from_what_is_shipped(cluster, tmp_path):
    p = subprocess.run([sys.executable, "-c", PROBE, cluster.url], capture_output=True, text=True,
                       env=cluster.driver_env(), cwd=tmp_path, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:] + cluster.logs()
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    for executor in seen["before"]:
        # Its dependencies are there; the analyzer is not, and no site-packages or repository is on its path.
        assert executor["analyzer"] is None and executor["duckdb"] and executor["no_site"] == 1, executor
        # (Spark's own jars and Python zips may sit in a virtual environment inside the repository, as .ci/run's does.)
        assert not any(p.endswith("site-packages") or (p.startswith(str(REPO)) and not p.startswith(sys.prefix))
                       for p in executor["path"]), executor["path"]
    for executor in seen["after"]:
        assert "analyzer.zip" in executor["analyzer"] and str(REPO) not in executor["analyzer"], executor


def test_the_lake_built_on_the_cluster_is_the_one_analyze_exports(built, duckdb_lake, cluster):
    lake, first, second, seconds = built
    _, exported = duckdb_lake
    assert first["master"] == second["master"] == cluster.url and first["shipped"] and second["shipped"]
    assert first["days_written"] == DAYS[:6] and first["files_read"] == sum(_files(d) for d in DAYS[:6])
    # The sixth day's chunks read again (the lake's copies replaced), the seventh's and the stdout new:
    # every day has new records (the stdout's copies), and the lake is the week's.
    assert second["days_written"] == DAYS and second["files_read"] == _files(DAYS[5]) + _files(DAYS[6]) + 6
    assert second["skipped_files"] == [] and second["lake"]["tables"]["turns"] == 2553
    differences = lake_differences(exported, lake)
    assert not differences, "\n".join(f"{t}: {d}" for t, d in differences.items())
    print(f"\nsample week built on the standalone cluster (2 workers) by day, equal to the export; the run "
          f"that added the last day, the stdout and the metrics took {seconds:.0f} s")


def _files(day: str) -> int:
    return len(list((SAMPLE / "s3" / day).iterdir()))


def test_every_question_answers_on_the_built_lake_as_on_the_database(built, duckdb_lake):
    """Every question and view of the gate, both parameter sets, on the built lake (through DuckDB and
    through Spark) as on the database: the same columns, JSON types and rows."""
    lake, *_ = built
    db, _ = duckdb_lake
    on_db = connect(db, read_only=True)
    try:
        answers = {(n, s): on_duckdb(on_db, n, params(n, s)) for n in RUNNABLE for s in PARAM_SETS}
    finally:
        on_db.close()
    problems = {}
    on_lake = open_lake(lake)
    try:
        for (name, param_set), want in answers.items():
            problem = difference(want, on_duckdb(on_lake, name, params(name, param_set)))
            if problem:
                problems[("duckdb", name, param_set)] = problem
    finally:
        on_lake.close()
    spark = local_session("analyzer-built-lake", master="local[2]")
    try:
        register_lake(spark, str(lake))
        for (name, param_set), want in answers.items():
            if name in SAMPLES and param_set == "bound":
                continue  # a fixed sample drawn by another hash on Spark (the gate checks it is a sample)
            problem = difference(want, on_spark(spark, name, params(name, param_set)))
            if problem:
                problems[("spark", name, param_set)] = problem
    finally:
        spark.stop()
    assert not problems, "\n".join(f"{k}: {v}" for k, v in list(problems.items())[:10])
