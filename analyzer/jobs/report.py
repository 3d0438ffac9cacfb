"""``analyze report``: ingest what is given, then render a week (or a range) into one HTML file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analyzer.classification.turns import is_current, refresh_turns
from analyzer.core.errors import AnalyzerError, DatabaseError, ExitCode
from analyzer.core.paths import default_db_path
from analyzer.ingestion.logs import ingest
from analyzer.outputs.report.build import build_context, resolve_period
from analyzer.outputs.report.html import render_html, write_html
from analyzer.store.db import connect, connect_writer
from analyzer.store.lake import open_lake


@dataclass(frozen=True)
class ReportOptions:
    """What ``analyze report`` was asked; checked when made.

    ``db``: the database (default ``$ANALYZER_DB`` or ``./analyzer.duckdb``);
    ``files``: log files, directories or globs to ingest first; ``week``: an ISO
    week such as ``2026-W47`` (default: the last complete ISO week in the data);
    ``since``/``until``: a range instead (ISO 8601, UTC; ``until`` exclusive);
    ``output``: the HTML file (default ``report-2026-W47.html`` or
    ``report-<since>_<until>.html`` in the current directory); ``plotly``:
    ``"inline"`` embeds plotly.js (the page works offline), ``"cdn"`` links it
    (a much smaller file); ``lake``: a Parquet lake (``analyze export --lake``) to
    read instead of a database, its classes as exported.

    Raises:
        AnalyzerError: (usage) a bad ``plotly``, or a lake given with a database or files (``param="lake"``).
    """

    db: Path | None = None
    files: tuple[str, ...] = ()
    week: str | None = None
    since: str | None = None
    until: str | None = None
    output: Path | None = None
    plotly: str = "inline"
    lake: Path | None = None

    def __post_init__(self) -> None:
        if self.plotly not in ("inline", "cdn"):
            raise AnalyzerError(f"plotly must be 'inline' or 'cdn', not {self.plotly!r}", ExitCode.USAGE)
        if self.lake is not None and (self.files or self.db is not None):
            raise AnalyzerError("a report reads a lake or a database, not both: give --lake DIR alone",
                                ExitCode.USAGE, param="lake")


def make_report(opts: ReportOptions) -> Path:
    """Render the report for ``opts``' week or range into one HTML file; return its path.

    Raises:
        AnalyzerError: no database, no turns in the period, a bad week or range.
    """
    if opts.lake is not None:
        con = open_lake(opts.lake)
        try:
            period = resolve_period(con, week=opts.week, since=opts.since, until=opts.until)
            context = build_context(con, period, plotly=opts.plotly, refresh=False)
        finally:
            con.close()
        return _write(context, period, opts.output)
    files = list(opts.files)
    target = Path(opts.db) if opts.db is not None else default_db_path()
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
        period = resolve_period(con, week=opts.week, since=opts.since, until=opts.until)
        context = build_context(con, period, plotly=opts.plotly)
    finally:
        con.close()
    return _write(context, period, opts.output)


def _write(context, period, output: str | Path | None) -> Path:
    html = render_html(context)
    path = Path(output) if output is not None else Path.cwd() / f"report-{period.file_stem}.html"
    return write_html(html, path)
