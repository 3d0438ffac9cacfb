"""The documentation covers every view, column and command, and its links resolve.

View and column names are an API: docs/views.md describes each one. The README
stays an operator's five-minute read, its test command is the one CI runs, and
every relative link of the project's markdown points at a file (and heading) of
the repository, never outside it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analyzer.cli.app import app
from analyzer.store.db import connect
from analyzer.store.catalog import load_queries
from tests.support.readme_run import first_command
from tests.support.repo import REPO

ROOT = REPO
README = (ROOT / "README.md").read_text(encoding="utf-8")
VIEWS_DOC = (ROOT / "docs" / "views.md").read_text(encoding="utf-8")
#: Every markdown page the project ships: the README, docs/, and the READMEs beside code.
PAGES = sorted(p for p in {ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *ROOT.glob("*/README.md"),
                           *ROOT.glob("*/*/README.md")}
               if not any(part.startswith(".") for part in p.relative_to(ROOT).parts))
VIEWS = sorted(q.name for q in load_queries().values() if q.kind in ("view", "table"))
README_MAX_BYTES = 12_000


def _section(view: str) -> str:
    start = VIEWS_DOC.find(f"**`{view}`**")
    assert start >= 0, f"docs/views.md has no section **`{view}`**"
    nxt = re.search(r"\n\*\*`[a-z_]+`\*\*|\n#", VIEWS_DOC[start + 5:])
    return VIEWS_DOC[start: start + 5 + (nxt.start() if nxt else len(VIEWS_DOC))]


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
    assert not missing, f"docs/views.md does not document {view} columns {missing}"


def test_every_table_is_documented(con):
    tables = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'").fetchall()]
    missing = [t for t in tables if f"`{t}`" not in VIEWS_DOC]
    assert not missing, f"docs/views.md does not name the tables {missing}"


def test_every_query_file_says_what_it_answers():
    for q in load_queries().values():
        assert q.title and q.description, f"{q.path.name} needs a title and a description"


def test_every_question_is_in_the_sql_page():
    # A question the library runs is one a user can ask: docs/sql.md's tables name each.
    doc = (ROOT / "docs" / "sql.md").read_text(encoding="utf-8")
    missing = sorted(q.name for q in load_queries().values() if q.kind == "question" and f"`{q.name}`" not in doc)
    assert not missing, f"docs/sql.md does not list the questions {missing}"


def test_every_command_has_help():
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    for command in app.registered_commands:
        assert command.callback.__doc__, f"command {command.name} has no help text"
        assert f"analyze {command.name}" in README or command.name == "run", \
            f"README does not mention `analyze {command.name}`"
        assert f"analyze {command.name}" in text, f"no page of docs/ describes `analyze {command.name}`"


# ---------------------------------------------------------------------------
# The README is the operator's page


def test_the_readme_is_a_short_read():
    size = len(README.encode("utf-8"))
    assert size < README_MAX_BYTES, f"README.md is {size:,} bytes: move reference material into docs/"


def test_the_readme_test_command_is_the_one_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    blocks = re.findall(r"^```sh\n(.*?)^```", README, flags=re.M | re.S)
    assert len(blocks) >= 2, "the README shows the two commands as ```sh blocks"
    test_command = blocks[1].strip()
    assert test_command.startswith("pip install -e '.[test]'"), test_command
    ci_lines = [line.strip() for line in ci.splitlines()]
    assert test_command in ci_lines, f".ci/run does not run the README's test command {test_command!r}"


def test_the_readme_summary_is_an_excerpt_of_the_sample_summary():
    """The README's lines of output are docs/sample-summary.md's, in order ("..." marks a cut)."""
    excerpt = re.search(r"^```text\n(.*?)^```", README, flags=re.M | re.S).group(1).splitlines()
    whole_doc = (ROOT / "docs" / "sample-summary.md").read_text(encoding="utf-8")
    whole = re.search(r"^```text\n(.*?)^```", whole_doc, flags=re.M | re.S).group(1).splitlines()
    i = 0
    for line in (x for x in excerpt if x != "..."):
        while i < len(whole) and whole[i] != line:
            i += 1
        assert i < len(whole), f"README's summary line is not in docs/sample-summary.md (in order): {line!r}"


def test_the_sample_summary_is_what_the_readme_command_prints(readme_week):
    """docs/sample-summary.md is the README's first command's output, byte for byte:
    run for real, as the page says: in a folder holding a copy of sample_logs/ and
    no database yet, with no ``--db`` and no ``$ANALYZER_DB``, stdout a pipe
    (tests/support/readme_run.py; the run is shared with other tests of the session)."""
    whole_doc = (ROOT / "docs" / "sample-summary.md").read_text(encoding="utf-8")
    block = re.search(r"^```text\n(.*?)^```", whole_doc, flags=re.M | re.S)
    assert block and first_command(), \
        "docs/sample-summary.md has no text block, or the README no `pip install -e . && analyze ...`"
    folder, proc = readme_week
    assert proc.returncode == 0, proc.stderr
    assert (folder / "analyzer.duckdb").exists()
    assert proc.stdout == block.group(1)


# ---------------------------------------------------------------------------
# Links


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code (links there are not links)."""
    text = re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to dashes."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```[^\n]*$", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    seen: dict[str, int] = {}
    out = set()
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, flags=re.M):
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    return re.findall(r"!?\[[^\[\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", _prose(page.read_text(encoding="utf-8")))


def test_the_link_finder_sees_links_and_anchors(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# The `analyze run` page\n\nSee [a](other.md#x-y), ![b](img.png), [a\nwrapped link](w.md) and `[c](code.md)`.\n"
                    "```sh\n# not a heading\n[d](in-code.md)\n```\n## Same\n## Same\n", encoding="utf-8")
    assert _links(page) == ["other.md#x-y", "img.png", "w.md"]
    assert _anchors(page) == {"the-analyze-run-page", "same", "same-1"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    broken = []
    for link in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", link):  # https:, mailto: ...
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
            continue
        if ROOT not in target.parents and target != ROOT:
            broken.append(f"{link}: outside the repository")
            continue
        if anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: {target.name} has no heading #{anchor}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_points_outside_the_project(page):
    text = page.read_text(encoding="utf-8")
    assert "../shared" not in text and "/work/" not in text, f"{page.relative_to(ROOT)} names a path outside the project"
    internal = re.findall(r"\bseed 0\d\d\b|\bissue \d+\b", text, flags=re.I)
    assert not internal, f"{page.relative_to(ROOT)} carries development notes: {internal}"
