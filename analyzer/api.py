"""The Python API for notebooks and scripts (what ``import analyzer`` exposes).

::

    import analyzer

    con = analyzer.connect("week.duckdb")             # a DuckDB connection, views ready
    analyzer.query("failures_by_day", db=con, model="glm%")   # a polars DataFrame
    analyzer.query("SELECT model, count(*) AS n FROM turns GROUP BY model", db=con)

    analyzer.ingest(["logs/"], db="week.duckdb")      # scripted runs: ingest + classify
    analyzer.classify(db="week.duckdb")               # re-classify (after metrics, replays)
    analyzer.report(db="week.duckdb", week="2026-W47")     # the weekly HTML report: its path
    analyzer.export_lake("lake/", db="week.duckdb")   # the Parquet lake of `analyze export --lake`
    analyzer.replay(endpoint="http://vllm:8000/v1", db="week.duckdb", dry_run=True)

``report``, ``export_lake`` and ``replay`` are the commands' jobs
(:mod:`analyzer.jobs`), with the commands' options as keywords.

Every function takes ``db`` as a path (default ``$ANALYZER_DB`` or
./analyzer.duckdb) or as an open connection, which is then used and left open.
``import analyzer`` stays fast because the package imports this module only when
one of its functions is first used (``analyzer/__init__.py``).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Union

import duckdb

from analyzer.classification.turns import ClassifyReport, refresh_turns
from analyzer.core.errors import DatabaseError
from analyzer.core.paths import default_db_path
from analyzer.ingestion.logs import IngestReport
from analyzer.ingestion.logs import ingest as _ingest
from analyzer.jobs.export import ExportOptions, run_export
from analyzer.jobs.replay import ReplayOptions, ReplayRun, run_replay
from analyzer.jobs.report import ReportOptions, make_report
from analyzer.outputs.lake import LakeReport
from analyzer.questions.sqlrun import frame
from analyzer.store.db import READ_ONLY_SETTINGS, connect_writer
from analyzer.store.db import connect as _connect

if TYPE_CHECKING:  # pragma: no cover
    import polars

DB = Union[str, Path, duckdb.DuckDBPyConnection, None]


def connect(path: str | Path | None = None, read_only: bool = False) -> "duckdb.DuckDBPyConnection":
    """Open the analyzer database and return a DuckDB connection with the views ready.

    Args:
        path: the database file; default ``$ANALYZER_DB`` or ``./analyzer.duckdb``;
            ``":memory:"`` for a throwaway one. Created (and migrated) if missing,
            unless ``read_only``.
        read_only: open without write access; several read-only connections (other
            processes, notebooks) may share the file.

    Raises:
        analyzer.core.errors.DatabaseError: the file cannot be opened or is not ours.
    """
    return _connect(path, read_only=read_only)


@contextmanager
def _opened(db: DB, *, write: bool, ingest: bool = False) -> Iterator["duckdb.DuckDBPyConnection"]:
    """A connection for one call: ``db`` itself when it is one, else opened and closed here.

    ``ingest``: opened to ingest into, as the analyzer's commands that write
    open it (:func:`analyzer.store.db.connect_writer`). Opened to read (``write``
    false), a path gets the read-only settings of ``analyze sql``: no file or
    network access, the configuration locked.
    """
    if db is not None and not isinstance(db, (str, Path)):
        yield db  # the caller's connection: theirs to close
        return
    target = Path(str(db)) if db is not None else default_db_path()
    if not write and str(target) != ":memory:" and not target.exists():
        # A query on a mistyped path must not create an empty database and
        # answer from it as if the week had no traffic.
        raise DatabaseError(f"no database at {target}; run `analyze FILES...` (or analyzer.ingest) first")
    con = None
    if not write and str(target) != ":memory:" and target.exists():
        try:
            con = _connect(target, read_only=True, settings=READ_ONLY_SETTINGS)
        except DatabaseError as exc:
            # This process already holds the file read-write (a notebook's
            # connect()): DuckDB refuses a second, read-only configuration.
            if "different configuration" not in str(exc):
                raise
    if con is None:
        con = connect_writer(target) if ingest else _connect(target)
    try:
        yield con
    finally:
        con.close()


def query(name_or_sql: str, db: DB = None, **params: Any) -> "polars.DataFrame":
    """Run a ``queries/`` file by name, or SQL text, and return a polars DataFrame.

    Args:
        name_or_sql: a question or view of ``queries/`` (``"failures_by_day"``,
            ``"turns"``) or a SQL statement.
        db: a database path or an open connection (see :func:`connect`). A path is
            opened read-only when it exists.
        **params: the ``$name`` parameters. A question's declared parameters that
            are not given are NULL ("no bound"); ``since``/``until`` take ISO-8601
            text (UTC unless an offset is given) or datetimes.

    Read-only unless the caller passes a writable connection of their own on
    purpose (``db=analyzer.connect()``): on a path or a read-only connection the
    SQL is one reading statement that references only the database's relations
    and the functions a question may call (the guard of ``analyze sql``,
    :mod:`analyzer.questions.guard`), so ``COPY ... TO`` or ``read_text(...)``
    is refused.

    Raises:
        analyzer.store.asking.UnknownQueryError: no such query file.
        analyzer.store.asking.QueryParamError: a parameter is missing or not the query's.
        analyzer.store.asking.SqlError: DuckDB rejected the SQL.
        analyzer.questions.sqlrun.WriteRefused, analyzer.questions.guard.QuestionRefused:
            more than a read of the database's relations, on a connection not opened to write.
    """
    writable_on_purpose = db is not None and not isinstance(db, (str, Path)) and not _read_only(db)
    with _opened(db, write=False) as con:
        return frame(con, name_or_sql, params, guarded=not writable_on_purpose)


def _read_only(con: "duckdb.DuckDBPyConnection") -> bool:
    """Whether ``con``'s database was opened read-only."""
    rows = con.execute("SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()").fetchall()
    return bool(rows and rows[0][0])


def ingest(paths: str | Path | Iterable[str | Path], db: DB = None, strict: bool = False) -> "IngestReport":
    """Ingest log files, directories, globs or ``s3://bucket/prefix`` URLs, then classify.

    Re-running is cheap: files already read are skipped, new turns are classified
    incrementally. Returns the :class:`analyzer.ingestion.logs.IngestReport`.

    Raises:
        analyzer.core.errors.InputError: an input is missing or not a proxy log (or,
            with ``strict``, holds a malformed line; that batch is rolled back).
    """
    inputs = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
    with _opened(db, write=True, ingest=True) as con:
        report = _ingest(con, inputs, strict=strict)
        refresh_turns(con)
    return report


def classify(db: DB = None, *, caller_deadline_s: float | None = None) -> "ClassifyReport":
    """Bring the classification of every turn up to date (idempotent, incremental).

    :func:`ingest` already does this; call it after loading metrics or replays
    through other means. ``caller_deadline_s`` sets (and stores) the callers'
    deadline that makes a slower ok answer ``late-200`` (default: the stored
    value, else 300 s). Returns the :class:`analyzer.classification.turns.ClassifyReport`.
    """
    with _opened(db, write=True) as con:
        return refresh_turns(con, caller_deadline_s=caller_deadline_s)


def report(db: str | Path | None = None, files: Iterable[str] = (), **options: Any) -> Path:
    """``analyze report``: render a week (or ``since``/``until``) into one HTML file; return its path.

    ``options`` are :class:`analyzer.jobs.report.ReportOptions`' (``week``, ``since``,
    ``until``, ``output``, ``plotly``, ``lake``).
    """
    return make_report(ReportOptions(db=Path(db) if db is not None else None, files=tuple(str(f) for f in files),
                                     **options))


def export_lake(lake: str | Path, db: str | Path | None = None) -> "LakeReport":
    """``analyze export --lake``: write the database as a Parquet lake; return the
    :class:`analyzer.outputs.lake.LakeReport`."""
    return run_export(ExportOptions(lake=lake, db=Path(db) if db is not None else None))


def replay(db: str | Path | None = None, **options: Any) -> "ReplayRun":
    """``analyze replay``: re-send the captured ladder-eligible failures through the ladder.

    ``options`` are :class:`analyzer.jobs.replay.ReplayOptions`' (``endpoint``,
    ``api_key_env``, ``dry_run``, ``limit``, ``only_models``...). Returns the
    :class:`analyzer.jobs.replay.ReplayRun` (``.doc`` is what ``--json`` prints).
    """
    if "only_models" in options:
        options["only_models"] = tuple(options["only_models"] or ())
    return run_replay(ReplayOptions(db=Path(db) if db is not None else None, **options))
