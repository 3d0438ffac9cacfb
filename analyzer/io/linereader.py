"""Reading an input as numbered lines, in bounded Arrow blocks.

Every text input (plain, gzip, standard input) goes through :func:`read_lines`:
bytes are read a block at a time and split into lines by Arrow's C++ kernels, so
memory is bounded by the block size whatever the file's size, and Python touches
no line one by one. One semantics for every size of file:

- lines end with ``\\n``; a ``\\r`` before it is dropped; a file whose first
  block holds ``\\r`` but no ``\\n`` (old Mac line endings) is split on ``\\r``;
- a UTF-8 byte-order mark at the start is dropped;
- invalid UTF-8 is decoded with replacement characters (the line is kept, and
  the JSON parser judges it), only in the block where it occurs;
- a line longer than :data:`MAX_LINE_BYTES` (a gzip bomb, a runaway write) is never
  held: it is skipped as it streams past and reported as a :class:`LongLine`
  with its number, length and first bytes, and the lines around it are read.

Line numbers are exact (counted, never estimated), and each block says where it
ends in the input, so ingestion can commit part of a big file and resume there.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO, Iterator, Union

if TYPE_CHECKING:  # annotations only: pyarrow is imported when a file is read (arrow())
    import pyarrow as pa


def arrow():
    """``(pyarrow, pyarrow.compute)``, imported when an input is first read.

    Not at module import: a re-run with nothing new to read never loads Arrow
    (a third of such a run's start-up).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    return pa, pc

#: Bytes read from an input at a time.
BLOCK_BYTES = 8 * 1024 * 1024
#: The longest line kept; longer ones are reported and skipped (``$ANALYZER_MAX_LINE_BYTES``).
#: Full-capture records with a long transcript run to tens of megabytes. 32 MiB is
#: what DuckDB stores within the ingest's memory limit (analyzer.store.db.MEMORY_LIMIT),
#: two stores at once; a longer record can run DuckDB out of memory, and the whole
#: run with it (docs/log-format.md). Raise both together.
MAX_LINE_BYTES = int(os.environ.get("ANALYZER_MAX_LINE_BYTES", 32 * 1024 * 1024))
#: The UTF-8 byte-order mark, dropped at the start of an input.
BOM = b"\xef\xbb\xbf"
#: The first bytes of a gzip stream (how a compressed input is told, whatever its name).
GZIP_MAGIC = b"\x1f\x8b"
#: How much of a quarantined line is kept: its first characters (a long line's first bytes).
SNIPPET_CHARS = 200
#: The quarantine reason of a line that is not a JSON document (the ingest's SQL and
#: the LiteLLM reader both write it).
MALFORMED = "malformed JSON (invalid or cut-off line)"
#: A JSON escape of a UTF-16 surrogate (``\\ud83d``; valid pairs match too): where a
#: lone one can be. Python's ``json.dumps`` writes half an emoji so, and DuckDB's JSON
#: parser refuses the line; the readers mend it (:func:`mend_surrogates`). The ingest's
#: SQL finds the lines to mend with it.
SURROGATE_ESCAPE_RE = r"\\u[dD][89a-fA-F]"
_SURROGATE = re.compile(SURROGATE_ESCAPE_RE)
# A JSON escape: a surrogate pair (kept), a lone surrogate (length 6: replaced), or any
# other escape (kept; matched whole so that `\\ud83d`, an escaped backslash, is no escape).
_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\\.",
                     re.S)


def mend_surrogates(line: str) -> str:
    """``line`` with each lone UTF-16 surrogate escape (``\\ud83d`` without its pair) made ``\\ufffd``.

    The record is then kept (the bad code point replaced, as invalid UTF-8 is
    decoded) instead of quarantined as malformed. A line without a surrogate
    escape is returned as it is, after a substring test.
    """
    if "\\u" not in line or not _SURROGATE.search(line):
        return line
    return _ESCAPE.sub(lambda m: "\\ufffd" if len(m.group()) == 6 else m.group(), line)


@dataclass
class LineBlock:
    """Consecutive lines of one input: ``lines[i]`` is line ``first_line + i``."""

    first_line: int
    lines: pa.Array  # large_string
    end_offset: int  # input bytes consumed through the last of these lines
    nbytes: int
    #: each line's bytes are its text plus one separator, so the block can be cut
    #: at any line with exact offsets (false after lossy decoding or CR trimming)
    exact: bool = True
    terminated: bool = True  # the last line ended with a separator
    #: each line's own number (int64), when lines are not one per input line: a
    #: LiteLLM payload becomes two records on its line (analyzer.io.litellm_records)
    line_nos: pa.Array | None = None
    #: the last input line these lines stand for (with ``line_nos``: the block read)
    last: int | None = None

    @property
    def last_line(self) -> int:
        """The number of the last input line this block covers."""
        return self.last if self.last is not None else self.first_line + len(self.lines) - 1

    def split(self, k: int) -> tuple["LineBlock", "LineBlock"]:
        """The first ``k`` lines and the rest, each with its exact end offset (needs ``exact``)."""
        pa, pc = arrow()
        head, tail = self.lines.slice(0, k), self.lines.slice(k)
        tail_bytes = (pc.sum(pc.binary_length(tail)).as_py() or 0) + len(tail) - (0 if self.terminated else 1)
        cut = self.end_offset - tail_bytes
        head_bytes = self.nbytes - tail_bytes
        return (LineBlock(self.first_line, head, cut, head_bytes, True, True),
                LineBlock(self.first_line + k, tail, self.end_offset, tail_bytes, True, self.terminated))


@dataclass
class LongLine:
    """A line longer than the limit: not kept, but said, with where it was."""

    line_no: int
    length: int
    head: bytes
    end_offset: int

    @property
    def reason(self) -> str:
        """Its quarantine reason (the ingest's and the Spark reader's)."""
        return (f"line of {self.length:,} bytes, longer than ANALYZER_MAX_LINE_BYTES ({MAX_LINE_BYTES:,}: "
                "what DuckDB stores within its memory limit): not kept")


Piece = Union[LineBlock, LongLine]


def split_binary(body: bytes | bytearray | memoryview, sep: bytes) -> pa.Array:
    """Split a buffer of whole lines on ``sep`` into a large_binary array (one copy, in C++)."""
    pa, pc = arrow()
    buf = pa.py_buffer(body)
    offsets = pa.array([0, buf.size], pa.int64()).buffers()[1]
    whole = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, buf])
    return pc.split_pattern(whole, sep).values


def _split(body: bytes | memoryview, sep: bytes, has_cr: bool) -> tuple[pa.Array, bool]:
    """Split a buffer of whole lines into a string array; and whether it is exact."""
    return _decode(split_binary(body, sep), sep, has_cr)


def _decode(lines: pa.Array, sep: bytes, has_cr: bool) -> tuple[pa.Array, bool]:
    """Binary lines to strings: validated UTF-8, lossy only where it is not.

    Also says whether each string's bytes are still exactly its line's (false
    after a lossy decode or a trimmed ``\r``), which cutting a block needs.
    """
    pa, pc = arrow()
    exact = True
    try:
        out = lines.cast(pa.large_string())
    except pa.ArrowInvalid:
        # Invalid UTF-8 somewhere in this block: decode it line by line, lossily.
        out = pa.array([b.decode("utf-8", errors="replace") for b in lines.to_pylist()], pa.large_string())
        exact = False
    if has_cr and sep == b"\n":
        out = pc.utf8_rtrim(out, characters="\r")
        exact = False
    return out, exact


def _block(first_line: int, split: tuple[pa.Array, bool], end_offset: int, nbytes: int,
           terminated: bool = True) -> LineBlock:
    lines, exact = split
    return LineBlock(first_line, lines, end_offset, nbytes, exact, terminated)


def _without_long_lines(lines: pa.Array, line_no: int, offset: int) -> Iterator[Piece]:
    """A block that holds a line over the limit: the lines around it, and the line reported."""
    pa, pc = arrow()
    lengths = pc.binary_length(lines).to_pylist()
    start = 0
    pos = offset
    for i, n in enumerate(lengths):
        if n > MAX_LINE_BYTES:
            if i > start:
                part = lines.slice(start, i - start)
                nbytes = sum(lengths[start:i]) + (i - start)
                yield LineBlock(line_no + start, part, pos + nbytes, nbytes, exact=False)
                pos += nbytes
            pos += n + 1
            head = lines[i].as_py()[:SNIPPET_CHARS].encode("utf-8", errors="replace")
            yield LongLine(line_no + i, n, head, pos)
            start = i + 1
    if start < len(lengths):
        part = lines.slice(start)
        nbytes = sum(lengths[start:]) + (len(lengths) - start)
        yield LineBlock(line_no + start, part, pos + nbytes, nbytes, exact=False)


def prefetch(pieces: Iterator[Piece], depth: int = 2) -> Iterator[Piece]:
    """Read ahead in a thread: the next blocks are read, inflated and split while
    DuckDB works on the last ones (both release the GIL). Errors arrive in order."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def work() -> None:
        try:
            for p in pieces:
                while not stop.is_set():
                    try:
                        q.put(p, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as exc:  # handed to the consumer, raised there
            q.put(exc)

    t = threading.Thread(target=work, name="analyzer-reader", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        t.join(timeout=5)


def sniff_separator(head: bytes) -> bytes:
    """The line separator of an input from its first bytes: ``\\r`` only for CR-only text."""
    return b"\r" if b"\n" not in head and b"\r" in head else b"\n"


def read_lines(
    stream: BinaryIO,
    *,
    first_line: int = 1,
    offset: int = 0,
    block: int = BLOCK_BYTES,
    sep: bytes | None = None,
    read=None,
) -> Iterator[Piece]:
    """Yield the lines of ``stream`` as :class:`LineBlock` s (and :class:`LongLine` s).

    Args:
        stream: a binary file object positioned at ``offset`` (line ``first_line``).
        first_line, offset: where the stream starts, for a resumed read.
        block: bytes per read; a block holds at most about this many bytes of lines.
        sep: the line separator; sniffed from the first block when None.
        read: a function ``read(n) -> bytes`` to use instead of ``stream.read``
            (standard input returns what has arrived).
    """
    read = read or stream.read
    line_no, carry, skipping = first_line, b"", None
    at_start = offset == 0
    while True:
        chunk = read(block)
        if not chunk:
            break
        if at_start:
            if chunk.startswith(BOM):
                chunk = chunk[len(BOM):]
                offset += len(BOM)
            if sep is None:
                sep = sniff_separator(chunk[:65536])
            at_start = False
        sep = sep or b"\n"
        if skipping is not None:
            i = chunk.find(sep)
            if i < 0:
                skipping.length += len(chunk)
                offset += len(chunk)
                continue
            skipping.length += i
            offset += i + 1
            skipping.end_offset = offset
            yield skipping
            skipping = None
            line_no += 1
            chunk = chunk[i + 1:]
        last = chunk.rfind(sep)
        if last < 0:
            carry += chunk
            if len(carry) > MAX_LINE_BYTES:
                skipping = LongLine(line_no, len(carry), carry[:SNIPPET_CHARS], 0)
                offset += len(carry)
                carry = b""
            continue
        has_cr = chunk.find(b"\r", 0, last) >= 0
        start = 0
        if carry:
            # The line begun in the last block ends here: a block of its own, so
            # the rest of this block is split without being copied first.
            first = chunk.find(sep)
            head = carry + chunk[:first]
            offset += len(head) + 1
            yield _block(line_no, _split(head, sep, has_cr or b"\r" in carry), offset, len(head) + 1)
            line_no += 1
            start = first + 1
        if start < last + 1:
            body = memoryview(chunk)[start:last]
            split = _split(body, sep, has_cr)
            lines = split[0]
            if len(body) > MAX_LINE_BYTES:
                yield from _without_long_lines(lines, line_no, offset)
            else:
                yield _block(line_no, split, offset + len(body) + 1, len(body) + 1)
            offset += len(body) + 1
            line_no += len(lines)
        carry = chunk[last + 1:]
        if len(carry) > MAX_LINE_BYTES:
            skipping = LongLine(line_no, len(carry), carry[:SNIPPET_CHARS], 0)
            offset += len(carry)
            carry = b""
    if skipping is not None:
        skipping.end_offset = offset
        yield skipping
    elif carry:
        offset += len(carry)
        yield _block(line_no, _split(carry, sep or b"\n", b"\r" in carry), offset, len(carry), terminated=False)
