"""What a newcomer reads first: the verdict on top, the next commands last, tables that
never cut a name, sentences whole in a pipe, and `--help` without cut-off texts.

The summary is made from a real DuckDB file (tests/support/week.py's
week) by the job the command runs; it is printed by the command's printer into a
rich console of a chosen width, as a terminal of that width or a pipe gets it.
"""

from __future__ import annotations

import io
import re

import pytest
from typer.testing import CliRunner

from analyzer.cli.app import app
from analyzer.cli.terminal import Table, make_console
from analyzer.cli.terminal.summary import PIPED_WIDTH, print_summary, summary_text
from analyzer.jobs.main_job import RunOptions, summary_of_database
from analyzer.outputs.verdict import next_steps
from tests.support.ingesting import ingest_records
from tests.support.week import week_records

LONG = "accounts/fireworks/models/glm-5-fp8-long-context-preview"


@pytest.fixture(scope="module")
def summary(tmp_path_factory) -> dict:
    db = tmp_path_factory.mktemp("first-hour") / "week.duckdb"
    records = week_records()
    for r in records:  # one model with a long name, so a narrow terminal has to choose
        if r.get("model") == "qwen3":
            r["model"] = LONG
    ingest_records(db, records).close()
    return summary_of_database(RunOptions(db=db))


def _printed(summary: dict, width: int, terminal: bool) -> str:
    buf = io.StringIO()
    print_summary(summary, make_console(file=buf, width=width, soft_wrap=not terminal, highlight=False,
                                    color_system=None))
    return buf.getvalue()


def test_the_verdict_is_said_first_and_its_figures_are_the_summarys(summary):
    v = summary["verdict"]
    failed = sum(c["count"] for name, c in summary["classes"].items() if name != "ok")
    assert v["failed_turns"] == failed and v["turns"] == summary["turns"]
    assert v["lines"][0].startswith(f"{failed:,} of {summary['turns']:,} turns failed")
    largest = sorted(((n, c["count"]) for n, c in summary["classes"].items() if n != "ok"), key=lambda x: (-x[1], x[0]))
    assert [tuple(x) for x in v["largest"]] == largest[:3]
    if summary["sizing"]:
        assert v["ladder"]["sessions_lost_without_ladder"] == summary["sizing"]["sessions_lost_without_ladder"]
        assert summary["sizing"]["conclusion"] in v["lines"][1]
    out = summary_text(summary).splitlines()
    assert out[:len(v["lines"])] == v["lines"]
    assert out[len(v["lines"]) + 1].startswith(f"{summary['turns']:,} turns in ")


def test_the_next_commands_close_the_summary(summary):
    out = summary_text(summary).rstrip("\n").splitlines()
    assert out[-3] == f"The database is {summary['next']['database']}. Next:"
    assert out[-2].split()[:2] == ["analyze", "report"] and out[-1].split()[:3] == ["analyze", "sql", "--list"]


def test_the_next_commands_name_the_database_only_when_the_user_did(monkeypatch):
    monkeypatch.delenv("ANALYZER_DB", raising=False)
    default = next_steps(None)
    assert default["database"] == "analyzer.duckdb" and default["commands"][0]["command"] == "analyze report"
    named = next_steps("/data/my week.duckdb")
    assert named["database"] == "/data/my week.duckdb"
    assert named["commands"][0]["command"] == "analyze report --db '/data/my week.duckdb'"
    monkeypatch.setenv("ANALYZER_DB", "/data/env.duckdb")
    assert next_steps(None)["database"] == "/data/env.duckdb" and next_steps(None)["commands"][1]["command"] == \
        "analyze sql --list"


def test_piped_every_sentence_stays_on_one_line(summary):
    out = _printed(summary, PIPED_WIDTH, terminal=False)
    lines = out.splitlines()
    for sentence in summary["verdict"]["lines"]:
        assert sentence in lines, sentence
    assert any(len(line) > PIPED_WIDTH for line in summary["verdict"]["lines"]), "the test needs a long sentence"


def test_on_a_narrow_terminal_prose_wraps_and_no_name_is_cut(summary):
    out = _printed(summary, 60, terminal=True)
    assert all(len(line) <= 60 for line in out.splitlines())
    assert summary["verdict"]["lines"][0] not in out.splitlines() or len(summary["verdict"]["lines"][0]) <= 60
    # every model name and class is there whole, on one line, however narrow the terminal
    for m in summary["models"]:
        assert re.search(rf"(^|\s){re.escape(m['model'])}(\s|:|$)", out, re.M), m["model"]
    assert LONG in out
    for name in summary["classes"]:
        assert re.search(rf"(^|\s){re.escape(name)}(\s|:|$)", out, re.M), name


def test_a_table_that_fits_is_a_table_and_one_that_does_not_stacks():
    def printed(width: int) -> str:
        t = Table(title="Per model", title_justify="left")
        t.add_column("model", no_wrap=True)
        t.add_column("turns", justify="right")
        t.add_column("what it says")
        t.add_row(LONG, "1,333", "a long prose cell that may wrap at words")
        t.add_row("glm-5", "7", "")
        buf = io.StringIO()
        make_console(file=buf, width=width, color_system=None).print(t)
        return buf.getvalue()

    wide = printed(200)
    assert "┃ model" in wide and LONG in wide
    narrow = printed(64).splitlines()
    assert narrow[0] == "Per model"
    assert narrow[1].rstrip() == f"  {LONG}:"  # the name whole on its line, then each header and cell
    assert " ".join(x.strip() for x in narrow[1:-1]) == \
        f"{LONG}: turns 1,333; what it says a long prose cell that may wrap at words"
    assert "  glm-5: turns 7" in narrow  # an empty cell is left out, not printed as a dangling header
    assert not any("┃" in line for line in narrow)


def test_every_command_has_a_whole_short_help():
    out = CliRunner().invoke(app, ["--help"], terminal_width=200).output
    listed = [line.strip(" │") for line in out.splitlines() if re.match(r"^[│ ] +[a-z]+ {2,}\S", line)]
    assert len(listed) >= 8, out
    for line in listed:  # click cuts a long help at 45 characters and writes "..."
        assert line.endswith(".") and not line.endswith(("...", "…")), line


def test_one_turn_is_one_turn_and_a_refused_request_has_no_latency(tmp_path):
    from analyzer.core.errors import AnalyzerError
    from analyzer.outputs.summary import resolve_models
    from analyzer.store.asking import ask
    from tests.support.records import at, request, response_error, response_ok

    con = ingest_records(tmp_path / "a.duckdb", [
        request("r1", at(0), model="solo"), response_ok("r1", at(1), model="solo", content="hi", latency_ms=800),
        # refusals, as the proxy logs them: a response record alone, latency 0
        response_error("r2", at(2), "Streaming is not supported by this proxy", model="solo",
                       provider="streaming-unsupported", latency_ms=0),
        response_error("r3", at(3), "Model 'other' is not configured", model="other", provider="unrouted",
                       latency_ms=0),
    ])
    try:
        with pytest.raises(AnalyzerError, match=r"other \(1 turn\), solo \(2 turns\)|solo \(2 turns\), other \(1 turn\)"):
            resolve_models(con, ["nothing-like-it"])
        rows = {(m, p): (turns, timed, p50) for m, p, turns, timed, _failed, p50, *_ in
                ask(con, "latency_by_model", {"since": None, "until": None, "model": None, "models": None})}
    finally:
        con.close()
    # refused before any call: a turn, but no latency (not a 0 ms that pulls the median down)
    assert rows[("solo", "streaming-unsupported")] == (1, 0, None)
    assert rows[("other", "unrouted")] == (1, 0, None)
    assert rows[("solo", "nrp")][:2] == (1, 1) and rows[("solo", "nrp")][2] == 800


def test_a_stored_path_is_shown_as_typed_relative_under_the_working_folder(tmp_path, monkeypatch):
    from analyzer.core.paths import shown_path

    monkeypatch.chdir(tmp_path)
    assert shown_path(str(tmp_path / "sample_logs" / "s3" / "a.jsonl")) == "sample_logs/s3/a.jsonl"
    assert shown_path("/elsewhere/logs/a.jsonl") == "/elsewhere/logs/a.jsonl"
    assert shown_path(str(tmp_path) + "-sibling/a.jsonl") == str(tmp_path) + "-sibling/a.jsonl"
    assert shown_path("s3://bucket/logs/a.jsonl") == "s3://bucket/logs/a.jsonl"
