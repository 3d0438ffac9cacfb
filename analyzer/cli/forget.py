"""``analyze forget``: remove files from the database, re-derive the rest, say what was done."""

from __future__ import annotations

from pathlib import Path

from analyzer.cli.options import existing_db, naming
from analyzer.cli.terminal import print_forget_report, print_json
from analyzer.core.errors import AnalyzerError, DatabaseError, ExitCode
from analyzer.core.isotime import parse_range
from analyzer.jobs.forget import forget
from analyzer.store.db import connect_writer


def forget_command(paths: list[str], *, since: str | None, until: str | None, dry_run: bool = False,
                   json_out: bool = False, db: Path | None = None):
    """Select, remove, re-derive, and print what was done (stdout); return the
    :class:`analyzer.jobs.forget.ForgetReport`.

    Raises:
        AnalyzerError: (usage) nothing said to forget; DatabaseError: no database there.
    """
    if not paths and since is None and until is None:
        raise AnalyzerError("say what to forget: file paths (or folders, globs), and/or --since/--until",
                            ExitCode.USAGE)
    with naming(since="--since", until="--until"):
        since_dt, until_dt = parse_range(since, until)
    target = existing_db(db)
    if not target.exists():
        raise DatabaseError(f"no database at {target}")
    con = connect_writer(target)
    try:
        report = forget(con, paths, since=since_dt, until=until_dt, dry_run=dry_run)
    finally:
        con.close()
    if json_out:
        print_json(report.to_dict())
    else:
        print_forget_report(report)
    return report
