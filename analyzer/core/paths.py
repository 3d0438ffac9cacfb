"""Where things live: the default database, the SQL files, the report templates."""

from __future__ import annotations

import os
import sys
from pathlib import Path

DEFAULT_DB_NAME = "analyzer.duckdb"
#: The ``analyzer`` package folder (this module is ``analyzer/core/paths.py``).
PACKAGE = Path(__file__).resolve().parent.parent


def default_db_path() -> Path:
    """The database used when ``--db`` is not given: ``$ANALYZER_DB`` or ./analyzer.duckdb."""
    env = os.environ.get("ANALYZER_DB")
    return Path(env) if env else Path.cwd() / DEFAULT_DB_NAME


def shown_path(path: str) -> str:
    """A stored (absolute) path as the operator typed it: relative when under the current folder.

    What the terminal and the report show: a report is shared, so it never carries
    the machine's absolute path for an input given relative to where analyze ran.
    """
    try:
        cwd = os.getcwd()
    except OSError:
        return path
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    return path


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether the paths ``a`` and ``b`` name one file (the same path, or links to one file)."""
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    if pa.resolve() == pb.resolve():
        return True
    try:
        return pa.exists() and pb.exists() and os.path.samefile(pa, pb)
    except OSError:
        return False


def _resource_dir(name: str) -> Path:
    # In a checkout (or an editable install) the folder sits beside the package;
    # a regular install puts it under <prefix>/share/analyzer/ (pyproject data-files).
    beside = PACKAGE.parent / name
    if beside.is_dir():
        return beside
    installed = Path(sys.prefix) / "share" / "analyzer" / name
    if installed.is_dir():
        return installed
    raise FileNotFoundError(f"cannot find the {name}/ folder (looked in {beside} and {installed})")


def code_files() -> list[Path]:
    """The files whose code and SQL make the analyzer's output: its modules and its queries, sorted.

    What a change of the code is told by (:mod:`analyzer.outputs.summary_cache` hashes their bytes).
    """
    return sorted([*PACKAGE.rglob("*.py"), *queries_dir().glob("*.sql")])


def queries_dir() -> Path:
    """The folder of SQL files: one view or question per file."""
    return _resource_dir("queries")


def dashboards_dir() -> Path:
    """The folder of jinja2 templates for the HTML report."""
    return _resource_dir("dashboards")
