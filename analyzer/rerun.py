"""A re-run that finds nothing new, answered without loading DuckDB.

A scheduler runs the same ``analyze FILES... [--db PATH] [--json]`` again and
again, and most runs find every file as the last one left it. Such a run prints
the summary the database already holds, and half of its half second went to
importing DuckDB and opening the file. So after a run of that plain form, the
analyzer writes beside the database (``analyzer.duckdb.rerun``) what the same
command run again would print, and the state it was printed from:

- the command line: the working folder, the arguments, ``--json``, the database;
- the environment that changes what is printed (``ANALYZER_*``, rich's colour and
  terminal variables, the time zone and the locale);
- the code: the stat of every module and query of the analyzer, of DuckDB and of
  rich, and the Python that runs them;
- the inputs: every file discovery finds, with the size, modification and change
  times the ingest's own "unchanged" test reads (``source_files``), and nothing
  skipped (a file rewritten with its modification time put back has a new change
  time);
- the database file: its device, inode, size, modification and change times and its
  first 12 KiB (DuckDB's headers, whose checkpoint count moves with every change),
  and no write-ahead log beside it (uncheckpointed changes live there). The run
  that records takes it after a checkpoint, while it still holds the database, so
  no other writer can come between; a write at its own close would change it.

When this run read something, its re-run is made at once on the open connection
(:func:`analyzer.commands.run.run_main_job`), and only when every file is as the
run left it: a file that arrived meanwhile is left for the next run to read and
report. A run that skipped a file, loaded metrics or read standard input keeps
no record (the next one does all of that again).

The next run of the same command computes that state again (stat calls and one
12 KiB read) and, when every part is equal, prints the stored text and exits 0.
Anything different (a new or grown file, another command that wrote the database,
an upgrade, another option) takes the full path, which writes a new record. Only
output to a pipe or a file is kept and replayed: on a terminal rich draws for its
width. ``ANALYZER_NO_REPLAY=1`` takes the full path (which records as usual).
A replay does not open the database, so it exits 0 where the full path would fail
on a database another process holds locked without having written it yet.

This module is standard library only, and so is what it imports.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from .paths import default_db_path

#: Beside the database: ``<db>.rerun``.
SUFFIX = ".rerun"
_FORMAT = 1
_NO_REPLAY = "ANALYZER_NO_REPLAY"  # set (not 0): the full path, which still records for the next run
_HEADER_BYTES = 12288  # DuckDB's file header and its two database headers (4 KiB each)
# What rich, the clock and the locale read besides the analyzer's own variables.
_RENDER_ENV = ("COLUMNS", "LINES", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE",
               "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES", "TZ", "LANG", "LC_ALL", "LC_CTYPE",
               "PYTHONIOENCODING", "PYTHONUTF8")


def sidecar(db: Path | None) -> Path:
    """Where the record of ``db`` (or of the default database) is kept."""
    target = _target(db)
    return target.with_name(target.name + SUFFIX)


def keepable(db: Path | None) -> bool:
    """Whether a run of this command can keep a record at all: output not to a terminal, a database file."""
    return not sys.stdout.isatty() and str(db) != ":memory:"


def replay(files: list[str], db: Path | None, json_out: bool) -> bool:
    """Print what ``analyze FILES --db DB [--json]`` printed last, when nothing it read has changed.

    Returns False (having printed nothing) when anything differs, when there is
    no record, or when it cannot be read: the caller then runs the command. The
    parts are compared cheapest first; the folders are walked last.
    """
    if _disabled() or not keepable(db):
        return False
    try:
        with open(sidecar(db), encoding="utf-8") as f:
            stored = json.load(f)
        text, kept = stored["stdout"], stored["state"]
        if stored.get("format") != _FORMAT or hashlib.sha256(text.encode()).hexdigest() != stored.get("stdout_sha256"):
            return False
        if kept.get("command") != _command(files, db, json_out) or kept.get("database") != database_identity(db):
            return False
        from .sources import discover_inputs

        current = state(files, db, json_out, discover_inputs(files), kept["database"])
    except Exception:  # noqa: BLE001 - no record, a damaged one, a vanished input: run the command
        return False
    if current is None or current != kept:
        return False
    sys.stdout.write(text)
    return True


def state(files: list[str], db: Path | None, json_out: bool, discovered, database: list | None) -> dict | None:
    """What a replay of this command depends on (see the module's docstring), or None when it cannot be kept.

    ``discovered`` is :func:`analyzer.sources.discover_inputs` of ``files``, and
    ``database`` the :func:`database_identity` taken with nothing written since;
    None when anything was skipped or noted, or read from standard input.
    """
    if not keepable(db) or database is None or discovered.skipped or discovered.notes:
        return None
    inputs = hashlib.sha256()
    for f in discovered.files:
        if f.path.startswith("<stdin"):
            return None
        inputs.update(f"{f.path}\0{f.size}\0{f.mtime!r}\0{f.ctime!r}\n".encode("utf-8", "surrogateescape"))
    return {
        "command": _command(files, db, json_out),
        "environment": {k: v for k, v in sorted(os.environ.items())
                        if (k.startswith("ANALYZER_") or k in _RENDER_ENV) and k != _NO_REPLAY},
        "code": _code_stamp(),
        "inputs": [len(discovered.files), inputs.hexdigest()],
        "database": database,
    }


def database_identity(db: Path | None) -> list | None:
    """The database file's stat and the hash of its headers; None when it cannot be read or has a WAL.

    Taken by the run that records while it still holds the database (nothing can
    write it meanwhile): a write at its close, or by anyone after, changes it.
    """
    target = _target(db)
    for wal in {str(target) + ".wal", os.path.realpath(target) + ".wal"}:  # DuckDB's is beside the real file
        if os.path.lexists(wal):
            return None
    try:
        with open(target, "rb") as f:
            st = os.fstat(f.fileno())
            head = f.read(_HEADER_BYTES)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, hashlib.sha256(head).hexdigest()]


def _target(db: Path | None) -> Path:
    return Path(db) if db is not None else default_db_path()


def _command(files: list[str], db: Path | None, json_out: bool) -> dict:
    """The command line as it is read: folder, arguments, options, and the encoding of what it prints."""
    return {"cwd": os.getcwd(), "files": list(files), "json": bool(json_out), "db": os.path.abspath(_target(db)),
            "stdout_encoding": getattr(sys.stdout, "encoding", None)}


def record(current: dict, text: str, db: Path | None) -> None:
    """Keep ``text`` as what a re-run in state ``current`` (:func:`state`) prints.

    Written whole or not at all (a temporary file renamed over the old record), and
    a record that cannot be written is no error: the next run takes the full path.
    """
    path = sidecar(db)
    doc = {"format": _FORMAT, "state": current, "stdout": text,
           "stdout_sha256": hashlib.sha256(text.encode()).hexdigest()}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
    except OSError:
        _remove(tmp)
        _remove(path)


def forget(db: Path | None) -> None:
    """Remove the record of ``db``, if any (a run that will not write one)."""
    _remove(sidecar(db))


def _remove(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _disabled() -> bool:
    return os.environ.get(_NO_REPLAY, "") not in ("", "0")


_stamp: str | None = None


def _code_stamp() -> str:
    """The stat of the analyzer's code (:func:`analyzer.paths.code_files`), of DuckDB and rich, and the Python.

    An upgrade of any of them changes it.
    """
    global _stamp
    if _stamp is None:
        from importlib.util import find_spec

        from .paths import code_files

        files = [str(p) for p in code_files()]
        for name in ("duckdb", "rich"):  # what draws and what computes the summary
            spec = find_spec(name)
            if spec is not None and spec.origin:
                for top, dirs, names in os.walk(Path(spec.origin).parent):
                    dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                    files += [os.path.join(top, n) for n in sorted(names) if n.endswith((".py", ".so", ".pyd"))]
        h = hashlib.sha256(f"{sys.version}\0{sys.executable}\n".encode())
        for path in files:
            st = os.stat(path)
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        _stamp = h.hexdigest()
    return _stamp
