"""One guard for every engine: a question reads the database's relations and calls allowed functions.

The escapes a hostile (or careless) user tried are refused on DuckDB (a database
and a lake, through the real command) and on Spark (refused before a JVM starts;
Spark's own locks are tested on a real local session), and by the notebook's
``analyzer.query`` on a path. Every question, view and table of the catalog
passes the guard on both engines, so the gate's questions still answer.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import analyzer
from analyzer.core.errors import ExitCode
from analyzer.questions.guard import QuestionRefused, check_question
from analyzer.questions.spark.lake import lake_relations
from analyzer.questions.sqlrun import WriteRefused, duckdb_relations
from analyzer.store.catalog import load_queries
from tests.support.week import build_week_db
from tests.support.services import need_spark
from tests.support.cli import analyze
from tests.support.fresh_db import fresh_connection, fresh_db

SECRET = "not-for-questions-7f3a"

#: The escapes of issue 47 and their like: (SQL with {secret} for a file outside, what the refusal names).
ESCAPES = [
    ('SELECT * FROM "text"."{secret}"', '"text"'),
    ('SELECT * FROM "parquet"."{lake_parent}/other/turns"', '"parquet"'),
    ('SELECT * FROM "csv"."{secret}"', '"csv"'),
    ("SELECT reflect('java.lang.System', 'getenv', 'HOME') AS v", "reflect()"),
    ("SELECT java_method('java.lang.System', 'getenv', 'HOME') AS v", "java_method()"),
    ("SELECT reflect('org.apache.hadoop.fs.FileUtil', 'chmod', '{secret}', '777') AS v", "reflect()"),
    ("SELECT * FROM read_text('{secret}')", "read_text()"),
    ("SELECT * FROM read_csv('{secret}')", "read_csv()"),
    ("SELECT * FROM glob('{lake_parent}/*')", "glob()"),
    ("SELECT * FROM query('SELECT 42')", "query()"),
    ("SELECT getenv('HOME') AS v", "getenv()"),
    ("SELECT current_setting('temp_directory') AS v", "current_setting()"),
    ("SELECT * FROM '{secret}'", "not a relation or view"),
    ("SELECT * FROM memory.main.turns", '"memory"."main"."turns"'),
    ("SELECT count(*) AS n FROM turns WHERE model IN (SELECT content FROM read_text('{secret}'))", "read_text()"),
]


@pytest.fixture(scope="module")
def week(tmp_path_factory) -> tuple[Path, Path, Path]:
    """The small week as a database and as a lake, and a file outside both."""
    tmp = tmp_path_factory.mktemp("guard")
    db = build_week_db(fresh_db(tmp / "week.duckdb"))  # starts as a copied empty one (tests/support/fresh_db.py)
    p = analyze("export", "--lake", str(tmp / "lake"), "--db", str(db))
    assert p.returncode == 0, p.stderr
    secret = tmp / "secret.txt"
    secret.write_text(SECRET)
    return db, tmp / "lake", secret


def _sql(template: str, week) -> str:
    _db, lake, secret = week
    return template.format(secret=secret, lake_parent=lake.parent)


def _refused(p: subprocess.CompletedProcess, names: str) -> None:
    assert p.returncode == ExitCode.USAGE, p.stdout + p.stderr
    assert SECRET not in p.stdout + p.stderr and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("analyze: error: ") and names in lines[0], p.stderr


# ---------------------------------------------------------------------------
# The guard itself


def test_every_catalog_question_view_and_table_passes_on_both_engines(tmp_path):
    con = fresh_connection(tmp_path / "fresh.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    try:
        relations = duckdb_relations(con)
    finally:
        con.close()
    spark_relations = lake_relations()
    checked = 0
    for name, q in load_queries().items():
        if q.kind == "macro":
            continue
        check_question(q.sql, relations, label=name)
        check_question(q.sql, spark_relations, engine="spark", label=name)
        checked += 1
    assert checked > 60


@pytest.mark.parametrize("sql", [
    "SELECT model, count(*) AS n, quantile_cont(latency_ms, 0.95) AS p95 FROM turns GROUP BY ALL",
    "WITH s AS (SELECT * FROM sessions) SELECT count(*) FROM s JOIN turns USING (session_id)",
    "SELECT raw ->> '$.model' AS m, json_extract_string(raw, '$.type') AS t FROM records LIMIT 1",
    "SELECT list_transform([1, 2], x -> x + 1) AS l, epoch_ms(ts) AS e, strftime(ts, '%Y') AS y FROM turns",
    "SELECT date_trunc('hour', ts) AS h, string_agg(DISTINCT model, ',') AS m FROM main.turns GROUP BY 1",
    "SELECT * FROM range(3)",
    "SELECT row_number() OVER (PARTITION BY model ORDER BY ts) AS k, wilson_low(1, 2) AS w FROM turns",
    "SELECT * FROM turns WHERE in_scope(ts, model, $since, $until, $model, $models)",
])
def test_ordinary_questions_pass(sql, tmp_path):
    con = fresh_connection(tmp_path / "fresh.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    try:
        check_question(sql, duckdb_relations(con))
    finally:
        con.close()


@pytest.mark.parametrize("sql,names", [
    ("COPY (SELECT 1) TO '/tmp/x.csv'", "COPY"), ("INSTALL httpfs", "INSTALL"), ("LOAD httpfs", "LOAD"),
    ("ATTACH 'x.duckdb'", "ATTACH"), ("SET memory_limit = '8GB'", "SET"), ("PRAGMA enable_profiling", "PRAGMA"),
    ("EXPLAIN SELECT * FROM read_text('x')", "read_text()"), ("DESCRIBE 'x.csv'", "not a relation"),
])
def test_statements_that_are_not_questions_are_refused(sql, names):
    with pytest.raises(QuestionRefused, match=".*".join(map(re.escape, names.split()))) as err:
        check_question(sql, ["turns"])
    assert err.value.exit_code == ExitCode.USAGE


def test_spark_runs_queries_only():
    check_question("SELECT * FROM turns", ["turns"], engine="spark")
    for sql in ("DESCRIBE turns", "EXPLAIN SELECT 1", "PRAGMA table_info('turns')"):
        with pytest.raises(QuestionRefused, match="not a question"):
            check_question(sql, ["turns"], engine="spark")


# ---------------------------------------------------------------------------
# DuckDB: the database and the lake, through the command


@pytest.mark.parametrize("template,names", ESCAPES)
def test_every_escape_is_refused_on_the_database_and_the_lake(week, template, names):
    db, lake, _ = week
    sql = _sql(template, week)
    _refused(analyze("sql", sql, "--db", str(db)), names)
    _refused(analyze("sql", sql, "--lake", str(lake)), names)


def test_install_is_said_as_install_and_a_lake_offers_no_write(week):
    db, lake, _ = week
    p = analyze("sql", "INSTALL httpfs", "--db", str(db))
    assert p.returncode == 2 and "INSTALL is not a read-only statement" in p.stderr and "LOAD" not in p.stderr
    assert "--write" in p.stderr  # on a database, the remedy is --write
    p = analyze("sql", "CREATE TABLE t AS SELECT 1", "--lake", str(lake))
    assert p.returncode == 2 and "a lake is read, never written" in p.stderr and "pass --write" not in p.stderr
    p = analyze("sql", "SELECT 1", "--lake", str(lake), "--write")
    assert p.returncode == 2 and p.stderr.strip() == (
        "analyze: error: --write is not available with --lake: a lake is read, never written")


def test_write_opens_the_database_for_anything(week, tmp_path):
    """--write is the user's explicit choice: no guard (the read-only default's), DuckDB's own rules."""
    db, _, _ = week
    copy = shutil.copy(db, tmp_path / "copy.duckdb")
    out = tmp_path / "out.csv"
    p = analyze("sql", f"COPY (SELECT count(*) AS n FROM turns) TO '{out}' (HEADER)", "--db", str(copy), "--write")
    assert p.returncode == 0, p.stderr
    assert out.read_text().splitlines()[0] == "n"


# ---------------------------------------------------------------------------
# The notebook


def test_query_on_a_path_is_guarded(week, tmp_path):
    db, _, secret = week
    target = tmp_path / "copied.csv"
    with pytest.raises(WriteRefused, match="COPY is not a read-only statement"):
        analyzer.query(f"COPY (SELECT * FROM turns) TO '{target}'", db=db)
    assert not target.exists()
    with pytest.raises(QuestionRefused, match=r"read_text\(\)"):
        analyzer.query(f"SELECT * FROM read_text('{secret}')", db=db)
    with pytest.raises(QuestionRefused, match=r"read_text\(\)"):
        analyzer.query(f"SELECT * FROM read_text('{secret}')", db=str(db))
    ro = analyzer.connect(db, read_only=True)
    try:
        with pytest.raises(QuestionRefused, match='"parquet"'):
            analyzer.query('SELECT * FROM "parquet"."x.parquet"', db=ro)
        assert analyzer.query("SELECT count(*) AS n FROM turns", db=ro)["n"][0] > 0
    finally:
        ro.close()
    assert analyzer.query("failures_by_day", db=db, model="glm%").height > 0


def test_query_on_a_writable_connection_the_caller_opened_runs_anything(week, tmp_path):
    db, _, _ = week
    copy = shutil.copy(db, tmp_path / "mine.duckdb")
    target = tmp_path / "counts.csv"
    con = analyzer.connect(copy)  # read-write, on purpose
    try:
        analyzer.query(f"COPY (SELECT count(*) AS n FROM turns) TO '{target}' (HEADER)", db=con)
    finally:
        con.close()
    assert target.read_text().splitlines()[0] == "n"


# ---------------------------------------------------------------------------
# Spark: refused before a JVM starts; Spark's own locks on a real session


@pytest.mark.spark
@pytest.mark.parametrize("template,names", ESCAPES)
def test_every_escape_is_refused_on_spark(week, template, names):
    _db, lake, _ = week
    _refused(analyze("sql", _sql(template, week), "--engine", "spark", "--lake", str(lake)), names)


def test_spark_refuses_what_duckdb_refuses_before_starting(week, monkeypatch):
    """No JVM for a refused question: the guard runs on the question's DuckDB SQL."""
    import io

    import analyzer.questions.spark as spark_module
    from analyzer.jobs.sql import run_sql

    def no_jvm(*args, **kwargs):
        raise AssertionError("a Spark session was started for a refused question")

    monkeypatch.setattr(spark_module, "local_session", no_jvm)
    _db, lake, secret = week
    with pytest.raises(QuestionRefused, match=r"reflect\(\)"):
        run_sql("SELECT reflect('java.lang.System', 'getenv', 'HOME')", engine="spark", lake=lake,
                out=io.StringIO(), err=io.StringIO())
    with pytest.raises(WriteRefused, match="a lake is read, never written"):
        run_sql(f"COPY (SELECT 1) TO '{secret}'", engine="spark", lake=lake, out=io.StringIO(), err=io.StringIO())


@pytest.mark.spark
def test_spark_session_is_locked_down_behind_the_guard(week):
    """Belt and braces: the session `analyze sql --engine spark` runs in cannot read files or reflect."""
    need_spark()
    from analyzer.questions.spark import local_session, lock_down

    _db, _lake, secret = week
    spark = local_session("analyzer-guard-test")
    try:
        assert spark.sql(f"SELECT reflect('java.lang.String', 'valueOf', '{SECRET}') AS v").collect()[0].v == SECRET
        assert lock_down(spark) == ["java_method", "reflect", "try_reflect"]
        refused = {f"SELECT * FROM text.`{secret}`": "TABLE_OR_VIEW_NOT_FOUND",
                   f"SELECT reflect('java.lang.String', 'valueOf', '{SECRET}')": "UNRESOLVED_ROUTINE",
                   "SELECT java_method('java.lang.System', 'getenv', 'HOME')": "UNRESOLVED_ROUTINE",
                   "SELECT try_reflect('java.lang.System', 'getenv', 'HOME')": "UNRESOLVED_ROUTINE"}
        for sql, why in refused.items():
            with pytest.raises(Exception, match=why):
                spark.sql(sql).collect()
        assert spark.sql("SELECT count(*) AS n FROM range(3)").collect()[0].n == 3  # questions still run
    finally:
        spark.stop()
