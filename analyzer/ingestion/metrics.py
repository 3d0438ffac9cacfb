"""Metric files read into a scratch database before they are stored.

:func:`stage_metric_files` reads every file of a ``--metrics`` list into a
scratch DuckDB (:mod:`.metric_readers`, labels interned by :mod:`.metric_stage`);
:func:`analyzer.jobs.metrics.load_metrics` then stores them in
``metric_samples`` and recomputes the pod windows in one transaction.

Only ``up``, ``vllm:generation_tokens_total`` (also spelled
``vllm_generation_tokens_total``), ``vllm:num_requests_running``/``_waiting`` and
``vllm:engine_sleep_state`` (the rules), and ``vllm:kv_cache_usage_perc`` and
``vllm:request_success_total`` (corroboration) are kept; other metrics in a file
are counted and dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

import duckdb

from analyzer.ingestion.metric_readers import stage_file
from analyzer.ingestion.metric_stage import Series, close_stage, open_stage, seal_input
from analyzer.io.metric_formats import discover_metric_files

__all__ = ["StagedFiles", "stage_metric_files", "Progress"]

#: ``progress(done, total, what)``: called as files load and windows are computed.
Progress = Callable[[int, int, str], None]


@dataclass
class StagedFiles:
    """Metric files read into a scratch database, not yet stored (:func:`stage_metric_files`).

    The caller stores them (:func:`~.metric_stage.store_stage`) and closes them.
    """

    scratch: duckdb.DuckDBPyConnection
    series: Series
    sources: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def close(self) -> None:
        """Close the scratch database (and remove its spill folder)."""
        close_stage(self.scratch)


def stage_metric_files(paths: Iterable[str], progress: Progress | None = None) -> StagedFiles:
    """Read every metric file of ``paths`` into a scratch database; nothing is stored.

    ``progress`` is called before each file and now and then within a big one (an
    exception it raises stops the reading).

    Raises:
        InputError: a path matches nothing, a file does not parse, or a file is a proxy log.
    """
    files = discover_metric_files(list(paths))
    sizes = [f.stat().st_size for f in files]
    total = sum(sizes) or 1
    done = 0
    staged = StagedFiles(scratch=open_stage(), series=Series())  # labels interned once for every file
    try:
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
