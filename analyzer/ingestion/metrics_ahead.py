"""Metric files read while the logs are ingested: ``analyze LOGS --metrics FILES``.

Reading the metric files (:func:`~analyzer.ingestion.metrics.stage_metric_files`, into a
scratch database of its own) needs nothing from the analyzer's database, so
:class:`StagingAhead` does it in a thread from the start of the run; the load
then only stores what was read and computes the windows. On a small day of logs
the logs' ingest leaves a core idle, and the metrics' reading was most of their
cost (measured on a week's 600,000-row CSV and query_range files beside 15 MB of
logs: 1.4 s of the 2.9 s the metrics added).

Only beside small logs (:data:`AHEAD_LOG_BYTES`): a big ingest keeps both cores
busy, so reading ahead would gain little, and the scratch database's memory
(its own bound, ``ANALYZER_METRICS_MEMORY_LIMIT``) would add to the ingest's
instead of following it. And only files DuckDB reads (CSV, API JSON, big
scrapes): an interrupt stops their reading at once, where a small scrape in the
Python parser would hold a failed or interrupted run until it is read. A file
that does not parse fails the run exactly where it did before (after the logs
are ingested); Ctrl-C and a failed ingest stop the reading (before its next
file, and the statement running) and close the scratch database.
"""

from __future__ import annotations

import threading

from analyzer.core.interrupt import track
from analyzer.ingestion.metric_readers import CSV, JSON, STREAM_BYTES, head_text
from analyzer.ingestion.metrics import StagedFiles, stage_metric_files
from analyzer.io.metric_formats import detect_form, discover_metric_files
from analyzer.io.sources import PARQUET, STDIN, starts_packed

#: Logs up to this many bytes in all (and no standard input) leave room to read the
#: metric files beside them.
AHEAD_LOG_BYTES = 128 * 1024 * 1024
# A compressed file holds several times its size in lines (a week's logs: 6.5x gzipped).
_PACKED, _PACKED_SUFFIXES = 10, (".gz", ".parquet")


def worth_staging_ahead(metrics, log_files) -> bool:
    """Whether ``metrics`` (the ``--metrics`` paths) are read while ``log_files`` are ingested."""
    # `_form` only: asking a file's form reads its head (the ingest's job, which
    # also reports a file that is not a log).
    if not metrics or any(f._form == STDIN for f in log_files) or not _read_by_duckdb(metrics):
        return False
    named = [f.path.endswith(_PACKED_SUFFIXES) or f.compressed or f._form == PARQUET for f in log_files]
    if sum((f.size or 0) * (_PACKED if packed else 1) for f, packed in zip(log_files, named)) > AHEAD_LOG_BYTES:
        return False
    # Small by their names: a compressed file named otherwise (`gzip > week.log`)
    # is told by its first bytes (4 of them, of files whose form is not known yet),
    # until the logs are too big.
    total = 0
    for f, packed in zip(log_files, named):
        if not packed and f._form is None:
            packed = starts_packed(f.path)
        total += (f.size or 0) * (_PACKED if packed else 1)
        if total > AHEAD_LOG_BYTES:
            return False
    return True


def _read_by_duckdb(metrics) -> bool:
    """Whether every file of ``metrics`` is one DuckDB's readers take (CSV, API JSON, a big
    scrape), so an interrupt stops its reading at once; a small text scrape is parsed in
    Python, which nothing stops, and is read after the logs. A path that is not there
    (the load says so) reads nothing ahead either."""
    try:
        files = discover_metric_files(metrics)
        return all(detect_form(head_text(f), f.name) in (CSV, JSON) or f.stat().st_size >= STREAM_BYTES
                   for f in files)
    except Exception:  # noqa: BLE001 - any problem: read them after the logs, where it is reported
        return False


class _Stopped(Exception):
    """The run no longer wants the files (raised in the reading thread, before a file)."""


class StagingAhead:
    """:func:`~analyzer.ingestion.metrics.stage_metric_files` of ``paths``, started now in a thread.

    The caller ends it one of two ways: :meth:`result` (the staged files, now the
    caller's to store and close) or :meth:`abandon`. Either may come at any time,
    and :meth:`abandon` after :meth:`result` does nothing.
    """

    def __init__(self, paths) -> None:
        self.paths = list(paths)
        self._lock = threading.Lock()
        self._scratch = None
        self._stopped = False
        self._staged: StagedFiles | None = None
        self._error: BaseException | None = None
        # Not a daemon: a thread still inside DuckDB when the interpreter ends aborts
        # the process (checked). It is stopped and joined instead (:meth:`abandon`).
        self._thread = threading.Thread(target=self._work, name="analyzer-metrics")
        self._thread.start()

    def _work(self) -> None:
        try:
            staged = stage_metric_files(self.paths, self._before_file, self._opened)
        except BaseException as exc:  # noqa: BLE001 - handed to result(), or dropped when abandoned
            self._error = exc
        else:
            self._staged = staged

    def _before_file(self, done: int, total: int, what: str) -> None:
        if self._stopped:
            raise _Stopped()

    def _opened(self, scratch) -> None:
        track(scratch)  # a Ctrl-C interrupts the reading as it does every query
        with self._lock:
            self._scratch = scratch
            stopped = self._stopped
        if stopped:
            raise _Stopped()

    def _join(self) -> None:
        while self._thread.is_alive():
            self._thread.join(0.05)  # in steps: a Ctrl-C meanwhile reaches the main thread

    def result(self) -> StagedFiles:
        """The staged files (the caller stores and closes them); the reading's error, if it failed."""
        try:
            self._join()
        except BaseException:  # Ctrl-C while waiting
            self.abandon()
            raise
        staged, self._staged = self._staged, None
        if self._error is not None:
            raise self._error
        return staged

    def abandon(self) -> None:
        """Stop the reading (the run failed or was interrupted) and close what it opened.

        The next file is not begun, and the statement running now stops (the files
        read ahead are those DuckDB reads, :func:`worth_staging_ahead`), so this
        returns within moments.
        """
        with self._lock:
            self._stopped = True
            scratch = self._scratch
        if scratch is not None and self._thread.is_alive():
            try:
                scratch.interrupt()
            except Exception:  # noqa: BLE001 - closed already, or nothing running
                pass
        while self._thread.is_alive():
            try:
                self._thread.join(0.05)
            except BaseException:  # noqa: BLE001 - a second Ctrl-C: the reading is stopping already
                continue
        staged, self._staged = self._staged, None
        if staged is not None:
            staged.close()
