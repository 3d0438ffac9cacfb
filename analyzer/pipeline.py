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
from .summary import build_summary, parse_time
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
    wedge_window: str = "5m",
    prometheus: str | None = None,
    model_map: list[str] | None = None,
    caller_deadline_s: float | None = None,
    prometheus_selector: str | None = None,
    prometheus_timeout: str = "60s",
) -> dict:
    """Ingest ``files`` into ``db``, classify every turn, print the sizing summary.

    Prints JSON on stdout with ``json_out``, else tables; diagnostics go to stderr.
    Returns the summary dict.
    """
    since_dt, until_dt = parse_time(since, "since"), parse_time(until, "until")
    from .metrics import parse_duration

    parse_duration(wedge_window, "--wedge-window")  # a bad value fails before any work
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
        with byte_progress("ingesting", sys.stderr.isatty() and not json_out) as progress:
            report = ingest(con, sources, strict=strict, progress=progress)
        _say_skipped(report)
        if report.metric_files:  # Prometheus exports passed among the logs
            metrics = list(metrics or []) + report.metric_files
        from .metrics.progress import metrics_progress

        with metrics_progress(sys.stderr.isatty() and not json_out) as mprogress:
            metric_loads = _load_metrics(con, report, metrics, prometheus, model_map, wedge_window, since_dt, until_dt,
                                         selector=prometheus_selector, deadline_s=deadline_s, progress=mprogress)
        refresh_turns(con, caller_deadline_s=caller_deadline_s)
        summary = cached_summary(con, build_summary, models=models, since=since_dt, until=until_dt)
        summary["ingest"] = report.to_dict()
        summary["metrics"]["loads"] = [m.to_dict() for m in metric_loads]
    finally:
        con.close()
    if json_out:
        print(json.dumps(summary, indent=2, default=str))
    else:
        from .render import print_summary

        print_summary(summary)
    if strict and report.skipped_files:
        raise AnalyzerError(f"{len(report.skipped_files)} input file(s) skipped (--strict)", ExitCode.SKIPPED)
    return summary


def _say_skipped(report: IngestReport) -> None:
    """Skipped files and notes on stderr; a run whose every input was skipped is an error.

    A run that read some files and skipped others succeeds (exit 0): a cron job
    should not fail every night over a stray file in the log folder, and the
    skipped files are listed in the summary and kept in ``skipped_files``.
    ``--strict`` makes such a run exit 8 after committing the good files.
    """
    from .oncall import terminal_text as tt  # paths are untrusted: no control characters reach the terminal

    for s in report.skipped_files:
        print(f"analyze: warning: skipped {tt(s['path'])}: {tt(s['reason'])}", file=sys.stderr)
    for n in report.notes:
        print(f"analyze: note: {tt(n['path'])}: {tt(n['note'])}", file=sys.stderr)
    read = report.files_ingested + report.files_unchanged + report.files_resumed + len(report.metric_files)
    if report.skipped_files and not read:
        first = report.skipped_files[0]
        more = f" (and {len(report.skipped_files) - 1} more)" if len(report.skipped_files) > 1 else ""
        raise InputError(f"{tt(first['path'])}: {tt(first['reason'])}{more}; nothing was ingested")


def _load_metrics(con, ingested: IngestReport, metrics, prometheus, model_map, wedge_window, since, until, *,
                  selector=None, deadline_s=60.0, progress=None) -> list:
    """Load metric files and/or query Prometheus, then (re)compute the pod windows.

    Without metric options, windows are still recomputed when new log records
    arrived and samples are stored: logged requests are demand in the wedge rule.
    Warnings (coarse samples, pods without a model, ...) go to stderr.
    """
    from .metrics import load_metrics, load_prometheus, parse_model_map, recompute_windows

    mapping = parse_model_map(model_map)
    loads = []
    if metrics or (model_map and not prometheus):
        loads.append(load_metrics(con, metrics or [], wedge_window=wedge_window, model_map=mapping, progress=progress))
    if prometheus:
        loads.append(load_prometheus(con, prometheus, since, until, wedge_window=wedge_window, model_map=mapping,
                                     selector=selector, timeout=deadline_s, progress=progress))

    if not loads and ingested.new_records and con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0]:
        recompute_windows(con, wedge_window)
    for load in loads:
        for warning in load.warnings:
            print(f"analyze: warning: {warning}", file=sys.stderr)
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
