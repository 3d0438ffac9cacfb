"""Reading one input file as pieces of numbered lines, from where a previous run stopped.

Text files (plain or gzip), Parquet's ``entry`` column and standard input each
become :class:`analyzer.io.linereader.LineBlock` s (and ``LongLine`` s); ingestion
gathers them into batches. A file that cannot be read (further) raises
:class:`FileFailed` with the reason that goes to ``skipped_files``.
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from analyzer.io.linereader import BLOCK_BYTES, BOM, LineBlock, LongLine, arrow, read_lines, split_binary
from analyzer.io.sources import fingerprint_of

#: Standard input commits what has arrived after this many idle seconds.
STDIN_IDLE_FLUSH_S = 2.0


class FileFailed(Exception):
    """A file could not be read (further); the reason is for skipped_files."""


class _CountingReader:
    """A raw file that counts the bytes read from disk (progress for gzip inputs)."""

    def __init__(self, raw):
        self.raw = raw
        self.pos = 0

    def read(self, n: int = -1) -> bytes:
        b = self.raw.read(n)
        self.pos += len(b)
        return b

    def readinto(self, b) -> int:  # gzip.GzipFile reads through readinto when it can
        n = self.raw.readinto(b)
        self.pos += n or 0
        return n


def _gzip_read(stream: gzip.GzipFile) -> Callable[[int], bytes]:
    """``read(n)`` over a gzip stream that hands over what inflated before a cut.

    ``GzipFile.read`` raises on a truncated file and drops what it had inflated;
    reading with ``read1`` keeps it, and the error comes on the next call, so the
    lines before the cut are kept and the file is reported.
    """
    pending: list[BaseException] = []

    def read(n: int) -> bytes:
        if pending:
            raise pending.pop()
        parts, got = [], 0
        while got < n:
            try:
                b = stream.read1(n - got)
            except (OSError, EOFError, zlib.error) as exc:
                if not parts:
                    raise
                pending.append(exc)
                break
            if not b:
                break
            parts.append(b)
            got += len(b)
        return b"".join(parts)

    return read


def text_pieces(todo, disk: list[int], block: int = BLOCK_BYTES) -> Iterator[LineBlock | LongLine]:
    """The lines of a text file (plain or gzip), from where a previous run stopped."""
    f = todo.source
    try:
        raw = open(f.path, "rb")
    except OSError as exc:
        raise FileFailed(f"cannot read: {exc.strerror or exc}") from exc
    with raw:
        counting = _CountingReader(raw)
        gz = f.compressed
        stream = gzip.GzipFile(fileobj=counting, mode="rb") if gz else counting
        try:
            if todo.resume_bytes:
                if gz:  # no random access into gzip: inflate and discard up to the offset
                    left = todo.resume_bytes
                    while left > 0:
                        got = stream.read(min(left, 8 << 20))
                        if not got:
                            break
                        left -= len(got)
                else:
                    raw.seek(todo.resume_bytes)
                    counting.pos = todo.resume_bytes
            for piece in read_lines(stream, first_line=todo.resume_lines + 1, offset=todo.resume_bytes,
                                    sep=f.separator, block=block, read=_gzip_read(stream) if gz else None):
                disk[0] = counting.pos
                yield piece
        except (OSError, EOFError, zlib.error) as exc:
            what = "truncated or damaged gzip" if gz else "read failed"
            raise FileFailed(f"{what}: {exc}") from exc


def parquet_pieces(todo, disk: list[int]) -> Iterator[LineBlock]:
    """The ``entry`` column of a consolidated Parquet file as numbered lines (row numbers)."""
    import pyarrow.parquet as pq

    pa, _ = arrow()
    f = todo.source
    try:
        pf = pq.ParquetFile(f.path)
    except (OSError, pa.ArrowException) as exc:
        raise FileFailed(f"not a readable Parquet file: {exc}") from exc
    if "entry" not in pf.schema_arrow.names:
        raise FileFailed(f"Parquet without an `entry` column (columns: {', '.join(pf.schema_arrow.names[:8])})")
    row = 0
    skip = todo.resume_lines
    groups = []
    for i in range(pf.num_row_groups):  # whole row groups before the resume point are not read
        n = pf.metadata.row_group(i).num_rows
        if row + n <= skip:
            row += n
            continue
        groups.append(i)
    try:
        for batch in pf.iter_batches(batch_size=20_000, columns=["entry"], row_groups=groups):
            col = batch.column(0)
            if row < skip:
                cut = min(skip - row, len(col))
                col, row = col.slice(cut), row + cut
                if not len(col):
                    continue
            if not pa.types.is_large_string(col.type):
                col = col.cast(pa.large_string())
            nbytes = col.nbytes
            row += len(col)
            disk[0] = int(f.size * row / max(pf.metadata.num_rows, 1))
            yield LineBlock(row - len(col) + 1, col, row, nbytes)
    except (OSError, pa.ArrowException) as exc:
        raise FileFailed(f"Parquet read failed: {exc}") from exc


def stdin_pieces(todo, disk: list[int], on_idle: Callable[[], None], block: int = BLOCK_BYTES) -> Iterator[LineBlock | LongLine]:
    """Standard input, as it arrives: what has come is committed after a pause."""
    import select
    import sys

    fd = sys.stdin.fileno()
    head = todo.source.head or b""
    state = {"head": head}

    def read(n: int) -> bytes:
        if state["head"]:
            out, state["head"] = state["head"], b""
            return out
        while True:
            try:
                ready, _, _ = select.select([fd], [], [], STDIN_IDLE_FLUSH_S)
            except (OSError, ValueError):  # not selectable (a regular file): just read
                ready = [fd]
            if ready:
                b = os.read(fd, n)
                disk[0] += len(b)
                return b
            on_idle()

    if todo.source.compressed:
        inflater = zlib.decompressobj(wbits=31)
        raw_read = read

        def read(n: int) -> bytes:  # noqa: F811 - inflate as it arrives
            while True:
                b = raw_read(n)
                if not b:
                    return inflater.flush()
                out = inflater.decompress(b)
                if out:
                    return out

    try:
        yield from read_lines(None, read=read, sep=todo.source.separator, block=block)  # type: ignore[arg-type]
    except zlib.error as exc:
        raise FileFailed(f"damaged gzip on standard input: {exc}") from exc


# ---------------------------------------------------------------------------
# Runs of small files (S3 chunks): read whole, split together


@dataclass
class WholeFile:
    """A small file read whole: its lines (a slice of its run's array), or why not.

    ``block`` is None for a file with no lines; ``error`` says why the file could
    not be read; ``fallback`` asks the caller to read the file the usual way
    (:func:`text_pieces`): it has ``\r`` line ends or invalid UTF-8 (the usual
    path handles them line by line), or it grew past the small-file size.
    """

    todo: object
    block: LineBlock | None = None
    error: str | None = None
    fallback: bool = False


def whole_files(todos: Iterable, cap: int, run_bytes: int = BLOCK_BYTES) -> Iterator[list[WholeFile]]:
    """Small plain text files, read whole, a run of them at a time, each run split into lines once.

    A folder of 10,000 S3 chunks costs one Arrow split per ~``run_bytes`` instead of
    one per file: a run's files are read straight into one buffer (sized from
    their stat sizes; each file ending with a newline, one added after an
    unterminated last line), split by Arrow's kernels, validated as UTF-8 at once,
    and each file gets the slice of its lines, with its exact line numbers, byte
    offsets and fingerprint (taken from the bytes already read: each file is
    opened and read once). The reader semantics are
    :func:`analyzer.io.linereader.read_lines`' (BOM dropped, an unterminated last
    line kept); a file they would treat specially (``\r``, invalid UTF-8) or
    that grew past ``cap`` since it was listed is handed back as ``fallback``.
    Yields lists of :class:`WholeFile`, in input order.
    """
    group: list = []
    size = 0
    # One buffer for every run: the split copies the lines out of it, so the next run
    # reads into it again (a fresh buffer per run was zeroed, and faulted in page by
    # page, for every byte read).
    scratch = [bytearray()]
    for t in todos:
        group.append(t)
        size += t.source.size + 1
        if size >= run_bytes:
            yield from _read_run(group, cap, scratch)
            group, size = [], 0
    if group:
        yield from _read_run(group, cap, scratch)


def _read_run(todos: list, cap: int, scratch: list[bytearray]) -> Iterator[list[WholeFile]]:
    """One run of :func:`whole_files`: read into one buffer (``scratch[0]``, grown when too small), split once."""
    pa, pc = arrow()
    need = sum(t.source.size + 1 for t in todos)
    if len(scratch[0]) < need:
        scratch[0] = bytearray(need + need // 8)
    buf = scratch[0]
    view = memoryview(buf)
    pos = 0
    out: list[WholeFile] = []
    spans: list[tuple[int, int, int, int, bool]] = []  # per file in out: start, content start, end, lines, terminated
    for t in todos:
        f = t.source
        want = f.size
        try:
            fd = os.open(f.path, os.O_RDONLY)
            try:
                got = os.readv(fd, [view[pos:pos + want]]) if want else 0
                more = os.read(fd, 1) if got == want else b""
            finally:
                os.close(fd)
        except OSError as exc:
            out.append(WholeFile(t, error=f"cannot read: {exc.strerror or exc}"))
            spans.append((pos, pos, pos, 0, True))
            continue
        end = pos + got
        if more or buf.find(b"\r", pos, end) >= 0:  # grown since listed, or CR line ends: the usual reader
            out.append(WholeFile(t, fallback=True))
            spans.append((pos, pos, pos, 0, True))
            continue
        if f._fingerprint is None:
            f._fingerprint = fingerprint_of(f.size, view[pos:end])
        start = pos + len(BOM) if buf.startswith(BOM, pos, end) else pos
        terminated = end == start or buf[end - 1] == 0x0A
        lines = int(end > start)  # has lines; how many is told by the split below
        if not terminated:
            buf[end] = 0x0A  # the room for it is there: one byte per file
            end += 1
        out.append(WholeFile(t))
        spans.append((pos, start, end, lines, terminated))
        pos = end
    del view
    # The lines: the buffer's bytes with each BOM cut out (rare: then one copy).
    firsts, at = [], 0  # where each file with lines starts in `data`
    for _, start, end, lines, _ in spans:
        if lines:
            firsts.append(at)
        at += end - start
    if any(start != p0 for p0, start, *_ in spans):
        data = b"".join(buf[start:end] for _, start, end, *_ in spans)
    else:
        data = buf
    if not firsts:
        yield out
        return
    try:  # (every file ends with a newline: the last ends the run)
        lines_all = split_binary(memoryview(data)[:at - 1], b"\n").cast(pa.large_string())
    except pa.ArrowInvalid:  # invalid UTF-8 in some file: each is read the usual way (lossy where bad)
        yield [w if w.error else WholeFile(w.todo, fallback=True) for w in out]
        return
    # Each file's first line: line j starts at byte offsets[j] + j of `data` (the
    # split dropped j newlines before it), so a file's start names its first line.
    n = len(lines_all)
    offs = pa.Array.from_buffers(pa.int64(), n, [None, lines_all.buffers()[1]], offset=lines_all.offset)
    starts = pc.add(offs, pc.cumulative_sum(pa.nulls(n, pa.int64()).fill_null(1), start=-1))
    first = pc.index_in(pa.array(firsts, pa.int64()), value_set=starts).to_pylist() + [n]
    k = 0
    for w, (p0, start, end, lines, terminated) in zip(out, spans):
        if lines:
            size = end - p0 - (0 if terminated else 1)  # the file's bytes (not the newline added)
            count = first[k + 1] - first[k]
            w.block = LineBlock(1, lines_all.slice(first[k], count), size, size - (start - p0), True, terminated)
            k += 1
    yield out
