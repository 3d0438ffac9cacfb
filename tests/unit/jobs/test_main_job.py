"""The main job as a library call (`analyzer.jobs.main_job`): what `analyze FILES...` does, without a terminal.

The sample week goes into a real DuckDB file through `run_main_job`; the summary
is the CLI's (`analyze --json` on the same files), the view hears the progress,
diagnostics and warnings the terminal would show, and `summary_of_database`
answers from the file alone.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from analyzer.core.errors import AnalyzerError, InputError
from analyzer.jobs.main_job import JobView, RunOptions, run_main_job, summary_of_database
from tests.support.repo import REPO
from tests.support.cli import analyze

SAMPLE = REPO / "sample_logs"
FILES = (str(SAMPLE / "s3"), str(SAMPLE / "kubectl"))
METRICS = (str(SAMPLE / "metrics"),)


class Heard:
    """A view that keeps what it was told."""

    def __init__(self):
        self.events: list[tuple] = []

    def progress(self, name):
        @contextlib.contextmanager
        def bar():
            self.events.append((name, "open"))
            yield lambda *args: self.events.append((name, args))
            self.events.append((name, "close"))
        return bar

    def view(self) -> JobView:
        return JobView(ingesting=self.progress("ingest"), loading_metrics=self.progress("metrics"),
                       ingested=lambda report: self.events.append(("ingested", report.files_ingested)),
                       warn=lambda text: self.events.append(("warn", text)))


def _comparable(summary: dict) -> dict:
    """The summary without what differs between two runs into two files (the database's path and
    size, the ingest's times); the metric loads without their timing."""
    out = {k: v for k, v in summary.items() if k not in ("database", "ingest", "notes", "next")}
    out["metrics"] = {**summary["metrics"],
                      "loads": [{k: v for k, v in load.items() if k != "seconds"} for load in summary["metrics"]["loads"]]}
    return out


def test_the_job_is_the_commands_summary(tmp_path):
    heard = Heard()
    summary, report = run_main_job(RunOptions(files=FILES, metrics=METRICS, db=tmp_path / "lib.duckdb"), heard.view())
    cli = analyze(*FILES, "--metrics", *METRICS, "--db", tmp_path / "cli.duckdb", "--json")
    assert cli.returncode == 0, cli.stderr
    assert _comparable(json.loads(json.dumps(summary, default=str))) == _comparable(json.loads(cli.stdout))
    assert report.files_ingested > 0 and summary["turns"] > 0 and summary["metrics"]["loads"][0]["samples_new"] > 0
    # the view was told as the terminal is: the ingest's bar, its diagnostics, then the metrics' bar
    names = [e[0] for e in heard.events]
    assert names.index("ingested") > names.index("ingest") and names.index("metrics") > names.index("ingested")
    assert ("ingest", "close") in heard.events and any(e[0] == "ingest" and isinstance(e[1], tuple)
                                                         for e in heard.events)

    again = summary_of_database(RunOptions(db=tmp_path / "lib.duckdb"))
    assert again["classes"] == summary["classes"] and again["turns"] == summary["turns"]


def test_a_bad_option_or_input_creates_no_database(tmp_path):
    db = tmp_path / "never.duckdb"
    with pytest.raises(AnalyzerError, match="--wedge-window"):
        run_main_job(RunOptions(files=FILES, db=db, wedge_window="soon"))
    with pytest.raises(AnalyzerError, match="--prometheus-selector needs --prometheus"):
        run_main_job(RunOptions(files=FILES, db=db, prometheus_selector='{job="vllm"}'))
    with pytest.raises(InputError):
        run_main_job(RunOptions(files=(str(tmp_path / "missing.jsonl"),), db=db))
    assert not db.exists()
    with pytest.raises(AnalyzerError, match="no database at"):
        summary_of_database(RunOptions(db=db))


def test_every_input_skipped_is_an_error_that_names_the_first(tmp_path):
    bad = tmp_path / "notes.jsonl"
    bad.write_bytes(b"\x00\x01 not a log\n")
    with pytest.raises(InputError, match="nothing was ingested"):
        run_main_job(RunOptions(files=(str(bad),), db=tmp_path / "x.duckdb"))
