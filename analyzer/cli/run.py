"""``analyze FILES...`` (``analyze run``): ingest, load metrics, classify, print the summary.

With no files, no ``--metrics`` and no ``--prometheus``: the summary of what the
database holds. ``--fail-on`` thresholds are checked after the summary is printed.
"""

from __future__ import annotations

import sys

from analyzer.cli.metrics_progress import metrics_progress
from analyzer.cli.options import naming
from analyzer.cli.terminal import (
    byte_progress,
    json_text,
    print_ingest_diagnostics,
    print_json,
    print_summary,
    summary_text,
    warn,
)
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.jobs import main_job
from analyzer.jobs.main_job import RunOptions
from analyzer.outputs.oncall import check_fail_on, parse_fail_on

# The library's parameters as `analyze run` spells them.
_FLAGS = {"selector": "--prometheus-selector", "url": "--prometheus", "timeout": "--prometheus-timeout",
          "model_map": "--model-map", "since": "--since", "until": "--until", "models": "--model"}


def run(opts: RunOptions) -> dict:
    """The main job, or the stored summary when there is nothing to read; then ``--fail-on``.

    Returns the summary dict (printed as tables, or JSON with ``json_out``).

    Raises:
        AnalyzerError: a bad option (usage), a threshold crossed (exit 7), ...
    """
    thresholds = []
    if opts.fail_on:
        with naming(specs="--fail-on"):
            thresholds = parse_fail_on(list(opts.fail_on))  # a malformed threshold fails before any work
    with naming(**_FLAGS):
        summary = run_main_job(opts) if opts.reads_inputs else summary_from_database(opts)
    if thresholds:
        with naming(thresholds="--fail-on"):
            check_fail_on(summary, thresholds)
    return summary


def run_main_job(opts: RunOptions) -> dict:
    """The main job (:func:`analyzer.jobs.main_job.run_main_job`) with the terminal's progress and
    diagnostics; prints the summary (JSON with ``json_out``, else tables). Returns the summary dict.

    Raises:
        AnalyzerError: exit 8 with ``--strict`` when an input file was skipped (after
            the good files were committed and the summary printed).
    """
    summary, report = main_job.run_main_job(opts, _terminal_view(shown=sys.stderr.isatty() and not opts.json_out))
    _write(_render(summary, opts.json_out), summary, opts.json_out)
    if opts.strict and report.skipped_files:
        raise AnalyzerError(f"{len(report.skipped_files)} input file(s) skipped (--strict)", ExitCode.SKIPPED)
    return summary


def _terminal_view(shown: bool) -> main_job.JobView:
    """Progress bars on stderr when ``shown`` (a terminal, no ``--json``); diagnostics and warnings always."""
    return main_job.JobView(
        ingesting=lambda: byte_progress("ingesting", shown),
        loading_metrics=lambda: metrics_progress(shown),
        ingested=print_ingest_diagnostics,
        warn=warn,  # pod names are log text: warn escapes them
    )


def summary_from_database(opts: RunOptions) -> dict:
    """``analyze --db X`` with no files: print the summary of what the database holds; return it."""
    summary = main_job.summary_of_database(opts)
    _write(_render(summary, opts.json_out), summary, opts.json_out)  # as the ingest's run prints it
    return summary


def _render(summary: dict, json_out: bool) -> str | None:
    """The summary as printed into a pipe or a file; None on a terminal (rich draws for its width)."""
    if json_out:
        return json_text(summary)
    return None if sys.stdout.isatty() else summary_text(summary)


def _write(text: str | None, summary: dict, json_out: bool) -> None:
    if text is None:
        _print(summary, json_out)
    else:
        sys.stdout.write(text)


def _print(summary: dict, json_out: bool) -> None:
    if json_out:
        print_json(summary)
    else:
        print_summary(summary)
