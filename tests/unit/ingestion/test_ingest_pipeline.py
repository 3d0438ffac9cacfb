"""A batch is stored, then finished: by one store connection or by two at once, the same database.

Ingestion stores a batch's records in one transaction (on a store connection)
and finishes it in a second (de-duplication, quarantine, events, the files'
progress). Two store connections (``ANALYZER_STORES=2``) store two batches at
once. These tests check, on the sample week (S3 chunks and every replica's
stdout, with thousands of copies to drop and cut copies to replace), that both
give exactly the database one connection gives, and that a run killed between
the two transactions of a batch is undone by the next connection and completed
by the next run.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

import analyzer.ingestion.logs as ingestion
from analyzer.store.db import connect
from analyzer.core.errors import InputError
from analyzer.ingestion.logs import ingest
from tests.support.fresh_db import fresh_db
from tests.support.records import request, response_ok, at, write_jsonl
from tests.support.repo import REPO

SAMPLE = [REPO / "sample_logs" / "s3", REPO / "sample_logs" / "kubectl"]

# What a database holds, without the batch numbers (which differ run to run).
_CONTENT = {
    "records": "SELECT * EXCLUDE (ingest_batch) FROM records ORDER BY file_id, line_no",
    "quarantine": "SELECT * FROM quarantine ORDER BY ALL",
    "proxy_events": "SELECT * FROM proxy_events ORDER BY ALL",
    "source_files": "SELECT path, form, lines, records, quarantined, free_text, bytes_done, lines_done, complete "
                    "FROM source_files ORDER BY path",
    "turns_dirty": "SELECT DISTINCT turn_key FROM turns_dirty ORDER BY 1",
}


def _content(db: Path) -> dict:
    con = connect(db)
    try:
        out = {name: con.execute(sql).fetchall() for name, sql in _CONTENT.items()}
        out["pending"] = con.execute("SELECT count(*) FROM ingest_pending").fetchall()[0][0]
        return out
    finally:
        con.close()


def _ingest(db: Path, inputs, monkeypatch, *, stores: int, batch_lines: int):
    monkeypatch.setattr(ingestion, "_STORES", stores)
    monkeypatch.setattr(ingestion, "BATCH_LINES", batch_lines)
    # a new database is a copy of an empty one: creating it is not under test here
    con = connect(db if db.exists() else fresh_db(db))
    try:
        return ingest(con, [str(i) for i in inputs])
    finally:
        con.close()


def _counts(report) -> tuple:
    return (report.lines, report.records, report.new_records, report.duplicates, report.quarantined,
            report.free_text, report.proxy_events, report.files_ingested)


@dataclass
class _Reference:
    """A database ingested once by one store connection, what its ingest reported and what it holds."""

    db: Path
    report: object
    content: dict


def _reference(tmp_path_factory, inputs, *, batch_lines: int) -> _Reference:
    """Ingest ``inputs`` by one store connection in batches of ``batch_lines`` (for the module's tests to share)."""
    db = tmp_path_factory.mktemp("reference") / "one.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        report = _ingest(db, inputs, mp, stores=1, batch_lines=batch_lines)
    return _Reference(db, report, _content(db))


@pytest.fixture(scope="module")
def sample_by_one(tmp_path_factory) -> _Reference:
    """The sample week by one store connection in batches of 700 lines (several tests compare with it)."""
    return _reference(tmp_path_factory, SAMPLE, batch_lines=700)


def test_two_store_connections_give_the_database_one_gives(tmp_path, monkeypatch, sample_by_one):
    one = sample_by_one.report
    # The first two batches are held in their stores until both are there: the two
    # stores surely overlap (a pipeline that stored one at a time would break the barrier).
    both_in = threading.Barrier(2, timeout=30)
    calls = itertools.count()
    store = ingestion._Ingest._store

    def overlapping_store(self, sealed):
        if next(calls) < 2:  # the first two batches wait for each other
            both_in.wait()
        return store(self, sealed)

    monkeypatch.setattr(ingestion._Ingest, "_store", overlapping_store)
    two = _ingest(tmp_path / "two.duckdb", SAMPLE, monkeypatch, stores=2, batch_lines=700)
    monkeypatch.setattr(ingestion._Ingest, "_store", store)
    assert one.new_records > 5000 and one.duplicates > 5000  # the sample week: copies to drop
    assert _counts(two) == _counts(one)
    a, b = sample_by_one.content, _content(tmp_path / "two.duckdb")
    assert a["pending"] == b["pending"] == 0
    for name in _CONTENT:
        assert b[name] == a[name], name
    # and the same records as batches of the default size
    default = _ingest(tmp_path / "default.duckdb", SAMPLE, monkeypatch, stores=1, batch_lines=122_880)
    assert _counts(default)[1:] == _counts(one)[1:]


def _big_file(tmp_path: Path) -> Path:
    recs = []
    for k in range(300):
        rid = f"{0xc0000000 + k:08x}"
        recs.append(request(rid, at(k), session=f"s-{k % 40}"))
        recs.append(response_ok(rid, at(k + 0.01), content="answer", session=f"s-{k % 40}"))
    recs += recs[:50]  # copies of records stored by an earlier batch
    return write_jsonl(tmp_path / "week.jsonl", recs)


@pytest.fixture(scope="module")
def big_by_one(tmp_path_factory) -> tuple[Path, _Reference]:
    """``_big_file`` and its database by one store connection in one batch (the reference of two tests).

    The tests only read the file, so they share it too."""
    path = _big_file(tmp_path_factory.mktemp("big"))
    return path, _reference(tmp_path_factory, [path], batch_lines=122_880)


def test_a_run_killed_between_storing_and_finishing_a_batch_is_undone_then_completed(tmp_path, big_by_one):
    path, reference = big_by_one
    expected = reference.report
    assert expected.new_records == 600 and expected.duplicates == 50

    db = fresh_db(tmp_path / "killed.duckdb")  # a copy of an empty one: creating it is not under test
    # The process dies (no clean-up runs) once the third batch is stored and before it is finished.
    script = f"""
import os
import analyzer.ingestion.logs as ing
from analyzer.store.db import connect
ing.BATCH_LINES = 60
ing._STORES = 2
finish = ing._Ingest._finish
calls = [0]
def dying_finish(self, sealed):
    calls[0] += 1
    if calls[0] == 3:
        sealed.future.result()
        os._exit(9)
    finish(self, sealed)
ing._Ingest._finish = dying_finish
ing.ingest(connect({str(db)!r}), [{str(path)!r}])
"""
    p = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 9, p.stderr
    raw = duckdb.connect(str(db))  # as the killed run left it
    pending = raw.execute("SELECT count(*) FROM ingest_pending").fetchall()[0][0]
    stored, counted = raw.execute(
        "SELECT (SELECT count(*) FROM records), (SELECT sum(records) FROM source_files)").fetchall()[0]
    raw.close()
    assert pending >= 1 and stored > counted  # stored records no finished batch accounts for

    con = connect(db)  # the next connection removes them
    assert con.execute("SELECT count(*) FROM ingest_pending").fetchall()[0][0] == 0
    assert con.execute("SELECT (SELECT count(*) FROM records) = (SELECT sum(records) FROM source_files)"
                       ).fetchall()[0][0]
    lines_done = con.execute("SELECT lines_done FROM source_files").fetchall()[0][0]
    assert 0 < lines_done < 650
    report = ingest(con, [str(path)])
    con.close()
    assert report.files_resumed == 1 and report.lines == 650 - lines_done
    assert _content(db)["records"] == reference.content["records"]


def test_a_strict_failure_with_batches_in_flight_leaves_no_stored_batch(tmp_path, monkeypatch):
    path = _big_file(tmp_path)
    with path.open("a") as f:  # a bad line in a late batch
        f.write('{"type": "response", "cut off\n')
    monkeypatch.setattr(ingestion, "_STORES", 2)
    monkeypatch.setattr(ingestion, "BATCH_LINES", 60)
    con = connect(fresh_db(tmp_path / "a.duckdb"))
    settings = "SELECT current_setting('threads'), current_setting('preserve_insertion_order')"
    before = con.execute(settings).fetchall()
    with pytest.raises(InputError, match="--strict"):
        ingest(con, [str(path)], strict=True)
    assert con.execute("SELECT count(*) FROM ingest_pending").fetchall()[0][0] == 0
    assert con.execute("SELECT (SELECT count(*) FROM records) = (SELECT coalesce(sum(records), 0) FROM source_files)"
                       ).fetchall()[0][0]
    assert con.execute(settings).fetchall() == before  # DuckDB's settings put back
    con.close()


def test_a_batch_is_not_deduplicated_against_a_later_one_stored_beside_it(tmp_path, monkeypatch):
    """Each block of 60 lines is followed by a copy of itself: the copy is in the next batch,
    stored (here: always) before this one is finished. The first copy must stay."""
    recs = []
    for b in range(6):
        block = []
        for k in range(30):
            rid = f"{0xd0000000 + b * 100 + k:08x}"
            block.append(request(rid, at(b * 40 + k), session=f"s-{b}"))
            block.append(response_ok(rid, at(b * 40 + k + 0.01), content="answer", session=f"s-{b}"))
        recs += block + block
    path = write_jsonl(tmp_path / "copies.jsonl", recs)
    one = _ingest(tmp_path / "one.duckdb", [path], monkeypatch, stores=1, batch_lines=60)

    finish = ingestion._Ingest._finish

    def finish_after_the_next_is_stored(self, sealed):
        for later in self.inflight:
            later.future.result()
        finish(self, sealed)

    monkeypatch.setattr(ingestion._Ingest, "_finish", finish_after_the_next_is_stored)
    two = _ingest(tmp_path / "two.duckdb", [path], monkeypatch, stores=2, batch_lines=60)
    assert one.new_records == two.new_records == 360 and one.duplicates == two.duplicates == 360
    kept = "SELECT DISTINCT (line_no - 1) // 60 % 2 FROM records"
    con = connect(tmp_path / "two.duckdb")
    assert con.execute(kept).fetchall() == [(0,)]  # every record from the first copy of its block
    con.close()
    assert _content(tmp_path / "two.duckdb")["records"] == _content(tmp_path / "one.duckdb")["records"]


def test_reading_ahead_keeps_the_lines_in_flight_under_their_budget(tmp_path):
    """The batch read while others are stored or finished is cut so that together they stay
    within ANALYZER_FLIGHT_BYTES (give or take one read block)."""
    path = _big_file(tmp_path)
    db = fresh_db(tmp_path / "a.duckdb")
    script = f"""
import json
import analyzer.ingestion.logs as ing
from analyzer.store.db import connect
seen = []
flush = ing._Ingest.flush
def watched_flush(self):
    seen.append(sum(s.nbytes for s in self.inflight) + self.batch.nbytes)
    flush(self)
ing._Ingest.flush = watched_flush
report = ing.ingest(connect({str(db)!r}), [{str(path)!r}])
print(json.dumps([max(seen), len(seen), ing._READ_BLOCK, report.new_records]))
"""
    env = dict(os.environ, ANALYZER_BATCH_BYTES="16384", ANALYZER_FLIGHT_BYTES="24576")
    p = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    most, flushes, block, new = json.loads(p.stdout)
    assert new == 600 and flushes > 5
    assert most <= 24576 + block, (most, block)


def test_the_ingests_row_groups_two_batches_stored_at_once_give_the_same_database(tmp_path, monkeypatch, sample_by_one):
    """The ingest's connection (row groups of N rows): batches of N lines, two stored at once, by default."""
    reference = sample_by_one.report
    monkeypatch.setattr(ingestion, "_STORES", None)  # the defaults: sized from the connection
    monkeypatch.setattr(ingestion, "BATCH_LINES", None)
    shapes = []
    init = ingestion._Ingest.__init__

    def spy(self, *args, **kwargs):
        init(self, *args, **kwargs)
        shapes.append((self.lines, self.stores))

    monkeypatch.setattr(ingestion._Ingest, "__init__", spy)
    db = tmp_path / "rows.duckdb"
    con = connect(db, row_groups=2048)
    try:
        report = ingest(con, [str(i) for i in SAMPLE])
        per_batch = con.execute("SELECT count(*) FROM records GROUP BY ingest_batch").fetchall()
        groups, most = con.execute("SELECT count(DISTINCT row_group_id), max(count) "
                                   "FROM pragma_storage_info('records')").fetchall()[0]
    finally:
        con.close()
    assert shapes == [(2048, 2)]
    assert _counts(report) == _counts(reference)
    assert len(per_batch) > 2 and max(n for (n,) in per_batch) <= 2048  # batches of a row group of lines
    assert groups > 2 and most == 2048
    a, b = sample_by_one.content, _content(db)
    assert b["pending"] == 0
    for name in _CONTENT:
        assert b[name] == a[name], name


def test_another_connection_opened_during_an_ingest_leaves_its_pending_batches(tmp_path, monkeypatch, big_by_one):
    """A writable connection removes the batches a killed run left pending, but not
    those of an ingest running in this process (a notebook's second connection
    shares the ingest's DuckDB instance): they are pending on purpose."""
    path, big = big_by_one
    reference = big.report
    db = tmp_path / "a.duckdb"
    finish = ingestion._Ingest._finish
    seen = []

    def open_another_first(self, sealed):
        sealed.future.result()  # stored, not finished: pending
        other = connect(db)  # the same file, this process: the same instance
        seen.append(other.execute("SELECT count(*) FROM ingest_pending").fetchall()[0][0])
        other.close()
        finish(self, sealed)

    monkeypatch.setattr(ingestion._Ingest, "_finish", open_another_first)
    report = _ingest(db, [path], monkeypatch, stores=2, batch_lines=60)
    assert seen and min(seen) >= 1  # each time, its batch was still there to finish
    assert _counts(report) == _counts(reference)
    assert _content(db)["records"] == big.content["records"]


def test_an_error_on_an_aborted_transaction_is_not_hidden_by_putting_the_settings_back(tmp_path):
    """DuckDB refuses every statement on an aborted transaction, SET too: the ingest's own error must surface."""
    con = connect(fresh_db(tmp_path / "a.duckdb"))
    try:
        threads = con.execute("SELECT current_setting('threads')").fetchall()[0][0]
        with pytest.raises(duckdb.ConstraintException):
            with ingestion._ingest_settings(con):
                con.execute("BEGIN TRANSACTION")
                con.execute("INSERT INTO settings VALUES ('x', '1', now())")
                con.execute("INSERT INTO settings VALUES ('x', '2', now())")  # the key again: aborted
        settings = "SELECT current_setting('threads'), current_setting('preserve_insertion_order')"
        assert con.execute(settings).fetchall()[0] == (threads, True)  # put back all the same
        assert con.execute("SELECT count(*) FROM settings WHERE name = 'x'").fetchall()[0][0] == 0
        with ingestion._ingest_settings(con):  # and on the way out of a good run
            assert con.execute(settings).fetchall()[0][1] is False
        assert con.execute(settings).fetchall()[0] == (threads, True)
    finally:
        con.close()


def test_the_classification_bound_does_not_hide_an_error_on_an_aborted_transaction(tmp_path):
    """memory_bound puts DuckDB's limit back on the way out; on an aborted transaction DuckDB
    refuses that SET, and the error that ended the block (an interrupt, a failed statement) is
    what surfaces, also when the block is abandoned and the generator is closed by the collector
    (a Ctrl-C between two bytecodes of the context manager's exit)."""
    import gc
    import sys

    from analyzer.store.db import memory_bound

    con = connect(fresh_db(tmp_path / "a.duckdb"))
    unraisable = []
    old_hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        con.execute("BEGIN TRANSACTION")
        with pytest.raises(duckdb.ConstraintException):
            with memory_bound(con, "500MB"):
                con.execute("INSERT INTO settings VALUES ('x', '1', now())")
                con.execute("INSERT INTO settings VALUES ('x', '2', now())")  # the key again: aborted
        con.execute("ROLLBACK")
        con.execute("BEGIN TRANSACTION")
        bound = memory_bound(con, "500MB")
        bound.__enter__()
        with pytest.raises(duckdb.ConstraintException):
            con.execute("INSERT INTO settings VALUES ('y', '1', now())")
            con.execute("INSERT INTO settings VALUES ('y', '2', now())")
        del bound  # never exited: the collector closes the generator
        gc.collect()
        con.execute("ROLLBACK")
        assert unraisable == []
    finally:
        sys.unraisablehook = old_hook
        con.close()


def test_connections_are_tracked_from_threads_while_a_sigint_walks_them():
    """interrupt.track from worker threads (the stores) while the SIGINT watcher interrupts
    every tracked connection: neither may fail."""
    from analyzer.core import interrupt
    class FakeConnection:  # what the watcher calls on a tracked DuckDB connection
        interrupted = 0

        def interrupt(self):
            FakeConnection.interrupted += 1

    kept = [FakeConnection() for _ in range(20_000)]
    for con in kept:
        interrupt.track(con)
    errors: list[BaseException] = []
    stop = threading.Event()

    def tracking():
        try:
            while not stop.is_set():
                batch = [FakeConnection() for _ in range(200)]
                for con in batch:
                    interrupt.track(con)
                del batch  # collected: the set shrinks too
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    workers = [threading.Thread(target=tracking) for _ in range(3)]
    for w in workers:
        w.start()
    try:
        for _ in range(30):
            interrupt._interrupt_connections()
    except BaseException as exc:  # noqa: BLE001
        errors.append(exc)
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert not errors
    assert FakeConnection.interrupted >= 30 * len(kept)
