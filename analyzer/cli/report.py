"""``analyze report``: render the weekly HTML report and print its path."""

from __future__ import annotations

from pathlib import Path

from analyzer.cli.options import naming
from analyzer.outputs.report import make_report


def report_command(db: Path | None, files: list[str] | None, *, week: str | None = None, since: str | None = None,
                   until: str | None = None, output: Path | None = None, plotly_cdn: bool = False,
                   lake: Path | None = None) -> Path:
    """Ingest ``files`` (if any), render the report of the week or range, print the file's path; return it.

    With ``lake``: the report of a Parquet lake (``analyze export --lake``) instead of a database."""
    with naming(week="--week", since="--since", until="--until", lake="--lake"):
        path = make_report(db, files or None, week=week, since=since, until=until, output=output,
                           plotly="cdn" if plotly_cdn else "inline", lake=lake)
    print(path)
    return path
