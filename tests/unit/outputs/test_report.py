"""The weekly HTML report: golden context objects, untrusted content, the template contract.

The fixture week (ISO 2026-W47: sessions of known outcomes, hostile content, a wedged
window) and the sample week are built and rendered by tests/support/report_weeks.py.
"""

from __future__ import annotations

import html as html_lib
from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import jinja2.meta
import pytest
from pydantic import BaseModel

from analyzer.store.db import connect
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.api import ingest
from analyzer.api import report as make_report
from analyzer.outputs.report import build
from analyzer.outputs.report import context as ctx_module
from analyzer.outputs.report.build import build_context, resolve_period
from analyzer.core.scrub import REDACTED, scrub, scrub_json
from analyzer.outputs.report.html import render_html, template_environment
from analyzer.outputs.summary import build_summary
from tests.support.fresh_db import fresh_db
from tests.support.records import write_jsonl
from tests.support.cli import analyze
from tests.support.report_weeks import (
    EVIL_CLIENT,
    SECRETS,
    WEEK,
    XSS,
    build_fixture_db,
    fixture_records,
    sample_db,
    sample_truth,
)

GENERATED_AT = datetime(2026, 11, 23, 6, 0)


# --- fixtures --------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_db(tmp_path_factory) -> Path:
    return build_fixture_db(tmp_path_factory.mktemp("report-fixture"))


@pytest.fixture(scope="module")
def context(fixture_db):
    con = connect(fixture_db)
    try:
        period = resolve_period(con, week=WEEK)
        return build_context(con, period, generated_at=GENERATED_AT)
    finally:
        con.close()


@pytest.fixture(scope="module")
def page(context) -> str:
    return render_html(context)


# --- golden context objects -----------------------------------------------


def test_headline(context):
    h = context.headline
    assert (h.focus, h.models) == ("GLM", ["glm-5"])
    assert h.current.model_dump() == {
        "label": "2026-W47", "turns": 15, "sessions": 8, "failed_turns": 8, "failure_rate": 0.5333,
        "tool_sessions": 7, "sessions_lost": 4, "sessions_lost_to_eligible": 2, "ladder_eligible": 5,
        "recovery_rate": 0.5,
    }
    assert h.previous.model_dump() == {
        "label": "2026-W46", "turns": 4, "sessions": 2, "failed_turns": 1, "failure_rate": 0.25,
        "tool_sessions": 1, "sessions_lost": 0, "sessions_lost_to_eligible": 0, "ladder_eligible": 1,
        "recovery_rate": None,
    }
    assert [(c.incident_class, c.count) for c in h.failure_classes] == [
        ("tool-history-5xx", 4), ("empty-200-stop", 1), ("length-with-no-content", 1), ("wedged-pod", 1),
        ("client-error", 1)]
    assert (h.recovery.ladders, h.recovery.recovered, h.recovery.rate) == (2, 1, 0.5)
    assert (h.recovery.low, h.recovery.high) == pytest.approx((0.0945, 0.9055), abs=1e-4)
    assert h.baseline.model_dump() == {"failures": 3, "retried_ok": 0, "retried_failed": 1, "moved_on": 1,
                                       "session_ended": 1, "rescued_rate": 0.0}
    # one session lost after the ladder ran out of rungs is measured, not projected
    assert "about 0 of 1 GLM tool sessions lost to ladder-eligible failures without it" in h.conclusion
    assert "The ladder saved 1 GLM tool session and 1 was lost after every rung" in h.conclusion
    assert "1 more was lost to wedged" in h.conclusion


def test_timeline(context):
    t = context.timeline
    assert t.granularity == "day" and t.metrics_note is None
    assert t.classes == ["ok", "tool-history-5xx", "empty-200-stop", "length-with-no-content", "wedged-pod",
                         "client-error"]
    assert [(b.label, b.turns, b.failed) for b in t.buckets] == [
        ("Mon 11-16", 6, 2), ("Tue 11-17", 2, 2), ("Wed 11-18", 2, 1), ("Thu 11-19", 2, 1), ("Fri 11-20", 1, 1),
        ("Sat 11-21", 0, 0), ("Sun 11-22", 2, 1)]
    assert t.buckets[0].counts == {"ok": 4, "tool-history-5xx": 2, "empty-200-stop": 0,
                                   "length-with-no-content": 0, "wedged-pod": 0, "client-error": 0}
    assert [(w.pod, w.kind, w.minutes, w.failures) for w in t.windows] == [("glm-5-0", "wedged", 30.0, 1)]


def test_throughput(context):
    tp = context.throughput
    assert tp.available and tp.bucket_minutes == 30 and tp.note is None
    # 50 tokens/s, one flat half hour (the wedge), a reset bucket at 48.3 tokens/s: mean of 9 buckets.
    assert [p.model_dump() for p in tp.pods] == [{
        "pod": "glm-5-0", "model_name": "glm-5", "mean_tokens_per_s": 44.3, "peak_tokens_per_s": 50.0,
        "idle_buckets": 1, "wedged_minutes": 30.0, "down_minutes": 0.0}]
    rates = dict(zip(tp.chart.figure["data"][0]["x"], tp.chart.figure["data"][0]["y"]))
    assert rates["2026-11-20T08:15:00"] == 0 and rates["2026-11-20T09:15:00"] == pytest.approx(48.33, abs=0.01)


def test_ladder(context):
    lad = context.ladder
    assert lad.measured
    assert [(r.trigger, r.rung, r.ladders, r.reached, r.recovered) for r in lad.rungs] == [
        ("tool-history-5xx", "tool_choice_none", 2, 2, 1), ("tool-history-5xx", "drop_tools", 2, 1, 0),
        ("tool-history-5xx", "final_answer", 2, 1, 0)]
    assert lad.rungs[0].cumulative_rate == 0.5 and lad.rungs[-1].cumulative_rate == 0.5
    assert lad.eligible_by_trigger == {"empty-200-stop": 1, "tool-history-5xx": 4}
    assert lad.wedged_or_down_failures == 1
    assert lad.baseline == context.headline.baseline and lad.recovery == context.headline.recovery


def test_breakdowns(context):
    by = {b.dimension: b for b in context.breakdowns.items}
    assert list(by) == ["model", "origin", "client", "thinking"]
    rows = lambda d: [(r.key, r.turns, r.sessions, r.failed, r.ladder_eligible, r.top_failure)  # noqa: E731
                      for r in by[d].rows]
    assert by["model"].scope == "all models" and by["origin"].scope == "GLM turns"
    assert rows("model") == [("glm-5", 15, 8, 8, 5, "tool-history-5xx"), ("qwen3", 2, 1, 1, 0, "timeout")]
    assert rows("origin") == [("https://tpl.nrp-nautilus.io", 13, 7, 7, 5, "tool-history-5xx"),
                              ("https://geo.example.org", 2, 1, 1, 0, "client-error")]
    assert rows("client") == [("geo-agent/v3.13.1", 13, 7, 7, 5, "tool-history-5xx"),
                              (EVIL_CLIENT, 2, 1, 1, 0, "client-error")]
    assert rows("thinking") == [("thinking off", 13, 7, 7, 5, "tool-history-5xx"),
                                ("thinking on", 2, 1, 1, 0, "length-with-no-content")]
    glm = by["model"].rows[0]
    assert (glm.failure_rate, glm.failure_low, glm.failure_high) == pytest.approx((0.5333, 0.3012, 0.7519), abs=1e-4)
    assert by["model"].omitted == 0


def test_model_breakdown_agrees_with_the_summary(fixture_db, context):
    con = connect(fixture_db)
    try:
        s = build_summary(con, since=datetime(2026, 11, 16), until=datetime(2026, 11, 23))
    finally:
        con.close()
    rows = {r.key: r for r in context.breakdowns.items[0].rows}
    for m in s["models"]:
        assert rows[m["model"]].turns == m["turns"] and rows[m["model"]].sessions == m["sessions"]
    assert context.methods.turns == s["turns"] == 17


def test_positions(context):
    pos = context.positions
    assert [(r.bucket, r.turns, r.failed) for r in pos.by_turn_index] == [("1", 8, 5), ("2", 5, 2), ("3–4", 2, 1)]
    assert [(r.bucket, r.turns, r.failed) for r in pos.by_tool_depth] == [("0", 10, 5), ("1", 5, 3)]
    assert sum(r.ladder_eligible for r in pos.by_turn_index) == 5


def test_length_budget(context):
    lb = context.length_budget
    assert (lb.turns, lb.thinking_turns, lb.share_of_thinking, lb.inferred) == (1, 2, 0.5, 0)
    assert lb.median_reasoning_chars == 8000
    # The answered thinking turn: 1,200 tokens, 1,000 of 4,000 characters visible -> a 300-token answer.
    assert (lb.answered_turns, lb.answered_completion_p50, lb.answered_completion_p95) == (1, 1200, 1200)
    assert (lb.answer_tokens_p95, lb.answer_reserve) == (300, 320)
    assert [c.model_dump() for c in lb.caps] == [{"cap": 2048, "turns": 1, "logged": 1,
                                                  "median_reasoning_chars": 8000,
                                                  "suggested_thinking_budget": 2048 - 320 - 2}]
    assert "thinking_token_budget of 1726" in lb.conclusion


def test_top_sessions(context):
    top = context.top_sessions
    assert [(s.session_id, s.failed_turns, s.ended_on_failure) for s in top.sessions] == [
        ("s-legacy", 2, True), ("s-xss", 1, True), ("s-ladder-x", 1, True), ("s-wedged", 1, True),
        ("s-empty", 1, False), ("s-length", 1, False), ("s-ladder-ok", 1, False)]
    legacy = top.sessions[0]
    assert [(t.turn_index, t.request_id, t.incident_class, t.status) for t in legacy.turn_rows] == [
        (1, "a0000011", "ok", 200), (2, "a0000012", "tool-history-5xx", 500), (3, "a0000013", "tool-history-5xx", 500)]
    assert legacy.turn_rows[1].error == "Provider returned 500: "
    assert top.sessions[-1].turn_rows[0].recovered_at == "tool_choice_none"
    xss = top.sessions[1]
    assert xss.client == EVIL_CLIENT and xss.turn_rows[0].question == XSS
    assert xss.turn_rows[0].tool_calls.startswith('query({"sql": "CREATE SECRET s3 (TYPE S3, KEY_ID \'[REDACTED]\'')
    assert '"s3_secret": "[REDACTED]"' in xss.turn_rows[0].tool_calls
    assert "Bearer [REDACTED]" in xss.turn_rows[1].error and '"api_key": "[REDACTED]"' in xss.turn_rows[1].error


def test_methods(context):
    m = context.methods
    assert (m.since, m.until, m.partial_period) == (datetime(2026, 11, 16), datetime(2026, 11, 23), False)
    assert (m.input_files, m.input_forms, m.records) == (1, {"jsonl": 1}, 2 * 21)
    assert (m.turns, m.inferred_turns, m.truncated_turns, m.quarantined_lines) == (17, 5, 0, 1)
    assert [(q.line_no, q.reason) for q in m.quarantine_samples] == [(43, "malformed JSON (invalid or cut-off line)")]
    assert m.quarantine_samples[0].path.endswith("week.jsonl")
    assert (m.metric_samples, m.pod_windows, m.metrics_note) == (241, 1, None)
    assert m.generated_at == GENERATED_AT
    assert set(m.versions) == {"analyzer", "duckdb", "plotly", "plotly.js", "jinja2", "pydantic", "python"}
    assert m.migrations[0] == "000_baseline"  # then the migrations after the release, in order


def test_methods_show_input_paths_as_given_relative_under_the_working_folder(fixture_db, monkeypatch):
    """A report is shared: an input given relative to where analyze ran is shown relative,
    never as this machine's absolute path; run from elsewhere, the stored path is shown."""
    logs_dir = fixture_db.parent  # the fixture ingested <tmp>/logs/week.jsonl
    con = connect(fixture_db)
    try:
        period = resolve_period(con, week=WEEK)
        summary_all = None
        for cwd, expected in ((logs_dir, "logs/week.jsonl"), (logs_dir / "logs", "week.jsonl"),
                              (logs_dir.parent, str(logs_dir / "logs" / "week.jsonl")[len(str(logs_dir.parent)) + 1:]),
                              (logs_dir / "logs" / "elsewhere", str(logs_dir / "logs" / "week.jsonl"))):
            cwd.mkdir(exist_ok=True)
            monkeypatch.chdir(cwd)
            if summary_all is None:  # the whole report context once, as the report builds it
                m = build_context(con, period, generated_at=GENERATED_AT).methods
                # What the methods footer is made from: only the working folder changes from here on.
                summary_all = build_summary(con, since=period.since, until=period.until, refresh=False)
            else:  # the footer alone (build_context's own step) for the other folders: a whole context is 1.5 s
                m = build._methods(con, {"since": period.since, "until": period.until}, period, summary_all,
                                   GENERATED_AT)
            assert m.input_examples == [expected] and m.quarantine_samples[0].path == expected, cwd
    finally:
        con.close()


def test_without_metrics_the_report_says_so(tmp_path):
    db = fresh_db(tmp_path / "nometrics.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    ingest([str(write_jsonl(tmp_path / "w.jsonl", fixture_records()))], db=db)
    con = connect(db)
    try:
        c = build_context(con, resolve_period(con, week=WEEK))
    finally:
        con.close()
    assert not c.throughput.available and c.throughput.chart is None
    assert "no metrics given" in c.throughput.note and "no metrics given" in c.timeline.metrics_note
    assert c.timeline.windows == [] and c.headline.failure_classes[0].incident_class == "tool-history-5xx"
    html = render_html(c)
    assert 'id="throughput-note"' in html and "no metrics given" in html


# --- the period ---------------------------------------------------------------


def test_default_period_is_the_last_complete_iso_week(fixture_db):
    con = connect(fixture_db)
    try:
        p = resolve_period(con)
        assert (p.label, p.since, p.until, p.previous_label, p.file_stem) == (
            "2026-W47", datetime(2026, 11, 16), datetime(2026, 11, 23), "2026-W46", "2026-W47")
        p = resolve_period(con, since="2026-11-18", until="2026-11-20")
        assert (p.label, p.previous_since, p.file_stem) == (
            "2026-11-18 – 2026-11-20", datetime(2026, 11, 16), "2026-11-18_2026-11-20")
        hourly = build_context(con, resolve_period(con, since="2026-11-16", until="2026-11-17"))
        assert hourly.timeline.granularity == "hour" and len(hourly.timeline.buckets) == 24
        assert [(b.label, b.turns) for b in hourly.timeline.buckets if b.turns] == [("11-16 10:00", 3),
                                                                                   ("11-16 12:00", 3)]
        odd = build_context(con, resolve_period(con, since="2026-11-16T09:30", until="2026-11-16T13:00"))
        assert [(b.label, b.turns) for b in odd.timeline.buckets] == [
            ("11-16 09:00", 0), ("11-16 10:00", 3), ("11-16 11:00", 0), ("11-16 12:00", 3)]
        with pytest.raises(AnalyzerError) as err:
            resolve_period(con, week="2026-W47", since="2026-11-16")
        assert err.value.exit_code == ExitCode.USAGE
        with pytest.raises(AnalyzerError):
            resolve_period(con, week="47")
        with pytest.raises(AnalyzerError) as err:
            build_context(con, resolve_period(con, week="2026-W30"))
        assert err.value.exit_code == ExitCode.NO_INPUT
    finally:
        con.close()


def test_make_report_ingests_files_and_names_the_output(tmp_path, monkeypatch):
    logs = write_jsonl(tmp_path / "logs" / "week.jsonl", fixture_records())
    monkeypatch.chdir(tmp_path)
    path = make_report(tmp_path / "new.duckdb", [str(logs)])
    assert path == tmp_path / "report-2026-W47.html" and path.stat().st_size > 1_000_000
    with pytest.raises(AnalyzerError) as err:
        make_report(tmp_path / "missing.duckdb")
    assert err.value.exit_code == ExitCode.DATABASE


def test_the_report_command(tmp_path):
    """`analyze report FILES...` as a user runs it: a real process; stdout is the path and nothing else."""
    logs = write_jsonl(tmp_path / "logs" / "week.jsonl", fixture_records())
    run = lambda *a: analyze("report", *a, cwd=tmp_path)  # noqa: E731
    p = run(str(logs), "--db", "a.duckdb", "--week", "2026-W47", "-o", "out/r.html", "--plotly-cdn")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "out/r.html\n" and (tmp_path / "out" / "r.html").stat().st_size < 500_000
    p = run("--db", "a.duckdb")
    assert p.returncode == 0 and p.stdout == f"{tmp_path / 'report-2026-W47.html'}\n"
    p = run("--db", "a.duckdb", "--week", "2026-W30")
    assert p.returncode == ExitCode.NO_INPUT and p.stdout == "" and "no turns in 2026-W30" in p.stderr
    p = run("--db", "a.duckdb", "--week", "2026-W47", "--since", "2026-11-16")
    assert p.returncode == ExitCode.USAGE and "not both" in p.stderr


# --- untrusted content ----------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def _parse(page: str) -> _Tags:
    p = _Tags()
    p.feed(page)
    return p


def test_log_content_renders_inert_and_redacted(page, context):
    assert XSS not in page and EVIL_CLIENT not in page
    assert html_lib.escape(XSS, quote=False) in page or html_lib.escape(XSS) in page
    for secret in SECRETS:
        assert secret not in page, secret
    assert page.count(REDACTED) >= 5
    tags = _parse(page)
    # No element from the logs: no inline handlers, images or frames anywhere.
    assert not [(t, a) for t, a in tags.tags for name in a if name.startswith("on")]
    assert not [t for t, _ in tags.tags if t in ("img", "iframe", "object", "embed")]
    # Scripts: plotly.js, the drawChart helper, and one drawChart call per chart.
    n_charts = 10
    assert len(tags.scripts) == 2 + n_charts
    assert all(s.startswith("drawChart(") for s in tags.scripts[2:])
    # Log text inside chart JSON is HTML-escaped for plotly, and <, > are \u-escaped in the script.
    client_chart = next(s for s in tags.scripts if "chart-breakdown-client" in s)
    assert "evil-agent/\\u0026lt;img src=x onerror=alert(2)\\u0026gt;" in client_chart


def test_the_page_is_self_contained(page, tmp_path, fixture_db):
    tags = _parse(page)
    assert not [a for t, a in tags.tags if t == "script" and a.get("src")]
    assert not [a for t, a in tags.tags if t == "link"]
    assert not [a for _, a in tags.tags for k, v in a.items() if k in ("src", "href") and v and
                v.startswith(("http:", "https:", "//"))]
    assert 4_000_000 < len(page.encode()) < 8_000_000  # plotly.js inline is ~4.8 MB
    # --plotly-cdn: one script from the CDN, a small file.
    cdn = make_report(fixture_db, week=WEEK, output=tmp_path / "cdn.html", plotly="cdn").read_text()
    srcs = [a["src"] for t, a in _parse(cdn).tags if t == "script" and a.get("src")]
    assert len(srcs) == 1 and srcs[0].startswith("https://cdn.plot.ly/plotly-") and len(cdn.encode()) < 500_000


@pytest.mark.parametrize("text,expected", [
    ('{"api_key": "abc123", "max_tokens": 100, "prompt_tokens": 5}',
     '{"api_key": "[REDACTED]", "max_tokens": 100, "prompt_tokens": 5}'),
    ("Authorization: Bearer eyJhbGciOi.xyz-123", "Authorization: Bearer [REDACTED]"),
    ("CREATE SECRET s (TYPE S3, KEY_ID 'AKIAABCDEFGHIJKLMNOP', SECRET 'hunter2', REGION 'us-east-1')",
     "CREATE SECRET s (TYPE S3, KEY_ID '[REDACTED]', SECRET '[REDACTED]', REGION 'us-east-1')"),
    ("key sk-or-v1-abcdefghijklmnop1234 in text", "key [REDACTED] in text"),
    ('{\\"s3_secret\\": \\"xyz\\", \\"sql\\": \\"select 1\\"}', '{\\"s3_secret\\": \\"[REDACTED]\\", \\"sql\\": \\"select 1\\"}'),
    ("https://x.io/path?token=abc&user=me", "https://x.io/path?token=[REDACTED]&user=me"),
    ("password=hunter2 and X-Api-Key: zzz", "password=[REDACTED] and X-Api-Key: [REDACTED]"),
    ("postgres://bob:pw123@db:5432/x", "postgres://bob:[REDACTED]@db:5432/x"),
    ("thinking_token_budget: 512, max_tokens=200, author: Jane", "thinking_token_budget: 512, max_tokens=200, author: Jane"),
])
def test_scrub(text, expected):
    assert scrub(text) == expected


def test_scrub_json_parses_tool_arguments():
    call = {"name": "query", "arguments": '{"sql": "SELECT 1", "s3_key": "AK", "nested": {"password": "p"}}'}
    assert scrub_json(call) == {"name": "query", "arguments":
                                 '{"sql": "SELECT 1", "s3_key": "[REDACTED]", "nested": {"password": "[REDACTED]"}}'}


# --- the template contract ----------------------------------------------------


def _models() -> list[type[BaseModel]]:
    return [v for v in vars(ctx_module).values()
            if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == ctx_module.__name__
            and not v.__name__.startswith("_")]


def test_every_context_field_is_documented():
    for model in _models():
        assert model.__doc__ and model.__doc__.strip(), f"{model.__name__} has no docstring"
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


def _render_recording(context) -> set[tuple[str, str]]:
    seen: set[tuple[str, str]] = set()

    class Recording(jinja2.Environment):
        def getattr(self, obj, attribute):
            if isinstance(obj, BaseModel):
                assert attribute in type(obj).model_fields, f"template reads undocumented {type(obj).__name__}.{attribute}"
                seen.add((type(obj).__name__, attribute))
            return super().getattr(obj, attribute)

        def getitem(self, obj, argument):
            if isinstance(obj, BaseModel):
                assert argument in type(obj).model_fields, f"template reads undocumented {type(obj).__name__}[{argument}]"
                seen.add((type(obj).__name__, argument))
            return super().getitem(obj, argument)

    render_html(context, template_environment(environment_class=Recording))
    return seen


def test_the_templates_read_exactly_the_documented_context(context):
    """Every attribute a template reads is a documented field, and every documented field is rendered."""
    # The other branches: no metrics, no ladder data, more breakdown values than shown, plotly.js from the CDN.
    variant = context.model_copy(update={
        "throughput": context.throughput.model_copy(update={"available": False, "note": "no metrics given",
                                                            "chart": None}),
        "headline": context.headline.model_copy(update={"recovery": None}),
        "breakdowns": context.breakdowns.model_copy(update={"items": [
            b.model_copy(update={"omitted": 3}) for b in context.breakdowns.items]}),
        "assets": build.plotly_assets("cdn"),
        # The fixture week has no 429 burst and no provider that failed every call.
        "oncall": context.oncall.model_copy(update={
            "incidents": [ctx_module.ProviderIncident(
                incident="nimbus unreachable: 14 of 14 calls", scope="provider", models="gpt-oss",
                symptom="unreachable", first=datetime(2026, 11, 16), last=datetime(2026, 11, 22))],
            "bursts": [ctx_module.RateLimitBurst(
                provider="openrouter", model="z-ai/glm-4.6", start=datetime(2026, 11, 17, 19, 45),
                end=datetime(2026, 11, 17, 19, 47), duration_s=120.0, rate_limited_turns=3, calls_in_window=5,
                ok_in_window=2)],
            "engine_crash_turns": 2, "error_groups_omitted": 4}),
        # The fixture week is S3 chunks without replicas, slow warnings or lost-record lines.
        "replicas": ctx_module.ReplicasSection(
            replicas=[ctx_module.ReplicaRow(replica="llm-proxy-a", turns=10, failed=2, failure_rate=0.2,
                                            failure_low=0.05, failure_high=0.5, slow_warnings=1, lost_records=3)],
            lost=[ctx_module.LostKindRow(kind="buffer-dropped", meaning="dropped", events=1, lost=3)],
            lost_total=3, untimed_events=1,
            slow=[ctx_module.SlowModelRow(model="glm-5", warnings=1, turns_flagged=1, failed_flagged=0, max_ms=312000)],
            slow_note=context.replicas.slow_note),
        # The fixture week has no GLM-5.3 shapes.
        "deployment": ctx_module.DeploymentSection(
            findings=[ctx_module.DeploymentFinding(kind="repaired", model="glm-5", turns=2,
                                                   message="2 answers repaired on glm-5")],
            reasoning=[ctx_module.ReasoningRow(model="glm-5", answer_in_reasoning=1, answer_in_reasoning_tool_history=1,
                                               reasoning_leaked=2, leaked_after_thinking_off=2, repaired=2)],
            repaired=2),
    })
    seen = _render_recording(context) | _render_recording(variant)
    # The top-level variables are ReportContext's fields, each read by a template.
    env = template_environment()
    top = set()
    for name in env.list_templates(extensions=["j2"]):
        top |= jinja2.meta.find_undeclared_variables(env.parse(env.loader.get_source(env, name)[0]))
    assert top == set(ctx_module.ReportContext.model_fields)
    expected = {(m.__name__, f) for m in _models() if m is not ctx_module.ReportContext for f in m.model_fields}
    assert expected - seen == set(), "documented but never rendered"


def test_only_our_assets_are_marked_safe():
    """Autoescape is on, and the one `|safe` in the templates is plotly.js (our asset, not log text)."""
    env = template_environment()
    assert env.autoescape is True
    marked = []
    for name in env.list_templates(extensions=["j2"]):
        tree = env.parse(env.loader.get_source(env, name)[0])
        for node in tree.find_all(jinja2.nodes.Filter):
            if node.name == "safe":
                target = node.node
                marked.append((name, isinstance(target, jinja2.nodes.Getattr) and target.attr == "plotly_js"
                               and isinstance(target.node, jinja2.nodes.Name) and target.node.name == "assets"))
    assert marked == [("report.html.j2", True)]


# --- the sample week -------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_context(tmp_path_factory):
    db = sample_db(tmp_path_factory.mktemp("report-sample"))
    con = connect(db)
    try:
        return build_context(con, resolve_period(con), generated_at=GENERATED_AT)
    finally:
        con.close()


def test_sample_week_golden(sample_context):
    """The sample week's report against the sample's ground truth."""
    c, t = sample_context, sample_truth()
    assert c.period == t["period"] and c.headline.models == t["focus_models"]
    cur = c.headline.current
    assert (cur.turns, cur.sessions, cur.failed_turns) == (t["turns"], t["sessions"], t["failed"])
    assert cur.failure_rate == round(t["failed"] / t["turns"], 4)
    assert {x.incident_class: x.count for x in c.headline.failure_classes} == t["failure_classes"]
    assert [x.count for x in c.headline.failure_classes] == sorted(t["failure_classes"].values(), reverse=True)
    assert {b.label: b.turns for b in c.timeline.buckets} == t["per_day"]
    assert {r.key: r.turns for r in c.breakdowns.items[0].rows} == t["per_model"]
    # The wedged/down episodes: found by the metrics analysis within a scrape of the truth.
    got = [(w.kind, w.pod, w.start, w.end) for w in c.throughput.windows]
    assert [g[:2] for g in got] == [e[:2] for e in t["episodes"]]
    for g, e in zip(got, t["episodes"]):
        assert abs(g[2] - e[2]) <= timedelta(minutes=1) and abs(g[3] - e[3]) <= timedelta(minutes=1)
    failures = {"wedged": 0, "down": 0}
    for w in c.throughput.windows:
        failures[w.kind] += w.failures
    assert failures == {"wedged": t["failure_classes"]["wedged-pod"], "down": t["failure_classes"]["pod-down"]}
    assert c.throughput.available and len(c.throughput.pods) == 3
    # The ladder days: measured recovery of the tool-session ladders.
    assert (c.ladder.recovery.ladders, c.ladder.recovery.recovered) == (t["ladders"], t["recovered"])
    assert c.length_budget.turns == t["failure_classes"]["length-with-no-content"]
    assert sum(cap.turns for cap in c.length_budget.caps) == c.length_budget.turns
    assert {cap.cap for cap in c.length_budget.caps} <= {1024, 2048, 4096, 8192}  # the apps' round caps
    assert c.methods.quarantined_lines == t["quarantined"] and c.methods.partial_period is False
    assert len(c.top_sessions.sessions) == 10


def test_sample_week_renders_in_well_under_ten_seconds_worth_of_work(sample_context):
    """Not a timing assertion (the machine is shared): the page is one file of a sensible size."""
    html = render_html(sample_context)
    assert 4_000_000 < len(html.encode()) < 8_000_000
    for secret_shape in ("Bearer ey", "sk-live", "SECRET 'w"):
        assert secret_shape not in html


@pytest.mark.parametrize("text,secret", [
    ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ('{"headers": {"Authorization": "Token abc123def"}}', "abc123def"),
    ('Provider returned 401: {"error": "bad key", "api_key": "sk-live-AbCdEfGh', "AbCdEfGh"),
    ("password: hunter2 is wrong", "hunter2"),
])
def test_redaction_of_other_auth_schemes_and_cut_off_values(text, secret):
    assert secret not in scrub(text)


def test_redaction_leaves_prose_alone():
    text = "The token budget is a basic setting; max_tokens: 1024"
    assert scrub(text) == text
