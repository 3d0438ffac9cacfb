"""The main job: ingest, load metrics, classify, summarize; or the summary of what a database holds.

:func:`run_main_job` is ``analyze FILES...`` without the printing: every option
checked before any work, the logs ingested, then the metrics loaded, every turn
classified, the summary made.
:func:`summary_of_database` is ``analyze --db X`` with nothing to read. How a
running job is shown (progress bars, diagnostics, warnings) is the caller's,
given as a :class:`JobView`: :mod:`analyzer.cli.terminal.progress` gives the
terminal's, a script none. :func:`run` is the command's use case (the job, or the
stored summary when there is nothing to read); :func:`check_outcome` its exit
after the summary is shown. Scripts and notebooks call :func:`analyzer.ingest`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

from analyzer.classification.turns import check_caller_deadline, refresh_turns
from analyzer.classification.windows import recompute_windows
from analyzer.core.durations import parse_duration
from analyzer.core.errors import AnalyzerError, ExitCode, InputError
from analyzer.core.isotime import parse_range
from analyzer.core.paths import default_db_path
from analyzer.core.safetext import terminal_text
from analyzer.ingestion.logs import IngestReport, ingest
from analyzer.ingestion.metric_readers import check_metric_paths
from analyzer.ingestion.metric_store import parse_model_map
from analyzer.io.prometheus import parse_selector
from analyzer.io.sources import Discovered, discover_inputs
from analyzer.jobs.metrics import load_metrics, load_prometheus
from analyzer.outputs.oncall import check_fail_on, parse_fail_on
from analyzer.outputs.summary import build_summary, filter_notes, resolve_models
from analyzer.outputs.summary_cache import cached_summary
from analyzer.outputs.verdict import next_steps
from analyzer.store.db import connect_writer, discarded
from analyzer.store.holdings import (
    changes, describe_seconds, holdings, plan_wedge_window, store_wedge_window, stored_wedge_window)


def caller_deadline_option(seconds: float) -> float:
    """``--caller-deadline`` checked (:func:`check_caller_deadline`): a usage error that names the option.

    Raises:
        AnalyzerError: (usage) not a positive number of seconds.
    """
    try:
        return check_caller_deadline(seconds)
    except ValueError as exc:
        raise AnalyzerError(f"--caller-deadline: {exc}", ExitCode.USAGE) from exc


@dataclass(frozen=True)
class RunOptions:
    """What ``analyze FILES...`` (``analyze run``) was asked to do: one object from the
    command line (or a script) to the job, checked when it is made.

    ``model_patterns`` are ``--model`` as given: names or LIKE patterns (``glm%``),
    resolved to the models the database holds when the summary is made. Made with a
    bad value (a reversed range, a malformed duration or threshold, a selector
    without a Prometheus URL), it raises before any work: no database is created.

    Raises:
        AnalyzerError: (usage) a bad option, naming its parameter (``param``/``names``).
    """

    files: tuple[str, ...] = ()
    db: Path | None = None
    json_out: bool = False
    strict: bool = False
    model_patterns: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None
    metrics: tuple[str, ...] = ()
    wedge_window: str | None = None
    save_wedge_window: bool = False
    prometheus: str | None = None
    prometheus_selector: str | None = None
    prometheus_timeout: str = "60s"
    model_map: tuple[str, ...] = ()
    fail_on: tuple[str, ...] = ()
    caller_deadline_s: float | None = None
    # What the checks made of the text above (not given by the caller).
    since_dt: datetime | None = field(init=False, default=None, repr=False, compare=False)
    until_dt: datetime | None = field(init=False, default=None, repr=False, compare=False)
    wedge_window_s: float | None = field(init=False, default=None, repr=False, compare=False)
    deadline_s: float = field(init=False, default=60.0, repr=False, compare=False)
    thresholds: tuple = field(init=False, default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        derived = {
            "thresholds": tuple(parse_fail_on(list(self.fail_on))),  # a malformed threshold fails before any work
            "wedge_window_s": parse_duration(self.wedge_window, "--wedge-window") if self.wedge_window else None,
            "deadline_s": parse_duration(self.prometheus_timeout, "--prometheus-timeout"),
        }
        derived["since_dt"], derived["until_dt"] = parse_range(self.since, self.until)
        if self.caller_deadline_s is not None:
            caller_deadline_option(self.caller_deadline_s)
        if self.prometheus_selector:
            if not self.prometheus:
                raise AnalyzerError("--prometheus-selector needs --prometheus URL", ExitCode.USAGE)
            parse_selector(self.prometheus_selector)
        parse_model_map(list(self.model_map))
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def reads_inputs(self) -> bool:
        """Logs, metric files or a Prometheus to read; else the run prints what the database holds."""
        return bool(self.files or self.metrics or self.prometheus)


#: The library's parameters as ``analyze run`` spells them (for :func:`analyzer.cli.options.naming`).
RUN_FLAGS = {"selector": "--prometheus-selector", "url": "--prometheus", "timeout": "--prometheus-timeout",
             "model_map": "--model-map", "since": "--since", "until": "--until", "models": "--model",
             "specs": "--fail-on", "thresholds": "--fail-on"}


def run(opts: RunOptions, view: "JobView | None" = None) -> tuple[dict, IngestReport | None]:
    """``analyze FILES...``: the main job when there is something to read, else the summary of
    what the database holds; (summary, ingest report or None)."""
    if opts.reads_inputs:
        return run_main_job(opts, view or JobView())
    return summary_of_database(opts), None


def check_outcome(opts: RunOptions, summary: dict, report: IngestReport | None) -> None:
    """After the summary is shown: ``--strict`` with a skipped input file exits 8, a crossed
    ``--fail-on`` threshold exits 7.

    Raises:
        AnalyzerError: exit 8 (``--strict``: files skipped; the good ones were committed), exit 7 (a threshold).
    """
    if opts.strict and report is not None and report.skipped_files:
        raise AnalyzerError(f"{len(report.skipped_files)} input file(s) skipped (--strict)", ExitCode.SKIPPED)
    if opts.thresholds:
        check_fail_on(summary, opts.thresholds)


def _no_progress() -> AbstractContextManager[None]:
    return nullcontext(None)


@dataclass(frozen=True)
class JobView:
    """How a running job is shown; the default shows nothing (a script, a notebook).

    ``ingesting()`` and ``loading_metrics()`` are context managers yielding a
    progress callback (``(done, total)`` bytes; ``(done, total, what)``) or None;
    ``ingested(report)`` shows what the ingest skipped or quarantined; ``warn(text)``
    shows a metrics load's warning (text from the logs: the view escapes it).
    """

    ingesting: Callable[[], AbstractContextManager] = _no_progress
    loading_metrics: Callable[[], AbstractContextManager] = _no_progress
    ingested: Callable[[IngestReport], None] = field(default=lambda report: None)
    warn: Callable[[str], None] = field(default=lambda text: None)


def run_main_job(opts: RunOptions, view: JobView = JobView()) -> tuple[dict, IngestReport]:
    """Ingest ``opts.files`` into ``opts.db``, load metrics, classify every turn; (summary, ingest report).

    Every option is checked before any work (a bad one, or a missing input,
    creates no database). ``opts.wedge_window`` is for this run only unless
    ``opts.save_wedge_window`` (see :mod:`analyzer.store.holdings`).

    Raises:
        AnalyzerError: a bad option (usage); InputError: every input skipped.
    """
    if opts.metrics:  # a missing metrics path, or a log given as metrics, fails before any work
        check_metric_paths(list(opts.metrics))
    sources = discover_inputs(list(opts.files))  # a missing input fails before a database is created
    con = connect_writer(opts.db)
    try:
        return _job(con, sources, opts, view)
    finally:
        con.close()


def _job(con, sources: Discovered, opts: RunOptions, view: JobView) -> tuple[dict, IngestReport]:
    """Ingest, load metrics, classify and summarize on ``con``: (summary, ingest report)."""
    before = holdings(con)
    stored_w, one_off_w = plan_wedge_window(con, opts.wedge_window_s, opts.save_wedge_window)
    with view.ingesting() as progress:
        report = ingest(con, sources, strict=opts.strict, progress=progress)
    view.ingested(report)
    _fail_when_nothing_was_read(report)
    metrics = list(opts.metrics) + report.metric_files  # with Prometheus exports passed among the logs
    with view.loading_metrics() as mprogress:
        metric_loads = load_run_metrics(con, report, metrics, opts.prometheus, list(opts.model_map), stored_w,
                                        opts.since_dt, opts.until_dt, force=opts.save_wedge_window,
                                        selector=opts.prometheus_selector, deadline_s=opts.deadline_s,
                                        progress=mprogress)
    for load in metric_loads:
        for warning in load.warnings:
            view.warn(warning)
    classified = refresh_turns(con, caller_deadline_s=opts.caller_deadline_s)
    # Every file known and unchanged (none read), no metrics loaded, no windows
    # stored: what the database holds is what it held before the run.
    unchanged = report.files_unchanged == report.files_seen and not metric_loads and not opts.save_wedge_window
    summary = summarize_stored(con, model_patterns=list(opts.model_patterns) or None, since=opts.since_dt,
                               until=opts.until_dt, one_off_wedge_s=one_off_w, database=before if unchanged else None,
                               records_signature=classified.records_signature)
    summary["ingest"] = report.to_dict()
    summary["metrics"]["loads"] = [m.to_dict() for m in metric_loads]
    summary["notes"] = changes(before, summary["database"]) + summary.get("notes", [])
    summary["next"] = next_steps(None if opts.db is None else str(opts.db))
    return summary, report


def _fail_when_nothing_was_read(report: IngestReport) -> None:
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


def summary_of_database(opts: RunOptions) -> dict:
    """``analyze --db X`` with nothing to read: the summary of what the database holds, with the filters.

    With ``opts.save_wedge_window`` the pod windows are recomputed and stored first.

    Raises:
        AnalyzerError: (usage) no database there, or one with no records.
    """
    target = Path(opts.db) if opts.db is not None else default_db_path()
    if not target.exists():
        raise AnalyzerError(f"give log files to ingest (analyze FILES...), or --db of a database that holds "
                            f"data: there is no database at {target}", ExitCode.USAGE)
    con = connect_writer(target)
    try:
        if not con.execute("SELECT count(*) FROM records").fetchall()[0][0]:
            raise AnalyzerError(f"the database {target} holds no records: give log files to ingest "
                                "(analyze FILES... --db ...)", ExitCode.USAGE)
        stored_w, one_off_w = plan_wedge_window(con, opts.wedge_window_s, opts.save_wedge_window)
        if opts.save_wedge_window and con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0]:
            recompute_windows(con, stored_w)
            store_wedge_window(con, stored_w)
        classified = refresh_turns(con)
        summary = summarize_stored(con, model_patterns=list(opts.model_patterns) or None, since=opts.since_dt,
                                   until=opts.until_dt, one_off_wedge_s=one_off_w,
                                   records_signature=classified.records_signature)
        summary["next"] = next_steps(None if opts.db is None else str(opts.db))
        return summary
    finally:
        con.close()


def summarize_stored(con, *, model_patterns, since, until, one_off_wedge_s: float | None,
                     database: dict | None = None, records_signature: str | None = None) -> dict:
    """The summary of the database, with the ``--model`` patterns resolved and what it holds.

    With ``one_off_wedge_s`` the pod windows are recomputed with that wedge window
    for this summary only, in a transaction that is rolled back: the stored
    windows (and what later commands see) stay as they were. ``database`` is
    :func:`analyzer.store.holdings.holdings` when the caller took it and nothing it
    reads changed since (else it is taken here); ``records_signature`` is the one
    of the refresh just done (:attr:`analyzer.classification.turns.ClassifyReport.records_signature`).
    """
    chosen = resolve_models(con, model_patterns)  # the --model patterns as the models the database holds
    has_samples = con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0] > 0
    notes: list[str] = []
    if one_off_wedge_s is not None and has_samples:
        with discarded(con):
            recompute_windows(con, one_off_wedge_s)
            refresh_turns(con)
            summary = build_summary(con, models=chosen, since=since, until=until)
        stored = stored_wedge_window(con)
        notes.append(f"pod windows for this run only use --wedge-window {describe_seconds(one_off_wedge_s)}; "
                     f"the database keeps its windows of {describe_seconds(stored or 300.0)} "
                     "(add --save-wedge-window to keep these)")
    else:  # a re-run that changed nothing prints the stored summary (analyzer.outputs.summary_cache)
        summary = cached_summary(con, build_summary, models=chosen, since=since, until=until,
                                 records_signature=records_signature)
    summary["database"] = database if database is not None else holdings(con)
    summary["metrics"]["wedge_window_s"] = one_off_wedge_s if one_off_wedge_s is not None and has_samples \
        else stored_wedge_window(con)
    summary["metrics"]["wedge_window_stored"] = not (one_off_wedge_s is not None and has_samples)
    summary["notes"] = notes
    summary["not_filtered"] = filter_notes(summary)
    return summary


def load_run_metrics(con, ingested: IngestReport, metrics, prometheus, model_map, wedge_window, since, until, *,
                     force: bool = False, selector=None, deadline_s=60.0, progress=None) -> list:
    """Load metric files and/or query Prometheus, then (re)compute the pod windows.

    Without metric options, windows are still recomputed when new log records
    arrived and samples are stored: logged requests are demand in the wedge rule.
    ``metrics`` holds the metric files found among the logs too. Returns the
    loads; their ``warnings`` (coarse samples, pods without a model, ...) are the
    caller's to show.
    """
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
        store_wedge_window(con, parse_duration(wedge_window, "wedge_window"))
    return loads
