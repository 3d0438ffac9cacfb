"""Folders of many small files (S3 chunks): read whole, a run at a time, with every guarantee kept.

Runs of small files are read into one buffer and split once
(``analyzer.io.input_readers.whole_files``); each file must still get its exact
line numbers, its quarantine rows, its registry row and fingerprint, and a
re-run must see a chunk that was appended to or replaced.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import analyzer.ingestion.logs as ingestion
from analyzer.store.db import connect
from analyzer.io.input_readers import text_pieces, whole_files
from analyzer.io.sources import discover_inputs
from tests.support.fresh_db import fresh_db
from tests.support.ingesting import run
from tests.support.records import at, request, response_ok


def _pair(i: int, day_minutes: float = 0.0) -> list[str]:
    rid = f"{0xb0000000 + i:08x}"
    return [json.dumps(request(rid, at(day_minutes + i), session=f"s-{i % 7}")),
            json.dumps(response_ok(rid, at(day_minutes + i + 0.01), content="answer", session=f"s-{i % 7}"))]


def _chunks(root: Path, n_files: int, pairs_per_file: int = 3) -> list[Path]:
    """``n_files`` chunk files of real records, named as the proxy names them."""
    paths = []
    k = 0
    for f in range(n_files):
        lines = []
        for _ in range(pairs_per_file):
            lines += _pair(k)
            k += 1
        p = root / "2026-11-16" / f"14-{f // 60:02d}-{f % 60:02d}-proxy-{f % 3}-1-{f:08x}.jsonl"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("\n".join(lines) + "\n")
        paths.append(p)
    return paths


def _stored_lines(db: Path) -> dict[tuple[str, int], str]:
    con = connect(db)
    try:
        return {(p, n): raw for p, n, raw in con.execute(
            "SELECT f.path, r.line_no, r.raw FROM records r JOIN source_files f USING (file_id)").fetchall()}
    finally:
        con.close()


def _file_lines(path: Path) -> list[str]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    return text.removeprefix("\ufeff").split("\n")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A new, empty analyzer database (a copy: creating one is not what these tests check)."""
    return fresh_db(tmp_path / "analyzer.duckdb")


def test_a_bad_line_in_the_middle_file_of_a_run_is_quarantined_with_its_file_and_line(tmp_path, db, monkeypatch):
    paths = _chunks(tmp_path / "s3", 9)
    middle = paths[4]
    lines = middle.read_text().split("\n")
    lines.insert(3, '{"type": "response", "timestamp": "2026-11-16T14:0')  # cut mid-write
    middle.write_text("\n".join(lines))
    runs = []

    def spy(todos, **kw):
        for r in whole_files(todos, **kw):
            runs.append([Path(w.todo.source.path).name for w in r if w.block is not None])
            yield r

    monkeypatch.setattr(ingestion, "whole_files", spy)
    report = run(db, [tmp_path / "s3"])
    assert runs == [[p.name for p in paths]]  # the nine files were read as one run
    assert report.files_ingested == 9 and report.quarantined == 1
    assert report.new_records == 9 * 6
    con = connect(db)
    rows = con.execute("SELECT path, line_no, reason FROM quarantine").fetchall()
    assert [(Path(p).name, n) for p, n, _ in rows] == [(middle.name, 4)]
    assert rows[0][2].startswith("malformed JSON")
    # every file's registry row: all its lines, complete, its byte size, its own counts
    reg = {Path(p).name: (lines_, recs, bad, done, complete, size)
           for p, lines_, recs, bad, done, complete, size in con.execute(
               "SELECT path, lines, records, quarantined, bytes_done, complete, size_bytes FROM source_files").fetchall()}
    con.close()
    assert reg[middle.name] == (7, 6, 1, middle.stat().st_size, True, middle.stat().st_size)
    for p in paths:
        if p != middle:
            assert reg[p.name] == (6, 6, 0, p.stat().st_size, True, p.stat().st_size)
    # each stored record is the line its file and line number name
    for (path, n), raw in _stored_lines(db).items():
        assert _file_lines(Path(path))[n - 1] == raw


def test_a_run_reads_what_the_per_file_reader_reads(tmp_path):
    """BOM, an unterminated last line, an empty file, CRLF and invalid UTF-8 among small files."""
    root = tmp_path / "s3"
    paths = _chunks(root, 6, pairs_per_file=2)
    paths[1].write_bytes(b"\xef\xbb\xbf" + paths[1].read_bytes())  # BOM
    paths[2].write_bytes(paths[2].read_bytes().rstrip(b"\n"))  # unterminated last line
    paths[3].write_bytes(b"")  # empty
    paths[4].write_bytes(paths[4].read_bytes().replace(b"\n", b"\r\n"))  # CRLF: the usual reader
    paths[5].write_bytes(paths[5].read_bytes() + b"\xff\xfe not utf-8\n")  # invalid UTF-8: the usual reader
    files = discover_inputs([str(root)]).files
    todos = [ingestion._Todo(f) for f in files]
    for f in files:
        assert f.form == "jsonl"
    head, bad = todos[:5], todos[5]
    got = [w for run_ in whole_files(head, cap=1 << 20, run_bytes=1 << 20) for w in run_]
    assert [w.todo for w in got] == head  # one answer per file, in order, all in one run
    for w in got:
        name = Path(w.todo.source.path).name
        assert w.fallback == (name == paths[4].name), name
        if w.fallback:
            continue
        usual = list(text_pieces(w.todo, [0]))
        lines = [x for p in usual for x in p.lines.to_pylist()]
        assert (w.block.lines.to_pylist() if w.block else []) == lines, name
        if usual:
            assert w.block.end_offset == usual[-1].end_offset == os.path.getsize(w.todo.source.path)
            assert w.block.nbytes == sum(p.nbytes for p in usual)
            assert w.block.terminated == usual[-1].terminated
        # the fingerprint taken from the bytes read is the one taken on its own
        fp = w.todo.source.fingerprint()
        w.todo.source._fingerprint = None
        assert w.todo.source.fingerprint() == fp
    assert not got[2].block.terminated and got[3].block is None
    # invalid UTF-8 anywhere in a run: its files go the usual (lossy, line by line) way
    again = [ingestion._Todo(discover_inputs([str(paths[0])]).files[0]), bad]
    for t in again:
        t.source.form
    assert [w.fallback for run_ in whole_files(again, cap=1 << 20) for w in run_] == [True, True]


def test_odd_small_files_are_ingested_like_any_file(tmp_path, db):
    root = tmp_path / "s3"
    paths = _chunks(root, 6, pairs_per_file=2)
    paths[1].write_bytes(b"\xef\xbb\xbf" + paths[1].read_bytes())
    paths[2].write_bytes(paths[2].read_bytes().rstrip(b"\n"))
    paths[3].write_bytes(b"")
    paths[4].write_bytes(paths[4].read_bytes().replace(b"\n", b"\r\n"))
    paths[5].write_bytes(paths[5].read_bytes() + b"\xff\xfe not utf-8\n")
    report = run(db, [root])
    assert report.new_records == 5 * 4 and report.quarantined == 1 and report.files_ingested == 6
    con = connect(db)
    q = con.execute("SELECT path, line_no FROM quarantine").fetchall()
    con.close()
    assert [(Path(p).name, n) for p, n in q] == [(paths[5].name, 5)]
    for (path, n), raw in _stored_lines(db).items():
        assert _file_lines(Path(path))[n - 1].removesuffix("\r") == raw


def test_runs_cut_across_batches_keep_exact_line_numbers(tmp_path, db, monkeypatch):
    monkeypatch.setattr(ingestion, "BATCH_LINES", 25)  # a transaction every 25 lines, inside files and runs
    _chunks(tmp_path / "s3", 12, pairs_per_file=4)
    report = run(db, [tmp_path / "s3"])
    assert report.new_records == 12 * 8 and report.files_ingested == 12
    stored = _stored_lines(db)
    assert len(stored) == 12 * 8
    for (path, n), raw in stored.items():
        assert _file_lines(Path(path))[n - 1] == raw
    con = connect(db)
    batches = con.execute("SELECT count(DISTINCT ingest_batch) FROM records").fetchall()[0][0]
    incomplete = con.execute("SELECT count(*) FROM source_files WHERE NOT complete OR lines <> 8").fetchall()[0][0]
    con.close()
    assert batches >= 12 * 8 // 25 and incomplete == 0


def test_a_rerun_sees_an_appended_chunk_and_a_same_size_replacement(tmp_path, db):
    paths = _chunks(tmp_path / "s3", 5)
    first = run(db, [tmp_path / "s3"])
    assert first.new_records == 30
    again = run(db, [tmp_path / "s3"])
    assert again.files_unchanged == 5 and again.new_records == 0 and again.files_ingested == 0

    # a chunk appended to (a growing file)
    with open(paths[1], "a") as f:
        f.write("\n".join(_pair(900)) + "\n")
    # a chunk replaced by another of the same size: same records, one request id changed
    old = paths[3].read_text()
    new = old.replace(json.loads(old.split("\n")[0])["request_id"], "c0ffee00")
    assert len(new) == len(old)
    st = paths[3].stat()
    tmp = paths[3].with_suffix(".tmp")
    tmp.write_text(new)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # rewritten later than it was
    os.replace(tmp, paths[3])
    assert paths[3].stat().st_size == st.st_size

    third = run(db, [tmp_path / "s3"])
    assert third.files_unchanged == 3 and third.files_ingested == 2
    assert third.new_records == 2 + 2  # the appended pair, and the pair under its new request id
    con = connect(db)
    ids = {r for (r,) in con.execute("SELECT request_id FROM records").fetchall()}
    con.close()
    assert "c0ffee00" in ids and f"{0xb0000000 + 900:08x}" in ids
    for (path, n), raw in _stored_lines(db).items():
        if path != str(paths[3]):  # the replaced chunk's old records stay (as for any changed file)
            assert _file_lines(Path(path))[n - 1] == raw


def test_runs_read_into_one_buffer_keep_each_runs_lines_after_the_next_is_read(tmp_path):
    """The runs share one read buffer: every run's lines must survive the runs read after it."""
    root = tmp_path / "s3"
    paths = _chunks(root, 40, pairs_per_file=3)
    # a later file shorter than the ones before it, with no newline at its end:
    # stale bytes of earlier runs lie past it in the buffer
    paths[-1].write_bytes(paths[-1].read_bytes()[:200].rstrip(b"\n"))
    files = discover_inputs([str(root)]).files
    todos = [ingestion._Todo(f) for f in files]
    runs = list(whole_files(todos, cap=1 << 20, run_bytes=3000))  # a few files a run
    assert len(runs) > 5
    got = [w for run_ in runs for w in run_]  # every run read before any is looked at
    assert [w.todo for w in got] == todos
    for w in got:
        usual = [x for p in text_pieces(w.todo, [0]) for x in p.lines.to_pylist()]
        assert w.block.lines.to_pylist() == usual, w.todo.source.path
