"""A batch of numbered lines, gathered from many files' blocks into Arrow batches for DuckDB.

:class:`LineBatch` collects the :class:`~analyzer.io.linereader.LineBlock` s of one
ingestion batch and makes them the ``batch_lines`` table the batch's SQL reads
(:mod:`analyzer.store.record_sql`): per line its file, number and text, whether it came
from stdout, and the replica its file names.
"""

from __future__ import annotations

import os
import re

from analyzer.io.linereader import LineBlock, arrow


class LineBatch:
    """Lines gathered for one batch (stored, then finished), and the file progress they complete."""

    def __init__(self) -> None:
        self.pieces: list = []  # Arrow record batches shaped like batch_schema()
        self.long_lines: list[tuple[int, str, int, str, str]] = []
        self.files: dict = {}  # file_id -> the file's reading state (ingestion's _FileState)
        self.nbytes = 0
        self.lines = 0
        self.input_lines = 0  # the input lines they stand for (a LiteLLM payload's line holds two records)
        # small pieces, not yet made columns: (lines, file_id, first_line, from_stdout, pod, line_nos)
        self.small: list[tuple] = []
        self.small_bytes = 0

    def seal(self) -> None:
        """Make the small pieces gathered so far Arrow batches: one per run of consecutive slices
        of one array (no copy), else one merged batch (a copy)."""
        if not self.small:
            return
        groups: list[list[tuple]] = []
        key = None
        for item in self.small:
            lines = item[0]
            k = lines.buffers()[1].address
            if not groups or k != key or lines.offset != groups[-1][-1][0].offset + len(groups[-1][-1][0]):
                groups.append([])
            groups[-1].append(item)
            key = k
        # A run of slices of a vector or more stays one uncopied batch; shorter ones
        # (files read one by one: gzip chunks, say) are merged until a batch is worth
        # DuckDB's scan. (Merging the part-runs a seal cuts, a few thousand lines
        # each, too would copy a good part of a chunk folder's bytes.)
        cur: list[tuple] = []
        cur_lines = 0
        for g in groups:
            n = sum(len(it[0]) for it in g)
            if cur and (cur_lines >= _SMALL_PIECE or n >= _OWN_PIECE):  # (lines stay in order)
                self.pieces.append(_columns(cur))
                cur, cur_lines = [], 0
            if n >= _OWN_PIECE:
                self.pieces.append(_columns(g))
                continue
            cur.extend(g)
            cur_lines += n
        if cur:
            self.pieces.append(_columns(cur))
        self.small, self.small_bytes = [], 0

    def add(self, state, piece: LineBlock, stdout: bool, pod: str | None) -> None:
        """Add a file's block of lines (from stdout or not, of replica ``pod``)."""
        n = len(piece.lines)
        self.files[state.file_id] = state
        if not n:
            return
        item = (piece.lines, state.file_id, piece.first_line, stdout, pod, piece.line_nos)
        if n < _SMALL_PIECE:
            # Thousands of small chunk files make thousands of small pieces, and both
            # building columns per piece and DuckDB scanning many tiny batches cost
            # per piece: they are gathered and made columns together, some MB at a
            # time (slices of one run of files without a copy, others merged).
            self.small.append(item)
            self.small_bytes += piece.nbytes
            if self.small_bytes >= _SEAL_BYTES:
                self.seal()
        else:
            self.pieces.append(_columns([item]))
        self.nbytes += piece.nbytes
        self.lines += n
        self.input_lines += n if piece.line_nos is None else arrow()[1].count_distinct(piece.line_nos).as_py()

    def touch(self, state) -> None:
        """Count a file in the batch without lines (its progress, or its end, is in it)."""
        self.files[state.file_id] = state

    def empty(self) -> bool:
        """True when no file is in the batch."""
        return not self.files


_SMALL_PIECE = 4096  # lines: pieces smaller than this are merged
_OWN_PIECE = 2048  # lines (a DuckDB vector): consecutive slices of one run this long are never copied
_SEAL_BYTES = 16 * 1024 * 1024  # merged a few MB at a time


def batch_schema():
    """The Arrow schema of ``batch_lines``."""
    pa, _ = arrow()
    return pa.schema([
        ("file_id", pa.int32()), ("line_no", pa.int64()), ("line", pa.large_string()),
        ("from_stdout", pa.bool_()), ("file_pod", pa.large_string()),
    ])


def _columns(items: list[tuple]):
    """One Arrow batch (``batch_lines``' shape) of pieces ``(lines, file_id, first_line, from_stdout, pod, line_nos)``.

    The per-line columns are run-length decoded from one value per piece: the
    cost is per line in C++, not per piece in Python. A piece's ``line_nos``
    (LiteLLM's two records per line) numbers its lines instead of counting from
    its first line.
    """
    pa, pc = arrow()
    ends, at = [], 0
    for it in items:
        at += len(it[0])
        ends.append(at)
    ends_arr = pa.array(ends, pa.int32())

    def runs(values, typ):
        return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends_arr, pa.array(values, typ)))

    starts = [e - len(it[0]) for e, it in zip(ends, items)]
    index = pc.cumulative_sum(pa.nulls(at, pa.int64()).fill_null(1), start=-1)  # 0, 1, 2, ...
    cols = [
        runs([it[1] for it in items], pa.int32()),
        _numbers(items, starts, index, runs),
        _joined([it[0] for it in items]),
        runs([it[3] for it in items], pa.bool_()),
        runs([it[4] for it in items], pa.large_string()),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=batch_schema())


def _numbers(items: list[tuple], starts: list[int], index, runs):
    """The ``line_no`` column: counted from each piece's first line, or its own numbers where it has them."""
    pa, pc = arrow()
    counted = pc.add(index, runs([it[2] - s for it, s in zip(items, starts)], pa.int64()))
    if all(it[5] is None for it in items):
        return counted
    return pa.concat_arrays([it[5] if it[5] is not None else counted.slice(s, len(it[0]))
                             for it, s in zip(items, starts)])


def _joined(arrays: list):
    """The arrays one after the other: without a copy when they are consecutive slices of one
    array (the files of a run of small files), else concatenated."""
    pa, _ = arrow()
    if len(arrays) == 1:
        return arrays[0]
    first = arrays[0]
    bufs = first.buffers()
    at = first.offset + len(first)
    for a in arrays[1:]:
        if a.offset != at or a.buffers()[1].address != bufs[1].address:
            return pa.concat_arrays(arrays)
        at += len(a)
    return pa.Array.from_buffers(first.type, at - first.offset, bufs, offset=first.offset)


# An S3 chunk named by a newer proxy: `HH-MM-SS-<host>-<pid>-<8hex>.jsonl`, where
# the host is the pod's $HOSTNAME, i.e. the replica that wrote it.
_CHUNK_NAME = re.compile(r"^\d\d-\d\d-\d\d-(.+)-\d+-[0-9a-f]{8}\.jsonl(?:\.gz)?$")


def chunk_pod(path: str) -> str | None:
    """The proxy replica named by an S3 chunk's file name, if it names one."""
    m = _CHUNK_NAME.match(os.path.basename(path))
    return m.group(1) if m and m.group(1) != "nohost" else None
