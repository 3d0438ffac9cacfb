"""``analyze forget``: remove files from the database, and re-derive what depended on them.

A mistaken run (another week's logs, the wrong bucket) should not stay in the
database forever. ``forget`` removes files chosen by path (a file, a folder, a
glob, as ``analyze --db X`` lists the sources) or by time range (the files whose
records all lie in ``[since, until)``), with their records, their quarantined
lines, the proxy events read from them and the replay attempts of their turns.
Then it re-derives what depended on them:

- a record is stored once even when several files hold it (the S3 copy and the
  kubectl copy). A remaining file that held copies of forgotten records (its
  registry counts more records than it has stored) is read again, so its copies
  come back;
- the pod windows are recomputed with the stored wedge window (logged requests
  are demand in the wedge rule), and the classification is brought up to date.

Metric files given by path are forgotten too (their samples).

**Crash-safe.** The removal, the windows and the classification of what remains
are one transaction: killed at any point before it commits, the database holds
the forgotten files whole; after, they are gone, turns and windows included,
and the transaction has recorded what is left to do (``forget_pending``: the
files to read again). The re-read and the last re-derivation follow; a forget
killed during them is finished by the next ``analyze forget`` (the same command
again completes, though its files are gone already), before anything else.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

from analyzer.classification.turns import refresh_turns
from analyzer.classification.windows import write_windows
from analyzer.core.errors import AnalyzerError, DatabaseError, ExitCode
from analyzer.core.isotime import parse_range
from analyzer.core.paths import default_db_path
from analyzer.ingestion.logs import ingest
from analyzer.ingestion.metric_store import forget_sources
from analyzer.store.db import connect_writer, transaction
from analyzer.store.holdings import DEFAULT_WEDGE_WINDOW_S, stored_wedge_window


@dataclass
class ForgetReport:
    """What ``forget`` removed and re-derived (``--json`` prints it)."""

    files: list[str] = field(default_factory=list)
    records: int = 0
    quarantined: int = 0
    replay_attempts: int = 0
    metric_sources: list[str] = field(default_factory=list)
    metric_samples: int = 0
    reread: list[str] = field(default_factory=list)
    reread_missing: list[str] = field(default_factory=list)
    kept_straddling: int = 0
    windows_recomputed: bool = False
    dry_run: bool = False
    #: files of an earlier forget that was killed before it finished, finished by this one
    resumed: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class ForgetOptions:
    """What ``analyze forget`` was asked: the files (paths, folders, globs as the database
    holds them) and/or the range whose files go; checked when made.

    Raises:
        AnalyzerError: (usage) nothing said to forget, or a bad range (``names``: since, until).
    """

    paths: tuple[str, ...] = ()
    since: str | None = None
    until: str | None = None
    dry_run: bool = False
    db: Path | None = None
    since_dt: datetime | None = field(init=False, default=None, repr=False, compare=False)
    until_dt: datetime | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.paths and self.since is None and self.until is None:
            raise AnalyzerError("say what to forget: file paths (or folders, globs), and/or --since/--until",
                                ExitCode.USAGE)
        since_dt, until_dt = parse_range(self.since, self.until)
        object.__setattr__(self, "since_dt", since_dt)
        object.__setattr__(self, "until_dt", until_dt)


def run_forget(opts: ForgetOptions) -> ForgetReport:
    """``analyze forget``: select, remove and re-derive in the database (it must exist); the report.

    Raises:
        DatabaseError: no database there; AnalyzerError: (usage) a path that matches no file.
    """
    target = Path(opts.db) if opts.db is not None else default_db_path()
    if not target.exists():
        raise DatabaseError(f"no database at {target}")
    con = connect_writer(target)
    try:
        return forget(con, list(opts.paths), since=opts.since_dt, until=opts.until_dt, dry_run=opts.dry_run)
    finally:
        con.close()


def _candidates(given: str) -> list[str]:
    out = [given.rstrip("/") or "/"]
    if "://" not in given:
        local = os.path.expanduser(given)
        out.append(os.path.abspath(local).rstrip("/") or "/")
        out.append(os.path.realpath(local).rstrip("/") or "/")  # ingest registers files by their real path
    return list(dict.fromkeys(out))


def _matches(path: str, given: str) -> bool:
    for c in _candidates(given):
        if path == c or path.startswith(c + "/") or (any(ch in c for ch in "*?[") and fnmatch.fnmatchcase(path, c)):
            return True
    return False


def select_files(con: duckdb.DuckDBPyConnection, paths: list[str], since=None, until=None,
                 done: list[str] | None = None) -> tuple[dict[int, str], int]:
    """The registered files to forget: ``{file_id: path}``, and how many straddle the range.

    ``done``: files an earlier forget removed already (a path that matches only
    those is not an error: that forget is being finished).

    Raises:
        AnalyzerError: (usage) a path that matches no file (nor metric source) in the database.
    """
    rows = con.execute("SELECT file_id, path FROM source_files ORDER BY path").fetchall()
    chosen = dict(rows)
    if paths:
        metric_sources = [s for (s,) in con.execute("SELECT DISTINCT source FROM metric_samples").fetchall()]
        chosen = {}
        for given in paths:
            hit = {fid: p for fid, p in rows if _matches(p, given)}
            if not hit and not any(_matches(s or "", given) for s in [*metric_sources, *(done or ())]):
                raise AnalyzerError(f"no file in the database matches {given!r} (`analyze --db ...` lists its "
                                    "sources; `analyze sql \"SELECT path FROM source_files\"` its files)",
                                    ExitCode.USAGE)
            chosen.update(hit)
    straddling = 0
    if since is not None or until is not None:
        spans = con.execute("SELECT file_id, min(ts), max(ts) FROM records GROUP BY file_id").fetchall()
        inside = set()
        for fid, first, last in spans:
            if (since is None or first >= since) and (until is None or last < until):
                inside.add(fid)
            elif (since is None or last >= since) and (until is None or first < until):
                straddling += fid in chosen
        chosen = {fid: p for fid, p in chosen.items() if fid in inside}
    return chosen, straddling


def pending_forgets(con: duckdb.DuckDBPyConnection) -> list[tuple[list[str], list[str]]]:
    """The forgets that removed their files and were killed before finishing: ``(forgotten, reread)`` each."""
    return [(list(f), list(r)) for f, r in con.execute(
        "SELECT forgotten, reread FROM forget_pending ORDER BY started_at").fetchall()]


def forget(con: duckdb.DuckDBPyConnection, paths: list[str], *, since=None, until=None,
           dry_run: bool = False) -> ForgetReport:
    """Forget the files ``paths`` (and/or the range) name; re-derive the rest. See the module docstring.

    An earlier forget that was killed before it finished is finished first (its
    files are listed in ``resumed``); the same forget run again then completes.
    """
    pending = pending_forgets(con)
    done = [p for forgotten, _ in pending for p in forgotten]
    chosen, straddling = select_files(con, paths, since, until, done=done)
    metric_sources = [s for (s,) in con.execute("SELECT DISTINCT source FROM metric_samples").fetchall()
                      if s and paths and any(_matches(s, g) for g in paths)] if paths else []
    report = ForgetReport(files=sorted(chosen.values()), kept_straddling=straddling, metric_sources=metric_sources,
                          dry_run=dry_run, resumed=sorted(done))
    ids = sorted(chosen)
    con.execute("CREATE OR REPLACE TEMP TABLE forget_ids AS SELECT unnest(?::INTEGER[]) AS file_id", [ids])
    report.records, report.quarantined = con.execute(
        "SELECT (SELECT count(*) FROM records WHERE file_id IN (SELECT file_id FROM forget_ids)), "
        "(SELECT count(*) FROM quarantine WHERE file_id IN (SELECT file_id FROM forget_ids))").fetchall()[0]
    report.metric_samples = con.execute("SELECT count(*) FROM metric_samples WHERE list_contains(?, source)",
                                        [metric_sources]).fetchall()[0][0] if metric_sources else 0
    if dry_run:
        return report
    if ids or metric_sources:
        _remove(con, report)
    if ids or metric_sources or pending:
        _finish(con, report)
    con.execute("DROP TABLE IF EXISTS forget_ids")
    return report


def _remove(con: duckdb.DuckDBPyConnection, report: ForgetReport) -> None:
    """One transaction: the files go, what remains is derived again, and what is left to do is recorded."""
    with transaction(con):
        # The turns of these records are derived again below (as ingestion marks the
        # turns of the records it adds).
        con.execute("""INSERT INTO turns_dirty
                       SELECT DISTINCT coalesce(session_id, '~' || coalesce(request_id, '')) FROM records
                       WHERE file_id IN (SELECT file_id FROM forget_ids) AND type IN ('request', 'response')""")
        con.execute("DELETE FROM records WHERE file_id IN (SELECT file_id FROM forget_ids)")
        con.execute("DELETE FROM quarantine WHERE file_id IN (SELECT file_id FROM forget_ids)")
        con.execute("DELETE FROM proxy_events WHERE file_id IN (SELECT file_id FROM forget_ids)")
        con.execute("DELETE FROM source_files WHERE file_id IN (SELECT file_id FROM forget_ids)")
        if report.metric_sources:
            forget_sources(con, report.metric_sources)
        # Replay attempts of turns that are no longer in the database.
        report.replay_attempts = con.execute(
            "SELECT count(*) FROM replay_attempts a WHERE NOT EXISTS "
            "(SELECT 1 FROM records r WHERE r.request_id = a.request_id AND r.type = 'request')").fetchall()[0][0]
        con.execute("DELETE FROM replay_attempts a WHERE NOT EXISTS "
                    "(SELECT 1 FROM records r WHERE r.request_id = a.request_id AND r.type = 'request')")
        # Files that held copies of records stored under another file: read them
        # again (a size that matches no file makes ingestion see them as changed).
        holders = con.execute(
            """SELECT s.file_id, s.path FROM source_files s
               LEFT JOIN (SELECT file_id, count(*) AS n FROM records GROUP BY file_id) r USING (file_id)
               WHERE coalesce(s.records, 0) > coalesce(r.n, 0)""").fetchall()
        if holders:
            con.execute("UPDATE source_files SET size_bytes = -1 WHERE list_contains(?, file_id)",
                        [[fid for fid, _ in holders]])
        con.execute("INSERT INTO forget_pending VALUES (?, ?, ?, ?)",
                    [report.files, [p for _, p in holders], report.metric_sources,
                     datetime.now(timezone.utc).replace(tzinfo=None)])
        # What remains is whole as soon as this commits: windows and turns without the forgotten records.
        report.windows_recomputed = _rederive(con)


def _finish(con: duckdb.DuckDBPyConnection, report: ForgetReport) -> None:
    """Read again the files that held copies (every pending forget's), then derive again and close them."""
    holders = sorted({p for _, reread in pending_forgets(con) for p in reread})
    present = [p for p in holders if Path(p).exists()]
    report.reread = present
    report.reread_missing = [p for p in holders if not Path(p).exists()]
    if present:
        ingest(con, present)  # in batches of its own; killed half-way, the next forget reads on from there
    with transaction(con):
        report.windows_recomputed = _rederive(con) or report.windows_recomputed
        con.execute("DELETE FROM forget_pending")


def _rederive(con: duckdb.DuckDBPyConnection) -> bool:
    """The pod windows (if the database has metrics) and the classification, in the caller's transaction;
    whether the windows were recomputed."""
    windows = bool(con.execute("SELECT count(*) FROM metric_samples").fetchall()[0][0] or
                   con.execute("SELECT count(*) FROM pod_windows").fetchall()[0][0])
    if windows:
        write_windows(con, stored_wedge_window(con) or DEFAULT_WEDGE_WINDOW_S)
    refresh_turns(con)  # joins the transaction
    return windows
