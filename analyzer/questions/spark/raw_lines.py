"""Raw log files as numbered lines, read on Spark's executors by the analyzer's own readers.

Spark's ``text`` source numbers no lines, splits on ``\\r`` as well as ``\\n``,
tells gzip by the file's name and keeps a byte-order mark: none of that is how
``analyze`` reads (docs/log-format.md). So each file is read here, on an
executor, by the very readers the ingest uses (:mod:`analyzer.io.input_readers`
over :mod:`analyzer.io.linereader`): the form told from the first bytes
(:mod:`analyzer.io.sources`), gzip by its magic bytes, ``\\r\\n`` and CR-only
files, the BOM, invalid UTF-8, over-long lines, a gzip cut short (the lines
before the cut kept, the file reported), Parquet's ``entry`` column. The rows go
back to Spark, whose SQL judges and types them (:mod:`.raw_records`).

This module is what the executors import: it needs the analyzer package (not
pyspark) where Spark runs its Python workers.
"""

from __future__ import annotations

import os
import tempfile
from types import SimpleNamespace
from typing import Iterator

from analyzer.io.batch_lines import chunk_pod
from analyzer.io.input_readers import FileFailed, parquet_pieces, text_pieces
from analyzer.io.linereader import SNIPPET_CHARS, LongLine, mend_surrogates
from analyzer.io.litellm_records import SetAside, mapped_pieces
from analyzer.io.sources import JSONL, KUBECTL, LITELLM, METRICS, PARQUET, FormError, SourceFile

#: What a row of :func:`file_lines` is: a line, a line over the limit, a file skipped (with
#: why), one passed over (a metric file), and the file read (its registry row, last).
LINE, LONG_LINE, SKIPPED, NOTE, FILE = "line", "long", "skipped", "note", "file"

#: The rows' Spark schema (DDL), in :func:`file_lines`' order. ``line`` is the text
#: judged (mended, see below); ``original`` the line as read when mending changed
#: it; ``detail`` a long line's or skipped file's reason. The last six are the
#: file's, on its ``file`` row (and a skipped file's size and time when its form
#: could not be told, as the ingest keeps them): what ``source_files`` holds of it,
#: ``line_no`` being how many lines were read.
LINES_DDL = (
    "file_index INT, path STRING, form STRING, kind STRING, line_no BIGINT, line STRING, "
    "original STRING, from_stdout BOOLEAN, file_pod STRING, detail STRING, "
    "size_bytes BIGINT, mtime DOUBLE, ctime DOUBLE, fingerprint STRING, bytes_done BIGINT, complete BOOLEAN"
)

def file_lines(item: tuple) -> Iterator[tuple]:
    """The rows of one file: ``item`` is ``(file_index, SourceFile)`` or ``(file_index, uri, content, mtime)``.

    A local file (one the driver's discovery found) is read from its path; a file
    Spark listed (``s3a://``, ``hdfs://``: its bytes in ``content``, its
    modification time in seconds) is written to a temporary file first, so both
    go through the same readers. The last row of a file read is its ``file`` row.
    """
    if len(item) == 2:
        index, source = item
        yield from _rows(index, source, source.path)
        return
    index, uri, content, mtime = item
    # Under the file's own name: the form is told from the bytes, but a name counts
    # too (a `.gz` that is not gzip is skipped, a `.json` may be one document).
    with tempfile.TemporaryDirectory(prefix="analyzer-raw-") as tmp:
        path = os.path.join(tmp, uri.rstrip("/").rsplit("/", 1)[-1] or "input")
        with open(path, "wb") as f:
            f.write(content)
        # The object's time, not the temporary file's; an object store has no change time.
        source = SourceFile(path=path, size=len(content), mtime=mtime, ctime=None)
        yield from _rows(index, source, uri)


def _rows(index: int, source: SourceFile, shown: str) -> Iterator[tuple]:
    def row(kind, line_no=None, line=None, original=None, stdout=None, pod=None, detail=None, form=None,
            file=(None,) * 6):
        return (index, shown, form, kind, line_no, line, original, stdout, pod, detail, *file)

    try:
        form = source.form
    except FormError as exc:
        # The ingest keeps a file's size and time when its form cannot be told.
        yield row(SKIPPED, detail=exc.reason, file=(source.size, source.mtime, None, None, None, None))
        return
    if form == METRICS:
        yield row(NOTE, form=form, detail="Prometheus metrics among the logs: not read as logs (pass them as metrics)")
        return
    try:  # taken as the ingest takes it, before the lines
        fingerprint = source.fingerprint()
    except FormError as exc:
        yield row(SKIPPED, form=form, detail=exc.reason)
        return
    stdout = KUBECTL in (form, source.text_form)
    pod = chunk_pod(shown) if form == JSONL else None
    todo = SimpleNamespace(source=source, resume_bytes=0, resume_lines=0)
    pieces = parquet_pieces(todo, [0]) if form == PARQUET else text_pieces(todo, [0])
    if form == LITELLM:  # each payload as its two records, on its line (as the ingest reads it)
        pieces = mapped_pieces(pieces)
    read, done = 0, 0
    try:
        for piece in pieces:
            if isinstance(piece, SetAside):
                yield row(LONG_LINE, piece.line_no, piece.head, stdout=stdout, pod=pod, form=form,
                          detail=piece.reason)
                continue
            if isinstance(piece, LongLine):
                read, done = piece.line_no, piece.end_offset
                yield row(LONG_LINE, piece.line_no, piece.head.decode("utf-8", errors="replace")[:SNIPPET_CHARS],
                          stdout=stdout, pod=pod, form=form, detail=piece.reason)
                continue
            first = piece.first_line
            numbers = piece.line_nos.to_pylist() if piece.line_nos is not None else None
            for i, line in enumerate(piece.lines.to_pylist()):
                # DuckDB refuses a line with a lone surrogate escape as malformed, and the ingest
                # stores it mended: Spark judges the mended text, the original is the snippet's.
                mended = mend_surrogates(line)
                yield row(LINE, numbers[i] if numbers is not None else first + i,
                          mended, line if mended != line else None, stdout, pod, form=form)
            read, done = piece.last_line, piece.end_offset
    except FileFailed as exc:
        kept = f" (after {read:,} lines, which are kept)" if read else ""
        yield row(SKIPPED, form=form, detail=f"{exc}{kept}")
    # Read to its end, or as far as it could be (then skipped too): as the ingest registers it.
    yield row(FILE, read, form=form, file=(source.size, source.mtime, source.ctime, fingerprint, done, True))
