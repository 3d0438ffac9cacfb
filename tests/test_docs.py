"""The README documents every view, column and command (view and column names are an API)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analyzer.cli import app
from analyzer.db import connect
from analyzer.queries import load_queries

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
VIEWS = sorted(q.name for q in load_queries().values() if q.kind in ("view", "table"))


def _section(view: str) -> str:
    start = README.find(f"**`{view}`**")
    assert start >= 0, f"README has no section **`{view}`**"
    nxt = re.search(r"\n\*\*`[a-z_]+`\*\*|\n#", README[start + 5:])
    return README[start: start + 5 + (nxt.start() if nxt else len(README))]


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    c = connect(tmp_path_factory.mktemp("docs") / "a.duckdb")
    yield c
    c.close()


@pytest.mark.parametrize("view", VIEWS)
def test_every_view_column_is_documented(con, view):
    section = _section(view)
    columns = [r[0] for r in con.execute(f'DESCRIBE "{view}"').fetchall()]
    if "same columns" in section:  # e.g. incidents: the columns of turns
        return
    missing = [c for c in columns if f"`{c}`" not in section and f"`{c}`" not in _section("turns")]
    assert not missing, f"README does not document {view} columns {missing}"


def test_every_query_file_says_what_it_answers():
    for q in load_queries().values():
        assert q.title and q.description, f"{q.path.name} needs a title and a description"


def test_every_command_has_help():
    for command in app.registered_commands:
        assert command.callback.__doc__, f"command {command.name} has no help text"
        assert f"analyze {command.name}" in README or command.name == "run", f"README does not mention `analyze {command.name}`"
