"""Every shell and Python example of README.md and docs/ runs as written, on the sample week.

The way sqlite-utils and datasette keep their docs honest: each page's ```sh blocks
run in order with bash (``-e -o pipefail``), then its ```python blocks in order in one
interpreter, from a folder laid out as the repository root after the README's first
command (``sample_logs/`` beside ``./analyzer.duckdb`` holding the sample week), and
each must succeed. Lines that install the project (``pip install ...``) are left out:
the test environment already holds what they install, and the README's two commands
are run by CI and by tests/e2e/test_docs.py. Examples that need what a clone does not
have (a cluster, a bucket, a live Prometheus, an endpoint) are fenced ```console and
named as such on their page; they are not run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.prometheus import tool
from tests.support.readme_run import plain_env
from tests.support.repo import REPO

PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "docs").glob("*/*.md")])
BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```", re.M | re.S)


def examples(page: Path) -> list[tuple[str, str]]:
    """(language, code) of the page's runnable blocks, install lines left out."""
    out = []
    for lang, code in BLOCK.findall(page.read_text(encoding="utf-8")):
        if lang == "sh":
            code = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("pip install "))
            if not code.strip() or code.strip().startswith("&&"):
                continue
        out.append((lang, code))
    return out


RUNNABLE = [p for p in PAGES if examples(p)]


@pytest.fixture(scope="module")
def clone(tmp_path_factory, readme_week) -> Path:
    """A folder laid out as the repository root after the README's first command.

    That command ran once for the session (tests/support/readme_run.py: a new
    interpreter, relative paths, as a newcomer types it, in a folder holding a copy of
    ``sample_logs/``); here ``sample_logs/`` links to that copy, so the files the
    database names are the clone's own, and its database is kept aside as
    ``.pristine.duckdb`` for each page to start from.
    """
    folder, proc = readme_week
    assert proc.returncode == 0, proc.stderr
    root = tmp_path_factory.mktemp("clone")
    (root / "sample_logs").symlink_to(folder / "sample_logs")
    shutil.copy(folder / "analyzer.duckdb", root / ".pristine.duckdb")
    return root


def _fresh(root: Path) -> None:
    """Back to the state after the README's first command: its database, nothing the examples wrote."""
    for p in root.iterdir():
        if p.name in ("sample_logs", ".pristine.duckdb"):
            continue
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    shutil.copy(root / ".pristine.duckdb", root / "analyzer.duckdb")


def test_the_docs_have_examples_to_run():
    assert len(RUNNABLE) >= 6 and REPO / "docs" / "sql.md" in RUNNABLE


def _page(page: Path):
    """A page marked by what its examples start: Spark (``spark``), promtool (``prometheus``); the
    quick loop leaves those out."""
    code = "\n".join(c for _lang, c in examples(page))
    marks = [mark for mark, needs in ((pytest.mark.spark, "spark"), (pytest.mark.prometheus, "promtool"))
             if needs in code]
    return pytest.param(page, id=str(page.relative_to(REPO)), marks=marks)


@pytest.mark.parametrize("page", [_page(p) for p in RUNNABLE])
def test_every_example_runs_as_written(page, clone, request):
    if request.node.get_closest_marker("prometheus"):
        tool("promtool")  # skipped without it, failed under CI, as the alert tests are
    _fresh(clone)
    root, env = clone, plain_env()
    blocks = examples(page)
    for i, (lang, code) in enumerate(b for b in blocks if b[0] == "sh"):
        proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=root, env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"{page.name}: sh block {i + 1} failed ({proc.returncode}):\n{code}\n{proc.stderr[-3000:]}"
    python = [code for lang, code in blocks if lang == "python"]
    if python:
        script = "\n".join(f"# --- block {i + 1}\n{code}" for i, code in enumerate(python))
        proc = subprocess.run([sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, f"{page.name}: python blocks failed:\n{script}\n{proc.stderr[-3000:]}"
