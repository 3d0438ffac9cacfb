"""A new, empty analyzer database for a test, copied instead of created.

Creating the analyzer's database (its tables, macros and thirty-odd views) costs
about a third of a second, more than ingesting a test's few records: a test that
only needs *a* fresh database (not the creation itself under test) gets a copy of
one made once per process by :func:`analyzer.store.db.connect`, exactly what that
call leaves on disk for a new path. Tests of creating, migrating or refusing a
file keep calling ``connect`` on a new path themselves.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from analyzer.store.db import connect

_made: dict[str, Path] = {}


def _template() -> Path:
    """The empty database this process copies (made on first use, removed at exit)."""
    if "db" not in _made:
        folder = Path(tempfile.mkdtemp(prefix="blank-db-"))
        atexit.register(shutil.rmtree, folder, True)
        path = folder / "blank.duckdb"
        connect(path).close()  # closed: checkpointed, no WAL beside it
        _made["db"] = path
    return _made["db"]


def blank_db(path: Path) -> Path:
    """Put a new, empty analyzer database at ``path`` (a copy of this process's template); return ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_template(), path)
    return path
