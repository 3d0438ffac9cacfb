"""Loading metrics as one use case: samples stored and pod windows recomputed together.

The ladder cannot fix a vLLM pod that is up but generates nothing, so the turns
view relabels an upstream failure inside such a window ``wedged-pod`` (inside a
down window ``pod-down``). This module brings the evidence in:

- :func:`load_metrics` reads files: Prometheus ``query_range``/``query`` JSON,
  text exposition (0.0.4, OpenMetrics) and CSV (see :mod:`analyzer.io.metric_formats`);
- :func:`load_prometheus` runs the range queries against a live Prometheus
  (see :mod:`analyzer.io.prometheus`);
- both store the samples idempotently in ``metric_samples``
  (:mod:`analyzer.ingestion.metric_stage`) and recompute ``pod_windows``
  (:mod:`analyzer.classification.windows`, where the wedge rule and its behaviour on
  idle periods, restarts, gaps and stale series are documented) in one
  transaction, so the windows always describe the samples stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Iterable

import duckdb

from analyzer.classification.windows import DOWN, SLEEPING, WEDGED, WindowResult, write_windows
from analyzer.core.durations import US, parse_duration, to_epoch_us, us_to_datetime
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.scrub import scrub
from analyzer.core.urls import public_url
from analyzer.ingestion.apistream import SeriesStager
from analyzer.ingestion.metric_stage import Series, StageStats, close_stage, open_stage, seal_input, store_stage
from analyzer.ingestion.metric_store import store_model_map
from analyzer.ingestion.metrics import Progress, stage_metric_files
from analyzer.io.prometheus import fetch_range
from analyzer.store.db import transaction

__all__ = ["MetricsReport", "load_metrics", "load_prometheus"]

#: How far back ``load_prometheus`` looks when neither ``since`` nor logged records say: a week.
DEFAULT_LOOKBACK = timedelta(days=7)


@dataclass
class MetricsReport:
    """What a metrics load did (the summary and ``--json`` print it)."""

    sources: list[str] = field(default_factory=list)
    samples_read: int = 0
    samples_new: int = 0
    duplicates: int = 0
    non_finite: int = 0
    other_metrics: int = 0
    wedge_window_s: float = 300.0
    step_s: float | None = None
    selector: str | None = None
    windows: dict[str, int] = field(default_factory=lambda: {WEDGED: 0, DOWN: 0, SLEEPING: 0})
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
                for k, v in self.__dict__.items()}

    def _add(self, stats: StageStats) -> None:
        self.samples_read += stats.read
        self.non_finite += stats.non_finite
        self.other_metrics += stats.other_metrics
        self.samples_new += stats.new
        self.duplicates += stats.duplicates

    def _finish(self, result: WindowResult) -> "MetricsReport":
        self.windows = result.counts()
        self.warnings += result.warnings
        return self



def load_metrics(
    con: duckdb.DuckDBPyConnection,
    paths: Iterable[str],
    *,
    wedge_window: str | float = "5m",
    model_map: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> MetricsReport:
    """Load metric files into ``metric_samples`` and recompute ``pod_windows``.

    Args:
        con: an analyzer database (:func:`analyzer.store.db.connect`).
        paths: files, directories or globs; each file's form is detected from its content.
        wedge_window: how long a flat counter under demand makes a wedge (``"5m"``).
        model_map: log ``model`` -> metric ``model_name`` where they differ (stored).
        progress: called with ``(done, total, what)`` per file and for the windows.

    All files load in one transaction: a file that does not parse leaves the
    database as it was. Loading a file again stores nothing new. Each form has
    its reader (see :mod:`analyzer.ingestion.metric_readers`).

    Raises:
        InputError: a path matches nothing, a file does not parse, or a file is a proxy log.
        AnalyzerError: (usage) a bad ``wedge_window``.
    """
    w_s = parse_duration(wedge_window, "--wedge-window")
    staged = stage_metric_files(paths, progress)
    report = MetricsReport(wedge_window_s=w_s, sources=list(staged.sources), warnings=list(staged.warnings))
    try:
        with transaction(con):
            # Every file of the load in one INSERT: the files were all read first, so one
            # that does not parse has stopped the load before anything was written.
            report._add(store_stage(con, staged.scratch, staged.series, report.sources))
            store_model_map(con, model_map)
            result = write_windows(con, w_s, progress)
    finally:
        staged.close()
    return report._finish(result)


def load_prometheus(
    con: duckdb.DuckDBPyConnection,
    url: str,
    since: datetime | str | float | None,
    until: datetime | str | float | None,
    *,
    step: float | None = None,
    wedge_window: str | float = "5m",
    model_map: dict[str, str] | None = None,
    timeout: float = 60.0,
    selector: str | None = None,
    progress: Progress | None = None,
) -> MetricsReport:
    """Query a live Prometheus for ``[since, until]``, store the samples, recompute ``pod_windows``.

    Args:
        url: the Prometheus base URL, e.g. ``http://prometheus:9090``.
        since, until: the range. When not given, the time range of the logged
            records in the database widened by the wedge window on each side, or,
            with no records, the week up to now.
        step: seconds between points; default a fifth of the wedge window, between
            1 s and 15 s (so a wedge spans several points), raised when the range
            would exceed Prometheus' 11,000 points per series.
        wedge_window, model_map, progress: as for :func:`load_metrics`.
        timeout: the total seconds one query may take, connecting and reading
            included (a server that trickles bytes cannot hold a run).
        selector: label matchers applied to every query (``namespace="llm"``,
            ``{job="vllm",namespace=~"llm-.*"}``): on a shared Prometheus an
            unqualified ``up`` returns every tenant's targets.

    Raises:
        AnalyzerError: (upstream) Prometheus unreachable or answering an error;
            (usage) bad arguments.
    """
    w_s = parse_duration(wedge_window, "--wedge-window")
    if since is None or until is None:
        first, last = con.execute("SELECT epoch_us(min(ts)), epoch_us(max(ts)) FROM records").fetchall()[0]
        pad = round(w_s * US)
        if until is None:
            until = us_to_datetime(last + pad) if last is not None else datetime.now(timezone.utc)
        if since is None:
            since = (us_to_datetime(first - pad) if first is not None
                     else us_to_datetime(to_epoch_us(until, "until")) - DEFAULT_LOOKBACK)
    if step is None:
        step = max(1.0, min(15.0, w_s / 5))
    shown = public_url(url)  # never store or print credentials carried in the URL
    scratch = open_stage()
    try:
        # Each answer (a page of the range when it is big) is staged before the next is asked.
        stager = SeriesStager(scratch)
        fetched = fetch_range(url, since, until, step, timeout, selector=selector, progress=progress,
                              on_answer=stager.add_document)
        report = MetricsReport(wedge_window_s=w_s, step_s=fetched.step_s, sources=[shown], selector=fetched.selector)
        report.warnings += fetched.warnings
        try:
            series = stager.finish(Series())
        except ValueError as exc:  # a time or value that is not a number, found when the last batch is staged
            raise AnalyzerError(f"Prometheus at {shown}: unexpected answer: {scrub(str(exc))}",
                                ExitCode.UPSTREAM) from exc
        seal_input(scratch, 0)
        with transaction(con):
            report._add(store_stage(con, scratch, series, [shown]))
            store_model_map(con, model_map)
            result = write_windows(con, w_s, progress)
    finally:
        close_stage(scratch)
    return report._finish(result)
