"""Finding input files and telling which form each one is in.

Forms: ``jsonl`` (S3 chunk files: one JSON record per line), ``litellm``
(LiteLLM's logging payloads, one JSON object per line or per S3 object, read as
records by :mod:`analyzer.io.litellm_records`), ``kubectl`` (pod
stdout: records behind ``📥 REQUEST: `` / ``✓ RESPONSE: `` / ``✗ RESPONSE: ``
prefixes among free-text lines, from one pod or many), ``parquet`` (the
consolidated tier, the record as JSON in the ``entry`` column), ``stdin``
(``-``: any text form, as it arrives) and ``metrics`` (Prometheus exports passed
among the logs, loaded as metrics). Any text form may be gzip-compressed: gzip is
told by its magic bytes, not by the name.

Discovery never stops on one bad input: a dangling link, an unreadable file or
folder, a FIFO or a stranger's file is reported (``skipped`` or ``notes``) and
the other inputs are read. Only an argument that matches nothing at all is an
error, since that is a typo, not a bad file.
"""

from __future__ import annotations

import glob
import hashlib
import operator
import os
import re
import stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.core.errors import InputError
from analyzer.io.linereader import BOM, GZIP_MAGIC, sniff_separator
from analyzer.io.litellm_records import PAYLOAD_KEYS
from analyzer.io.objectstore import sync_for_ingest

JSONL = "jsonl"
KUBECTL = "kubectl"
PARQUET = "parquet"
STDIN = "stdin"
METRICS = "metrics"
LITELLM = "litellm"

RECORD_PREFIXES = ("📥 REQUEST: ", "✓ RESPONSE: ", "✗ RESPONSE: ")
# Lines the real proxy prints on stdout besides records: a file holding only
# these is a (quiet) proxy log, not a stranger's file.
_PROXY_BANNER_MARKS = ("Multi-Provider LLM Proxy", "Uvicorn running", "INFO:     ", "✓ Flushed", "✓ Loaded configuration")
_PEEK = 64 * 1024
_SKIP_NAMES = {".DS_Store"}
_TEXT_SUFFIXES = {".jsonl", ".json", ".ndjson", ".log", ".txt", ".out", ".csv", ".prom"}
_PARQUET_MAGIC = b"PAR1"
# The mirror's derived tiers (per-turn and per-session views): not records.
_DERIVED_TIERS = ("sessions", "session-rollup")
# Prometheus: a query/query_range JSON document, or the text exposition format.
_PROM_JSON = re.compile(r'^\s*\{\s*"(?:status|data)"\s*:')
_PROM_TEXT = re.compile(r"^(?:# (?:HELP|TYPE) [a-zA-Z_:]|[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})? (?:-?[0-9.eE+-]+|NaN|[+-]Inf)\b)")
_METRIC_CSV_HEADER = re.compile(r"^[\w\",:. ]*\b(?:metric|__name__)\b.*,.*\b(?:value|timestamp|ts)\b", re.I)
# A LiteLLM StandardLoggingPayload: its startTime beside one of its own keys. An
# unescaped `"key":` is JSON structure (inside a string every quote is escaped), so
# a proxy record that merely mentions these words never matches; the proxy's records
# have no startTime. Read from the first object's text, however long it is.
_LITELLM_START = re.compile(rb'"startTime"\s*:\s*["0-9]')
_LITELLM_KEY = re.compile(rb'"(?:' + b"|".join(re.escape(k.encode()) for k in PAYLOAD_KEYS) + rb')"\s*:')
_PROXY_TYPE = re.compile(rb'^\{\s*"(?:timestamp|type)"\s*:')


class FormError(InputError):
    """A file that is not a proxy log in any supported form (the file is skipped)."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.reason = reason


@dataclass
class SourceFile:
    """An input file: where it is, its size and time; its form and fingerprint on demand.

    Discovery only stats files; the first bytes are read (once) when the form or
    the fingerprint is asked for, which happens only for files not ingested yet
    or changed since, so a re-run over thousands of known chunks reads nothing.
    """

    path: str
    size: int
    mtime: float
    _form: str | None = None
    _fingerprint: str | None = None
    compressed: bool = False
    separator: bytes | None = None
    text_form: str | None = None  # standard input: the text form its first bytes showed
    head: bytes | None = None  # standard input: the bytes read to tell its form
    #: the status-change time (st_ctime) discovery saw: any write moves it, even
    #: one whose modification time was put back (None: not known)
    ctime: float | None = None

    def _read_head(self) -> None:
        # Only the head: the fingerprint is taken where the file is read anyway (a
        # small file read whole gives it for free), or on its own when asked for.
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                head = os.read(fd, _PEEK)
            finally:
                os.close(fd)
        except OSError as exc:
            raise FormError(self.path, f"cannot read: {exc.strerror or exc}") from exc
        self._form = self._detect(head)

    def _detect(self, head: bytes) -> str:
        if head[:4] == _PARQUET_MAGIC:
            return PARQUET
        if head[:2] == GZIP_MAGIC:
            self.compressed = True
            head = _inflate_head(self.path, head)
        elif self.path.endswith(".gz"):
            raise FormError(self.path, "named .gz but not gzip (no gzip header)")
        form, self.separator = detect_text_form(self.path, head)
        return form

    @property
    def form(self) -> str:
        """``jsonl``, ``litellm``, ``kubectl``, ``parquet``, ``metrics`` or ``stdin``; raises FormError for a stranger's file."""
        if self._form is None:
            self._read_head()
        return self._form  # type: ignore[return-value]

    def fingerprint(self) -> str:
        """A hash of the size and the content: whole up to 1 MiB, else sampled (:func:`fingerprint_of`)."""
        if self._fingerprint is None:
            try:
                self._fingerprint = file_fingerprint(self.path, self.size)
            except OSError as exc:
                raise FormError(self.path, f"cannot read: {exc.strerror or exc}") from exc
        return self._fingerprint

    def fingerprint_matches(self, stored: str | None) -> bool:
        """Whether ``stored`` (a registry's fingerprint) is this file's now."""
        return bool(stored) and self.fingerprint() == stored


# The fingerprint: sha256 of the size and of the whole content up to _FP_WHOLE
# bytes (every S3 chunk: ~100 KB), else of the first and last 64 KiB and
# _FP_SAMPLES blocks of _FP_SAMPLE bytes evenly spaced between. It is taken when a
# file is read (from the bytes in memory for a small one) and compared only when
# a file's size, modification or change time differ from its registry row's
# (analyzer.ingestion.logs._plan), so it costs a re-run over known files nothing.
# A fingerprint starts with the method's mark: another method would get another.
_FP_MARK = "2:"
_FP_WHOLE = 1024 * 1024
_FP_SAMPLES = 16
_FP_SAMPLE = 4096


def _fp_spans(size: int) -> list[tuple[int, int]]:
    """The (offset, length) spans of a file of ``size`` bytes that its fingerprint hashes."""
    if size <= _FP_WHOLE:
        return [(0, size)]
    step = (size - 2 * _PEEK - _FP_SAMPLE) / (_FP_SAMPLES + 1)
    middle = [(_PEEK + int(step * k), _FP_SAMPLE) for k in range(1, _FP_SAMPLES + 1)]
    return [(0, _PEEK), *middle, (size - _PEEK, _PEEK)]


def file_fingerprint(path: str | os.PathLike, size: int) -> str:
    """:meth:`SourceFile.fingerprint` of the file at ``path`` (``size``: its stat size).

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        for offset, length in _fp_spans(size):
            f.seek(offset)
            h.update(f.read(length))
    return _FP_MARK + h.hexdigest()


def fingerprint_of(size: int, data: bytes | memoryview) -> str:
    """:meth:`SourceFile.fingerprint` of a file whose whole content is ``data`` (``size``: its stat size)."""
    view = memoryview(data)
    h = hashlib.sha256(str(size).encode())
    for offset, length in _fp_spans(size):
        h.update(view[offset:offset + length])
    return _FP_MARK + h.hexdigest()


def _inflate_head(path: str, head: bytes) -> bytes:
    """The first inflated bytes of a gzip file (what there is, if it is cut short).

    A file that is not gzip past its magic bytes is skipped; one that is merely
    truncated is read up to its cut (the reader says where it ended).
    """
    try:
        return zlib.decompressobj(wbits=31).decompress(head, _PEEK)
    except zlib.error as exc:
        raise FormError(path, f"damaged gzip: {exc}") from exc


_PREFIX_BYTES = tuple(p.encode() for p in RECORD_PREFIXES)
# Every record prefix starts with a mark that is not ASCII, and the proxy's JSON is
# ASCII (json.dumps escapes the rest): a head with none of the marks' first bytes
# holds no prefix. One memchr per byte instead of a search per prefix: the forms of
# every chunk of a folder are told before any reading starts (benchmarks/chunk_profile.py's
# `forms` line times it).
_PREFIX_LEADS = tuple({p[:1] for p in _PREFIX_BYTES})


def _has_record_prefix(head: bytes) -> bool:
    """Whether one of :data:`RECORD_PREFIXES` is anywhere in ``head``."""
    return any(b in head for b in _PREFIX_LEADS) and any(p in head for p in _PREFIX_BYTES)


def detect_text_form(path: str, head: bytes) -> tuple[str, bytes]:
    """Tell a text input's form (and line separator) from its first bytes.

    Looks past a bad first line: a file whose first line is garbage is still a
    log if later lines are records (the bad line is quarantined when read).

    Raises:
        FormError: the input is not a proxy log or a metric file.
    """
    if head.startswith(BOM):
        head = head[len(BOM):]
    sep = sniff_separator(head)
    # The common cases, told from bytes (a folder of 10,000 chunks asks this 10,000 times).
    if _has_record_prefix(head):
        return KUBECTL, sep
    first = head.split(sep, 1)[0].strip()
    if is_litellm_head(head, sep):
        return LITELLM, sep
    if path.endswith((".json", ".json.gz")) and not _PROM_JSON.match(head.decode("utf-8", errors="replace")):
        # A .json file is one document unless its first line is a proxy record.
        import json

        try:
            rec = json.loads(first)
        except ValueError:
            rec = None
        if not (isinstance(rec, dict) and rec.get("type") in ("request", "response", "system_prompt")):
            raise FormError(path, "a JSON document that is neither Prometheus metrics nor proxy records "
                                  "(nor LiteLLM logging payloads)")
    if first.startswith(b'{"') and not _PROM_JSON.match(first.decode("utf-8", errors="replace")):
        return JSONL, sep
    text = head.decode("utf-8", errors="replace")  # (a prefix in it would be in the bytes: told above)
    lines = [ln.strip() for ln in text.split(sep.decode())]
    lines = [ln for ln in lines if ln]
    if not lines:
        return JSONL, sep  # an empty file: nothing to read, nothing to lose
    if _PROM_JSON.match(text):
        return METRICS, sep
    if not lines[0].startswith("{") and sum(1 for ln in lines[:20] if _PROM_TEXT.match(ln)) >= min(2, len(lines)):
        return METRICS, sep
    if _METRIC_CSV_HEADER.match(lines[0]):
        return METRICS, sep
    if any(ln.startswith("{") for ln in lines[:1000]):
        return JSONL, sep
    if any(m in text for m in _PROXY_BANNER_MARKS):
        return KUBECTL, sep
    raise FormError(
        path,
        "not a proxy log (expected JSON lines, kubectl stdout with '📥 REQUEST:' / '✓ RESPONSE:' lines, "
        f"Parquet, or Prometheus metrics); it starts with {lines[0][:60]!r}",
    )


def is_litellm_head(head: bytes, sep: bytes = b"\n") -> bool:
    """Whether an input's first bytes hold LiteLLM logging payloads (its first JSON object is one).

    Looks at the first line that opens an object (a bad first line is quarantined
    when read); a line longer than the head is judged from the part there.
    """
    # Line by line, without splitting the whole head: every proxy chunk is asked this,
    # and its first line (`{"timestamp": ...`) answers at once.
    pos = 0
    for _ in range(20):
        end = head.find(sep, pos)
        end = len(head) if end < 0 else end
        line = head[pos:end].strip()
        if line.startswith(b"{"):
            return (not _PROXY_TYPE.match(line) and _LITELLM_START.search(line) is not None
                    and _LITELLM_KEY.search(line) is not None)
        if end >= len(head):
            break
        pos = end + 1
    return False


@dataclass
class Discovered:
    """What discovery found: files to read, files skipped (problems), notes (passed over on purpose)."""

    files: list[SourceFile] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}
    notes: list[dict] = field(default_factory=list)  # {"path", "note"}


# The suffixes of input files, plain and gzipped (one endswith per name: a folder
# of 10,000 chunks is listed on every run).
_INPUT_SUFFIXES = tuple(sorted(x + gz for x in (*_TEXT_SUFFIXES, ".parquet") for gz in ("", ".gz")))


def _looks_like_name(name: str) -> bool:
    """A file name that may hold logs or metrics (by its suffix; hidden files never)."""
    return name.endswith(_INPUT_SUFFIXES) and not name.startswith(".") and name not in _SKIP_NAMES


_NAME = operator.attrgetter("name")


def _walk(root: Path, out: Discovered) -> list[tuple[str, os.stat_result | None]]:
    """The input files under ``root`` (pre-order, names sorted, as ``os.walk``), each with its stat.

    One ``scandir`` per folder and one ``stat`` per file, through the directory
    entry: a folder of 10,000 chunks is walked on every run, so no path is joined
    or stat-ed twice in Python.
    """
    found: list[tuple[str, os.stat_result | None]] = []

    def walk(top: str) -> None:
        try:
            with os.scandir(top) as it:
                entries = sorted(it, key=_NAME)
        except OSError as exc:
            out.skipped.append({"path": exc.filename or top, "reason": f"cannot read folder: {exc.strerror or exc}"})
            return
        subdirs = []
        for e in entries:
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                subdirs.append(e)
            elif _looks_like_name(e.name):
                try:
                    st = e.stat()
                except OSError:  # a dangling link, say: discovery reports it
                    st = None
                found.append((e.path, st))
        for d in subdirs:
            if d.name.startswith("."):
                continue
            if d.name in _DERIVED_TIERS:  # the mirror's per-turn and per-session views: not records
                out.notes.append({"path": d.path, "note": "derived session tier (not records): skipped"})
                continue
            if not d.is_symlink():  # as os.walk: linked folders are not followed
                walk(d.path)

    walk(str(root))
    return found


def _candidates(arg: str, out: Discovered) -> list[tuple[str, os.stat_result | None]]:
    """The files an argument names, each with its stat when a folder walk already took it."""
    p = Path(arg).expanduser()
    if p.is_dir():
        return _walk(p.resolve(), out)
    if p.exists() or p.is_symlink():
        return [(str(p), None)]
    matches = sorted(glob.glob(str(p), recursive=True))
    found: list[tuple[str, os.stat_result | None]] = []
    for m in matches:
        found.extend(_candidates(m, out))
    return found


def is_stdin(arg: str) -> bool:
    """Whether an argument names standard input (``-``, ``/dev/stdin`` and the like)."""
    return arg == "-" or os.path.realpath(arg) in ("/dev/stdin", "/proc/self/fd/0") or arg in ("/dev/stdin", "/dev/fd/0")


def stdin_source() -> SourceFile:
    """Standard input as a source: its first bytes tell its form (and gzip)."""
    import sys
    from datetime import datetime, timezone

    fd = sys.stdin.fileno()
    head = b""
    while len(head) < 4096:  # enough to tell the form; blocks until the first lines arrive
        b = os.read(fd, 65536)
        if not b:
            break
        head += b
        if b"\n" in head:
            break
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    f = SourceFile(path=f"<stdin {stamp}>", size=0, mtime=0.0, head=head)
    text = head
    if head[:2] == GZIP_MAGIC:
        f.compressed = True
        try:
            text = zlib.decompressobj(wbits=31).decompress(head)
        except zlib.error as exc:
            raise FormError("<stdin>", f"damaged gzip: {exc}") from exc
    form, f.separator = detect_text_form("<stdin>", text)
    if form not in (JSONL, KUBECTL, LITELLM):
        raise FormError("<stdin>", "standard input holds metrics, not logs: pass metric files with --metrics")
    f._form, f.text_form, f._fingerprint = STDIN, form, ""
    return f


def discover_inputs(inputs: list[str]) -> Discovered:
    """Expand files, directories (recursively), globs and ``-`` into input files, in order.

    A FIFO, socket or device among the inputs is skipped with a note; named with
    nothing else to read, it is an error.

    Raises:
        InputError: an argument matches nothing at all, or the inputs are only FIFOs or devices.
    """
    out = Discovered()
    seen: set[str] = set()
    odd: list[tuple[str, str]] = []  # (path, kind) of the FIFOs, sockets and devices named
    for arg in inputs:
        if is_stdin(arg):
            if "<stdin>" not in seen:
                seen.add("<stdin>")
                out.files.append(stdin_source())
            continue
        if arg.startswith("s3://"):  # mirrored into the local cache first (analyzer.io.objectstore)
            arg = sync_for_ingest(arg)
        paths = _candidates(arg, out)
        if not paths and not any(s["path"].startswith(str(Path(arg).expanduser())) for s in out.skipped + out.notes):
            raise InputError(f"{arg}: no such file, directory or matching log files")
        for p, st in paths:
            real = p if p.startswith("/") and "/." not in p else os.path.abspath(p)  # walked paths are absolute
            if real in seen:
                continue
            seen.add(real)
            try:
                st = st or os.stat(p)
            except OSError as exc:
                what = "dangling link" if os.path.islink(p) else "cannot read"
                out.skipped.append({"path": real, "reason": f"{what}: {exc.strerror or exc}"})
                continue
            if not stat.S_ISREG(st.st_mode):
                kind = "FIFO" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode) else "device"
                out.notes.append({"path": real, "note": f"not a regular file ({kind}): skipped; pipe it to `analyze -`"})
                odd.append((real, kind))
                continue
            # (a file that cannot be read is skipped when first opened: no extra
            # system call here for the thousands of known ones)
            out.files.append(SourceFile(path=real, size=st.st_size, mtime=st.st_mtime, ctime=st.st_ctime))
    if odd and not out.files and not out.skipped:
        # Nothing to read but a FIFO or a device (/dev/zero): an input error, not a run over "0 turns".
        path, kind = odd[0]
        raise InputError(f"{path}: not a regular file ({kind}), and nothing else to read; "
                         "pipe a stream to `analyze -`")
    return out
