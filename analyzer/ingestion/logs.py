"""Ingest proxy logs into the database: fast, in bounded memory, losing nothing, re-runnable.

One streaming pass. Python reads every input a block at a time
(:mod:`analyzer.io.linereader`: plain, gzip, standard input; Parquet's ``entry``
column by row batch) and hands Arrow arrays of numbered lines to DuckDB; it never
touches a line one by one. Lines from many small files, or from a slice of a big
one, gather into a batch of a DuckDB row group of lines (or fewer, up to a cap on bytes).
Each batch is two transactions:

1. the store (on a connection of its own, in a thread, while this thread reads
   the next batch): every line that is a record is parsed once
   (``json_transform``) and inserted into ``records`` with its typed hot columns
   and its original text (``raw``), streamed from the Arrow batch, what a bare
   INSERT of the same columns costs; the batch is marked in ``ingest_pending``;
2. the finish (on the caller's connection, batch after batch): the other lines
   (free text, blank, malformed) are judged, bad ones to ``quarantine`` with
   file and line, stdout lines that are data to ``proxy_events``; then
   de-duplication on the narrow key columns (type, request id, system prompt
   hash, session, timestamp): this batch's copies of records stored before, or
   twice in it, are deleted, and a stdout copy whose fields were cut to 200
   characters is replaced by the full copy when that arrives; then the files'
   progress is written to ``source_files`` and the mark cleared.

A big file is many batches: ``source_files`` records how far each file has been
finished (bytes and lines), so a killed run leaves the database consistent (the
next connection removes the records of a batch stored but not finished) and the
next run resumes where it stopped. A file that cannot be read (a fake or
truncated gzip, an unreadable file, a Parquet file with another schema) is
recorded in ``skipped_files`` and costs no other file its records.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator

import duckdb

from analyzer.core.errors import ExitCode, InputError
from analyzer.core.interrupt import track
from analyzer.io.batch_lines import LineBatch, batch_schema, chunk_pod
from analyzer.io.input_readers import FileFailed, WholeFile, parquet_pieces, stdin_pieces, text_pieces, whole_files
from analyzer.io.linereader import MAX_LINE_BYTES, SNIPPET_CHARS, LineBlock, LongLine, arrow, mend_surrogates, prefetch
from analyzer.io.litellm_records import SetAside, mapped_pieces
from analyzer.io.sources import (
    JSONL,
    KUBECTL,
    LITELLM,
    PARQUET,
    STDIN,
    Discovered,
    FormError,
    SourceFile,
    discover_inputs,
)
from analyzer.store import record_sql as sql
from analyzer.store.asking import ask
from analyzer.store.db import (
    DEFAULT_ROW_GROUP_ROWS,
    discard_unfinished_batches,
    ingest_running,
    registered,
    row_group_rows,
    transaction,
    use_same_database,
)


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else None


# A batch's size and how many are stored at once are taken from the connection
# when a run starts (_Ingest.__init__). The overrides below are for the tests and
# the benchmarks (benchmarks/README.md lists the variables), not settings.
#
# Lines per batch (default: the rows of the connection's row groups, 61,440 for the
# ingest's, analyzer.store.db.INGEST_ROW_GROUP_ROWS): whole row groups, so no commit
# leaves a part-filled one, which DuckDB appends row by row through its WAL and
# checkpoints, at a cost (benchmarks/README.md, "Figures behind rules in the code").
# Tests set it to cut many batches out of a few lines.
BATCH_LINES: int | None = None
# Batches stored at once, each by a DuckDB connection of its own in a thread
# (default: as many as keep DuckDB's 122,880 rows, one of its row groups, being
# stored at once, at most two: two of the ingest's). Two use both cores
# (benchmarks/ingest.py's analyze-one-store row: $ANALYZER_STORES=1).
_STORES: int | None = _env_int("ANALYZER_STORES")
# The lines of the batches in flight (stored, or being read) stay under
# _FLIGHT_BYTES together, so reading ahead holds about one typical batch more,
# never more than this of the biggest ($ANALYZER_FLIGHT_BYTES, for tests).
_FLIGHT_BYTES = int(os.environ.get("ANALYZER_FLIGHT_BYTES", 320 * 1024 * 1024))
# At most this many input bytes per batch (default: the flight budget shared by
# the stores): bounds memory when records are long. Room for a whole batch of the
# longest stretch of records of a production-shaped week ($ANALYZER_BATCH_BYTES,
# for tests: small batches out of a few lines).
BATCH_BYTES: int | None = _env_int("ANALYZER_BATCH_BYTES")
# Bytes read at a time (a quarter of a batch of the two stores' size; reading is
# not what bounds memory: the batches in flight are).
_READ_BLOCK = max(4096, min(8 * 1024 * 1024, (BATCH_BYTES or _FLIGHT_BYTES // 2) // 4))
# Files up to this size (and never over the longest line kept) are read whole,
# many at a time (S3 chunks are ~100 KB): one open and read each, one split per run.
_SMALL_FILE = min(_READ_BLOCK, MAX_LINE_BYTES)
# Runs of small files read ahead of the batch DuckDB is storing.
_RUNS_AHEAD = 3

Progress = Callable[[int, int], None]


@dataclass
class IngestReport:
    """What one ingestion run did (the summary prints it)."""

    files_seen: int = 0
    files_ingested: int = 0
    files_unchanged: int = 0
    files_resumed: int = 0
    lines: int = 0
    records: int = 0
    new_records: int = 0
    duplicates: int = 0
    quarantined: int = 0
    free_text: int = 0
    proxy_events: int = 0
    #: records stored after a lone surrogate escape in them was replaced (U+FFFD)
    mended: int = 0
    #: lines over ANALYZER_MAX_LINE_BYTES, quarantined without being held (counted in ``quarantined`` too)
    long_lines: int = 0
    quarantine_samples: list[dict] = field(default_factory=list)
    #: files that could not be read as logs: ``{"path", "reason"}``
    skipped_files: list[dict] = field(default_factory=list)
    #: inputs passed over on purpose (derived Parquet tiers, FIFOs, metric files): ``{"path", "note"}``
    notes: list[dict] = field(default_factory=list)
    #: metric files found among the logs, for the metrics loader
    metric_files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return dict(self.__dict__)


# ---------------------------------------------------------------------------
# Planning: which files need reading, and from where.

@dataclass
class _Todo:
    """A file to read: new (file_id None), changed (read whole again) or part-read (resume)."""

    source: SourceFile
    file_id: int | None = None
    resume_bytes: int = 0
    resume_lines: int = 0
    new_id: int | None = None  # allocated in bulk for new files


def not_known_unchanged(con: duckdb.DuckDBPyConnection, files: list[SourceFile]) -> list[SourceFile]:
    """The ``files`` an ingest would look into: not registered complete with this size, modification and change time.

    A re-run over thousands of known chunks finds them unchanged from these
    columns, reading no file (the others are fetched only when some file is new,
    part-read or changed). The change time (st_ctime) moves with any write, even
    one whose modification time was put back afterwards: such a file is looked
    into, and its fingerprint tells (:func:`_plan`).
    """
    quick = {path: (size, mtime, complete, ctime) for path, size, mtime, complete, ctime in con.execute(
        "SELECT path, size_bytes, mtime, complete, ctime FROM source_files").fetchall()}
    pending = []
    for f in files:
        prev = quick.get(f.path)
        if not (prev is not None and f._form != STDIN and prev[2] is not False and prev[0] == f.size
                and prev[1] == f.mtime and prev[3] == f.ctime and f.ctime is not None):
            pending.append(f)
    return pending


def _plan(con: duckdb.DuckDBPyConnection, files: list[SourceFile], report: IngestReport) -> list[_Todo]:
    """Which files need reading: new ones, part-read ones, and known ones whose content changed."""
    pending = not_known_unchanged(con, files)
    report.files_unchanged += len(files) - len(pending)
    if not pending:
        return []
    known = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT path, file_id, size_bytes, mtime, fingerprint, bytes_done, lines_done, complete FROM source_files"
        ).fetchall()
    }
    todo = []
    touched: list[tuple] = []  # (file_id, mtime, ctime) of files found unchanged by their fingerprint
    for f in pending:
        prev = known.get(f.path)
        if prev is None or f._form == STDIN:  # (`f.form` would read every known file's head)
            todo.append(_Todo(f))
            continue
        file_id, size, mtime, fp, bytes_done, lines_done, complete = prev
        if complete is False:
            if f.fingerprint_matches(fp):
                report.files_resumed += 1
                todo.append(_Todo(f, file_id, bytes_done or 0, lines_done or 0))
            else:
                todo.append(_Todo(f, file_id))
            continue
        # A complete file whose size, modification or change time moved: unchanged if its
        # content is (a copy, a touch, a chmod), else read again.
        if size == f.size and f.fingerprint_matches(fp):
            touched.append((file_id, f.mtime, f.ctime))
            report.files_unchanged += 1
            continue
        todo.append(_Todo(f, file_id))  # changed (a growing stdout log): read again; dedup keeps it single
    if touched:  # one statement, not one UPDATE per file (a chmod -R of a chunk folder touches thousands)
        pa, _ = arrow()
        with registered(con, "_touched", pa.table({"file_id": pa.array([t[0] for t in touched], pa.int32()),
                                                  "mtime": pa.array([t[1] for t in touched], pa.float64()),
                                                  "ctime": pa.array([t[2] for t in touched], pa.float64())})):
            con.execute("UPDATE source_files s SET mtime = t.mtime, ctime = t.ctime FROM _touched t "
                        "WHERE s.file_id = t.file_id").fetchall()
    return todo


# ---------------------------------------------------------------------------
# Batches: read into a LineBatch (analyzer.io.batch_lines), stored, then finished
# with the SQL of analyzer.store.record_sql.

@dataclass
class _FileState:
    """What this run has read of one file so far."""

    todo: _Todo
    file_id: int
    bytes_done: int = 0
    lines_done: int = 0
    complete: bool = False
    records: int = 0
    quarantined: int = 0
    free_text: int = 0
    lines: int = 0
    registered: bool = False  # has a source_files row (committed or in this batch)
    reset: bool = False  # re-read whole: old quarantine rows go at its first batch


@dataclass
class _Sealed:
    """A batch cut and handed to a store connection, with what it needs to be finished."""

    n: dict  # {"batch": its number in records.ingest_batch}
    table: object  # the Arrow table of its lines, shaped like batch_schema()
    progress: list  # (file state, lines_done, bytes_done, complete) when it was cut
    registry: dict  # its files' registry columns (_registry_rows)
    long_lines: list
    done: int = 0  # input bytes read when it was cut (for the progress callback)
    nbytes: int = 0  # its lines' bytes
    input_lines: int = 0  # the input lines its lines stand for
    future: object = None


class _Ingest:
    """One ingestion run over planned files."""

    def __init__(self, con, report: IngestReport, strict: bool, progress: Progress | None, total: int):
        self.con = con
        self.report = report
        self.strict = strict
        self.progress = progress
        self.total = total
        self.done = 0
        self.batch = LineBatch()
        self.now = datetime.now(timezone.utc).replace(tzinfo=None)
        self.inflight: deque[_Sealed] = deque()  # stored or being stored, not yet finished
        # The batches' shape (see BATCH_LINES, _STORES, BATCH_BYTES).
        self.lines = BATCH_LINES or row_group_rows(con)
        self.stores = _STORES or max(1, min(2, DEFAULT_ROW_GROUP_ROWS // self.lines))
        self.batch_bytes = BATCH_BYTES or _FLIGHT_BYTES // self.stores
        self.flight_bytes = max(self.batch_bytes, _FLIGHT_BYTES)
        self.in_flight = max(self.stores, 2)
        self.room = self.batch_bytes  # what the batch being read may hold (_room)
        self._stores = None  # the store connections' threads, started with the first batch
        self._cursors: list = []
        self._free: list = []
        self._lock = threading.Lock()

    # -- files -------------------------------------------------------------
    def read_all(self, todos: Iterable[_Todo]) -> None:
        """Read the planned files in order; runs of small plain files are read ahead, whole, in a thread."""
        todos = list(todos)
        small = [t for t in todos if self._small(t)]
        if len(small) < 2:  # nothing to gain from a reader of runs
            for t in todos:
                self.read_file(t)
            return
        runs = prefetch(whole_files(small, cap=_SMALL_FILE), depth=_RUNS_AHEAD)
        ahead: list[WholeFile] = []
        try:
            for t in todos:
                if not self._small(t):
                    self.read_file(t)
                    continue
                if not ahead:
                    ahead = next(runs)
                self._whole_file(ahead.pop(0))
        finally:
            runs.close()

    @staticmethod
    def _small(t: _Todo) -> bool:
        """A file read whole with others (:func:`whole_files`): small, plain text, newline-separated, from its start."""
        f = t.source
        return (f.form in (JSONL, KUBECTL, LITELLM) and not f.compressed and f.separator == b"\n"
                and not t.resume_bytes and f.size <= _SMALL_FILE)

    def _new_state(self, todo: _Todo) -> _FileState:
        return _FileState(todo, file_id=todo.file_id if todo.file_id is not None else todo.new_id,
                          bytes_done=todo.resume_bytes, lines_done=todo.resume_lines,
                          registered=todo.file_id is not None,
                          reset=todo.file_id is not None and not todo.resume_lines)

    def _whole_file(self, w: WholeFile) -> None:
        """One small file read whole: its lines into the batch, the file complete."""
        todo = w.todo
        f = todo.source
        if w.fallback:
            self.read_file(todo)
            return
        state = self._new_state(todo)
        if w.error is not None:  # as read_file does with a file that fails before its first line
            self._skip(f, w.error, state)
            if not state.registered:
                self.done += f.size  # nothing read: not registered, so the next run tries again
                return
        if w.block is not None:
            stdout, pod = KUBECTL in (f.form, f.text_form), chunk_pod(f.path) if f.form == JSONL else None
            for piece in _as_records(f, [w.block]):
                self._piece(state, piece, stdout, pod)
        state.complete = True
        self.batch.touch(state)
        self.done += f.size
        if self.batch.nbytes >= self.room or self.batch.lines >= self.lines:
            self.flush()

    def read_file(self, todo: _Todo) -> None:
        f = todo.source
        state = self._new_state(todo)
        try:  # taken now, while the file is there: its registry row needs it
            f.fingerprint()
        except FormError as exc:
            self._skip(f, exc.reason, state)
            self.done += f.size
            return
        stdout = KUBECTL in (f.form, f.text_form)
        pod = chunk_pod(f.path) if f.form == JSONL else None
        disk = [0]
        if f.form == PARQUET:
            pieces = prefetch(parquet_pieces(todo, disk))
        elif f.form == STDIN:  # not read ahead: an idle pipe commits from this thread
            pieces = stdin_pieces(todo, disk, on_idle=self._flush_if_pending, block=_READ_BLOCK)
        elif f.size > 4 * _READ_BLOCK:  # small files gain nothing from a thread of their own
            pieces = prefetch(text_pieces(todo, disk, block=_READ_BLOCK))
        else:
            pieces = text_pieces(todo, disk, block=_READ_BLOCK)
        start_done = self.done
        try:
            for piece in _as_records(f, pieces):
                self._piece(state, piece, stdout, pod)
                self.done = start_done + min(disk[0], f.size or disk[0])
                if self.batch.nbytes >= self.room or self.batch.lines >= self.lines:
                    self.flush()
        except FileFailed as exc:
            self._skip(f, str(exc), state)
            if not state.lines_done and not state.registered:
                self.done = start_done + f.size  # nothing read: not registered, so the next run tries again
                return
        state.complete = True
        self.batch.touch(state)
        self.done = start_done + (f.size or disk[0])
        if f.form == STDIN:
            self.drain()

    def _piece(self, state: _FileState, piece: LineBlock | LongLine | SetAside, stdout: bool, pod: str | None) -> None:
        """One piece of a file: its lines into the batch, or a line too long or set aside quarantined."""
        if isinstance(piece, LongLine):
            self._long_line(state, piece)
        elif isinstance(piece, SetAside):  # a LiteLLM line that holds no record (its block counted it as read)
            self._set_aside(state, piece.line_no, piece.reason, piece.head)
        else:
            self._add(state, piece, stdout, pod)

    def _add(self, state: _FileState, piece: LineBlock, stdout: bool, pod: str | None) -> None:
        """Add lines to the batch, cutting a block where the batch reaches whole row groups."""
        while True:
            room = self.lines - self.batch.lines
            if len(piece.lines) <= room or not piece.exact:
                break
            if room > 0:
                head, piece = piece.split(room)
                self._take(state, head, stdout, pod)
            self.flush()
        self._take(state, piece, stdout, pod)

    def _take(self, state: _FileState, piece: LineBlock, stdout: bool, pod: str | None) -> None:
        self.batch.add(state, piece, stdout, pod)
        state.bytes_done = piece.end_offset
        state.lines_done = piece.last_line

    def _long_line(self, state: _FileState, piece: LongLine) -> None:
        self.report.long_lines += 1
        self._set_aside(state, piece.line_no, piece.reason, piece.head.decode("utf-8", errors="replace"))
        state.bytes_done = piece.end_offset
        state.lines_done = piece.line_no

    def _set_aside(self, state: _FileState, line_no: int, reason: str, head: str) -> None:
        """A line that holds no record to store (too long, or no LiteLLM payload): quarantined with ``reason``."""
        if self.strict:
            raise InputError(f"{state.todo.source.path}:{line_no}: {reason} (--strict)", ExitCode.BAD_INPUT)
        self.batch.long_lines.append((state.file_id, state.todo.source.path, line_no, reason,
                                      head[:SNIPPET_CHARS]))  # the same cut as every quarantined line
        self.batch.touch(state)

    def _skip(self, f: SourceFile, reason: str, state: _FileState) -> None:
        read = f" (after {state.lines_done:,} lines, which are kept)" if state.lines_done else ""
        self.report.skipped_files.append({"path": f.path, "reason": reason + read})

    def _flush_if_pending(self) -> None:
        if self.batch.nbytes:
            self.drain()  # an idle pipe: what it sent is committed now

    # -- batches: stored two at a time, finished in order --------------------
    def flush(self) -> None:
        """Hand the gathered batch to a store connection, finish the one before, and return to read on.

        A batch is two transactions. The store (on one of ``self.stores`` connections,
        in a thread of its own) inserts its records and marks the batch in
        ``ingest_pending``. The finish (on this connection, batch after batch)
        judges the other lines, de-duplicates, writes quarantine, events and the
        files' progress, and clears the mark. DuckDB's INSERT of one batch uses
        one core well and two poorly (measured), so ``self.stores`` batches (two
        with the ingest's row groups) are stored at once, each on one core, while
        this thread finishes the ones before and reads the next.
        A run killed between the two leaves a marked batch, which the next
        connection removes (:func:`analyzer.store.db.discard_unfinished_batches`): the
        files' progress was not advanced, so its lines are read again.
        """
        batch, self.batch = self.batch, LineBatch()
        if batch.empty():
            return
        batch.seal()
        pa, _ = arrow()
        sealed = _Sealed(
            n={"batch": self.con.execute("SELECT nextval('ingest_batches')").fetchall()[0][0]},
            table=pa.Table.from_batches(batch.pieces, schema=batch_schema()),
            # what each file had reached when this batch was cut (reading goes on meanwhile)
            progress=[(st, st.lines_done, st.bytes_done, st.complete) for st in batch.files.values()],
            registry=self._registry_rows(batch),
            long_lines=batch.long_lines,
            done=self.done,
            input_lines=batch.input_lines,
            nbytes=batch.nbytes,
        )
        sealed.future = self._pool().submit(self._store, sealed)
        self.inflight.append(sealed)
        # Read ahead only into room for a whole row group of lines like these: a batch
        # of fewer rows is not written as its own row groups but appended row by row
        # through the WAL at commit, then checkpointed, which costs more than storing it.
        whole = min(self.batch_bytes, int(1.1 * self.lines * sealed.nbytes / max(1, len(sealed.table))))
        while self.inflight and (len(self.inflight) >= self.in_flight or self._room() < whole):
            self._finish(self.inflight.popleft())
        self.room = self._room()

    def _room(self) -> int:
        """The bytes the batch being read may hold, beside the batches in flight."""
        return min(self.batch_bytes, self.flight_bytes - sum(s.nbytes for s in self.inflight))

    def drain(self) -> None:
        """Finish every batch handed to a store connection."""
        self.flush()
        while self.inflight:
            self._finish(self.inflight.popleft())
        self.room = self._room()

    def close(self, *, abandon: bool = False) -> None:
        """Stop the store connections: after :meth:`drain`, or ``abandon``-ing the batches in flight."""
        if abandon:
            for s in self.inflight:
                s.future.cancel()
            for cur in self._cursors:
                try:
                    cur.interrupt()
                except duckdb.Error:  # closed already
                    pass
        if self._stores is not None:
            self._stores.shutdown(wait=True)
            for cur in self._cursors:
                cur.close()
            self._stores = None
        self.inflight.clear()

    def _pool(self):
        if self._stores is None:
            from concurrent.futures import ThreadPoolExecutor

            self._cursors = []
            database = self.con.execute("SELECT current_database()").fetchall()[0][0]
            for _ in range(self.stores):
                cur = self.con.cursor()
                use_same_database(cur, database)  # a cursor starts in DuckDB's in-memory one
                cur.execute("SET TimeZone = 'UTC'")  # as analyzer.store.db.connect: timestamps are UTC
                track(cur)
                self._cursors.append(cur)
            self._free = list(self._cursors)
            self._stores = ThreadPoolExecutor(max_workers=self.stores, thread_name_prefix="analyzer-store")
        return self._stores

    def _store(self, s: "_Sealed") -> int:
        """The first transaction of a batch: its records, typed and raw, and the pending mark."""
        with self._lock:
            cur = self._free.pop()
        try:
            with registered(cur, "batch_lines", s.table), transaction(cur):
                inserted = cur.execute(sql.STORE, s.n).fetchall()[0][0]
                cur.execute("INSERT INTO ingest_pending VALUES ($batch, now())", s.n)
        finally:
            with self._lock:
                self._free.append(cur)
        return inserted

    def _finish(self, s: "_Sealed") -> None:
        """The second transaction of a batch (in batch order): everything but the records' insert."""
        inserted = s.future.result()  # the store's error, if it failed, surfaces here
        con = self.con
        n = s.n
        with registered(con, "batch_lines", s.table), transaction(con):
            self._register_files(s.registry)
            if inserted == len(s.table):  # every line was a record: nothing is left to judge
                con.execute(sql.NO_REST)
            else:
                con.execute(sql.REST, n)
                inserted += self._mend(n)
            stats = {r[0]: tuple(int(x) for x in r[1:]) for r in con.execute(sql.BATCH_STATS, n).fetchall()}
            bad = sum(st[1] for st in stats.values())
            if self.strict and bad:
                first = con.execute(
                    "SELECT f.path, s.line_no, s.verdict FROM rest s JOIN batch_files f USING (file_id) "
                    "WHERE s.verdict NOT IN ('ok', 'blank', 'free_text') ORDER BY f.path, s.line_no LIMIT 1"
                ).fetchall()[0]
                raise InputError(f"{first[0]}:{first[1]}: {first[2]} (--strict; {bad} bad line(s) in this batch)",
                                 ExitCode.BAD_INPUT)
            new = inserted - self._deduplicate(n) if inserted else 0
            con.execute(sql.MARK_DIRTY, n)
            con.execute(sql.INSERT_QUARANTINE)
            if s.long_lines:
                con.executemany("INSERT INTO quarantine VALUES (?, ?, ?, ?, ?)", s.long_lines)
            events = con.execute(sql.INSERT_EVENTS).fetchall()[0][0]
            self._update_files(s.progress, stats, s.long_lines)
            con.execute("DROP TABLE rest")
            con.execute("DELETE FROM ingest_pending WHERE batch = $batch", n)
        r = self.report
        lines = s.input_lines
        recs = sum(st[0] for st in stats.values())
        r.lines += lines + len(s.long_lines)
        r.records += recs
        r.new_records += new
        r.duplicates = r.records - r.new_records
        r.quarantined += bad + len(s.long_lines)
        r.free_text += sum(st[2] for st in stats.values())
        r.proxy_events += events
        if self.progress:
            self.progress(min(s.done, self.total), self.total)

    def _mend(self, n: dict) -> int:
        """Store the lines left malformed only by a lone surrogate escape, it replaced by U+FFFD; return how many."""
        con = self.con
        rows = con.execute("SELECT file_id, line_no, mend_line FROM rest WHERE mend_line IS NOT NULL").fetchall()
        if not rows:
            return 0
        mended = [(f, ln, fixed) for f, ln, line in rows if (fixed := mend_surrogates(line)) != line]
        if not mended:
            return 0
        pa, _ = arrow()
        with registered(con, "mended", pa.table({"file_id": pa.array([m[0] for m in mended], pa.int32()),
                                                 "line_no": pa.array([m[1] for m in mended], pa.int64()),
                                                 "line": pa.array([m[2] for m in mended], pa.large_string())})):
            stored = con.execute(sql.STORE_MENDED, n).fetchall()[0][0]
        if stored:
            con.execute(sql.LEAVE_REST, n).fetchall()
        self.report.mended += stored
        return stored

    def _deduplicate(self, n: dict) -> int:
        """Drop this batch's copies of records stored before, or twice in it; return how many went.

        A stored truncated stdout copy that this batch holds whole is replaced by
        it (and counted as gone: the record is not new).
        """
        con = self.con
        lo, hi = con.execute("SELECT min(ts), max(ts) FROM records WHERE ingest_batch = $batch", n).fetchall()[0]
        gone = 0
        con.execute(sql.OLDER, {**n, "lo": lo, "hi": hi})
        if con.execute("SELECT count(*) FROM older").fetchall()[0][0]:
            for statement in (*sql.REPLACE_TRUNCATED, *sql.DROP_SEEN):
                changed = con.execute(statement, n if "$batch" in statement else None).fetchall()[0][0]
                if statement.lstrip().startswith("DELETE"):
                    gone += changed
        con.execute("DROP TABLE older")
        con.execute(sql.TWINS, n)
        if con.execute("SELECT count(*) FROM twins").fetchall()[0][0]:
            for statement in sql.DROP_TWINS:
                changed = con.execute(statement, n).fetchall()[0][0]
            gone += changed
        con.execute("DROP TABLE twins")
        return gone

    def _registry_rows(self, batch: LineBatch) -> dict[str, list]:
        """The registry columns of a batch's files, taken when it is cut (the next batch sees them registered)."""
        cols: dict[str, list] = {k: [] for k in ("file_id", "path", "form", "size_bytes", "mtime", "ctime",
                                                 "fingerprint", "is_new", "reset")}
        for st in batch.files.values():
            f = st.todo.source
            for k, v in (("file_id", st.file_id), ("path", f.path), ("form", f.form), ("size_bytes", f.size),
                         ("mtime", f.mtime), ("ctime", f.ctime), ("fingerprint", f.fingerprint()),
                         ("is_new", not st.registered), ("reset", st.registered and st.reset)):
                cols[k].append(v)
            st.registered, st.reset = True, False
        return cols

    def _register_files(self, cols: dict[str, list]) -> None:
        """New files get their registry row (part-read until complete); re-read files lose old rows.

        One statement for the whole batch, however many files it holds: a batch of
        thousands of small chunks costs no more registry work than one big file.
        """
        pa, _ = arrow()
        with registered(self.con, "_batch_files_arrow", pa.table(cols)):
            self.con.execute("CREATE OR REPLACE TEMP TABLE batch_files AS SELECT * FROM _batch_files_arrow")
        self.con.execute(
            """INSERT INTO source_files (file_id, path, form, size_bytes, mtime, fingerprint, lines, records,
                                         quarantined, free_text, ingested_at, bytes_done, lines_done, complete,
                                         ctime)
               SELECT file_id, path, form, size_bytes, mtime, fingerprint, 0, 0, 0, 0, $now, 0, 0, false, ctime
               FROM batch_files WHERE is_new""", {"now": self.now})
        if any(cols["reset"]):
            self.con.execute("DELETE FROM quarantine WHERE file_id IN (SELECT file_id FROM batch_files WHERE reset)")
            self.con.execute("DELETE FROM proxy_events WHERE file_id IN (SELECT file_id FROM batch_files WHERE reset)")
            self.con.execute(
                """UPDATE source_files s SET size_bytes = b.size_bytes, mtime = b.mtime, fingerprint = b.fingerprint,
                          ctime = b.ctime,
                          lines = 0, records = 0, quarantined = 0, free_text = 0, complete = false
                   FROM batch_files b WHERE b.reset AND s.file_id = b.file_id""")

    def _update_files(self, progress: list[tuple], stats: dict, long_lines: list) -> None:
        """The batch's progress through each of its files, in one statement."""
        long_by_file: dict[int, int] = {}
        for x in long_lines:
            long_by_file[x[0]] = long_by_file.get(x[0], 0) + 1
        cols: dict[str, list] = {k: [] for k in ("file_id", "lines_done", "records", "quarantined", "free_text",
                                                 "bytes_done", "complete", "size_bytes")}
        for st, lines_done, bytes_done, complete in progress:
            rec, bad, free = stats.get(st.file_id, (0, 0, 0))
            f = st.todo.source
            for k, v in (("file_id", st.file_id), ("lines_done", lines_done), ("records", rec),
                         ("quarantined", bad + long_by_file.get(st.file_id, 0)), ("free_text", free),
                         ("bytes_done", bytes_done), ("complete", complete),
                         ("size_bytes", f.size if f.form != STDIN else bytes_done)):
                cols[k].append(v)
        pa, _ = arrow()
        with registered(self.con, "_progress_arrow", pa.table(cols)):
            self.con.execute(
                """UPDATE source_files s SET lines = u.lines_done, records = s.records + u.records,
                          quarantined = s.quarantined + u.quarantined, free_text = s.free_text + u.free_text,
                          bytes_done = u.bytes_done, lines_done = u.lines_done, complete = u.complete,
                          ingested_at = $now, size_bytes = u.size_bytes
                   FROM _progress_arrow u WHERE s.file_id = u.file_id""", {"now": self.now})
        self.report.files_ingested += sum(1 for p in progress if p[3])


def _as_records(f: SourceFile, pieces: Iterable) -> Iterable:
    """A file's pieces as proxy record lines: a LiteLLM file's payload lines become their two records each."""
    return mapped_pieces(pieces) if LITELLM in (f.form, f.text_form) else pieces


def _record_skipped(con: duckdb.DuckDBPyConnection, report: IngestReport, now: datetime) -> None:
    """Keep the files this run skipped in ``skipped_files`` (one row per path, the latest reason)."""
    if not report.skipped_files:
        return
    with transaction(con):
        for s in report.skipped_files:
            con.execute("DELETE FROM skipped_files WHERE path = ?", [s["path"]])
            con.execute("INSERT INTO skipped_files VALUES (?, ?, ?, ?, ?)",
                        [s["path"], s["reason"], s.get("size"), s.get("mtime"), now])


def ingest(
    con: duckdb.DuckDBPyConnection,
    inputs: list[str] | list[SourceFile] | Discovered,
    *,
    strict: bool = False,
    progress: Progress | None = None,
) -> IngestReport:
    """Read log files into the database; return what was done.

    Args:
        con: a connection from :func:`analyzer.store.db.connect`.
        inputs: files, directories, globs and ``-`` for standard input (or what
            :func:`analyzer.io.sources.discover_inputs` found).
        strict: raise :class:`InputError` on the first batch with a malformed line
            (that batch is rolled back) instead of quarantining it.
        progress: called with ``(bytes_done, bytes_total)`` after each batch.

    Files that cannot be read are skipped and listed in the report's
    ``skipped_files`` (and the ``skipped_files`` table); every other file is read.

    Raises:
        InputError: an argument matches nothing; under ``strict``, a malformed line.
    """
    # Callers that already expanded the inputs (to fail before opening a
    # database) pass the SourceFiles; discovery is not done twice.
    if isinstance(inputs, Discovered):
        found = inputs
    elif inputs and all(isinstance(i, SourceFile) for i in inputs):
        found = Discovered(files=list(inputs))  # type: ignore[arg-type]
    else:
        found = discover_inputs([str(i) for i in inputs])
    report = IngestReport(files_seen=len(found.files))
    report.notes.extend(found.notes)
    report.skipped_files.extend(found.skipped)
    todo = []
    # Only files to read are opened: a re-run over thousands of known chunks reads none.
    for t in _plan(con, found.files, report):
        f = t.source
        try:  # telling the form reads a file's first bytes: a failure skips that file only
            form = f.form
        except FormError as exc:
            report.skipped_files.append({"path": f.path, "reason": exc.reason, "size": f.size, "mtime": f.mtime})
            continue
        if form == "metrics":
            report.metric_files.append(f.path)
            report.notes.append({"path": f.path, "note": "Prometheus metrics among the logs: loaded as metrics"})
            continue
        todo.append(t)
    fresh = [t for t in todo if t.file_id is None]
    if fresh:
        ids = con.execute("SELECT nextval('source_file_ids') FROM range(?)", [len(fresh)]).fetchall()
        for t, (i,) in zip(fresh, ids):
            t.new_id = i
    if todo:
        # pyarrow's default allocator (mimalloc) keeps freed batches mapped; the
        # system allocator hands them back, which keeps a long ingest's peak memory
        # near one batch. Arrow is loaded only when there is something to read.
        pa, _ = arrow()
        pa.set_memory_pool(pa.system_memory_pool())
    total = sum(t.source.size for t in todo)
    run = _Ingest(con, report, strict, progress, total)
    if progress:
        progress(0, total)
    with ingest_running(), _ingest_settings(con):
        try:
            run.read_all(_ordered(todo))
            run.drain()
        except BaseException:
            run.close(abandon=True)  # the batches in flight are abandoned ...
            _discard_after_abort(con)  # ... and what they stored removed
            raise
        run.close()
    _record_skipped(con, report, run.now)
    report.quarantine_samples = [
        {"path": p, "line_no": n, "reason": r} for p, n, r in ask(con, "quarantine_samples", {"limit": 5})
    ]
    return report


def _discard_after_abort(con: duckdb.DuckDBPyConnection) -> None:
    """Remove what abandoned batches stored, on the way out of a failed or interrupted run.

    Ctrl-C also wakes a thread that interrupts every connection, and it may do so
    while a rollback or this runs (leaving the transaction aborted, not rolled
    back): rolled back and tried a few times. If it still fails, the next
    connection removes them (:func:`analyzer.store.db.discard_unfinished_batches`).
    """
    for _ in range(5):
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:  # no transaction open: the usual case
            pass
        try:
            discard_unfinished_batches(con)
            return
        except duckdb.Error:
            time.sleep(0.05)


@contextmanager
def _ingest_settings(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB's settings for storing batches (they are the database's, shared by its connections)."""
    before = con.execute("SELECT current_setting('threads'), current_setting('preserve_insertion_order')").fetchall()[0]
    # One thread: an INSERT on two leaves two part row groups that are copied and
    # compressed again at its end (more CPU, no less time); the store connections
    # use the cores instead.
    con.execute("SET threads = 1")
    # Row order in `records` carries no meaning (file and line say where a record
    # came from); not keeping it lets DuckDB write row groups as they fill.
    con.execute("SET preserve_insertion_order = false")

    def restore() -> None:
        con.execute(f"SET threads = {int(before[0])}")
        con.execute(f"SET preserve_insertion_order = {'true' if before[1] else 'false'}")

    try:
        yield
    except BaseException:
        # DuckDB refuses even a SET on a transaction left aborted: that one (the failed
        # ingest's own) is rolled back first, and the error that ended the ingest is
        # what the caller sees, whatever happens here.
        for step in (restore, lambda: (con.execute("ROLLBACK"), restore())):
            try:
                step()
                break
            except duckdb.Error:
                continue
        raise
    restore()


def _ordered(todo: list[_Todo]) -> Iterable[_Todo]:
    """Full copies before stdout copies (fewer truncated rows to replace), Parquet last."""
    rank = {JSONL: 0, LITELLM: 0, KUBECTL: 1, PARQUET: 2, STDIN: 3}
    return sorted(todo, key=lambda t: rank.get(t.source.form, 9))
