"""Progress of a metrics load on a terminal: files read, Prometheus queries, pod windows.

Quiet when stderr is not a terminal (piped, CI) or with ``--json``: the callback is
then None and the loaders skip it.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator


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
