"""``analyze export --lake DIR``: every relation a question reads, as a Parquet lake with a manifest.

The hand-off for an engine past one machine (Spark, Trino, DuckDB elsewhere):
one folder per relation, the big ones partitioned by UTC day (hive style), and a
manifest that says what each holds::

    DIR/_manifest.json                    format, schema, time range, every table's columns
    DIR/records/day=2026-11-16/*.parquet  records, turns, sessions, proxy_events, metric_points
    DIR/pod_windows/*.parquet             the small ones unpartitioned

The relations are the database's own tables (what ingestion and classification
stored: records with their raw line, labels, metric series and points, pod
windows, settings...) and the materialized ``turns``, ``sessions`` and
``ladder_baseline``, so an engine can read the classes directly or recompute them
from the base tables (``analyzer.questions.spark`` does, and its gate checks the
two agree). Caches and bookkeeping (summary memo, build state) stay out. JSON columns are written as text; the manifest lists them so a reader can
restore the type (:func:`analyzer.store.lake.open_lake` does).

The lake holds what the database holds, raw log lines included: share it as you
would share the database file.

Re-exporting replaces the lake: everything is written beside ``DIR`` first, then
each relation's folder is swapped in and the manifest written last. A folder
that is not empty and holds no lake manifest is refused, so nobody's files are
replaced by accident.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import duckdb

from analyzer import __version__
from analyzer.core.errors import AnalyzerError, ExitCode, WriteError
from analyzer.core.isotime import iso_utc
from analyzer.store.catalog import load_queries
from analyzer.store.migrations import schema_name
from analyzer.store.lake import (FORMAT, FORMAT_VERSION, MANIFEST, NOT_EXPORTED, PARTITION, check_lake_path,
                                  read_manifest)
from analyzer.store.lake_files import describe_files

#: The lock an export holds on its lake (a hidden file in it, kept: its presence means nothing).
LOCK = ".export.lock"
#: The staging folders of exports, in the lake: ``.staging-<hex>``.
STAGING_PREFIX = ".staging-"
#: What an export of an older analyzer left beside the lake (its staging, the folders it swapped out).
_OLD_LEFTOVERS = re.compile(r"\.(?P<name>.+)\.(?:staging|old)-[0-9a-f]{8}")

#: The relations big enough to partition, by the UTC day of this time column.
PARTITIONED_BY = {"records": "ts", "turns": "ts", "sessions": "first_ts", "proxy_events": "ts",
                  "metric_points": "ts"}

#: What each relation holds, for the manifest (docs/views.md has every column).
WHAT = {
    "records": "every log record read, typed columns and the raw line, with file and line",
    "source_files": "every input file read: path, form, size, how far it was read",
    "quarantine": "lines that could not be read as records, with file, line and reason",
    "skipped_files": "files that could not be read at all, and why",
    "proxy_events": "what the proxy said about itself on stdout (starts, crashes, warnings)",
    "error_kinds": "analyzer.online.parse_error over each distinct error text",
    "feature_labels": "analyzer.online.decide over each distinct turn feature row",
    "class_labels": "the classes logged by a proxy running analyzer.online, as the analyzer reads them",
    "metric_series": "each Prometheus series kept (metric, labels, pod, model)",
    "metric_points": "the samples of those series",
    "metric_sources": "the metric inputs loaded",
    "model_map": "log model -> metric model_name, where they differ",
    "pod_windows": "wedged, down and sleeping windows of each pod, from the wedge rule",
    "turns_windows": "the windows the materialized turns were built with",
    "replay_attempts": "what `analyze replay` sent and got back, per turn and rung",
    "runs": "the runs of the analyzer on this database",
    "settings": "what the database keeps between runs (caller deadline, wedge window)",
    "_migrations": "the schema migrations that made the database the lake was exported from",
    "turns": "every turn with its incident class (materialized from queries/turns.sql)",
    "sessions": "every session with how it ended (materialized from queries/sessions.sql)",
    "ladder_baseline": "the failures the ladder would have met (materialized from queries/ladder_baseline.sql)",
}


@dataclass
class LakeReport:
    """What a lake export wrote."""

    path: str
    tables: dict[str, int] = field(default_factory=dict)
    files: int = 0
    removed: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows written, every relation together."""
        return sum(self.tables.values())

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return {**asdict(self), "rows": self.rows}


def swap_in(src: Path, dest: Path, *, trash: Path) -> None:
    """Put the folder ``src`` in the place of ``dest`` (renames on one filesystem: a reader
    sees the old folder or the new one, never a half-written one); the old one is moved
    into ``trash`` (a folder on ``dest``'s filesystem) and removed."""
    old = trash / f"{dest.name}-{uuid.uuid4().hex[:8]}"
    if dest.exists():
        os.replace(dest, old)
    os.replace(src, dest)
    shutil.rmtree(old, ignore_errors=True)


def write_manifest(path: Path, doc: dict) -> None:
    """Write ``doc`` as JSON to ``path`` whole (a temporary file renamed over it): written last,
    it is what tells a reader the export is complete."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def lake_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The relations the lake holds: the database's tables but the bookkeeping, sorted."""
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' AND NOT temporary ORDER BY table_name"
    ).fetchall()]
    if "records" not in names:
        raise AnalyzerError("the database holds no records; run `analyze FILES...` first", ExitCode.DATABASE)
    return [n for n in names if n not in NOT_EXPORTED]


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    return con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' AND table_name = ? "
        "ORDER BY column_index", [table]).fetchall()


def _write_table(con: duckdb.DuckDBPyConnection, table: str, staging: Path, compression: str) -> tuple[int, dict]:
    return write_relation(con, table, _columns(con, table), staging, compression)


def write_relation(con: duckdb.DuckDBPyConnection, table: str, columns: list[tuple[str, str]], staging: Path,
                   compression: str = "zstd", *, source: str | None = None) -> tuple[int, dict]:
    """The lake's relation ``table`` written into ``staging / table``; its rows and manifest entry.

    ``columns``: its ``(name, DuckDB type)`` pairs, JSON written as text.
    ``source``: a relation of ``con`` holding its rows, cast to those types (default:
    the table ``table`` itself, as it is). By UTC day of its time column when it
    has rows and one (:data:`PARTITIONED_BY`), else one file.
    """
    if source is None:
        exprs = [f'CAST("{c}" AS VARCHAR) AS "{c}"' if t == "JSON" else f'"{c}"' for c, t in columns]
        source = f'"{table}"'
    else:
        exprs = [f'CAST("{c}" AS {"VARCHAR" if t == "JSON" else t}) AS "{c}"' for c, t in columns]
    time_column = PARTITIONED_BY.get(table)
    rows = con.execute(f'SELECT count(*) FROM {source}').fetchall()[0][0]
    dest = staging / table
    dest.mkdir(parents=True)
    if rows and time_column:
        # The relation API takes the path as a value, never pasted into SQL.
        con.sql(f'SELECT {", ".join(exprs)}, CAST("{time_column}" AS DATE) AS {PARTITION} FROM {source} '
                f'ORDER BY "{time_column}"').write_parquet(str(dest), partition_by=[PARTITION],
                                                         compression=compression)
    else:
        # An empty relation still gets a file: its schema is what a reader registers.
        con.sql(f'SELECT {", ".join(exprs)} FROM {source}').write_parquet(
            str(dest / "data_0.parquet"), compression=compression)
    return rows, manifest_entry(table, columns, staging, rows, bool(rows and time_column), con)


def manifest_entry(table: str, columns: list[tuple[str, str]], staging: Path, rows: int, partitioned: bool,
                   con: duckdb.DuckDBPyConnection | None = None) -> dict:
    """The manifest's entry of ``table``, whose files are written in ``staging / table``.

    ``columns``: its ``(name, DuckDB type)`` pairs; ``partitioned``: its files are
    in ``day=`` folders (by :data:`PARTITIONED_BY`'s column).
    """
    kind = load_queries().get(table)
    return {
        "rows": rows,
        "columns": [[c, t] for c, t in columns],
        "json_columns": [c for c, t in columns if t == "JSON"],
        "partition": PARTITION if partitioned else None,
        "time_column": PARTITIONED_BY.get(table),
        "kind": "materialized" if kind is not None and kind.kind == "table" else "table",
        "what": WHAT.get(table, ""),
        # Every file, so a reader can tell the lake is the one exported (analyzer.store.lake_files).
        "files": describe_files(staging, table, partitioned, con),
    }


def manifest_of(out: Path) -> dict | None:
    """The lake manifest in ``out`` (of any schema: a re-export replaces an older lake), or None if there is none.

    Its relation names are checked plain names: they are the folders a re-export
    removes, so a manifest naming ``../elsewhere`` is refused, and the folder kept.

    Raises:
        AnalyzerError: (``param="out_dir"``) a manifest there that this analyzer will not replace.
    """
    if not (out / MANIFEST).exists():
        return None
    try:
        return read_manifest(out, any_schema=True)
    except AnalyzerError as exc:
        raise AnalyzerError(f"out_dir {out}: holds a {MANIFEST} this analyzer will not replace ({exc}); "
                            "give a new or empty folder", ExitCode.USAGE, param="out_dir") from exc


def _ours(entry: Path) -> bool:
    """An entry of a lake folder that an export itself makes: its lock, a staging folder, a manifest being written."""
    return entry.name == LOCK or entry.name.startswith(STAGING_PREFIX) or entry.name == f".{MANIFEST}.tmp"


@contextmanager
def export_lock(out: Path) -> Iterator[None]:
    """Hold the lake's export lock for the block; clear what killed exports left once it is held.

    The lock is ``flock`` on ``out/.export.lock``: the kernel releases it when its
    holder ends, even by ``kill -9``, so a lock is never stale. Once it is held, no
    other export runs on ``out``: every staging folder in it (and what an older
    analyzer's export left beside it) is a killed export's, and goes.

    Raises:
        WriteError: (exit 9) another export holds the lock.
    """
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise _busy(out, fd, "out_dir") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _clear_leftovers(out)
        yield
    finally:
        os.close(fd)  # releases the lock


def _busy(out: Path, fd: int, param: str) -> WriteError:
    """The error of an export refused because another holds the lock open at ``fd`` (it wrote its process id)."""
    holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
    return WriteError(f"{param} {out}: another export is writing this lake (process {holder}); "
                      "wait for it to end, then export again", param=param)


def _check_not_locked(out: Path, param: str) -> None:
    """Raise :func:`_busy`'s error when another export holds ``out``'s lock (a lock never made is not held).

    flock cannot be asked without being taken: the lock is held shared for the
    instant of the check, and an export starting in that instant is refused as
    by a running one (three exports at once).
    """
    try:
        fd = os.open(out / LOCK, os.O_RDONLY)
    except OSError:  # no lock there (or one this user cannot read): the folder is judged as it is
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise _busy(out, fd, param) from exc
        # (another error, a file system without locks: cannot tell; the folder is judged as it is)
    finally:
        os.close(fd)  # (releases the shared lock when it was taken)


def _clear_leftovers(out: Path) -> None:
    """Remove killed exports' staging folders and half-written manifest (the lock is held: none is running)."""
    for entry in out.iterdir():
        if not _ours(entry) or entry.name == LOCK:
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    for entry in out.parent.iterdir():  # an older analyzer staged beside the lake
        m = _OLD_LEFTOVERS.fullmatch(entry.name)
        if m and m.group("name") == out.name and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


def _check_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Refuse a database not yet migrated to this analyzer's schema: its lake could not be read.

    Export opens the database read-only, so it cannot migrate it; any command
    that writes does (``analyze --db X``).
    """
    schema = con.execute("SELECT max(name) FROM _migrations").fetchall()[0][0]
    if schema != schema_name():
        raise AnalyzerError(f"the database is of schema {schema!r}, this analyzer's is {schema_name()!r}: "
                            "run `analyze --db DB` once to upgrade it, then export", ExitCode.USAGE, param="db")


def check_out_dir(out_dir: str | Path, param: str = "out_dir") -> Path:
    """``out_dir`` as an absolute path, once it is known to be a lake, an empty folder or nothing yet.

    Raises:
        AnalyzerError: (usage, ``param``) a file, a folder with other content, or a
            manifest this analyzer will not replace.
        WriteError: (exit 9) another export is writing a first lake there (no manifest yet).
    """
    out = Path(out_dir).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise AnalyzerError(f"{param} {out}: exists and is not a directory", ExitCode.USAGE, param=param)
    old = manifest_of(out) if out.is_dir() else None
    if out.is_dir() and old is None and any(not _ours(e) for e in out.iterdir()):
        # An export swapping its relations in writes the manifest last: until then the lake it is
        # writing looks like a folder of something else. It is said as the lock says it.
        _check_not_locked(out, param)
        if manifest_of(out) is not None:
            return out  # that export ended between the first look and the lock's: a lake now
        raise AnalyzerError(f"{param} {out}: not empty and not a lake (no {MANIFEST}); "
                            "give a new or empty folder", ExitCode.USAGE, param=param)
    return out


def new_staging(out: Path) -> Path:
    """A new staging folder in the lake ``out`` (its own filesystem: each swap is a rename; hidden: no reader lists it)."""
    return out / f"{STAGING_PREFIX}{uuid.uuid4().hex[:8]}"


def export_lake(con: duckdb.DuckDBPyConnection, out_dir: str | Path, *, compression: str = "zstd") -> LakeReport:
    """Write every relation a question reads to ``out_dir`` as a Parquet lake with a manifest.

    Idempotent: a re-export replaces each relation's folder and removes the
    relations the database no longer has. Staged in a hidden folder inside
    ``out_dir`` under the export lock (:func:`export_lock`). Returns a :class:`LakeReport`.

    Raises:
        AnalyzerError: ``out_dir`` is a file, a folder with other content or an
            unreplaceable manifest, or has a pattern character in its path
            (``param="out_dir"``); the database is of an older schema; a write failed.
        WriteError: another export is writing the same lake.
    """
    check_lake_path(out_dir, "out_dir")
    _check_schema(con)
    out = check_out_dir(out_dir)
    tables = lake_tables(con)
    report = LakeReport(path=str(out))
    try:
        with export_lock(out):
            old = manifest_of(out)  # again, under the lock: another export may have ended meanwhile
            staging = new_staging(out)
            try:
                _export_into(con, out, staging, tables, old, report, compression)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return report
    except OSError as exc:
        raise AnalyzerError(f"cannot write the lake to {out}: {exc}", ExitCode.FAILED) from exc


def _export_into(con: duckdb.DuckDBPyConnection, out: Path, staging: Path, tables: list[str], old: dict | None,
                 report: LakeReport, compression: str) -> None:
    entries = {}
    for table in tables:
        rows, entries[table] = _write_table(con, table, staging, compression)
        report.tables[table] = rows
    first, last = con.execute("SELECT min(ts), max(ts) FROM records").fetchall()[0]
    swap_lake_in(out, staging, entries, old, (first, last), report)


def swap_lake_in(out: Path, staging: Path, entries: dict[str, dict], old: dict | None,
                 time_range: tuple, report: LakeReport) -> None:
    """Put each relation's folder staged in ``staging`` in its place in ``out``, then the manifest.

    ``entries``: each relation's manifest entry (:func:`manifest_entry`); ``old``:
    the manifest replaced (its relations no longer written are removed);
    ``time_range``: the records' first and last time. The manifest is written last:
    it is what tells a reader the lake is complete. The lake's schema is this
    analyzer's (the export checked the database's; a build writes this analyzer's).
    """
    schema = schema_name()
    trash = staging / ".replaced"
    trash.mkdir()
    for table in entries:
        swap_in(staging / table, out / table, trash=trash)
        report.files += len(entries[table]["files"])
    for table in sorted(set((old or {}).get("tables", {})) - set(entries)):
        shutil.rmtree(out / table, ignore_errors=True)
        report.removed.append(table)
    first, last = time_range
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "analyzer_version": __version__,
        "schema": schema,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "time_range": [iso_utc(first) if first else None, iso_utc(last) if last else None],
        "partitioning": f"hive: {PARTITION}=YYYY-MM-DD, the UTC day of each table's time_column",
        "tables": entries,
    }
    write_manifest(out / MANIFEST, manifest)
