"""The main job behind ``analyze FILES...``: ingest, classify, summarize, print."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .db import connect
from .ingestion import IngestReport, ingest
from .summary import build_summary, parse_time
from .turns import refresh_turns


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


def run_main_job(
    *,
    files: list[str],
    db: Path | None,
    json_out: bool = False,
    strict: bool = False,
    models: list[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    metrics: list[str] | None = None,
    wedge_window: str = "5m",
) -> dict:
    """Ingest ``files`` into ``db``, classify every turn, print the sizing summary.

    Prints JSON on stdout with ``json_out``, else tables; diagnostics go to stderr.
    Returns the summary dict.
    """
    since_dt, until_dt = parse_time(since, "since"), parse_time(until, "until")
    con = connect(db)
    try:
        with byte_progress("ingesting", sys.stderr.isatty() and not json_out) as progress:
            report = ingest(con, files, strict=strict, progress=progress)
        if metrics:
            from .metrics import load_metrics

            load_metrics(con, metrics, wedge_window=wedge_window)
        refresh_turns(con)
        summary = build_summary(con, models=models, since=since_dt, until=until_dt)
        summary["ingest"] = report.to_dict()
    finally:
        con.close()
    if json_out:
        print(json.dumps(summary, indent=2, default=str))
    else:
        from .render import print_summary

        print_summary(summary)
    return summary


def ingest_only(files: list[str], db: Path | None, strict: bool = False) -> IngestReport:
    """Ingest and classify without printing (for scripts and notebooks)."""
    con = connect(db)
    try:
        report = ingest(con, files, strict=strict)
        refresh_turns(con)
        return report
    finally:
        con.close()
