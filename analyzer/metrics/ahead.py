"""Metric files read while the logs are ingested: ``analyze LOGS --metrics FILES``.

Reading the metric files (:func:`~analyzer.metrics.stage_metric_files`, into a
scratch database of its own) needs nothing from the analyzer's database, so
:class:`StagingAhead` does it in a thread from the start of the run; the load
then only stores what was read and computes the windows. On a small day of logs
the logs' ingest leaves a core idle, and the metrics' reading was most of their
cost (measured on a week's 600,000-row CSV and query_range files beside 15 MB of
logs: 1.4 s of the 2.9 s the metrics added).

Only beside small logs (:data:`AHEAD_LOG_BYTES`): a big ingest keeps both cores
busy, so reading ahead would gain little, and the scratch database's memory
(its own bound, ``ANALYZER_METRICS_MEMORY_LIMIT``) would add to the ingest's
instead of following it. A file that does not parse fails the run exactly where
it did before (after the logs are ingested); Ctrl-C and a failed ingest stop the
reading and close the scratch database.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from . import StagedFiles, stage_metric_files

#: Logs up to this many bytes in all (and no standard input) leave room to read the
#: metric files beside them.
AHEAD_LOG_BYTES = 128 * 1024 * 1024


def worth_staging_ahead(metrics, log_files) -> bool:
    """Whether ``metrics`` (the ``--metrics`` paths) are read while ``log_files`` are ingested."""
    from ..sources import STDIN

    # `_form` only: asking a file's form reads its head (the ingest's job, which
    # also reports a file that is not a log).
    if not metrics or any(f._form == STDIN for f in log_files):
        return False
    # A compressed file holds several times its size in lines (a week's logs: 6.5x gzipped).
    return sum((f.size or 0) * (_PACKED if f.path.endswith(_PACKED_SUFFIXES) else 1)
               for f in log_files) <= AHEAD_LOG_BYTES


_PACKED, _PACKED_SUFFIXES = 10, (".gz", ".parquet")


class StagingAhead:
    """:func:`~analyzer.metrics.stage_metric_files` of ``paths``, started now in a thread."""

    def __init__(self, paths) -> None:
        self.paths = list(paths)
        self._scratch = None
        self._lock = threading.Lock()
        self._stopped = False
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="analyzer-metrics")
        self._future = self._pool.submit(stage_metric_files, self.paths, None, self._opened)

    def _opened(self, scratch) -> None:
        from ..interrupt import track

        track(scratch)  # a Ctrl-C interrupts the reading as it does every query
        with self._lock:
            self._scratch = scratch
            stopped = self._stopped
        if stopped:
            scratch.interrupt()

    def result(self) -> StagedFiles:
        """The staged files (the caller stores them); the reading's error, if it failed."""
        try:
            return self._future.result()
        finally:
            self._pool.shutdown(wait=True)

    def abandon(self) -> None:
        """Stop the reading (the run failed or was interrupted) and close what it opened."""
        with self._lock:
            self._stopped = True
            scratch = self._scratch
        if scratch is not None:
            try:
                scratch.interrupt()
            except Exception:  # noqa: BLE001 - closed already, or nothing running
                pass
        self._pool.shutdown(wait=True)
        try:
            staged = self._future.result()
        except BaseException:  # noqa: BLE001 - the reading's own failure: the run has one already
            return
        staged.close()
