"""What on-call people look for, through the real CLI: the summary's on-call block and --fail-on.

A hand-built week (records in the proxy's shapes) with known answers:

- ``gpt-oss`` on ``nimbus``: 14 calls, every one a ``ConnectError`` (an incident);
- ``z-ai/glm-4.6`` on ``openrouter``: 429s at 0, 60 and 150 s with an ok call in
  between (one burst of 3), a lone 429 an hour later (not a burst), then two
  429s 10 s apart (a second burst);
- ``glm-5`` on ``nrp``: 40 ok turns with latencies 100, 200, ... 4,000 ms, four
  timeouts with different millisecond counts (one normalised error group), a
  vLLM ``EngineCore`` crash and a ``CUDA error`` (flagged), and a naked 500 with
  tool history (``tool-history-5xx``);
- ``qwen3`` on a provider whose name carries a terminal escape sequence, with an
  error text that carries an API key.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analyzer.core.errors import ExitCode
from analyzer.outputs.oncall import parse_fail_on
from analyzer.cli.terminal import shown_text
from tests.support.records import (
    NAKED_500,
    NAKED_500_HEADERS,
    TOOL_RESULT,
    at,
    request,
    response_error,
    response_ok,
    write_jsonl,
)
from tests.support.repo import REPO
from tests.support.cli import analyze

SAMPLE = REPO / "sample_logs"
EVIL_PROVIDER = "evil\x1b]0;PWNED\x07\x1b[2J"
API_KEY = "sk-live-abcdefghijklmnopqrstuvwx"
ENGINE_CORE = ('Provider returned 500: {"object": "error", "message": "EngineCore encountered an issue. '
               'See stack trace (above) for the root cause.", "type": "InternalServerError", "code": 500}')
CUDA = "RuntimeError: CUDA error: an illegal memory access was encountered (device 3, stream 0x7f3a2b10)"
GLM_LATENCIES = [100 * (i + 1) for i in range(40)]


def _pair(recs: list, rid: str, minute: float, *, provider: str, model: str, session: str, ok: bool = True,
          error: str | None = None, latency_ms: int = 900, **kw) -> None:
    common = {"provider": provider, "model": model, "session": session}
    recs.append(request(rid, at(minute), **common, tool_results=kw.pop("tool_results", None)))
    if ok:
        recs.append(response_ok(rid, at(minute + latency_ms / 60000), content="fine", latency_ms=latency_ms,
                                completion_tokens=kw.pop("completion_tokens", 50), **common, **kw))
    else:
        recs.append(response_error(rid, at(minute + latency_ms / 60000), error, latency_ms=latency_ms, **common, **kw))


def oncall_records() -> list[dict]:
    """The week of the module docstring."""
    r: list[dict] = []
    n = 0

    def rid() -> str:
        nonlocal n
        n += 1
        return f"{0xc0000000 + n:08x}"

    for i in range(14):  # nimbus never answers
        _pair(r, rid(), 10 + i * 30, provider="nimbus", model="gpt-oss", session=f"n-{i}", ok=False,
              error="ConnectError: All connection attempts failed", latency_ms=5)
    orq = {"provider": "openrouter", "model": "z-ai/glm-4.6", "session": "or-1"}
    limited = 'Provider returned 429: {"error": {"message": "Rate limit exceeded: 20 per minute", "code": 429}}'
    _pair(r, rid(), 600, **orq, ok=False, error=limited, latency_ms=300)
    _pair(r, rid(), 600.5, **orq)
    _pair(r, rid(), 601, **orq, ok=False, error=limited, latency_ms=300)
    _pair(r, rid(), 602.5, **orq, ok=False, error=limited, latency_ms=300)
    _pair(r, rid(), 662.5, **orq, ok=False, error=limited, latency_ms=300)  # alone: not a burst
    _pair(r, rid(), 900, **orq, ok=False, error=limited, latency_ms=300)
    _pair(r, rid(), 900 + 10 / 60, **orq, ok=False, error=limited, latency_ms=300)
    for i, ms in enumerate(GLM_LATENCIES):
        _pair(r, rid(), 1000 + i, provider="nrp", model="glm-5", session=f"g-{i // 10}", latency_ms=ms,
              completion_tokens=10 * (i + 1))
    for i, ms in enumerate((1200003, 1200017, 1200101, 600042)):
        _pair(r, rid(), 1100 + i, provider="nrp", model="glm-5", session="g-t", ok=False,
              error=f"Request timed out after {ms}ms", latency_ms=ms)
    _pair(r, rid(), 1200, provider="nrp", model="glm-5", session="g-c", ok=False, error=ENGINE_CORE, latency_ms=40)
    _pair(r, rid(), 1201, provider="nrp", model="glm-5", session="g-c", ok=False, error=CUDA, latency_ms=40)
    _pair(r, rid(), 1202, provider="nrp", model="glm-5", session="g-c", ok=False, error=NAKED_500,
          latency_ms=40, tool_results=TOOL_RESULT, headers=NAKED_500_HEADERS)
    _pair(r, rid(), 1300, provider=EVIL_PROVIDER, model="qwen3", session="q-1")
    _pair(r, rid(), 1301, provider=EVIL_PROVIDER, model="qwen3", session="q-1", ok=False,
          error=f'Provider returned 401: {{"error": "bad key", "api_key": "{API_KEY}"}}\x1b[31m', latency_ms=20)
    return r


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("oncall") / "2026-11-16" / "14-00-00-proxy-1-0a1b2c3d.jsonl",
                       oncall_records())


@pytest.fixture(scope="module")
def first_run(logs, tmp_path_factory) -> tuple[Path, dict]:
    """``analyze LOGS --db a.duckdb --json`` into a new database, once for the module: the
    database (tests that write to it take a copy) and the summary it printed."""
    db = tmp_path_factory.mktemp("db") / "a.duckdb"
    p = analyze(str(logs), "--db", str(db), "--json")
    assert p.returncode == 0, p.stderr
    return db, json.loads(p.stdout)


@pytest.fixture(scope="module")
def summary(first_run) -> dict:
    return first_run[1]


def _quantile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (what quantile_cont computes)."""
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


# ---------------------------------------------------------------------------
# The summary's on-call block (--json)


def test_a_provider_that_never_answered_is_named_as_an_incident(summary):
    incidents = summary["oncall"]["incidents"]
    assert [i["incident"] for i in incidents] == ["nimbus unreachable: 14 of 14 calls"]
    assert incidents[0]["scope"] == "provider" and incidents[0]["models"] == "gpt-oss"
    # openrouter answered some calls, nrp most: neither is an incident.


def test_429_bursts_are_windows(summary):
    bursts = summary["oncall"]["rate_limit_bursts"]
    got = [(b["provider"], b["model"], b["start"][:19], b["rate_limited_turns"], b["calls_in_window"],
            b["ok_in_window"], b["duration_s"]) for b in bursts]
    assert got == [
        ("openrouter", "z-ai/glm-4.6", at(600).strftime("%Y-%m-%dT%H:%M:%S"), 3, 4, 1, 150.0),
        ("openrouter", "z-ai/glm-4.6", at(900).strftime("%Y-%m-%dT%H:%M:%S"), 2, 2, 0, 10.0),
    ]


def test_latency_percentiles_per_model_and_provider(summary):
    rows = {(r["model"], r["provider"]): r for r in summary["oncall"]["latency"]}
    glm = rows[("glm-5", "nrp")]
    timeouts = [1200003, 1200017, 1200101, 600042]
    every = GLM_LATENCIES + timeouts + [40, 40, 40]
    assert glm["turns"] == glm["timed_turns"] == len(every)
    for key, q in (("p50_ms", 0.5), ("p95_ms", 0.95), ("p99_ms", 0.99)):
        assert glm[key] == round(_quantile(every, q)), key
    assert glm["max_ms"] == 1200101
    assert glm["p50_ok_ms"] == round(_quantile(GLM_LATENCIES, 0.5))
    assert rows[("gpt-oss", "nimbus")]["p99_ms"] == 5


def test_tokens_per_model(summary):
    rows = {r["model"]: r for r in summary["oncall"]["tokens"]}
    glm = rows["glm-5"]
    assert glm["turns_with_usage"] == 40
    assert glm["completion_tokens"] == sum(10 * (i + 1) for i in range(40))
    assert glm["prompt_tokens"] == 40 * 9000
    assert glm["total_tokens"] == glm["prompt_tokens"] + glm["completion_tokens"]
    assert rows["gpt-oss"]["turns_with_usage"] == 0 and rows["gpt-oss"]["total_tokens"] == 0


def test_error_texts_are_grouped_with_numbers_normalised(summary):
    groups = {g["pattern"]: g for g in summary["oncall"]["error_groups"]}
    timeouts = groups["Request timed out after <n>ms"]
    assert (timeouts["turns"], timeouts["distinct_texts"], timeouts["models"]) == (4, 4, "glm-5")
    assert timeouts["example_error"] == "Request timed out after 1200003ms"  # the earliest
    assert groups["ConnectError: All connection attempts failed"]["turns"] == 14
    # The status of `Provider returned NNN` is kept, the numbers in the body are not.
    assert 'Provider returned 429: {"error": {"message": "Rate limit exceeded: <n> per minute", "code": <n>}}' in groups
    assert groups["Provider returned 500: "]["main_class"] == "tool-history-5xx"


def test_vllm_engine_crashes_are_flagged_and_listed_first(summary):
    block = summary["oncall"]
    crashes = [g for g in block["error_groups"] if g["engine_crash"]]
    assert {g["example_error"] for g in crashes} == {ENGINE_CORE, CUDA}
    assert block["error_groups"][: len(crashes)] == crashes
    assert block["engine_crash_turns"] == 2
    assert any("<addr>" in g["pattern"] for g in crashes)  # the stream address is normalised


def test_credentials_never_reach_the_json(summary):
    text = json.dumps(summary)
    assert API_KEY not in text and "[REDACTED]" in text


# ---------------------------------------------------------------------------
# The summary as a person reads it (text on a pipe)


@pytest.fixture(scope="module")
def text_summary(logs, first_run, tmp_path_factory) -> str:
    # The same command on a copy of the ingested week: the summary is the same but for
    # the line about what this run ingested (nothing new), and no ingest is paid twice.
    db = tmp_path_factory.mktemp("db-text") / "a.duckdb"
    shutil.copy(first_run[0], db)
    p = analyze(str(logs), "--db", str(db))
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_text_summary_shows_the_oncall_section(text_summary):
    out = text_summary
    assert "incident: nimbus unreachable: 14 of 14 calls" in out
    assert "vLLM engine crash:" in out and "[engine crash] Provider returned 500" in out
    assert "429 bursts" in out and "Latency per model and provider" in out and "Tokens per model" in out
    assert "Request timed out after <n>ms" in out


def test_log_text_reaches_the_terminal_inert_and_redacted(text_summary):
    out = text_summary
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b]0;PWNED\\x07\\x1b[2J" in out  # shown, not obeyed
    assert API_KEY not in out


def test_normalising_never_unmasks_a_credential(tmp_path):
    from analyzer.store.db import connect
    from analyzer.outputs.oncall import build_oncall
    from analyzer.api import ingest

    secrets = ("123abcdefSECRETtoken", "42hunter2", "7777wJalrXUtnFEMI")
    recs: list = []
    _pair(recs, "e0000001", 0, provider="nrp", model="glm-5", session="x", ok=False,
          error=f"Provider returned 401: invalid Bearer {secrets[0]} (expired)", latency_ms=5)
    _pair(recs, "e0000002", 1, provider="nrp", model="glm-5", session="x", ok=False,
          error=f"RuntimeError: login failed password={secrets[1]} token: {secrets[2]}", latency_ms=5)
    db = tmp_path / "s.duckdb"
    ingest([str(write_jsonl(tmp_path / "l.jsonl", recs))], db=db)
    con = connect(db, read_only=True)
    try:
        text = json.dumps(build_oncall(con))
    finally:
        con.close()
    for secret in secrets:
        assert secret not in text and secret.lstrip("0123456789") not in text, secret
    assert "Bearer [REDACTED]" in text


def test_shown_text_escapes_every_control_character():
    # the on-call block's text is escaped as every other line of the summary is (analyzer.core.safetext)
    assert shown_text("a\rb\x1b[2Jc\u202ed\x9b\ufeff") == "a\\rb\\x1b[2Jc\\u202ed\\x9b\\ufeff"
    assert shown_text(None) == "-" and shown_text("x" * 10, limit=5) == "xxxx…"


# ---------------------------------------------------------------------------
# --fail-on: the cron job's exit code


@pytest.fixture(scope="module")
def db_with_week(first_run, tmp_path_factory) -> Path:
    """The week ingested by ``analyze LOGS --db a.duckdb --json`` (a copy: the --fail-on runs write to it)."""
    db = tmp_path_factory.mktemp("db-fail") / "a.duckdb"
    shutil.copy(first_run[0], db)
    return db


def test_fail_on_exits_7_after_printing_the_summary(logs, db_with_week):
    # 1 tool-history-5xx in 70 turns is 1.43%.
    p = analyze(str(logs), "--db", str(db_with_week), "--json", "--fail-on", "tool-history-5xx>1%")
    assert p.returncode == ExitCode.THRESHOLD == 7
    assert json.loads(p.stdout)["turns"] == 70  # the summary is still there for the mail
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "tool-history-5xx 1.43% (1 of 70 turns) > 1%" in lines[0], p.stderr
    p = analyze(str(logs), "--db", str(db_with_week), "--fail-on", "tool-history-5xx>2%")
    assert p.returncode == 0, p.stderr


def test_fail_on_absolute_counts_and_several_thresholds(logs, db_with_week):
    p = analyze(str(logs), "--db", str(db_with_week), "--fail-on", "wedged-pod>0",
                "--fail-on", "incidents>0,engine-crashes>=2", "--fail-on", "rate-limit-bursts>5")
    assert p.returncode == 7
    err = p.stderr.strip()
    assert "2 thresholds crossed" in err and "incidents 1 > 0" in err and "engine-crashes 2 >= 2" in err
    assert "wedged-pod" not in err and "rate-limit-bursts" not in err  # not crossed: not named
    p = analyze(str(logs), "--db", str(db_with_week), "--fail-on", "wedged-pod>0", "--fail-on", "rate-limited>6")
    assert p.returncode == 0, p.stderr  # 6 rate-limited turns: not more than 6


def test_fail_on_follows_the_summary_filters(logs, db_with_week):
    # Under --model gpt-oss every turn is a connection error; no 429 at all.
    p = analyze(str(logs), "--db", str(db_with_week), "--model", "gpt-oss", "--fail-on", "connection-error>99%")
    assert p.returncode == 7 and "100.00% (14 of 14 turns)" in p.stderr
    p = analyze(str(logs), "--db", str(db_with_week), "--model", "gpt-oss", "--fail-on", "rate-limited>0")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("spec,message", [
    ("tool-history-5xx>>2%", "expected METRIC>N"),
    ("no-such-class>1", "unknown metric 'no-such-class'"),
    ("incidents>1%", "incidents is a count"),
    ("wedged-pod<1", "expected METRIC>N"),
])
def test_a_bad_threshold_is_a_usage_error_before_any_work(spec, message, logs, tmp_path):
    db = tmp_path / "never.duckdb"
    p = analyze(str(logs), "--db", str(db), "--fail-on", spec)
    assert p.returncode == ExitCode.USAGE, p.stderr
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not db.exists()


def test_parse_fail_on_reads_every_form():
    got = [(t.metric, t.op, t.value, t.percent) for t in parse_fail_on(["tool-history-5xx>2%, wedged-pod>0",
                                                                       "failed>=12.5%"])]
    assert got == [("tool-history-5xx", ">", 2.0, True), ("wedged-pod", ">", 0.0, False), ("failed", ">=", 12.5, True)]


# ---------------------------------------------------------------------------
# The sample week, against its ground truth


@pytest.fixture(scope="module")
def sample_summary(tmp_path_factory) -> dict:
    if not (SAMPLE / "s3").is_dir():
        pytest.skip("sample_logs/ not generated yet")
    p = analyze(str(SAMPLE / "s3"), "--db", str(tmp_path_factory.mktemp("sample") / "a.duckdb"), "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _truth() -> dict:
    return json.loads((SAMPLE / "ground_truth.json").read_text())


def test_sample_week_bursts_match_the_ground_truth(sample_summary):
    from datetime import datetime

    per_pair: dict[tuple, list[datetime]] = {}
    for r in _truth()["requests"].values():
        if r["class"] == "rate-limited":
            per_pair.setdefault((r["provider"], r["model"]), []).append(
                datetime.fromisoformat(r["ts"].replace("Z", "")))
    expected = []
    for (provider, model), times in per_pair.items():
        times.sort()
        run = [times[0]]
        for t in times[1:] + [None]:
            if t is not None and (t - run[-1]).total_seconds() <= 300:
                run.append(t)
                continue
            if len(run) >= 2:
                expected.append((run[0].isoformat()[:19], provider, model, len(run)))
            if t is not None:
                run = [t]
    got = [(b["start"][:19], b["provider"], b["model"], b["rate_limited_turns"])
           for b in sample_summary["oncall"]["rate_limit_bursts"]]
    assert got == sorted(expected) and got


def test_sample_week_incidents_and_latency_cover_every_pair(sample_summary):
    truth = _truth()["requests"].values()
    pairs: dict[tuple, list[str]] = {}
    for r in truth:
        pairs.setdefault((r["provider"], r["model"]), []).append(r["class"])
    # No routed provider or model failed every call in the sample week (ground truth).
    dead = [p for p, classes in pairs.items() if p[0] not in ("unrouted", "streaming-unsupported")
            and len(classes) >= 3 and "ok" not in classes]
    assert sample_summary["oncall"]["incidents"] == [] and dead == []
    latency = {(r["provider"], r["model"]): r["turns"] for r in sample_summary["oncall"]["latency"]}
    assert latency == {p: len(c) for p, c in pairs.items()}
    timeouts = next(g for g in sample_summary["oncall"]["error_groups"]
                    if g["pattern"] == "Request timed out after <n>ms")
    assert timeouts["distinct_texts"] == timeouts["turns"] > 1  # different numbers, one group


# ---------------------------------------------------------------------------
# The report's On call section


def test_the_report_shows_the_oncall_section(first_run):
    from analyzer.store.db import connect
    from analyzer.outputs.report.build import build_context, resolve_period
    from analyzer.outputs.report.html import render_html

    con = connect(first_run[0], read_only=True)  # the week as `analyze LOGS --json` left it
    try:
        context = build_context(con, resolve_period(con), plotly="cdn")
    finally:
        con.close()
    oc, page = context.oncall, render_html(context)
    assert [i.incident for i in oc.incidents] == ["nimbus unreachable: 14 of 14 calls"]
    assert [(b.model, b.rate_limited_turns) for b in oc.bursts] == [("z-ai/glm-4.6", 3), ("z-ai/glm-4.6", 2)]
    assert oc.engine_crash_turns == 2 and [g.engine_crash for g in oc.error_groups][:3] == [True, True, False]
    assert {(r.model, r.provider) for r in oc.latency} >= {("glm-5", "nrp"), ("gpt-oss", "nimbus")}
    section = page[page.index('<section id="oncall">'):]
    section = section[: section.index("</section>")]
    assert "nimbus unreachable: 14 of 14 calls" in section and section.count("engine crash</b>") == 2
    assert "Request timed out after &lt;n&gt;ms" in section  # autoescaped, not markup
    assert API_KEY not in page and "[REDACTED]" in section
