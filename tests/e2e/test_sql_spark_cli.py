"""`analyze sql NAME --engine spark --lake DIR`: the same rows as on the database, in every format.

One question through the real command (the gate, tests/e2e/test_spark_gate.py,
covers every question): a lake written by `analyze export --lake`, then the
question on the database, on the lake through DuckDB and on the lake through a
local Spark, byte for byte the same table, CSV and JSON on stdout.

Skipped only on a developer machine without pyspark or Java; under CI (env CI
set) a missing engine is a failure, not a skip.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.jobs.sql import run_sql
from analyzer.core.errors import AnalyzerError
from analyzer.outputs.lake import export_lake
from analyzer.store.db import connect
from tests.support.week import build_week_db
from tests.support.services import need_spark
from tests.support.cli import analyze

pytestmark = pytest.mark.spark

QUESTION = "failures_by_day"
PARAMS = {"model": "glm%", "since": "2026-11-16T00:00:00.5Z"}


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("sqlspark")
    db = build_week_db(tmp / "week.duckdb")
    p = analyze("export", "--lake", str(tmp / "lake"), "--db", str(db))
    assert p.returncode == 0, p.stderr
    return db, tmp / "lake"


def _rows(fmt: str, **where) -> str:
    out, err = io.StringIO(), io.StringIO()
    run_sql(QUESTION, params=PARAMS, fmt=fmt, out=out, err=err, **where)
    return out.getvalue()


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_the_lake_through_duckdb_answers_as_the_database(lake, fmt):
    db, lake_dir = lake
    on_db = _rows(fmt, db=db)
    assert on_db.count("\n") > 3
    assert _rows(fmt, lake=lake_dir) == on_db


def test_spark_answers_as_the_database_in_every_format(lake):
    need_spark()
    db, lake_dir = lake
    for fmt in ("table", "csv"):
        assert _rows(fmt, engine="spark", lake=lake_dir) == _rows(fmt, db=db), fmt
    # The command as a user runs it: the options reach the engine, rows on stdout, the count last on stderr.
    args = ["sql", QUESTION, "--format", "json", *[a for k, v in PARAMS.items() for a in ("--param", f"{k}={v}")]]
    p = analyze(*args, "--engine", "spark", "--lake", str(lake_dir))
    assert p.returncode == 0, p.stderr[-2000:]
    on_db = analyze(*args, "--db", str(db))
    assert p.stdout == on_db.stdout and '"failed_turns"' in p.stdout
    assert p.stderr.strip().splitlines()[-1] == on_db.stderr.strip()


def test_spark_needs_a_lake_and_a_known_engine(lake):
    db, lake_dir = lake
    with pytest.raises(AnalyzerError, match="--lake"):
        run_sql(QUESTION, engine="spark", db=db, out=io.StringIO(), err=io.StringIO())
    with pytest.raises(AnalyzerError, match="--engine 'trino'"):
        run_sql(QUESTION, engine="trino", lake=lake_dir, out=io.StringIO(), err=io.StringIO())
    with pytest.raises(AnalyzerError, match="never written"):
        run_sql(QUESTION, lake=lake_dir, write=True, out=io.StringIO(), err=io.StringIO())


def test_spark_says_a_wrong_lake_before_starting(lake, tmp_path, monkeypatch):
    import analyzer.questions.spark as spark_module

    def no_jvm(*args, **kwargs):
        raise AssertionError("a Spark session was started for a lake that cannot be read")

    monkeypatch.setattr(spark_module, "local_session", no_jvm)
    (tmp_path / "_manifest.json").write_text('{"format": "something-else"}')
    with pytest.raises(AnalyzerError, match="not an analyzer lake"):
        run_sql(QUESTION, engine="spark", lake=tmp_path, out=io.StringIO(), err=io.StringIO())
    with pytest.raises(AnalyzerError, match="read as a pattern"):
        run_sql(QUESTION, engine="spark", lake=str(tmp_path / "lake*"), out=io.StringIO(), err=io.StringIO())


def test_spark_rows_into_a_closed_pipe_end_quietly(lake, tmp_path):
    need_spark()
    _, lake_dir = lake
    cmd = (f"{sys.executable} -m analyzer.cli.app sql 'SELECT * FROM range(200000)' "
           f"--engine spark --lake '{lake_dir}' | head -1")
    p = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd}"], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 1, p.stderr[-2000:]
    assert "Traceback" not in p.stderr and "error" not in p.stderr.lower(), p.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []  # Spark's warehouse folder went to the temp dir, not here


def test_spark_reads_the_lakes_own_turns(tmp_path):
    """`--engine spark` answers from the tables the lake holds, as `--lake` on DuckDB does: a lake whose
    `turns` lacks one turn of its records says so on both engines (recomputed, Spark would count it)."""
    need_spark()
    db = build_week_db(tmp_path / "week.duckdb")
    con = connect(db)
    try:
        whole = con.execute("SELECT count(*) FROM turns").fetchone()[0]
        con.execute("DELETE FROM turns WHERE request_id = (SELECT min(request_id) FROM turns)")
        export_lake(con, tmp_path / "lake")
    finally:
        con.close()
    args = ("sql", "SELECT count(*) AS n FROM turns", "--format", "csv", "--lake", str(tmp_path / "lake"))
    on_duckdb, on_spark = analyze(*args), analyze(*args, "--engine", "spark")
    assert on_duckdb.returncode == on_spark.returncode == 0, on_spark.stderr[-2000:]
    assert on_spark.stdout == on_duckdb.stdout == f"n\n{whole - 1}\n"
