"""Prometheus metrics and the wedged pod: samples in, ``pod_windows`` out.

The ladder cannot fix a vLLM pod that is up but generates nothing, so the turns
view relabels an upstream failure inside such a window ``wedged-pod`` (inside a
down window ``pod-down``). This package brings the evidence in:

- :func:`load_metrics` reads files: Prometheus ``query_range``/``query`` JSON,
  text exposition (0.0.4, OpenMetrics) and CSV (see :mod:`.formats`);
- :func:`load_prometheus` runs the range queries against a live Prometheus
  (see :mod:`.prometheus`);
- both store the samples idempotently in ``metric_samples`` (:mod:`.store`) and
  recompute ``pod_windows`` (:mod:`.windows`, where the wedge rule and its
  behaviour on idle periods, restarts, gaps and stale series are documented);
- :func:`wedged_episodes` lists the windows with their failed turns for the summary.

Only ``up``, ``vllm:generation_tokens_total`` (also spelled
``vllm_generation_tokens_total``), ``vllm:num_requests_running``/``_waiting`` and
``vllm:engine_sleep_state`` (the rules), and ``vllm:kv_cache_usage_perc`` and
``vllm:request_success_total`` (corroboration) are kept; other metrics in a file
are counted and dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Callable, Iterable

import duckdb

from ..db import transaction
from .formats import discover_metric_files
from .stage import Series, StageStats, close_stage, open_stage, seal_input, store_stage
from .store import parse_model_map, store_model_map
from .times import US, parse_duration, to_epoch_us, us_to_datetime
from .windows import DOWN, SLEEPING, WEDGED, WindowResult, recompute_windows, wedged_episodes, write_windows
from ..urls import public_url
from .readers import stage_file
from ..errors import AnalyzerError, ExitCode
from ..scrub import scrub

__all__ = [
    "MetricsReport", "StagedFiles", "load_metrics", "stage_metric_files", "load_prometheus", "recompute_windows", "wedged_episodes",
    "parse_duration", "parse_model_map", "WEDGED", "DOWN", "SLEEPING", "Progress",
]

#: ``progress(done, total, what)``: called as files load and windows are computed.
Progress = Callable[[int, int, str], None]

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


@dataclass
class StagedFiles:
    """Metric files read into a scratch database, not yet stored (:func:`stage_metric_files`).

    :func:`load_metrics` stores them (``staged=``) and closes the scratch
    database; a caller that does not get that far calls :meth:`close`.
    """

    scratch: duckdb.DuckDBPyConnection
    series: Series
    sources: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def close(self) -> None:
        """Close the scratch database (and remove its spill folder)."""
        close_stage(self.scratch)


def stage_metric_files(paths: Iterable[str], progress: Progress | None = None,
                       opened: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
                       into: StagedFiles | None = None) -> StagedFiles:
    """Read every metric file of ``paths`` into a scratch database; nothing is stored.

    ``opened(scratch)`` is called once the scratch database exists (a caller in
    another thread uses it to interrupt the reading); ``progress`` before each
    file (an exception it raises stops the reading). ``into``: files staged
    already, which these join (their scratch database; closed on failure).

    Raises:
        InputError: a path matches nothing, a file does not parse, or a file is a proxy log.
    """
    paths = list(paths)
    files = discover_metric_files(paths)
    sizes = [f.stat().st_size for f in files]
    total = sum(sizes) or 1
    done = 0
    staged = into if into is not None else StagedFiles(scratch=open_stage(), series=Series())  # labels interned once
    try:
        if opened:
            opened(staged.scratch)
        for path, size in zip(files, sizes):
            if progress:
                progress(done, total, f"metrics {path.name}")
            tick = (lambda: progress(done, total, f"metrics {path.name}")) if progress else None
            _form, notes = stage_file(staged.scratch, path, staged.series, tick)
            seal_input(staged.scratch, len(staged.sources))
            staged.sources.append(str(path.resolve()))
            staged.warnings += notes
            done += size
    except BaseException:
        staged.close()
        raise
    return staged


def load_metrics(
    con: duckdb.DuckDBPyConnection,
    paths: Iterable[str],
    *,
    wedge_window: str | float = "5m",
    model_map: dict[str, str] | None = None,
    progress: Progress | None = None,
    staged: StagedFiles | None = None,
) -> MetricsReport:
    """Load metric files into ``metric_samples`` and recompute ``pod_windows``.

    Args:
        con: an analyzer database (:func:`analyzer.db.connect`).
        paths: files, directories or globs; each file's form is detected from its content.
        wedge_window: how long a flat counter under demand makes a wedge (``"5m"``).
        model_map: log ``model`` -> metric ``model_name`` where they differ (stored).
        progress: called with ``(done, total, what)`` per file and for the windows.
        staged: ``paths`` already read by :func:`stage_metric_files` (this call
            stores them and closes the scratch database).

    All files load in one transaction: a file that does not parse leaves the
    database as it was. Loading a file again stores nothing new. CSV and JSON go
    through DuckDB's readers, big text scrapes stream (see :mod:`.readers`).

    Raises:
        InputError: a path matches nothing, a file does not parse, or a file is a proxy log.
        AnalyzerError: (usage) a bad ``wedge_window``.
    """
    try:
        w_s = parse_duration(wedge_window, "--wedge-window")
    except BaseException:
        if staged is not None:
            staged.close()
        raise
    if staged is None:
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
    # Here, not at the top: httpx, and numpy for the stager, only when a live Prometheus is asked.
    from .apistream import SeriesStager
    from .prometheus import fetch_range

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
