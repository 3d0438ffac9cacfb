"""``analyze FILES...`` (``analyze run``): ingest, load metrics, classify, print the summary.

With no files, no ``--metrics`` and no ``--prometheus``: the summary of what the
database holds. ``--fail-on`` thresholds are checked after the summary is printed.
"""

from __future__ import annotations

import sys

from analyzer.classification.turns import check_caller_deadline, refresh_turns
from analyzer.classification.windows import recompute_windows
from analyzer.cli.metrics_progress import metrics_progress
from analyzer.cli.options import existing_db, naming
from analyzer.cli.terminal import (
    byte_progress,
    json_text,
    print_ingest_diagnostics,
    print_json,
    print_summary,
    summary_text,
    warn,
)
from analyzer.core.durations import parse_duration
from analyzer.core.errors import AnalyzerError, ExitCode, InputError
from analyzer.core.isotime import parse_range
from analyzer.core.safetext import terminal_text
from analyzer.ingestion.logs import ingest
from analyzer.ingestion.metric_readers import check_metric_paths
from analyzer.ingestion.metrics_ahead import StagingAhead, worth_staging_ahead
from analyzer.io.prometheus import parse_selector
from analyzer.io.sources import discover_inputs
from analyzer.jobs.main_job import RunOptions, load_run_metrics, summarize_stored
from analyzer.outputs.oncall import check_fail_on, parse_fail_on
from analyzer.store.db import connect_writer
from analyzer.store.holdings import changes, holdings, plan_wedge_window, store_wedge_window

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
    """Ingest ``opts.files`` into ``opts.db``, classify every turn, print the sizing summary.

    Prints JSON on stdout with ``json_out``, else tables; diagnostics go to stderr.
    ``wedge_window`` is for this run only unless ``save_wedge_window`` (see
    :mod:`analyzer.store.holdings`). Returns the summary dict.
    """
    # every value is checked before any work
    since_dt, until_dt = parse_range(opts.since, opts.until)
    requested_w = parse_duration(opts.wedge_window, "--wedge-window") if opts.wedge_window else None
    if opts.caller_deadline_s is not None:
        try:
            check_caller_deadline(opts.caller_deadline_s)
        except ValueError as exc:
            raise AnalyzerError(f"--caller-deadline: {exc}", ExitCode.USAGE) from exc
    deadline_s = parse_duration(opts.prometheus_timeout, "--prometheus-timeout")
    if opts.prometheus_selector:
        if not opts.prometheus:
            raise AnalyzerError("--prometheus-selector needs --prometheus URL", ExitCode.USAGE)
        parse_selector(opts.prometheus_selector)
    if opts.metrics:  # a missing metrics path, or a log given as metrics, fails before any work
        check_metric_paths(list(opts.metrics))
    sources = discover_inputs(list(opts.files))  # a missing input fails before a database is created
    shown = sys.stderr.isatty() and not opts.json_out
    # Beside small logs the metric files are read (into a scratch database) from
    # now on, while the database opens and the logs are ingested; the metrics' load
    # takes what was read. Abandoned on the way out whatever happened (a failed
    # connect or ingest, Ctrl-C): nothing once the load took it.
    ahead = StagingAhead(list(opts.metrics)) if worth_staging_ahead(list(opts.metrics), sources.files) else None
    try:
        con = connect_writer(opts.db)
        try:
            summary, report = _job(con, sources, opts, since_dt=since_dt, until_dt=until_dt,
                                   requested_w=requested_w, deadline_s=deadline_s, progress_shown=shown, ahead=ahead)
        finally:
            con.close()
    finally:
        if ahead is not None:
            ahead.abandon()
    _write(_render(summary, opts.json_out), summary, opts.json_out)
    if opts.strict and report.skipped_files:
        raise AnalyzerError(f"{len(report.skipped_files)} input file(s) skipped (--strict)", ExitCode.SKIPPED)
    return summary


def _job(con, sources, opts: RunOptions, *, since_dt, until_dt, requested_w, deadline_s, progress_shown: bool,
         ahead=None) -> tuple[dict, object]:
    """Ingest, load metrics, classify and summarize on ``con``: (summary, ingest report).

    ``since_dt``/``until_dt``, ``requested_w`` and ``deadline_s`` are ``opts``'
    values already checked. ``ahead``: the ``--metrics`` files being read since the
    run began (:class:`analyzer.ingestion.metrics_ahead.StagingAhead`), for the metrics' load;
    the caller abandons it on the way out.
    """
    before = holdings(con)
    stored_w, one_off_w = plan_wedge_window(con, requested_w, opts.save_wedge_window)
    with byte_progress("ingesting", progress_shown) as progress:
        report = ingest(con, sources, strict=opts.strict, progress=progress)
    print_ingest_diagnostics(report)
    _fail_when_nothing_was_read(report)
    metrics = list(opts.metrics) + report.metric_files  # with Prometheus exports passed among the logs
    with metrics_progress(progress_shown) as mprogress:
        metric_loads = load_run_metrics(con, report, metrics, opts.prometheus, list(opts.model_map), stored_w,
                                        since_dt, until_dt, force=opts.save_wedge_window,
                                        selector=opts.prometheus_selector, deadline_s=deadline_s, progress=mprogress,
                                        ahead=ahead)
    for load in metric_loads:
        for warning in load.warnings:
            warn(warning)  # pod names are log text
    classified = refresh_turns(con, caller_deadline_s=opts.caller_deadline_s)
    # Every file known and unchanged (none read), no metrics loaded, no windows
    # stored: what the database holds is what it held before the run.
    unchanged = report.files_unchanged == report.files_seen and not metric_loads and not opts.save_wedge_window
    summary = summarize_stored(con, model_patterns=list(opts.model_patterns) or None, since=since_dt, until=until_dt,
                               one_off_wedge_s=one_off_w, database=before if unchanged else None,
                               records_signature=classified.records_signature)
    summary["ingest"] = report.to_dict()
    summary["metrics"]["loads"] = [m.to_dict() for m in metric_loads]
    summary["notes"] = changes(before, summary["database"]) + summary.get("notes", [])
    return summary, report


def summary_from_database(opts: RunOptions) -> dict:
    """``analyze --db X`` with no files: the summary of what the database holds, with the filters.

    Raises:
        AnalyzerError: (usage) no database there, or one with no records.
    """
    since_dt, until_dt = parse_range(opts.since, opts.until)
    requested_w = parse_duration(opts.wedge_window, "--wedge-window") if opts.wedge_window else None
    target = existing_db(opts.db)
    if not target.exists():
        raise AnalyzerError(f"give log files to ingest (analyze FILES...), or --db of a database that holds "
                            f"data: there is no database at {target}", ExitCode.USAGE)
    con = connect_writer(target)
    try:
        if not con.execute("SELECT count(*) FROM records").fetchall()[0][0]:
            raise AnalyzerError(f"the database {target} holds no records: give log files to ingest "
                                "(analyze FILES... --db ...)", ExitCode.USAGE)
        stored_w, one_off_w = plan_wedge_window(con, requested_w, opts.save_wedge_window)
        if opts.save_wedge_window and con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0]:
            recompute_windows(con, stored_w)
            store_wedge_window(con, stored_w)
        classified = refresh_turns(con)
        summary = summarize_stored(con, model_patterns=list(opts.model_patterns) or None, since=since_dt, until=until_dt,
                                   one_off_wedge_s=one_off_w, records_signature=classified.records_signature)
    finally:
        con.close()
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


def _fail_when_nothing_was_read(report) -> None:
    """A run whose every input was skipped is an error.

    A run that read some files and skipped others succeeds (exit 0): a cron job
    should not fail every night over a stray file in the log folder, and the
    skipped files are listed in the summary and kept in ``skipped_files``.
    ``--strict`` makes such a run exit 8 after committing the good files.
    """
    read = report.files_ingested + report.files_unchanged + report.files_resumed + len(report.metric_files)
    if report.skipped_files and not read:
        first = report.skipped_files[0]
        more = f" (and {len(report.skipped_files) - 1} more)" if len(report.skipped_files) > 1 else ""
        raise InputError(f"{terminal_text(first['path'])}: {terminal_text(first['reason'])}{more}; nothing was ingested")
