"""A new, empty analyzer database in a fraction of the time ``connect`` takes to create one.

Creating a database file runs the schema and every migration and creates the views:
about 0.25 s, paid by every test that wants an empty database of its own. The file
that makes is the same each time, so :func:`fresh_db` makes it once per test process
and copies it (a few milliseconds). The copy is a real DuckDB file the analyzer made;
tests about creating or migrating a database still call ``connect`` on a new path.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import duckdb

from analyzer.store.db import connect

_TEMPLATE: Path | None = None


def _template() -> Path:
    """The empty database this process copies, made by ``connect`` on first use (removed at exit)."""
    global _TEMPLATE
    if _TEMPLATE is None or not _TEMPLATE.exists():
        folder = Path(tempfile.mkdtemp(prefix="analyzer-empty-db-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        connect(folder / "empty.duckdb").close()
        _TEMPLATE = folder / "empty.duckdb"
    return _TEMPLATE


def fresh_db(path: str | Path) -> Path:
    """Put a new, empty analyzer database at ``path`` (as ``connect(path)`` would create) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_template(), path)
    return path


def fresh_connection(path: str | Path) -> duckdb.DuckDBPyConnection:
    """``connect(path)`` on a new, empty analyzer database at ``path`` (see :func:`fresh_db`)."""
    return connect(fresh_db(path))
