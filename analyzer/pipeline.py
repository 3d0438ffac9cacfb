"""The main job behind ``analyze FILES...``: ingest, classify, summarize, print."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .db import connect
from .errors import AnalyzerError, ExitCode, InputError
from .ingestion import IngestReport, ingest
from .sources import discover_inputs
from .holdings import changes, holdings, plan_wedge_window, store_wedge_window
from .safetext import terminal_text
from .summary import build_summary, parse_range
from .summary_cache import cached_summary
from .turns import refresh_turns


@contextmanager
def byte_progress(description: str, enabled: bool) -> Iterator:
    """A rich progress bar over bytes on stderr, or a no-op when not on a terminal."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


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
    from .metrics import parse_duration

    # a bad value fails before any work
    requested_w = parse_duration(wedge_window, "--wedge-window") if wedge_window else None
    if caller_deadline_s is not None:
        from .turns import check_caller_deadline

        try:
            check_caller_deadline(caller_deadline_s)
        except ValueError as exc:
            raise AnalyzerError(f"--caller-deadline: {exc}", ExitCode.USAGE) from exc
    deadline_s = parse_duration(prometheus_timeout, "--prometheus-timeout")
    if prometheus_selector:
        if not prometheus:
            raise AnalyzerError("--prometheus-selector needs --prometheus URL", ExitCode.USAGE)
        from .metrics.prometheus import parse_selector

        parse_selector(prometheus_selector)
    if metrics:  # a missing metrics path, or a log given as metrics, fails before any work
        from .metrics.readers import check_metric_paths

        check_metric_paths(metrics)
    sources = discover_inputs(files)  # a missing input fails before a database is created
    con = connect(db)
    try:
        before = holdings(con)
        stored_w, one_off_w = plan_wedge_window(con, requested_w, save_wedge_window)
        with byte_progress("ingesting", sys.stderr.isatty() and not json_out) as progress:
            report = ingest(con, sources, strict=strict, progress=progress)
        _say_skipped(report)
        if report.metric_files:  # Prometheus exports passed among the logs
            metrics = list(metrics or []) + report.metric_files
        from .metrics.progress import metrics_progress

        with metrics_progress(sys.stderr.isatty() and not json_out) as mprogress:
            metric_loads = _load_metrics(con, report, metrics, prometheus, model_map, stored_w, since_dt, until_dt,
                                         force=save_wedge_window, selector=prometheus_selector,
                                         deadline_s=deadline_s, progress=mprogress)
        refresh_turns(con, caller_deadline_s=caller_deadline_s)
        summary = summarize_stored(con, models=models, since=since_dt, until=until_dt, one_off_wedge_s=one_off_w)
        summary["ingest"] = report.to_dict()
        summary["metrics"]["loads"] = [m.to_dict() for m in metric_loads]
        summary["notes"] = changes(before, summary["database"]) + summary.get("notes", [])
    finally:
        con.close()
    _print(summary, json_out)
    if strict and report.skipped_files:
        raise AnalyzerError(f"{len(report.skipped_files)} input file(s) skipped (--strict)", ExitCode.SKIPPED)
    return summary


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
    from .errors import AnalyzerError, ExitCode
    from .metrics import parse_duration
    from .paths import default_db_path

    since_dt, until_dt = parse_range(since, until)
    requested_w = parse_duration(wedge_window, "--wedge-window") if wedge_window else None
    target = Path(db) if db is not None else default_db_path()
    if not target.exists():
        raise AnalyzerError(f"give log files to ingest (analyze FILES...), or --db of a database that holds "
                            f"data: there is no database at {target}", ExitCode.USAGE)
    con = connect(target)
    try:
        if not con.execute("SELECT count(*) FROM records").fetchall()[0][0]:
            raise AnalyzerError(f"the database {target} holds no records: give log files to ingest "
                                "(analyze FILES... --db ...)", ExitCode.USAGE)
        stored_w, one_off_w = plan_wedge_window(con, requested_w, save_wedge_window)
        if save_wedge_window and con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0]:
            from .metrics import recompute_windows

            recompute_windows(con, stored_w)
            store_wedge_window(con, stored_w)
        refresh_turns(con)
        summary = summarize_stored(con, models=models, since=since_dt, until=until_dt, one_off_wedge_s=one_off_w)
    finally:
        con.close()
    _print(summary, json_out)
    return summary


def summarize_stored(con, *, models, since, until, one_off_wedge_s: float | None) -> dict:
    """The summary of the database, with the ``--model`` patterns resolved and what it holds.

    With ``one_off_wedge_s`` the pod windows are recomputed with that wedge window
    for this summary only, in a transaction that is rolled back: the stored
    windows (and what later commands see) stay as they were.
    """
    from .db import discarded
    from .holdings import describe_seconds, stored_wedge_window
    from .summary import filter_notes, resolve_models

    chosen = resolve_models(con, models)
    has_samples = con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0] > 0
    notes: list[str] = []
    if one_off_wedge_s is not None and has_samples:
        from .metrics import recompute_windows

        with discarded(con):
            recompute_windows(con, one_off_wedge_s)
            refresh_turns(con)
            summary = build_summary(con, models=chosen, since=since, until=until)
        stored = stored_wedge_window(con)
        notes.append(f"pod windows for this run only use --wedge-window {describe_seconds(one_off_wedge_s)}; "
                     f"the database keeps its windows of {describe_seconds(stored or 300.0)} "
                     "(add --save-wedge-window to keep these)")
    else:  # a re-run that changed nothing prints the stored summary (analyzer.summary_cache)
        summary = cached_summary(con, build_summary, models=chosen, since=since, until=until)
    summary["database"] = holdings(con)
    summary["metrics"]["wedge_window_s"] = one_off_wedge_s if one_off_wedge_s is not None and has_samples \
        else stored_wedge_window(con)
    summary["metrics"]["wedge_window_stored"] = not (one_off_wedge_s is not None and has_samples)
    summary["notes"] = notes
    summary["not_filtered"] = filter_notes(summary)
    return summary


def _print(summary: dict, json_out: bool) -> None:
    if json_out:
        print(json.dumps(summary, indent=2, default=str))
    else:
        from .render import print_summary

        print_summary(summary)


def _say_skipped(report: IngestReport) -> None:
    """Skipped files and notes on stderr; a run whose every input was skipped is an error.

    A run that read some files and skipped others succeeds (exit 0): a cron job
    should not fail every night over a stray file in the log folder, and the
    skipped files are listed in the summary and kept in ``skipped_files``.
    ``--strict`` makes such a run exit 8 after committing the good files.
    """
    for s in report.skipped_files:
        print(f"analyze: warning: skipped {terminal_text(s['path'])}: {terminal_text(s['reason'])}", file=sys.stderr)
    for n in report.notes:
        print(f"analyze: note: {terminal_text(n['path'])}: {terminal_text(n['note'])}", file=sys.stderr)
    read = report.files_ingested + report.files_unchanged + report.files_resumed + len(report.metric_files)
    if report.skipped_files and not read:
        first = report.skipped_files[0]
        more = f" (and {len(report.skipped_files) - 1} more)" if len(report.skipped_files) > 1 else ""
        raise InputError(f"{terminal_text(first['path'])}: {terminal_text(first['reason'])}{more}; nothing was ingested")


def _load_metrics(con, ingested: IngestReport, metrics, prometheus, model_map, wedge_window, since, until, *,
                  force: bool = False, selector=None, deadline_s=60.0, progress=None) -> list:
    """Load metric files and/or query Prometheus, then (re)compute the pod windows.

    Without metric options, windows are still recomputed when new log records
    arrived and samples are stored: logged requests are demand in the wedge rule.
    Warnings (coarse samples, pods without a model, ...) go to stderr.
    """
    from .metrics import load_metrics, load_prometheus, parse_duration, parse_model_map, recompute_windows

    mapping = parse_model_map(model_map)
    loads = []
    if metrics or (model_map and not prometheus):
        loads.append(load_metrics(con, metrics or [], wedge_window=wedge_window, model_map=mapping, progress=progress))
    if prometheus:
        loads.append(load_prometheus(con, prometheus, since, until, wedge_window=wedge_window, model_map=mapping,
                                     selector=selector, timeout=deadline_s, progress=progress))
    has_samples = con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0]
    recomputed = bool(loads)
    if not loads and (ingested.new_records or force) and has_samples:
        recompute_windows(con, wedge_window)
        recomputed = True
    if recomputed:  # the windows now stored were made with this wedge window: later runs use it too
        store_wedge_window(con, parse_duration(wedge_window, "--wedge-window"))
    for load in loads:
        for warning in load.warnings:
            print(f"analyze: warning: {terminal_text(warning)}", file=sys.stderr)  # pod names are log text
    return loads


def ingest_only(files: list[str], db: Path | None, strict: bool = False) -> IngestReport:
    """Ingest and classify without printing (for scripts and notebooks)."""
    con = connect(db)
    try:
        report = ingest(con, files, strict=strict)
        refresh_turns(con)
        return report
    finally:
        con.close()
