"""The README's first command, run for real as a newcomer runs it: once, for the tests that need its result.

``pip install -e . && analyze sample_logs/s3 ...`` in a clone: :func:`run_first_command`
runs the ``analyze ...`` part with a new interpreter (``python -m analyzer``) in a folder
holding a copy of ``sample_logs/`` and no database yet, with no ``--db`` and no
``$ANALYZER_DB``, stdout a pipe. The session fixture ``readme_week`` (tests/conftest.py)
keeps the folder: tests/e2e/test_docs.py compares what it printed with
docs/sample-summary.md, the doc examples start from its ``analyzer.duckdb``, and the
sample week's classes are read from it (tests/e2e/test_sample_week.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.repo import REPO

FIRST_COMMAND = re.compile(r"^pip install -e \. && (analyze .*)$", re.M)


def plain_env() -> dict[str, str]:
    """This environment as a newcomer's shell has it: no ``ANALYZER_*`` setting, no forced colour; the
    interpreter's folder first on ``PATH`` (its ``analyze`` and ``python``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANALYZER_", "FORCE_COLOR"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def first_command() -> list[str] | None:
    """The words of the README's ``analyze ...`` after ``pip install -e . &&`` (None: no such line)."""
    m = FIRST_COMMAND.search((REPO / "README.md").read_text(encoding="utf-8"))
    return m.group(1).split() if m else None


def run_first_command(folder: Path) -> subprocess.CompletedProcess:
    """Copy ``sample_logs/`` into ``folder`` and run the README's first command there."""
    command = first_command()
    assert command, "the README has no `pip install -e . && analyze ...` line"
    env = plain_env()
    shutil.copytree(REPO / "sample_logs", folder / "sample_logs")
    return subprocess.run([sys.executable, "-m", "analyzer", *command[1:]],
                          cwd=folder, env=env, capture_output=True, text=True, encoding="utf-8", timeout=300)
