"""The `analyze` command as a user runs it: a real process, real files, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.core.errors import ExitCode
from tests.support.records import NAKED_500, TOOL_RESULT, at, request, response_error, response_ok, write_jsonl
from tests.support.cli import analyze


@pytest.fixture
def week(tmp_path: Path) -> Path:
    recs = []
    for i in range(6):
        rid = f"{0xd0000000 + i:08x}"
        model = "glm-5" if i < 4 else "qwen3"
        recs.append(request(rid, at(i * 60 * 24), model=model, tool_results=TOOL_RESULT, session=f"s{i}"))
        if i in (1, 2):
            recs.append(response_error(rid, at(i * 60 * 24 + 0.1), NAKED_500, model=model, session=f"s{i}"))
        else:
            recs.append(response_ok(rid, at(i * 60 * 24 + 0.1), content="ok", model=model, session=f"s{i}"))
    return write_jsonl(tmp_path / "logs" / "week.jsonl", recs)


def test_json_summary_on_stdout_and_nothing_else(week, tmp_path):
    p = analyze(str(week), "--db", str(tmp_path / "a.duckdb"), "--json")
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["turns"] == 6
    assert summary["classes"]["tool-history-5xx"]["count"] == 2
    assert [m["model"] for m in summary["models"]] == ["glm-5", "qwen3"]  # GLM first
    assert summary["ladder_addressable"] == 2
    assert summary["ingest"]["new_records"] == 12
    assert "\x1b[" not in p.stderr  # no progress bar when not on a terminal


def test_table_summary_when_piped(week, tmp_path):
    p = analyze(str(week), "--db", str(tmp_path / "a.duckdb"))
    assert p.returncode == 0, p.stderr
    assert "tool-history-5xx" in p.stdout and "glm-5" in p.stdout
    assert "ladder could address 2 turns" in p.stdout
    assert "\x1b[" not in p.stdout


def test_model_and_time_filters(week, tmp_path):
    db = str(tmp_path / "a.duckdb")
    p = analyze(str(week), "--db", db, "--json", "--model", "qwen3")
    assert json.loads(p.stdout)["turns"] == 2
    p = analyze(str(week), "--db", db, "--json", "--since", "2026-11-17", "--until", "2026-11-19")
    s = json.loads(p.stdout)
    assert s["turns"] == 2 and s["ingest"]["new_records"] == 0


@pytest.mark.parametrize(
    "args,code,message",
    [
        (["nope/*.jsonl"], ExitCode.NO_INPUT, "no such file"),
        (["--since", "yesterday"], ExitCode.USAGE, "not an ISO-8601"),
    ],
)
def test_clear_errors_without_tracebacks(week, tmp_path, args, code, message):
    argv = [a if a != "nope/*.jsonl" else str(tmp_path / a) for a in args]
    if argv[0].startswith("--"):
        argv = [str(week), *argv]
    p = analyze(*argv, "--db", str(tmp_path / "a.duckdb"))
    assert p.returncode == code
    assert message in p.stderr
    assert "Traceback" not in p.stderr


def test_not_a_log_and_not_a_database(week, tmp_path):
    stranger = tmp_path / "photo.txt"
    stranger.write_text("GIF89a not a log\n")
    p = analyze(str(stranger), "--db", str(tmp_path / "a.duckdb"))
    assert p.returncode == ExitCode.NO_INPUT and "not a proxy log" in p.stderr and "Traceback" not in p.stderr
    bad_db = tmp_path / "bad.duckdb"
    bad_db.write_bytes(b"this is not a duckdb file at all" * 100)
    p = analyze(str(week), "--db", str(bad_db))
    assert p.returncode == ExitCode.DATABASE and "cannot open database" in p.stderr and "Traceback" not in p.stderr


def test_help_for_every_command():
    p = analyze("--help")
    assert p.returncode == 0 and "run" in p.stdout
    p = analyze("run", "--help")
    assert p.returncode == 0 and "--json" in p.stdout


def test_log_text_is_not_read_as_terminal_markup(tmp_path):
    """A model name like `glm-[/evil]` is data: printed as is, never a crash."""
    recs = [request("f0000001", at(0), model="glm-[/evil]"), response_ok("f0000001", at(0.1), content="ok", model="glm-[/evil]"),
            request("f0000002", at(1), model="glm-[red]x"), response_ok("f0000002", at(1.1), content="ok", model="glm-[red]x")]
    logs = write_jsonl(tmp_path / "odd.jsonl", recs)
    p = analyze(str(logs), "--db", str(tmp_path / "a.duckdb"))
    assert p.returncode == 0, p.stderr
    assert "glm-[/evil]" in p.stdout and "glm-[red]x" in p.stdout


def test_strict_exits_with_the_bad_input_code(tmp_path):
    bad = tmp_path / "chunk.jsonl"
    bad.write_text('{"type": "request", "timestamp": "2026-11-16T14:00:00.000000Z", "request_id": "a"}\n{cut\n')
    p = analyze(str(bad), "--db", str(tmp_path / "a.duckdb"), "--strict")
    assert p.returncode == ExitCode.BAD_INPUT and "chunk.jsonl:2" in p.stderr and "Traceback" not in p.stderr
