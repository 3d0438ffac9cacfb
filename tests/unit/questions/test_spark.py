"""Past one machine: the same classification questions on Spark SQL and on DuckDB, same counts.

The classified turns are exported as day-partitioned Parquet (`analyze export`);
Spark (pyspark, local mode, one core) and DuckDB each read that export and run
the portable question files of queries/ (translated by analyzer.questions.spark.sql;
DuckDB's `$name` markers are Spark's `:name`). test_spark_gate.py runs every question over a lake. The results must be identical, and equal to what the database
itself answers.

Skipped only on a developer machine without pyspark or Java; under CI (env CI
set) a missing engine is a failure, not a skip.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from datetime import datetime

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime", allow_module_level=True)

from analyzer.store.db import connect  # noqa: E402
from analyzer.outputs.export import export_parquet, open_export  # noqa: E402
from analyzer.outputs.rows import write_json  # noqa: E402
from analyzer.questions.spark import PORTABLE, local_session, register_turns, run_question, to_spark_sql  # noqa: E402
from analyzer.store.asking import execute  # noqa: E402
from tests.unit.questions.test_queries import build_week_db  # noqa: E402

PARAMS = [{}, {"since": "2026-11-17", "until": "2026-11-18T12:00:00Z", "model": "glm%"}, {"model": "qwen3"}]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """The small week, classified in DuckDB and exported; also the database's own answers."""
    tmp = tmp_path_factory.mktemp("spark")
    con = connect(build_week_db(tmp / "week.duckdb"), read_only=True)
    try:
        export_parquet(con, tmp / "turns")
        expected = {(q, i): _rows(execute(con, q, p)) for q in PORTABLE for i, p in enumerate(PARAMS)}
    finally:
        con.close()
    return tmp / "turns", expected


@pytest.fixture(scope="module")
def spark(export):
    session = local_session("analyzer-test")
    register_turns(session, str(export[0]))
    yield session
    session.stop()


def _rows(cur) -> list[dict]:
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def _canonical(rows: list[dict]) -> list[tuple]:
    """Rows as comparable tuples, in a fixed order (engines sort NULLs differently)."""
    def value(v):
        return v.isoformat() if isinstance(v, datetime) else str(v) if v is not None else None
    return sorted((tuple((k, value(v)) for k, v in r.items()) for r in rows), key=repr)


@pytest.mark.parametrize("param_set", range(len(PARAMS)))
@pytest.mark.parametrize("question", PORTABLE)
def test_same_answers_on_spark_and_duckdb(spark, export, question, param_set):
    parquet_dir, expected = export
    params = PARAMS[param_set]
    on_spark = run_question(spark, question, **params)
    lake = open_export(parquet_dir)
    try:
        on_duckdb = _rows(execute(lake, question, params))
    finally:
        lake.close()
    assert on_spark, f"{question} {params}: Spark found nothing"
    assert _canonical(on_spark) == _canonical(on_duckdb) == _canonical(expected[(question, param_set)])


def test_class_counts_per_model_and_day(spark, export):
    """The turn-classification count itself, column by column, on both engines."""
    rows = run_question(spark, "classes_by_day")
    counts = {(str(r["day"]), r["model"], r["incident_class"]): r["turns"] for r in rows}
    assert counts[("2026-11-16", "glm-5", "tool-history-5xx")] == 2
    assert counts[("2026-11-17", "glm-5", "wedged-pod")] == 1
    assert counts[("2026-11-18", "qwen3", "rate-limited")] == 1
    assert sum(counts.values()) == 17


def test_parameter_markers_translate_outside_strings_only():
    sql = "SELECT '$keep' AS a, $since AS b -- $comment\nFROM t WHERE x = $model"
    spark_sql = to_spark_sql(sql)
    assert "'$keep'" in spark_sql and ":since AS b" in spark_sql and "x = :model" in spark_sql
    assert "$since" not in spark_sql and ":comment" not in spark_sql and ":keep" not in spark_sql


def test_numbers_print_as_the_same_json_types(spark, export):
    """A division by a number with a point is a DOUBLE on both engines, and so is ceil() of one
    (Spark alone would give a DECIMAL and a BIGINT: `14` where DuckDB prints `14.0`)."""
    sql = ("SELECT count(*) / 60.0 AS per_minute, round(count(*) / 2.0, 1) AS halves, "
           "ceil(count(*) / 4) AS quarters, floor(avg(latency_ms)) AS floor_ms, count(*) * 1.5 AS scaled FROM turns")
    lake = open_export(export[0])
    try:
        cur = execute(lake, sql, {})
        duck = _json([d[0] for d in cur.description], cur.fetchall())
    finally:
        lake.close()
    df = spark.sql(to_spark_sql(sql))
    on_spark = _json(df.columns, [tuple(r) for r in df.collect()])
    assert on_spark == duck
    assert [type(v) for v in json.loads(duck)[0].values()] == [float, float, float, float, float]


def _json(columns, rows) -> str:
    out = io.StringIO()
    write_json(columns, rows, out)
    return out.getvalue()
