"""The weekly HTML report: ``analyze report``.

:func:`make_report` builds one self-contained HTML page for a week (or any
range) from the database: :mod:`.build` turns the views into the documented
context objects of :mod:`.context`, :mod:`.charts` makes the plotly figures,
:mod:`.html` runs the jinja2 templates in ``dashboards/``, and
:mod:`analyzer.core.scrub` scrubs credentials from every piece of log text shown.
"""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path
from typing import Iterable

from analyzer.classification.turns import is_current, refresh_turns
from analyzer.core.errors import AnalyzerError, DatabaseError, ExitCode
from analyzer.core.paths import default_db_path
from analyzer.ingestion.logs import ingest
from analyzer.outputs.report.build import build_context, resolve_period
from analyzer.outputs.report.html import render_html, write_html
from analyzer.store.db import connect, connect_writer
from analyzer.store.lake import open_lake

__all__ = ["make_report"]


def make_report(
    db: str | Path | None,
    files: Iterable[str] | None = None,
    *,
    week: str | None = None,
    since: str | date | datetime | None = None,
    until: str | date | datetime | None = None,
    output: str | Path | None = None,
    plotly: str = "inline",
    lake: str | Path | None = None,
) -> Path:
    """Render the report for a week (or ``[since, until)``) into one HTML file; return its path.

    Args:
        db: the DuckDB database (default ``$ANALYZER_DB`` or ``./analyzer.duckdb``).
        files: log files, directories or globs to ingest first (optional).
        week: an ISO week such as ``2026-W47``; default: the last complete ISO
            week in the data.
        since, until: a range instead of a week (ISO 8601, UTC; ``until`` exclusive).
        output: the HTML file; default ``report-2026-W47.html`` (or
            ``report-<since>_<until>.html``) in the current directory.
        plotly: ``"inline"`` embeds plotly.js (the page works offline);
            ``"cdn"`` links it from cdn.plot.ly instead (a much smaller file).
        lake: a Parquet lake (``analyze export --lake``) to read instead of a
            database: DuckDB reads its files (:func:`analyzer.store.lake.open_lake`);
            the classes are the lake's, as exported.

    Raises:
        AnalyzerError: bad arguments, no database, or no turns in the period.
    """
    if plotly not in ("inline", "cdn"):
        raise AnalyzerError(f"plotly must be 'inline' or 'cdn', not {plotly!r}", ExitCode.USAGE)
    files = list(files or [])
    if lake is not None:
        if files or db is not None:
            raise AnalyzerError("a report reads a lake or a database, not both: give --lake DIR alone",
                                ExitCode.USAGE, param="lake")
        con = open_lake(lake)
        try:
            period = resolve_period(con, week=week, since=since, until=until)
            context = build_context(con, period, plotly=plotly, refresh=False)
        finally:
            con.close()
        return _write(context, period, output)
    target = Path(db) if db is not None else default_db_path()
    if not files and str(target) != ":memory:" and not target.exists():
        raise DatabaseError(f"no database at {target}; run `analyze FILES...` or give the log files")
    # Rendering alone only reads: open read-only (other readers may share the
    # file) unless there are files to ingest or the classification is stale.
    con = None
    if not files and str(target) != ":memory:":
        con = connect(target, read_only=True)
        if not is_current(con):
            con.close()
            con = None
    if con is None:
        con = connect_writer(target)  # ingesting or not: a checkpoint never re-packs the ingest's row groups
    try:
        if files:
            ingest(con, files)
        if not is_current(con):
            refresh_turns(con)
        period = resolve_period(con, week=week, since=since, until=until)
        context = build_context(con, period, plotly=plotly)
    finally:
        con.close()
    return _write(context, period, output)


def _write(context, period, output: str | Path | None) -> Path:
    html = render_html(context)
    path = Path(output) if output is not None else Path.cwd() / f"report-{period.file_stem}.html"
    return write_html(html, path)
