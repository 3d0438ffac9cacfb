"""A hostile name cannot make the report unreadable: a 5,000-character model, client and pod.

Issue 47: a model name of 5,000 characters made the report 62,221 px wide. The
report is rendered from a real database holding such names and measured in a real
headless Chromium: the page is as wide as the window, the long names are shown
cut (their start and end, and how much was left out), and the charts are drawn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.api import report as make_report
from tests.support.browser import check_page, open_report, require_chromium
from tests.support.ingesting import run
from tests.support.records import at, request, response_error, response_ok, write_jsonl

pytestmark = pytest.mark.browser

LONG_MODEL = "glm-" + "x" * 5000 + "-tail"
LONG_CLIENT = "agent/" + "y" * 5000
LONG_SESSION = "s-" + "z" * 5000


def _records() -> list[dict]:
    recs = []
    for k in range(12):
        rid, model = f"c{k:07x}", LONG_MODEL if k % 2 else "glm-5"
        session = LONG_SESSION if k < 6 else f"s-{k}"
        recs.append(request(rid, at(k * 30), model=model, client=LONG_CLIENT, session=session))
        if k % 3 == 0:
            recs.append(response_error(rid, at(k * 30 + 0.1), "Provider returned 500: " + "e" * 3000,
                                       model=model, client=LONG_CLIENT, session=session))
        else:
            recs.append(response_ok(rid, at(k * 30 + 0.1), content="ok", model=model, client=LONG_CLIENT,
                                    session=session))
    return recs


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("longnames")
    db = tmp / "long.duckdb"
    run(db, [write_jsonl(tmp / "logs" / "long.jsonl", _records())])
    return make_report(db, since="2026-11-16", until="2026-11-18", output=tmp / "report.html")


def test_long_names_are_cut_in_the_page(report):
    html = report.read_text(encoding="utf-8")
    assert LONG_MODEL not in html and LONG_CLIENT not in html and LONG_SESSION not in html
    assert "glm-xxxx" in html and "more characters" in html


def test_the_page_is_as_wide_as_the_window(report, tmp_path):
    chrome, page = open_report(require_chromium(), report, tmp_path)
    try:
        check_page(page, report)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"the page is {width} px wide in a 1280 px window"
        widest = page.evaluate("Math.max(...Array.from(document.querySelectorAll('table, figure, .plot'))"
                               ".map(e => e.getBoundingClientRect().width))")
        assert widest <= 1280, widest
    finally:
        chrome.close()
