"""Finding input files and telling which form each one is in.

Forms: ``jsonl`` (S3 chunk files: one JSON record per line), ``kubectl`` (pod
stdout: records behind ``📥 REQUEST: `` / ``✓ RESPONSE: `` / ``✗ RESPONSE: ``
prefixes among free-text lines) and ``parquet`` (the consolidated tier, the record
as JSON in the ``entry`` column). Any text form may be gzip-compressed.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

JSONL = "jsonl"
KUBECTL = "kubectl"
PARQUET = "parquet"

RECORD_PREFIXES = ("📥 REQUEST: ", "✓ RESPONSE: ", "✗ RESPONSE: ")
# Lines the real proxy prints on stdout besides records: a file holding only
# these is a (quiet) proxy log, not a stranger's file.
_PROXY_BANNER_MARKS = ("Multi-Provider LLM Proxy", "Uvicorn running", "INFO:     ", "✓ Flushed", "✓ Loaded configuration")
_PEEK = 64 * 1024
_SKIP_NAMES = {".DS_Store"}
_TEXT_SUFFIXES = {".jsonl", ".json", ".ndjson", ".log", ".txt", ".out"}


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

    def _read_head(self) -> None:
        try:
            with open(self.path, "rb") as f:
                head = f.read(_PEEK)
                self._fingerprint = _fingerprint(f, self.size, head)
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read: {exc}") from exc
        self._form = detect_form(Path(self.path), head)

    @property
    def form(self) -> str:
        """``jsonl``, ``kubectl`` or ``parquet``; raises InputError for a stranger's file."""
        if self._form is None:
            self._read_head()
        return self._form  # type: ignore[return-value]

    def fingerprint(self) -> str:
        """sha256 of the size and the first and last 64 KiB: cheap change detection."""
        if self._fingerprint is None:
            self._read_head()
        return self._fingerprint  # type: ignore[return-value]


def _fingerprint(f, size: int, head: bytes | None = None) -> str:
    h = hashlib.sha256(str(size).encode())
    h.update(head if head is not None else f.read(_PEEK))
    if size > 2 * _PEEK:
        f.seek(-_PEEK, os.SEEK_END)
        h.update(f.read(_PEEK))
    return h.hexdigest()


def _candidates(arg: str) -> list[Path]:
    p = Path(arg).expanduser()
    if p.is_dir():
        root = p.resolve()
        found = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            found.extend(Path(dirpath) / n for n in filenames if _looks_like_input(Path(n)))
        return sorted(found)
    if p.is_file():
        return [p]
    matches = sorted(glob.glob(str(p), recursive=True))
    out: list[Path] = []
    for m in matches:
        out.extend(_candidates(m))
    return out


def _looks_like_input(p: Path) -> bool:
    if p.name in _SKIP_NAMES or p.name.startswith("."):
        return False
    suffixes = p.suffixes
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in _TEXT_SUFFIXES | {".parquet"}


def _peek(path: Path) -> bytes:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            return f.read(_PEEK)
    except (OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from exc


def detect_form(path: Path, head: bytes | None = None) -> str:
    """Tell a file's form from its first bytes (``head``: its first 64 KiB, if read).

    Raises:
        InputError: the file is not a proxy log in any supported form.
    """
    if head is None or path.suffix == ".gz":
        with open(path, "rb") as f:
            raw = f.read(4)
        if raw == b"PAR1":
            return PARQUET
        head = _peek(path)
    elif head[:4] == b"PAR1":
        return PARQUET
    text = head.decode("utf-8", errors="replace")
    if any(p in text for p in RECORD_PREFIXES):
        return KUBECTL
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if first.startswith("{"):
        return JSONL
    if not first:
        return JSONL  # an empty file: nothing to read, nothing to lose
    if any(m in text for m in _PROXY_BANNER_MARKS):
        return KUBECTL
    raise InputError(
        f"{path}: not a proxy log (expected JSON lines, kubectl stdout with "
        f"'📥 REQUEST:' / '✓ RESPONSE:' lines, or Parquet); it starts with {first[:60]!r}"
    )


def discover(inputs: list[str]) -> list[SourceFile]:
    """Expand files, directories (recursively) and globs into input files, in order.

    Raises:
        InputError: an argument matches nothing. (Whether a file is a proxy log is
            checked when it is first read: :attr:`SourceFile.form`.)
    """
    seen: set[str] = set()
    out: list[SourceFile] = []
    for arg in inputs:
        if arg.startswith("s3://"):  # mirrored into the local cache first (analyzer.objectstore)
            from .objectstore import sync_for_ingest

            arg = sync_for_ingest(arg)
        paths = _candidates(arg)
        if not paths:
            raise InputError(f"{arg}: no such file, directory or matching log files")
        for p in paths:
            real = os.path.abspath(p)
            if real in seen:
                continue
            seen.add(real)
            try:
                st = os.stat(p)
            except OSError as exc:
                raise InputError(f"{p}: cannot read: {exc}") from exc
            out.append(SourceFile(path=real, size=st.st_size, mtime=st.st_mtime))
    return out
