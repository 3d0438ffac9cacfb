"""Reading one input file as pieces of numbered lines, from where a previous run stopped.

Text files (plain or gzip), Parquet's ``entry`` column and standard input each
become :class:`analyzer.linereader.LineBlock` s (and ``LongLine`` s); ingestion
gathers them into batches. A file that cannot be read (further) raises
:class:`FileFailed` with the reason that goes to ``skipped_files``.
"""

from __future__ import annotations

import gzip
import os
import zlib
from typing import Callable, Iterator

import pyarrow as pa

from .linereader import BLOCK_BYTES, LineBlock, LongLine, read_lines

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
