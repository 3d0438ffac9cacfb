"""Where DuckDB spills: a folder each run owns, removed when the run ends, and by a later run if it was killed.

DuckDB writes what does not fit its memory limit to a temporary folder: beside
the database (``<db>.tmp``) for a file, ``./.tmp`` of the current directory for
an in-memory database (a lake, a scratch). Left to DuckDB, a run ended by
SIGTERM or ``kill -9`` leaves hundreds of MB there that no later run removes.
So every connection the analyzer opens spills into a folder of this run's own:

- for a database file, ``<db>.tmp/run-<host>-<pid>-<start>/`` (beside the data,
  on its filesystem, as DuckDB would); when ``<db>.tmp`` cannot be made (a
  read-only folder), the temporary folder below;
- for an in-memory database, a folder of its own inside
  ``$TMPDIR/analyzer-spill-<user>/run-<host>-<pid>-<start>/``.

The run's folders are removed when the process exits (``atexit``: a normal end,
an error, Ctrl-C, and SIGTERM, which the command line turns into an exit:
:mod:`analyzer.core.interrupt`), and their parent with them when it is left empty. A ``kill -9`` leaves them: the next run that
spills under the same parent removes every run folder of this host whose process
is gone (its PID not running, or running since another time: a PID reused).
"""

from __future__ import annotations

import atexit
import getpass
import os
import re
import shutil
import socket
import tempfile
import threading
from pathlib import Path

#: A run folder's name: host, PID and the process's start time (clock ticks since boot; 0 when unknown).
_RUN = re.compile(r"run-(?P<host>[A-Za-z0-9.-]+)-(?P<pid>\d+)-(?P<start>\d+)")
_lock = threading.Lock()
#: This process's run folders, by parent.
_owned: dict[Path, Path] = {}
_registered = False


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"


def _start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, from /proc), or None where that is not known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count fields after its end.
    fields = stat[stat.rfind(")") + 2:].split()
    try:
        return int(fields[19])  # field 22 of proc(5)
    except (IndexError, ValueError):
        return None


def _alive(pid: int, start: int) -> bool:
    """Whether the process that made a run folder still runs (the same PID, started at the same time)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    now = _start_time(pid)
    return start == 0 or now is None or now == start


def run_folder_name() -> str:
    """This process's run folder name: ``run-<host>-<pid>-<start>``."""
    pid = os.getpid()
    return f"run-{_host()}-{pid}-{_start_time(pid) or 0}"


def sweep(parent: Path) -> list[Path]:
    """Remove the run folders in ``parent`` of this host's processes that are gone; return them."""
    removed = []
    host = _host()
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = _RUN.fullmatch(entry.name)
        if not m or m.group("host") != host or not entry.is_dir() or entry.is_symlink():
            continue
        if int(m.group("pid")) == os.getpid() or _alive(int(m.group("pid")), int(m.group("start"))):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def temp_parent() -> Path:
    """The parent of the run folders of in-memory databases: ``$TMPDIR/analyzer-spill-<user>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return Path(tempfile.gettempdir()) / f"analyzer-spill-{re.sub(r'[^A-Za-z0-9_.-]', '_', user)}"


def run_dir(parent: Path) -> Path:
    """This run's spill folder under ``parent`` (made once per process; gone runs' folders swept first).

    Raises:
        OSError: the folder cannot be made.
    """
    global _registered
    key = parent.absolute()
    with _lock:
        if key in _owned and _owned[key].is_dir():
            return _owned[key]
        key.mkdir(parents=True, exist_ok=True)
        sweep(key)
        folder = key / run_folder_name()
        folder.mkdir(parents=True, exist_ok=True)  # (parents: another run may have just removed an empty parent)
        _owned[key] = folder
        if not _registered:
            atexit.register(remove_run_dirs)
            _registered = True
    return folder


def database_spill_dir(target: str) -> str:
    """Where a connection to the database file ``target`` spills: this run's folder in ``<target>.tmp``.

    Every connection of this process to ``target`` gets the same folder (they share
    one DuckDB instance). A ``<target>.tmp`` that cannot be made: the temporary folder.
    """
    try:
        return str(run_dir(Path(target + ".tmp")))
    except OSError:
        return scratch_spill_dir("db-")


def scratch_spill_dir(prefix: str = "mem-") -> str:
    """A new folder for one in-memory database to spill into, inside this run's temporary folder."""
    return tempfile.mkdtemp(prefix=prefix, dir=run_dir(temp_parent()))


def remove_run_dirs() -> None:
    """Remove this process's run folders (at exit; DuckDB has removed its files in them on close)."""
    with _lock:
        folders = list(_owned.values())
        _owned.clear()
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
        try:
            folder.parent.rmdir()  # the parent too when no other run spills there: no empty <db>.tmp is left
        except OSError:
            pass
