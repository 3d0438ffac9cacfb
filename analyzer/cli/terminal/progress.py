"""Progress on a terminal (bars on stderr, quiet when piped or with ``--json``) and the
ingest's lines on stderr."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

from analyzer.cli.terminal import warn
from analyzer.core.safetext import terminal_text

from analyzer.jobs.main_job import JobView

if TYPE_CHECKING:  # pragma: no cover
    from analyzer.ingestion.logs import IngestReport


def print_ingest_diagnostics(report: "IngestReport") -> None:
    """The files an ingest skipped and its notes, one line each on stderr."""
    for s in report.skipped_files:
        print(f"analyze: warning: skipped {terminal_text(s['path'])}: {terminal_text(s['reason'])}", file=sys.stderr)
    for n in report.notes:
        print(f"analyze: note: {terminal_text(n['path'])}: {terminal_text(n['note'])}", file=sys.stderr)


@contextmanager
def progress_bar(description: str, enabled: bool, *, steps: bool = False) -> Iterator[Callable | None]:
    """A rich progress bar on stderr, or None when not ``enabled`` (off a terminal, or ``--json``).

    Over bytes (the ingest) it yields ``progress(done, total)``; with ``steps`` (the metrics
    load) ``progress(done, total, what)``, ``what`` shown as the bar's description.
    """
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (BarColumn, DownloadColumn, Progress, TaskProgressColumn, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    counted = (TaskProgressColumn(), TimeElapsedColumn()) if steps else (DownloadColumn(), TimeRemainingColumn())
    with Progress(
        TextColumn("{task.description}"), BarColumn(), *counted, console=Console(stderr=True), transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def in_bytes(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        def in_steps(done: int, total: int, what: str) -> None:
            # File names and queries are shown, never read as markup.
            bar.update(task, completed=done, total=total or None, description=escape(what[:60]))

        yield in_steps if steps else in_bytes


def job_view(shown: bool) -> JobView:
    """How the terminal shows the main job: progress bars on stderr when ``shown`` (a terminal,
    no ``--json``); the ingest's skipped files and notes, and the metrics' warnings, always."""
    return JobView(
        ingesting=lambda: progress_bar("ingesting", shown),
        loading_metrics=lambda: progress_bar("metrics", shown, steps=True),
        ingested=print_ingest_diagnostics,
        warn=warn,  # pod names are log text: warn escapes them
    )
