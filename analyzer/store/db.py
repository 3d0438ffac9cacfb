"""The DuckDB database: opening it, transactions, the ingest's bookkeeping, views from queries/.

A new file gets its schema from ``schema.sql``, and every file the migrations it has
not seen (:mod:`analyzer.store.migrations`), when a writable connection opens it.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

from analyzer.core.errors import DatabaseError, WriteError, is_write_failure, one_line
from analyzer.core.interrupt import track
from analyzer.core.paths import default_db_path
from analyzer.store.catalog import create_temp_macros, create_views
from analyzer.store.migrations import check_recorded, migrate
from analyzer.store.spill import database_spill_dir, scratch_spill_dir


# Connections inside a transaction() block (by id): a nested block joins the outer one.
_IN_TRANSACTION: set[int] = set()


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One transaction: committed when the block ends, rolled back if it raises.

    Every write path uses it, so an interrupted run leaves the database as it was
    before the block. A block inside another one on the same connection joins it
    (the outer block commits or rolls back the whole), so a caller can run a whole
    job in one transaction, e.g. to compute something for one run and discard it.
    If the rollback itself fails (DuckDB has already aborted the transaction after
    an interrupted query), the original error is the one raised.
    """
    key = id(con)
    if key in _IN_TRANSACTION:
        yield con
        return
    con.execute("BEGIN TRANSACTION")
    _IN_TRANSACTION.add(key)
    try:
        yield con
    except BaseException:
        _IN_TRANSACTION.discard(key)
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:  # aborted or already gone: nothing of the block was committed
            pass
        raise
    _IN_TRANSACTION.discard(key)
    con.execute("COMMIT")


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, name: str, data) -> Iterator[duckdb.DuckDBPyConnection]:
    """``data`` (an Arrow table or stream) readable as the view ``name`` of ``con`` for the block."""
    con.register(name, data)
    try:
        yield con
    finally:
        con.unregister(name)


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Insert many Python rows at once (through Arrow, cast to the table's types; executemany is row by row)."""
    import pyarrow as pa

    types = {name: con.execute(
        "SELECT data_type FROM duckdb_columns() WHERE table_name = ? AND column_name = ?", [table, name]
    ).fetchall()[0][0] for name in columns}
    select = ", ".join(f'CAST("{c}" AS {types[c]})' for c in columns)
    with registered(con, "_rows_to_insert", pa.table({name: [r[i] for r in rows] for i, name in enumerate(columns)})):
        con.execute(f'INSERT INTO {table} ({", ".join(columns)}) SELECT {select} FROM _rows_to_insert')


#: DuckDB's memory bound ($ANALYZER_MEMORY_LIMIT): with the Arrow batch being
#: stored beside it, a week's ingest stays well under 1 GB of peak RSS.
MEMORY_LIMIT = os.environ.get("ANALYZER_MEMORY_LIMIT", "384MB")
#: The bound while classifying, when $ANALYZER_MEMORY_LIMIT does not set one:
#: classification holds no Arrow batch, and its two wide statements would spill
#: at 384 MB, costing CPU for little memory saved (benchmarks/README.md).
CLASSIFY_MEMORY_LIMIT = os.environ.get("ANALYZER_MEMORY_LIMIT", "640MB")


@contextmanager
def memory_bound(con: duckdb.DuckDBPyConnection, limit: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """Run the block with DuckDB's memory limit at ``limit``, then put back the one before.

    (DuckDB reports the limit rounded to 0.1 MiB, so the bound put back may be
    that much lower than the one set at connect.)
    """
    before = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    try:
        con.execute("SET memory_limit = ?", [limit])
    except duckdb.Error:  # a locked configuration keeps its bound
        yield con
        return
    try:
        yield con
    except BaseException:
        # DuckDB refuses even a SET on a transaction the failure left aborted: the
        # error that ended the block is what the caller sees (the caller's rollback
        # follows). GeneratorExit too: a block abandoned by a Ctrl-C in the middle of
        # the exit is closed by the collector, which would print the SET's error.
        try:
            con.execute("SET memory_limit = ?", [before])
        except duckdb.Error:
            pass
        raise
    con.execute("SET memory_limit = ?", [before])


@contextmanager
def discarded(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """A transaction that is always rolled back: what runs inside is seen by this block only."""
    key = id(con)
    if key in _IN_TRANSACTION:
        raise RuntimeError("discarded() cannot run inside another transaction")
    con.execute("BEGIN TRANSACTION")
    _IN_TRANSACTION.add(key)
    try:
        yield con
    finally:
        _IN_TRANSACTION.discard(key)
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass


# Ingests running in this process. Only one process writes a database file
# (DuckDB locks it), so a batch pending while none runs here was left by a killed
# run; while one runs, its batches are pending on purpose, and another connection
# this process opens to the same file (sharing its DuckDB instance) leaves them.
_INGESTS = threading.Lock()
_ingests_running = 0


@contextmanager
def ingest_running() -> Iterator[None]:
    """Mark an ingest as running in this process (see :func:`connect`'s clean-up)."""
    global _ingests_running
    with _INGESTS:
        _ingests_running += 1
    try:
        yield
    finally:
        with _INGESTS:
            _ingests_running -= 1


def discard_unfinished_batches(con: duckdb.DuckDBPyConnection) -> int:
    """Remove the records of batches stored but never finished; return how many batches.

    Ingestion stores a batch's records in one transaction and finishes it (de-
    duplication, quarantine, the files' progress) in a second. A run killed
    between the two leaves the batch in ``ingest_pending``: its records go, and
    as its files' progress was not advanced, the next run reads those lines again.
    """
    pending = con.execute("SELECT count(*) FROM ingest_pending").fetchall()[0][0]
    if pending:
        with transaction(con):
            con.execute("DELETE FROM records WHERE ingest_batch IN (SELECT batch FROM ingest_pending)")
            con.execute("DELETE FROM ingest_pending")
    return pending


#: Rows per DuckDB row group in what the ingest writes (ATTACH's ROW_GROUP_SIZE;
#: DuckDB's own, and what other connections write, is DEFAULT_ROW_GROUP_ROWS).
#: A batch is one row group, and half of DuckDB's lets two batches be stored at
#: once, each a whole row group, in the memory one of DuckDB's took: faster in
#: about the same memory (benchmarks/README.md). Row groups of both sizes live in
#: one file.
#:
#: Every command that writes opens the file with this size too, not only the
#: ingest. A checkpoint merges adjacent row groups that fit in fewer of the
#: size its connection writes: through a connection of DuckDB's size, the first
#: checkpoint after any write rewrote every table the ingest wrote, `raw`
#: included, and grew the file (benchmarks/checkpoint.py).
INGEST_ROW_GROUP_ROWS = 61_440
DEFAULT_ROW_GROUP_ROWS = 122_880

#: Settings of every connection: DuckDB never downloads or auto-loads an extension
#: (a SQLite file would otherwise make it fetch sqlite_scanner from the network).
NO_NETWORK_CONFIG = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
}
#: Settings of a read-only connection that answers questions (``analyze sql``, a
#: lake, ``analyzer.query`` on a path), applied in this order: no file or network
#: access (COPY TO, EXPORT DATABASE, read_csv('http://...'), ATTACH), then the
#: configuration locked (no SET, no extension settings) for the query.
READ_ONLY_SETTINGS = {"enable_external_access": False, "lock_configuration": True}
_DUCKDB_MAGIC = b"DUCK"  # bytes 8..12 of a DuckDB database file
_OTHER_FORMATS = ((b"SQLite format 3\x00", "a SQLite database"), (b"PAR1", "a Parquet file"),
                  (b"\x1f\x8b", "a gzip file"), (b"PK\x03\x04", "a zip file"))


def _check_file_format(target: str) -> None:
    """Refuse a file that is not a DuckDB database before DuckDB touches it."""
    p = Path(target)
    try:
        if not p.is_file() or p.stat().st_size == 0:
            return
        with p.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise DatabaseError(f"cannot open database {target}: {exc.strerror or exc}") from exc
    if head[8:12] == _DUCKDB_MAGIC:
        return
    what = next((name for magic, name in _OTHER_FORMATS if head.startswith(magic)), "not a DuckDB database")
    raise DatabaseError(f"cannot open database {target}: it is {what}, not an analyzer database"
                        if what != "not a DuckDB database" else f"cannot open database {target}: not a DuckDB database file")


def check_ours(con: duckdb.DuckDBPyConnection, target: str) -> None:
    """Refuse someone else's DuckDB database, or one this analyzer cannot bring up to date, before anything is written.

    Ours: empty (a new file), or holding ``_migrations`` with only migrations this
    version knows (:func:`analyzer.store.migrations.check_recorded`).

    Raises:
        DatabaseError: tables but no ``_migrations``; a database of a pre-release
            build; or migrations this version does not know.
    """
    # (duckdb_tables() and duckdb_views(): what information_schema.tables lists here,
    # without its binding cost on a connection's first statement)
    tables = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        "UNION ALL SELECT view_name FROM duckdb_views() "
        "WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal").fetchall()}
    if not tables:
        return
    if "_migrations" not in tables:
        shown = ", ".join(sorted(tables)[:5]) + (" ..." if len(tables) > 5 else "")
        raise DatabaseError(f"{target} is a DuckDB database but not an analyzer database (it holds {shown}); "
                            "nothing was written to it: pass another --db")
    check_recorded({r[0] for r in con.execute("SELECT name FROM _migrations").fetchall()}, target)


def _open_attached(target: str, config: dict, row_group_rows: int) -> duckdb.DuckDBPyConnection | None:
    """``target`` attached with new row groups of ``row_group_rows`` rows, and in use.

    DuckDB sets the row group size when it attaches a file, not when it opens one
    as its main database: so the file is attached to an in-memory one, under the
    name a plain open gives it, and made the default (``USE``). Cursors of the
    connection start in the in-memory database: they must ``USE`` it too
    (:func:`use_same_database`). ``None`` when it cannot be attached so (this
    process holds the file in another DuckDB instance already, as a notebook's
    connection does; a file named like one of DuckDB's own databases): then the
    caller opens it plainly, with DuckDB's row groups, and a file that cannot be
    opened at all fails there with DuckDB's usual error.
    """
    con = duckdb.connect(":memory:", config=config)
    try:
        # Spilled data goes beside the file, as when DuckDB opens it (not to ./.tmp), in this run's own folder.
        con.execute("SET temp_directory = ?", [database_spill_dir(target)])
        literal = "'" + target.replace("'", "''") + "'"  # ATTACH takes no parameters
        con.execute(f"ATTACH {literal} (ROW_GROUP_SIZE {int(row_group_rows)})")
        use_same_database(con, con.execute(
            "SELECT database_name FROM duckdb_databases() WHERE NOT internal AND database_name <> 'memory'"
        ).fetchall()[0][0])
    except duckdb.Error:
        con.close()
        return None
    return con


def set_session(con: duckdb.DuckDBPyConnection, target: str | None) -> None:
    """The settings of every connection to a database or a lake: UTC, no progress bar of DuckDB's, the
    memory bound, and a spill folder of this run's own (:mod:`analyzer.store.spill`): beside the
    database file ``target``, or in the temporary folder for an in-memory database (``None``)."""
    con.execute("SET TimeZone = 'UTC'")
    # DuckDB draws its own progress bar on long queries; the analyzer shows its
    # own on a terminal only, and nothing when piped.
    con.execute("SET enable_progress_bar = false")
    # DuckDB would use up to 80% of RAM as cache; a bound keeps a week's ingest
    # well under the memory target and makes large joins spill to disk instead.
    con.execute("SET memory_limit = ?", [MEMORY_LIMIT])
    folder = scratch_spill_dir() if target is None else database_spill_dir(target)
    try:
        con.execute("SET temp_directory = ?", [folder])
    except duckdb.Error:  # the instance (shared with another connection of this process) spills already
        pass


def use_same_database(cur: duckdb.DuckDBPyConnection, name: str) -> None:
    """Make ``name`` (``current_database()`` of the connection ``cur`` came from) ``cur``'s default."""
    cur.execute('USE "' + name.replace('"', '""') + '"')


def row_group_rows(con: duckdb.DuckDBPyConnection) -> int:
    """Rows per row group that ``con`` writes into its database (see :data:`INGEST_ROW_GROUP_ROWS`)."""
    rows = con.execute("SELECT options['row_group_size'] FROM duckdb_databases() "
                       "WHERE database_name = current_database()").fetchall()
    return int(rows[0][0]) if rows and rows[0][0] else DEFAULT_ROW_GROUP_ROWS


def connect_writer(path: str | Path | None = None) -> duckdb.DuckDBPyConnection:
    """:func:`connect` as the analyzer's commands that write open the file.

    With the ingest's row groups (:data:`INGEST_ROW_GROUP_ROWS`), so that a
    commit or checkpoint of any command never re-packs what the ingest wrote.
    """
    return connect(path, row_groups=INGEST_ROW_GROUP_ROWS)


def connect(path: str | Path | None = None, *, read_only: bool = False,
            config: dict | None = None, settings: dict | None = None,
            row_groups: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the analyzer database with its views ready.

    Args:
        path: the DuckDB file; default ``$ANALYZER_DB`` or ``./analyzer.duckdb``.
            ``":memory:"`` gives a throwaway database.
        read_only: open without write access (the database must already exist).
        config: further DuckDB settings to open the connection with.
        settings: DuckDB settings applied with ``SET`` once the connection is ready,
            in order (``analyze sql`` turns off external access, then locks the
            configuration).
        row_groups: rows per row group in what this connection writes
            (:data:`INGEST_ROW_GROUP_ROWS` for the analyzer's commands that
            write: :func:`connect_writer`); ``None``: DuckDB's.
            Only for a writable file, and not when this process holds the file
            already (see :func:`row_group_rows`).

    Never downloads an extension (:data:`NO_NETWORK_CONFIG`).

    Raises:
        DatabaseError: the file cannot be opened, is locked, is not a DuckDB file,
            is someone else's DuckDB database, or was written by a newer analyzer.
    """
    target = str(path) if path is not None else str(default_db_path())
    if read_only and target != ":memory:" and not Path(target).exists():
        raise DatabaseError(f"no database at {target}; run `analyze FILES...` first")
    if target != ":memory:":
        _check_file_format(target)
    try:
        full = {**NO_NETWORK_CONFIG, **(config or {})}
        con = None
        if row_groups and not read_only and target != ":memory:":
            con = _open_attached(target, full, row_groups)
        if con is None:
            con = duckdb.connect(target, read_only=read_only, config=full)
    except (duckdb.IOException, duckdb.Error) as exc:
        if is_write_failure(exc) and not Path(target).exists():
            raise WriteError(f"cannot create database {target}: {one_line(str(exc))}") from exc
        raise DatabaseError(f"cannot open database {target}: {one_line(str(exc))}") from exc

    track(con)  # Ctrl-C stops a long statement instead of waiting for it
    try:
        if target != ":memory:":
            check_ours(con, target)
        set_session(con, None if target == ":memory:" else target)
        for name, value in (settings or {}).items():  # in order: lock_configuration comes last
            con.execute(f"SET {name} = ?", [value])
    except BaseException:
        con.close()
        raise
    if read_only:
        try:
            create_temp_macros(con)  # an older database lacks today's macros
        except duckdb.Error:
            pass  # not an analyzer database yet (no build_state): the query says what is missing
    else:
        try:
            with transaction(con):
                migrate(con)
            if not _ingests_running:
                discard_unfinished_batches(con)  # a run killed inside a batch

            create_views(con)
        except duckdb.Error as exc:
            con.close()

            if is_write_failure(exc):
                raise WriteError(f"cannot write database {target}: {one_line(str(exc))}") from exc
            raise DatabaseError(f"{target} is not a usable analyzer database: {one_line(str(exc))}") from exc
    return con
