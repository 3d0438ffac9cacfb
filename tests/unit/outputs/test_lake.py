"""The Parquet lake (`analyze export --lake DIR`): every relation, a manifest, the same answers.

The sample week (logs of both forms and metrics) is analyzed into a real DuckDB
file, exported as a lake, and read back through DuckDB (`analyzer.store.lake`):
every question and every view answers as the database does, with no parameters
and with bound ones; the report of the lake is the report of the database, byte
for byte. Spark reads the same lake in tests/unit/questions/.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from analyzer.core.errors import AnalyzerError
from analyzer.outputs.lake import NOT_EXPORTED, export_lake
from analyzer.store.asking import execute
from analyzer.store.catalog import load_queries
from analyzer.store.db import connect
from analyzer.store import migrations
from analyzer.store.lake import MANIFEST, open_lake, read_manifest
from tests.support.repo import REPO
from tests.support.cli import analyze
from tests.support.fresh_db import fresh_db

SAMPLE = REPO / "sample_logs"
QUERIES = load_queries()
QUESTIONS = sorted(n for n, q in QUERIES.items() if q.kind == "question")
RELATIONS = sorted(n for n, q in QUERIES.items() if q.kind in ("view", "table"))
BOUND = {"since": "2026-11-17", "until": "2026-11-19T12:00:00Z", "model": "glm%"}


@pytest.fixture(scope="module")
def week(tmp_path_factory) -> Path:
    """The sample week analyzed into a database, as the README's first command does."""
    db = fresh_db(tmp_path_factory.mktemp("lake") / "week.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    p = analyze(str(SAMPLE / "s3"), str(SAMPLE / "kubectl"), "--metrics", str(SAMPLE / "metrics"),
                "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    return db


@pytest.fixture(scope="module")
def lake(week, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lake") / "lake"
    p = analyze("export", "--lake", str(out), "--db", str(week), "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["path"] == str(out) and report["rows"] == sum(report["tables"].values())
    return out


@pytest.fixture(scope="module")
def both(week, lake):
    db, lk = connect(week, read_only=True), open_lake(lake)
    yield db, lk
    db.close()
    lk.close()


def _rows(con, name: str, params: dict) -> list[str]:
    sql = name if QUERIES[name].kind == "question" else f'SELECT * FROM "{name}"'
    return sorted(map(repr, execute(con, sql, params).fetchall()))


def test_the_manifest_says_what_each_relation_holds(week, lake):
    doc = read_manifest(lake)
    con = connect(week, read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY 1").fetchall()]
        assert set(doc["tables"]) == set(tables) - NOT_EXPORTED
        for name, entry in doc["tables"].items():
            assert entry["rows"] == con.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0], name
            assert entry["what"], name
        first, last = con.execute("SELECT min(ts), max(ts) FROM records").fetchall()[0]
        schema = con.execute("SELECT max(name) FROM _migrations").fetchall()[0][0]
    finally:
        con.close()
    assert doc["time_range"] == [f"{first.isoformat()}Z", f"{last.isoformat()}Z"]
    assert doc["schema"] == schema and doc["format_version"] == 2
    # Every file is listed with its size and rows: they add up to the relation's rows.
    for name, entry in doc["tables"].items():
        assert entry["files"] and sum(f["rows"] for f in entry["files"]) == entry["rows"], name
        for f in entry["files"]:
            assert (lake / name / f["path"]).stat().st_size == f["bytes"] and f["fingerprint"].startswith("2:")
    assert doc["tables"]["turns"]["kind"] == "materialized" and doc["tables"]["records"]["kind"] == "table"
    assert "ladder" in doc["tables"]["records"]["json_columns"]
    # The big relations are partitioned by day; the rest are one file.
    days = sorted(p.name for p in (lake / "records").iterdir())
    assert days and all(d.startswith("day=2026-11-") for d in days)
    assert doc["tables"]["records"]["partition"] == "day"
    assert [p.name for p in (lake / "pod_windows").iterdir()] == ["data_0.parquet"]


@pytest.mark.parametrize("params", [{}, BOUND], ids=["unbound", "bound"])
def test_every_question_and_view_answers_on_the_lake_as_on_the_database(both, params):
    db, lk = both
    differ, empty = [], []
    # A view or table takes no parameters: it is read whole, the same statement either way, so
    # it is compared once (unbound); the bound case compares the questions, which take them.
    for name in QUESTIONS + (RELATIONS if not params else []):
        p = params if QUERIES[name].kind == "question" else {}
        a, b = _rows(db, name, p), _rows(lk, name, p)
        if a != b:
            differ.append(name)
        if not a:
            empty.append(name)
    assert not differ, f"answers differ on the lake: {differ}"
    # Not vacuous: most questions have rows on the sample week.
    assert len(empty) < len(QUESTIONS) // 3, empty


def test_json_columns_come_back_as_json(both):
    _db, lk = both
    types = dict(lk.execute("SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'records'")
                 .fetchall())
    assert types["ladder"] == "JSON" and types["ts"] == "TIMESTAMP"
    assert "day" not in types  # the hive partition folder is not a column


def test_the_report_of_the_lake_is_the_report_of_the_database(week, lake, tmp_path):
    a = analyze("report", "--db", str(week), "-o", str(tmp_path / "db.html"))
    b = analyze("report", "--lake", str(lake), "-o", str(tmp_path / "lake.html"))
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    # Byte for byte but the minute each was rendered in (two renders may fall either side of one).
    rendered = re.compile(rb"<dd>\d{4}-\d\d-\d\d \d\d:\d\d UTC by <code>analyze report</code>")
    lake_html, db_html = ((tmp_path / n).read_bytes() for n in ("lake.html", "db.html"))
    assert len(rendered.findall(db_html)) == 1
    assert rendered.sub(b"", lake_html) == rendered.sub(b"", db_html)


def test_re_export_replaces_the_lake_and_its_answers_stay(week, tmp_path):
    out = tmp_path / "lake"
    con = connect(week, read_only=True)
    try:
        first = export_lake(con, out)
        (out / "stale_relation").mkdir()  # a relation an older database had
        doc = json.loads((out / MANIFEST).read_text())
        doc["tables"]["stale_relation"] = {"rows": 0, "columns": [], "partition": None}
        (out / MANIFEST).write_text(json.dumps(doc))
        again = export_lake(con, out)
    finally:
        con.close()
    assert again.tables == first.tables and again.removed == ["stale_relation"]
    assert not (out / "stale_relation").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left behind


def test_a_folder_that_is_not_a_lake_is_refused_and_kept(week, tmp_path):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    p = analyze("export", "--lake", str(other), "--db", str(week))
    assert p.returncode == 2 and "--lake" in p.stderr and "not a lake" in p.stderr
    assert (other / "notes.txt").read_text() == "keep me"
    p = analyze("export", "--db", str(week))
    assert p.returncode == 2 and "Missing option '--lake'" in p.stderr


def test_reading_no_lake_or_a_newer_one_is_a_clear_error(lake, tmp_path):
    with pytest.raises(AnalyzerError, match="no _manifest.json"):
        open_lake(tmp_path)
    newer = tmp_path / "newer"
    newer.mkdir()
    doc = json.loads((lake / MANIFEST).read_text())
    (newer / MANIFEST).write_text(json.dumps({**doc, "format_version": 99}))
    with pytest.raises(AnalyzerError, match="newer than this analyzer"):
        open_lake(newer)
    p = analyze("report", "--lake", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and "no _manifest.json" in p.stderr


def test_a_relation_with_missing_files_names_itself(lake, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / MANIFEST).write_text((lake / MANIFEST).read_text())
    with pytest.raises(AnalyzerError, match="relation "):
        open_lake(broken)


def test_the_lake_reads_only_what_the_manifest_names(lake):
    con = open_lake(lake)
    try:
        with pytest.raises(duckdb.CatalogException):
            con.execute("SELECT * FROM summary_cache").fetchall()
    finally:
        con.close()


def _edited(lake: Path, where: Path, edit) -> Path:
    """A copy of the lake's manifest in ``where``, changed by ``edit(doc)``, beside no data."""
    where.mkdir()
    doc = json.loads((lake / MANIFEST).read_text())
    edit(doc)
    (where / MANIFEST).write_text(json.dumps(doc))
    return where


def test_a_manifest_naming_a_path_or_a_quoted_column_is_refused(lake, tmp_path):
    outside = _edited(lake, tmp_path / "outside", lambda d: d["tables"].update({"../victim": {"columns": []}}))
    with pytest.raises(AnalyzerError, match="not a plain name"):
        open_lake(outside)
    quoted = _edited(lake, tmp_path / "quoted", lambda d: d["tables"]["records"]["columns"].append(['x" , 1 --', "VARCHAR"]))
    with pytest.raises(AnalyzerError, match="column that is not a plain"):
        open_lake(quoted)
    newline = _edited(lake, tmp_path / "newline", lambda d: d["tables"].update({"records\n": d["tables"]["records"]}))
    with pytest.raises(AnalyzerError, match="not a plain name"):
        open_lake(newline)
    short = _edited(lake, tmp_path / "short", lambda d: d["tables"]["records"]["columns"].append(["x"]))
    with pytest.raises(AnalyzerError, match="column that is not a plain"):
        open_lake(short)


def test_re_export_over_a_manifest_naming_a_path_removes_nothing_outside(week, tmp_path):
    out = tmp_path / "lake"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep me")
    con = connect(week, read_only=True)
    try:
        export_lake(con, out)
        doc = json.loads((out / MANIFEST).read_text())
        doc["tables"]["../victim"] = {"rows": 0, "columns": [], "partition": None}
        (out / MANIFEST).write_text(json.dumps(doc))
        with pytest.raises(AnalyzerError, match="will not replace .*not a plain name"):
            export_lake(con, out)
    finally:
        con.close()
    assert (victim / "keep.txt").read_text() == "keep me"


def test_a_lake_of_another_schema_says_export_again(lake, tmp_path):
    older = _edited(lake, tmp_path / "older", lambda d: d.update(schema="001_initial"))
    with pytest.raises(AnalyzerError, match="export it again"):
        open_lake(older)
    p = analyze("sql", "SELECT 1", "--lake", str(older))
    assert p.returncode == 2 and "export it again" in p.stderr


def test_sql_on_a_lake_reads_no_other_file(lake, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours")
    p = analyze("sql", f"SELECT content FROM read_text('{secret}')", "--lake", str(lake), "--format", "csv")
    assert p.returncode == 2 and "not yours" not in p.stdout, p.stdout + p.stderr
    ok = analyze("sql", "SELECT count(*) AS n FROM turns", "--lake", str(lake), "--format", "csv")
    assert ok.returncode == 0 and int(ok.stdout.splitlines()[1]) > 0, ok.stderr


def test_sql_takes_a_lake_or_a_database_not_both(week, lake):
    p = analyze("sql", "SELECT 1", "--lake", str(lake), "--db", str(week))
    assert p.returncode == 2 and "--db" in p.stderr and "--lake" in p.stderr
    p = analyze("sql", "SELECT 1", "--lake", "s3a://bucket/lake")
    assert p.returncode == 2 and "--engine spark" in p.stderr


def test_a_lake_path_read_as_a_pattern_is_refused_not_misread(week, lake, tmp_path):
    # `lake*` would also match the look-alike `lake-old`, `lake[s]` the folder `lakes`
    import shutil

    shutil.copytree(lake, tmp_path / "lake-old")
    shutil.copytree(lake, tmp_path / "lakes")
    for odd in ("lake*", "lake[s]", "lake?old", "lake{s}"):
        shutil.copytree(lake, tmp_path / odd)
        with pytest.raises(AnalyzerError, match="read as a pattern"):
            open_lake(tmp_path / odd)
    p = analyze("report", "--lake", str(tmp_path / "lake*"), "-o", str(tmp_path / "r.html"))
    assert p.returncode == 2 and "pattern" in p.stderr and not (tmp_path / "r.html").exists()
    p = analyze("export", "--lake", str(tmp_path / "new[1]"), "--db", str(week))
    assert p.returncode == 2 and "--lake" in p.stderr and "pattern" in p.stderr
    assert not (tmp_path / "new[1]").exists()


def test_a_database_of_an_older_schema_is_upgraded_before_export(week, tmp_path, monkeypatch):
    """Export reads the database read-only: one made before this analyzer's last migration is refused,
    saying to open it once with a command that writes (which migrates it); then it exports."""
    import shutil

    old = tmp_path / "old.duckdb"
    shutil.copy(week, old)
    # a migration after the database was made (one that changes no relation a lake holds)
    monkeypatch.setattr(migrations, "MIGRATIONS", [
        *migrations.MIGRATIONS, ("901_runs_index", lambda con: con.execute("CREATE INDEX runs_at ON runs (started_at)"))])
    con = connect(old, read_only=True)
    try:
        with pytest.raises(AnalyzerError, match="run `analyze --db DB` once to upgrade it"):
            export_lake(con, tmp_path / "lake")
    finally:
        con.close()
    assert not (tmp_path / "lake").exists()
    connect(old).close()  # what the message says to do: a connection that writes migrates it
    con = connect(old, read_only=True)
    try:
        export_lake(con, tmp_path / "lake")
    finally:
        con.close()
    assert read_manifest(tmp_path / "lake")["schema"] == "901_runs_index"
    open_lake(tmp_path / "lake").close()
