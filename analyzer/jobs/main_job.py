"""The main job's library steps: the summary of a database, the run's metrics, ingest-only.

``analyze FILES...`` (:mod:`analyzer.cli.run`) ingests, then calls
:func:`load_run_metrics` and :func:`summarize_stored`; scripts and notebooks
call :func:`ingest_only` (or :func:`analyzer.ingest`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analyzer.classification.turns import refresh_turns
from analyzer.classification.windows import recompute_windows
from analyzer.core.durations import parse_duration
from analyzer.ingestion.logs import IngestReport, ingest
from analyzer.ingestion.metric_store import parse_model_map
from analyzer.ingestion.metrics import stage_metric_files
from analyzer.jobs.metrics import load_metrics, load_prometheus
from analyzer.outputs.summary import build_summary, filter_notes, resolve_models
from analyzer.outputs.summary_cache import cached_summary
from analyzer.store.db import connect_writer, discarded
from analyzer.store.holdings import describe_seconds, holdings, store_wedge_window, stored_wedge_window


@dataclass(frozen=True)
class RunOptions:
    """What ``analyze FILES...`` (``analyze run``) was asked to do: one object from the
    command line to the job, instead of the same options passed on by hand at each step.

    ``model_patterns`` are ``--model`` as given: names or LIKE patterns (``glm%``),
    resolved to the models the database holds when the summary is made.
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

    @property
    def reads_inputs(self) -> bool:
        """Logs, metric files or a Prometheus to read; else the run prints what the database holds."""
        return bool(self.files or self.metrics or self.prometheus)


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
                     force: bool = False, selector=None, deadline_s=60.0, progress=None, ahead=None) -> list:
    """Load metric files and/or query Prometheus, then (re)compute the pod windows.

    Without metric options, windows are still recomputed when new log records
    arrived and samples are stored: logged requests are demand in the wedge rule.
    ``ahead``: a :class:`analyzer.ingestion.metrics_ahead.StagingAhead` reading the
    ``--metrics`` files since the run began (the metric files found among the logs,
    ``ingested.metric_files``, are read into the same stage); its result is taken here, and the caller
    abandons it whatever happens (which does nothing once it was taken). Returns
    the loads; their ``warnings`` (coarse samples, pods without a model, ...) are
    the caller's to show.
    """
    mapping = parse_model_map(model_map)
    loads = []
    if metrics or (model_map and not prometheus):
        staged = None
        if ahead is not None:
            staged = ahead.result()
            if ingested.metric_files:  # metric files found among the logs: read into the same stage
                stage_metric_files(ingested.metric_files, progress, into=staged)
        loads.append(load_metrics(con, metrics or [], wedge_window=wedge_window, model_map=mapping, progress=progress,
                                  staged=staged))
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


def ingest_only(files: list[str], db: Path | None, strict: bool = False) -> IngestReport:
    """Ingest and classify without printing (for scripts and notebooks)."""
    con = connect_writer(db)
    try:
        report = ingest(con, files, strict=strict)
        refresh_turns(con)
        return report
    finally:
        con.close()
