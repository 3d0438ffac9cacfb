"""`analyze export --parquet DIR`: the classified turns as day-partitioned Parquet, replaced on re-export."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analyzer.store.db import connect
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.outputs.export import MANIFEST, export_parquet, open_export
from analyzer.store.asking import execute
from tests.unit.questions.test_queries import build_week_db


def analyze(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analyzer.cli.app", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    return build_week_db(tmp_path_factory.mktemp("export") / "week.duckdb")


def _files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def test_export_by_day_as_a_real_process(db, tmp_path):
    out = tmp_path / "lake" / "turns"
    p = analyze("export", "--parquet", str(out), "--db", str(db))
    assert p.returncode == 0, p.stderr
    assert "exported 17 turns in 3 day partition(s) (2026-11-16 .. 2026-11-18)" in p.stdout
    assert _files(out) == [MANIFEST, "day=2026-11-16/data_0.parquet", "day=2026-11-17/data_0.parquet",
                           "day=2026-11-18/data_0.parquet"]
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["rows"] == 17 and manifest["days"] == ["2026-11-16", "2026-11-17", "2026-11-18"]
    # Every file holds only its day; the partition column lives in the path.
    for day in manifest["days"]:
        t = pq.read_table(out / f"day={day}" / "data_0.parquet")
        assert "day" not in t.column_names
        assert {str(ts.as_py().date()) for ts in t.column("ts")} == {day}


def test_the_export_holds_every_turn_and_column(db, tmp_path):
    out = tmp_path / "x"
    con = connect(db, read_only=True)
    try:
        report = export_parquet(con, out)
        columns = [r[0] for r in con.execute("DESCRIBE turns").fetchall()]
        by_class = sorted(con.execute("SELECT model, incident_class, count(*) FROM turns GROUP BY ALL").fetchall())
        ladders = con.execute("SELECT request_id, ladder::VARCHAR FROM turns WHERE ladder IS NOT NULL").fetchall()
    finally:
        con.close()
    assert report.rows == 17 and report.files == 3
    lake = open_export(out)
    try:
        assert [r[0] for r in lake.execute("DESCRIBE turns").fetchall()] == columns + ["day"]
        got = sorted(lake.execute("SELECT model, incident_class, count(*) FROM turns GROUP BY ALL").fetchall())
        assert got == by_class
        # JSON columns travel as text that still parses
        exported = dict(lake.execute("SELECT request_id, ladder FROM turns WHERE ladder IS NOT NULL").fetchall())
        assert exported == dict(ladders) and json.loads(exported["e0000001"])["outcome"] == "recovered"
        # the portable questions run on the export as on the database
        rows = execute(lake, "failures_by_day", {"model": "glm%"}).fetchall()
        assert rows
    finally:
        lake.close()


def test_re_export_replaces_and_leaves_other_files_alone(db, tmp_path):
    out = tmp_path / "x"
    con = connect(db, read_only=True)
    try:
        export_parquet(con, out)
        first = _files(out)
        stale = out / "day=2020-01-01"
        stale.mkdir()
        (stale / "data_0.parquet").write_bytes(b"old")
        (out / "notes.txt").write_text("mine")
        report = export_parquet(con, out)
    finally:
        con.close()
    assert report.removed_days == ["2020-01-01"]
    assert _files(out) == sorted(first + ["notes.txt"])
    assert (out / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind
    lake = open_export(out)
    try:
        assert lake.execute("SELECT count(*) FROM turns").fetchall()[0][0] == 17  # not doubled
    finally:
        lake.close()


def test_an_empty_database_exports_nothing(tmp_path):
    con = connect(tmp_path / "empty.duckdb")
    try:
        report = export_parquet(con, tmp_path / "x")
    finally:
        con.close()
    assert (report.rows, report.days, report.files) == (0, [], 0)
    assert _files(tmp_path / "x") == [MANIFEST]


def test_a_file_in_the_way_is_a_clear_error(db, tmp_path):
    (tmp_path / "file").write_text("x")
    con = connect(db, read_only=True)
    try:
        with pytest.raises(AnalyzerError) as err:
            export_parquet(con, tmp_path / "file")
    finally:
        con.close()
    assert err.value.exit_code == ExitCode.USAGE and "not a directory" in str(err.value)
    p = analyze("export", "--parquet", str(tmp_path / "x"), "--db", str(tmp_path / "missing.duckdb"))
    assert p.returncode == ExitCode.DATABASE and "no database at" in p.stderr and "Traceback" not in p.stderr
