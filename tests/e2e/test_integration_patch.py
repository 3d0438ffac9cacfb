"""docs/integrations/open-llm-proxy.patch vendors analyzer.online: the copy it ships is this one.

The proxy runs the vendored files, the analyzer imports these; offline numbers
describe what production does only while the two are the same code. A change to
analyzer/online/*.py therefore needs the patch refreshed (the page says how).
"""

from __future__ import annotations

import re
from tests.support.repo import REPO

ROOT = REPO
PATCH = ROOT / "docs" / "integrations" / "open-llm-proxy.patch"


def _new_files(patch: str) -> dict[str, str]:
    """Each file the patch creates (``new file mode``), as its full text."""
    out: dict[str, str] = {}
    for block in re.split(r"^diff --git ", patch, flags=re.M)[1:]:
        header, _, body = block.partition("\n@@")
        if "new file mode" not in header:
            continue
        path = re.match(r"a/(\S+) b/", header).group(1)
        lines = []
        for line in ("@@" + body).splitlines():
            if line.startswith("+") and not line.startswith("+++"):
                lines.append(line[1:])
            elif line.startswith("\\"):  # "\ No newline at end of file"
                lines[-1] = lines[-1] + "\x00"
        text = "\n".join(lines) + "\n"
        out[path] = text.replace("\x00\n", "")
    return out


def test_the_patch_vendors_exactly_this_analyzer_online():
    vendored = {p: t for p, t in _new_files(PATCH.read_text(encoding="utf-8")).items()
                if p.startswith("analyzer/online/")}
    here = {f"analyzer/online/{p.name}": p.read_text(encoding="utf-8")
            for p in sorted((ROOT / "analyzer" / "online").glob("*.py"))}
    assert set(vendored) == set(here), "the patch vendors other files than analyzer/online/*.py"
    stale = [p for p in here if vendored[p] != here[p]]
    assert not stale, f"refresh docs/integrations/open-llm-proxy.patch: vendored copies differ: {stale}"


def test_the_patch_targets_the_pinned_commit_the_page_names():
    page = (ROOT / "docs" / "integrations" / "open-llm-proxy.md").read_text(encoding="utf-8")
    pinned = re.search(r"\*\*`([0-9a-f]{40})`\*\*", page)
    assert pinned, "the page names no pinned commit"
    text = PATCH.read_text(encoding="utf-8")
    assert "llm_proxy.py" in text and "from analyzer.online import" in text
