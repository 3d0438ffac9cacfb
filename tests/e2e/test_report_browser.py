"""The rendered report in a real headless Chromium, offline: the fixture week's and the sample week's.

The browser (Debian's ``chromium``, driven over the DevTools Protocol with networking
off) and the checks every rendered report must pass are tests/support/browser.py's.

Skipped only when chromium is absent and ``CI`` is not set; under CI a missing
chromium fails.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.support.browser import DRAWN_CHARTS_JS, check_page, console_errors, open_report, require_chromium, table

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def chromium_path() -> str:
    return require_chromium()


# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_report(tmp_path_factory) -> Path:
    from tests.support.report_weeks import render_fixture_week

    return render_fixture_week(tmp_path_factory.mktemp("browser-fixture"))


def test_fixture_report_in_chromium(chromium_path, fixture_report, tmp_path):
    chrome, page = open_report(chromium_path, fixture_report, tmp_path)
    try:
        charts = check_page(page, fixture_report)
        assert {c["id"] for c in charts} == {
            "chart-timeline", "chart-throughput", "chart-ladder", "chart-breakdown-model", "chart-breakdown-origin",
            "chart-breakdown-client", "chart-breakdown-thinking", "chart-position-index", "chart-position-depth",
            "chart-length"}
        # The tables hold the fixture's known numbers.
        assert page.evaluate("document.querySelector('[data-metric=turns]').innerText") == "15"
        assert page.evaluate("document.querySelector('[data-metric=failure-rate]').innerText") == "53.3%"
        assert page.evaluate("document.querySelector('[data-metric=sessions-lost]').innerText") == "4"
        assert page.evaluate("document.querySelector('[data-metric=recovery]').innerText") == "50.0%"
        compare = table(page, "#headline-compare")
        assert compare[0] == ["", "2026-W47", "2026-W46", "change"]
        assert compare[1] == ["turns", "15", "4", "+11 (+275%)"]
        rungs = table(page, "#ladder-rungs")
        assert rungs[1][:5] == ["tool-history-5xx", "tool_choice_none", "2", "2", "1"]
        wedged_row = table(page, "#windows-table")[1]
        assert wedged_row[:6] == ["wedged", "glm-5-0", "glm-5", "2026-11-20 08:00", "2026-11-20 08:30", "30.0"]
        assert wedged_row[6] == "2026-11-20 08:05 (+5.0 min)"  # when the alert would have fired
        assert wedged_row[7] == "1"
        assert len(wedged_row) == 9  # and what the other signals said (corroboration)
        model_rows = table(page, "#breakdown-model table")
        assert model_rows[1][:4] == ["glm-5", "15", "8", "8"] and model_rows[2][:4] == ["qwen3", "2", "1", "1"]
        # The hostile record renders as text, redacted.
        text = page.evaluate("document.body.innerText")
        assert "<script>alert(1)</script>" in text
        assert "evil-agent/<img src=x onerror=alert(2)>" in text
        for secret in ("hunter2-topsecret", "wJalrXUtnFEMIsecretvalue", "AKIAIOSFODNN7EXAMPLE"):
            assert secret not in text
        assert "[REDACTED]" in text
        # The client label in the chart is text too (plotly renders labels as HTML).
        assert page.evaluate(
            "Array.from(document.querySelectorAll('#chart-breakdown-client .ytick text'))"
            ".some(t => t.textContent.includes('<img src=x onerror=alert(2)>'))")
        shot = page.screenshot(tmp_path / "fixture-report.png")
        assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # It prints: a PDF of several pages.
        pdf = base64.b64decode(page.send("Page.printToPDF", {"printBackground": True})["data"])
        assert pdf[:5] == b"%PDF-" and pdf.count(b"/Type /Page") > 2
    finally:
        chrome.close()


def test_sample_week_report_in_chromium(chromium_path, tmp_path):
    from tests.support.report_weeks import render_sample_week

    html = render_sample_week(tmp_path)
    chrome, page = open_report(chromium_path, html, tmp_path)
    try:
        charts = check_page(page, html)
        assert len(charts) == 10
        from tests.support.report_weeks import sample_truth

        truth = sample_truth()
        assert page.evaluate("document.querySelector('[data-metric=turns]').innerText") == f"{truth['turns']:,}"
        windows = table(page, "#windows-table")
        # A wedge with frozen gauges is inferred from the logs, and says so.
        assert [row[0] for row in windows[1:]] == [e[0] + (" (inferred)" if e[4] else "") for e in truth["episodes"]]
        findings = page.evaluate("[...document.querySelectorAll('#deployment-findings li')].map(li => li.dataset.kind)")
        assert {"answer-in-reasoning", "thinking-off-leaks", "repaired", "budget-refused", "frozen-gauges"} <= set(findings)
        assert sum(int(row[7]) for row in windows[1:]) == (  # "failures inside"; corroboration follows
            truth["failure_classes"]["wedged-pod"] + truth["failure_classes"]["pod-down"])
        classes = {row[0]: row[1] for row in table(page, "#headline-classes")[1:]}
        assert classes == {c: f"{n:,}" for c, n in truth["failure_classes"].items()}
        page.screenshot(tmp_path / "sample-report.png")
        assert (tmp_path / "sample-report.png").stat().st_size > 50_000
    finally:
        chrome.close()


def test_the_checks_catch_a_bad_page(chromium_path, tmp_path):
    """The browser checks are not vacuous: a page that logs an error, runs an alert and
    fetches from the network fails each of them."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><script>console.error("boom"); alert(1);</script>'
                   '<img src="https://example.com/x.png"><figure class="chart"><div class="plot" id="p"></div>'
                   "</figure></body></html>")
    chrome, page = open_report(chromium_path, bad, tmp_path)
    try:
        page.evaluate("new Promise(r => setTimeout(() => r(true), 200))")
        assert any("boom" in e for e in console_errors(page))
        assert len(page.events("Page.javascriptDialogOpening")) == 1
        urls = {e["params"]["request"]["url"] for e in page.events("Network.requestWillBeSent")}
        assert "https://example.com/x.png" in urls and page.events("Network.loadingFailed")
        assert page.evaluate(DRAWN_CHARTS_JS)[0]["drawn"] is False
    finally:
        chrome.close()
