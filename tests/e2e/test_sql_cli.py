"""`analyze sql`: queries by name or text, parameters, formats, read-only by default, clear errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from analyzer.cli.app import main
from analyzer.store.db import connect
from analyzer.core.errors import ExitCode
from tests.support.week import build_week_db
from tests.support.cli import analyze


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    return build_week_db(tmp_path_factory.mktemp("sqlcli") / "week.duckdb")


@pytest.fixture
def sql(db, capsys):
    """Run `analyze sql ... --db DB` in this process; return (exit code, stdout, stderr)."""
    def run(*args: str, database: Path | None = None):
        with pytest.raises(SystemExit) as exit_info:
            main(["sql", *args, "--db", str(database or db)])
        out, err = capsys.readouterr()
        return exit_info.value.code or 0, out, err
    return run


def _turn_count(db: Path) -> int:
    con = connect(db, read_only=True)
    try:
        return con.execute("SELECT count(*) FROM turns").fetchall()[0][0]
    finally:
        con.close()


def test_json_on_stdout_row_count_on_stderr_as_a_real_process(db):
    p = analyze("sql", "failures_by_day", "--param", "model=glm-5", "--format", "json", "--db", str(db))
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)  # stdout is the result and nothing else
    assert rows and {r["model"] for r in rows} == {"glm-5"}
    assert {"day", "incident_class", "failed_turns", "rate"} <= set(rows[0])
    assert rows[0]["day"] == "2026-11-16"
    assert p.stderr.strip() == f"({len(rows)} rows)"


def test_table_by_default(sql):
    code, out, err = sql("classes_by_day")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["day", "model", "incident_class", "turns", "model_turns", "share"]
    assert set(lines[1]) <= {"-", " "}
    assert any("tool-history-5xx" in line and "glm-5" in line for line in lines[2:])
    assert err.strip().endswith("rows)")


def test_csv_with_time_and_model_params(sql):
    code, out, _ = sql("failures_by_day", "-p", "since=2026-11-17", "-p", "until=2026-11-18T00:00:00Z",
                       "-p", "model=qwen%", "--format", "csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["day"], r["model"], r["incident_class"], r["failed_turns"]) for r in rows] == [
        ("2026-11-17", "qwen3", "unanswered", "1")]


def test_sql_text_and_placeholders(sql, db):
    code, out, _ = sql("SELECT count(*) AS n FROM turns", "-f", "json")
    assert code == 0 and json.loads(out) == [{"n": _turn_count(db)}]
    code, out, _ = sql("SELECT incident_class FROM turns WHERE request_id = $rid", "-p", "rid=b0000002", "-f", "json")
    assert code == 0 and json.loads(out) == [{"incident_class": "tool-history-5xx"}]
    # '$' inside a string literal is not a placeholder
    code, out, _ = sql("SELECT '$not_a_param' AS s", "-f", "csv")
    assert code == 0 and out.splitlines() == ["s", "$not_a_param"]


def test_views_by_name_and_a_sql_file(sql, db, tmp_path):
    code, out, _ = sql("sessions", "-f", "json")
    assert code == 0 and {r["session_id"] for r in json.loads(out)} >= {"s-a", "s-b"}
    f = tmp_path / "mine.sql"
    f.write_text("-- question: mine\n-- title: mine\n-- params: model\n-- test\n"
                 "SELECT count(*) AS n FROM turns WHERE ($model IS NULL OR model = $model)\n")
    code, out, _ = sql(str(f), "-p", "model=qwen3", "-f", "json")
    assert code == 0 and json.loads(out) == [{"n": 5}]


def test_list_the_queries(sql):
    code, out, _ = sql("--list")
    assert code == 0
    assert "failures_by_day" in out and "since, until, model" in out and "turns" in out


def test_read_only_by_default_and_write_when_asked(sql, db):
    code, _, err = sql("CREATE TABLE notes AS SELECT 1 AS x")
    assert code == ExitCode.USAGE and "--write" in err and "Traceback" not in err
    code, _, err = sql("CREATE TABLE notes AS SELECT 1 AS x", "--write")
    assert code == 0, err
    code, out, _ = sql("SELECT x FROM notes", "-f", "json")
    assert json.loads(out) == [{"x": 1}]
    sql("DROP TABLE notes", "--write")


@pytest.mark.parametrize("args,code,message", [
    (["no_such_question"], ExitCode.USAGE, "unknown query 'no_such_question'"),
    (["wilson_interval"], ExitCode.USAGE, "macro"),
    (["SELECT $x AS x"], ExitCode.USAGE, "needs parameter $x: pass --param x=VALUE"),
    (["failures_by_day", "-p", "colour=red"], ExitCode.USAGE, "has no parameter colour"),
    (["failures_by_day", "-p", "since"], ExitCode.USAGE, "expected NAME=VALUE"),
    (["failures_by_day", "-p", "since=last tuesday"], ExitCode.USAGE, "not an ISO-8601"),
    (["SELEC 1"], ExitCode.USAGE, "syntax error"),
    (["SELECT nope FROM turns"], ExitCode.USAGE, "nope"),
    (["classes_by_day", "--format", "xml"], ExitCode.USAGE, "expected one of table, csv, json"),
])
def test_clear_errors(sql, args, code, message):
    got, out, err = sql(*args)
    assert got == code, err
    assert message in err and err.startswith("analyze: error: ")
    assert "Traceback" not in err and out == ""


def test_missing_database_is_a_database_error(tmp_path):
    p = analyze("sql", "classes_by_day", "--db", str(tmp_path / "none.duckdb"))
    assert p.returncode == ExitCode.DATABASE
    assert "no database at" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "none.duckdb").exists()  # a read-only query never creates one


def test_help():
    p = analyze("sql", "--help")
    assert p.returncode == 0 and "--param" in p.stdout and "--write" in p.stdout


def test_json_times_say_they_are_utc(sql):
    code, out, _ = sql("SELECT ts FROM turns ORDER BY ts LIMIT 1", "--format", "json")
    assert code == 0
    assert json.loads(out)[0]["ts"].endswith("Z")
