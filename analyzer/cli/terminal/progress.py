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


@contextmanager
def metrics_progress(enabled: bool | None = None) -> Iterator[Callable[[int, int, str], None] | None]:
    """A rich progress bar on stderr yielding ``progress(done, total, what)``, or None off a terminal.

    ``enabled`` None means: when stderr is a terminal.
    """
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    ) as bar:
        task = bar.add_task("metrics", total=None)

        def update(done: int, total: int, what: str) -> None:
            # File names and queries are shown, never read as markup.
            bar.update(task, completed=done, total=total or None, description=escape(what[:60]))

        yield update


def job_view(shown: bool) -> JobView:
    """How the terminal shows the main job: progress bars on stderr when ``shown`` (a terminal,
    no ``--json``); the ingest's skipped files and notes, and the metrics' warnings, always."""
    return JobView(
        ingesting=lambda: byte_progress("ingesting", shown),
        loading_metrics=lambda: metrics_progress(shown),
        ingested=print_ingest_diagnostics,
        warn=warn,  # pod names are log text: warn escapes them
    )
