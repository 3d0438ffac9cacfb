"""``analyze FILES...`` (``analyze run``): ingest, load metrics, classify, print the summary.

With no files, no ``--metrics`` and no ``--prometheus``: the summary of what the
database holds. ``--fail-on`` thresholds are checked after the summary is printed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..db import connect_writer
from ..errors import AnalyzerError, ExitCode, InputError
from ..holdings import changes, holdings, plan_wedge_window, store_wedge_window
from ..ingestion import ingest
from ..metrics import parse_duration, recompute_windows
from ..metrics.ahead import StagingAhead, worth_staging_ahead
from ..metrics.progress import metrics_progress
from ..metrics.prometheus import parse_selector
from ..metrics.readers import check_metric_paths
from ..oncall import check_fail_on, parse_fail_on
from ..pipeline import load_run_metrics, summarize_stored
from ..safetext import terminal_text
from ..sources import discover_inputs
from ..isotime import parse_range
from ..terminal import byte_progress, json_text, print_ingest_diagnostics, print_json, print_summary, summary_text, warn
from ..turns import check_caller_deadline, refresh_turns
from .options import existing_db, naming

# The library's parameters as `analyze run` spells them.
_FLAGS = {"selector": "--prometheus-selector", "url": "--prometheus", "timeout": "--prometheus-timeout",
          "model_map": "--model-map", "since": "--since", "until": "--until", "models": "--model"}


def run(
    *,
    files: list[str],
    db: Path | None,
    json_out: bool = False,
    strict: bool = False,
    models: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    metrics: list[str] | None = None,
    wedge_window: str | None = None,
    save_wedge_window: bool = False,
    prometheus: str | None = None,
    model_map: list[str] | None = None,
    fail_on: list[str] | None = None,
    caller_deadline_s: float | None = None,
    prometheus_selector: str | None = None,
    prometheus_timeout: str = "60s",
) -> dict:
    """The main job, or the stored summary when there is nothing to read; then ``--fail-on``.

    Returns the summary dict (printed as tables, or JSON with ``json_out``).

    Raises:
        AnalyzerError: a bad option (usage), a threshold crossed (exit 7), ...
    """
    thresholds = []
    if fail_on:
        with naming(specs="--fail-on"):
            thresholds = parse_fail_on(fail_on)  # a malformed threshold fails before any work
    with naming(**_FLAGS):
        if not files and not metrics and not prometheus:  # `analyze --db X`: what the database holds
            summary = summary_from_database(db=db, json_out=json_out, models=models, since=since, until=until,
                                            wedge_window=wedge_window, save_wedge_window=save_wedge_window)
        else:
            summary = run_main_job(files=files, db=db, json_out=json_out, strict=strict, models=models,
                                   since=since, until=until, metrics=metrics, wedge_window=wedge_window,
                                   save_wedge_window=save_wedge_window, prometheus=prometheus, model_map=model_map,
                                   caller_deadline_s=caller_deadline_s, prometheus_selector=prometheus_selector,
                                   prometheus_timeout=prometheus_timeout)
    if thresholds:
        with naming(thresholds="--fail-on"):
            check_fail_on(summary, thresholds)
    return summary


def run_main_job(
    *,
    files: list[str],
    db: Path | None,
    json_out: bool = False,
    strict: bool = False,
    models: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    metrics: list[str] | None = None,
    wedge_window: str | None = None,
    save_wedge_window: bool = False,
    prometheus: str | None = None,
    model_map: list[str] | None = None,
    caller_deadline_s: float | None = None,
    prometheus_selector: str | None = None,
    prometheus_timeout: str = "60s",
) -> dict:
    """Ingest ``files`` into ``db``, classify every turn, print the sizing summary.

    Prints JSON on stdout with ``json_out``, else tables; diagnostics go to stderr.
    ``wedge_window`` is for this run only unless ``save_wedge_window`` (see
    :mod:`analyzer.holdings`). Returns the summary dict.
    """
    since_dt, until_dt = parse_range(since, until)
    # a bad value fails before any work
    requested_w = parse_duration(wedge_window, "--wedge-window") if wedge_window else None
    if caller_deadline_s is not None:
        try:
            check_caller_deadline(caller_deadline_s)
        except ValueError as exc:
            raise AnalyzerError(f"--caller-deadline: {exc}", ExitCode.USAGE) from exc
    deadline_s = parse_duration(prometheus_timeout, "--prometheus-timeout")
    if prometheus_selector:
        if not prometheus:
            raise AnalyzerError("--prometheus-selector needs --prometheus URL", ExitCode.USAGE)
        parse_selector(prometheus_selector)
    if metrics:  # a missing metrics path, or a log given as metrics, fails before any work
        check_metric_paths(metrics)
    sources = discover_inputs(files)  # a missing input fails before a database is created
    job = dict(strict=strict, models=models, since_dt=since_dt, until_dt=until_dt, metrics=metrics,
               requested_w=requested_w, save_wedge_window=save_wedge_window, prometheus=prometheus,
               model_map=model_map, caller_deadline_s=caller_deadline_s, selector=prometheus_selector,
               deadline_s=deadline_s)
    shown = sys.stderr.isatty() and not json_out
    # Beside small logs the metric files are read (into a scratch database) from
    # now on, while the database opens and the logs are ingested; the metrics' load
    # takes what was read. Abandoned on the way out whatever happened (a failed
    # connect or ingest, Ctrl-C): nothing once the load took it.
    ahead = StagingAhead(metrics) if worth_staging_ahead(metrics, sources.files) else None
    try:
        con = connect_writer(db)
        try:
            summary, report, _metric_loads = _job(con, sources, progress_shown=shown, ahead=ahead, **job)
        finally:
            con.close()
    finally:
        if ahead is not None:
            ahead.abandon()
    _write(_render(summary, json_out), summary, json_out)
    if strict and report.skipped_files:
        raise AnalyzerError(f"{len(report.skipped_files)} input file(s) skipped (--strict)", ExitCode.SKIPPED)
    return summary


def _job(con, sources, *, progress_shown: bool, strict: bool, models, since_dt, until_dt, metrics, requested_w,
         save_wedge_window: bool, prometheus, model_map, caller_deadline_s, selector, deadline_s,
         ahead=None) -> tuple[dict, object, list]:
    """Ingest, load metrics, classify and summarize on ``con``: (summary, ingest report, metric loads).

    ``ahead``: the ``--metrics`` files being read since the run began
    (:class:`analyzer.metrics.ahead.StagingAhead`), for the metrics' load; the
    caller abandons it on the way out.
    """
    before = holdings(con)
    stored_w, one_off_w = plan_wedge_window(con, requested_w, save_wedge_window)
    with byte_progress("ingesting", progress_shown) as progress:
        report = ingest(con, sources, strict=strict, progress=progress)
    print_ingest_diagnostics(report)
    _fail_when_nothing_was_read(report)
    if report.metric_files:  # Prometheus exports passed among the logs
        metrics = list(metrics or []) + report.metric_files
    with metrics_progress(progress_shown) as mprogress:
        metric_loads = load_run_metrics(con, report, metrics, prometheus, model_map, stored_w, since_dt, until_dt,
                                        force=save_wedge_window, selector=selector,
                                        deadline_s=deadline_s, progress=mprogress, ahead=ahead)
    for load in metric_loads:
        for warning in load.warnings:
            warn(warning)  # pod names are log text
    classified = refresh_turns(con, caller_deadline_s=caller_deadline_s)
    # Every file known and unchanged (none read), no metrics loaded, no windows
    # stored: what the database holds is what it held before the run.
    unchanged = report.files_unchanged == report.files_seen and not metric_loads and not save_wedge_window
    summary = summarize_stored(con, models=models, since=since_dt, until=until_dt, one_off_wedge_s=one_off_w,
                               database=before if unchanged else None,
                               records_signature=classified.records_signature)
    summary["ingest"] = report.to_dict()
    summary["metrics"]["loads"] = [m.to_dict() for m in metric_loads]
    summary["notes"] = changes(before, summary["database"]) + summary.get("notes", [])
    return summary, report, metric_loads


def summary_from_database(
    *,
    db: Path | None,
    json_out: bool = False,
    models: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    wedge_window: str | None = None,
    save_wedge_window: bool = False,
) -> dict:
    """``analyze --db X`` with no files: the summary of what the database holds, with the filters.

    Raises:
        AnalyzerError: (usage) no database there, or one with no records.
    """
    since_dt, until_dt = parse_range(since, until)
    requested_w = parse_duration(wedge_window, "--wedge-window") if wedge_window else None
    target = existing_db(db)
    if not target.exists():
        raise AnalyzerError(f"give log files to ingest (analyze FILES...), or --db of a database that holds "
                            f"data: there is no database at {target}", ExitCode.USAGE)
    con = connect_writer(target)
    try:
        if not con.execute("SELECT count(*) FROM records").fetchall()[0][0]:
            raise AnalyzerError(f"the database {target} holds no records: give log files to ingest "
                                "(analyze FILES... --db ...)", ExitCode.USAGE)
        stored_w, one_off_w = plan_wedge_window(con, requested_w, save_wedge_window)
        if save_wedge_window and con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0]:
            recompute_windows(con, stored_w)
            store_wedge_window(con, stored_w)
        classified = refresh_turns(con)
        summary = summarize_stored(con, models=models, since=since_dt, until=until_dt, one_off_wedge_s=one_off_w,
                                   records_signature=classified.records_signature)
    finally:
        con.close()
    _write(_render(summary, json_out), summary, json_out)  # as the ingest's run prints it
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
