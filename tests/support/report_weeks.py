"""The weeks the report's tests render: a fixture week of known outcomes, and the bundled sample week.

:func:`build_fixture_db` ingests the fixture week (:func:`fixture_records`, with its metrics)
and :func:`render_fixture_week` writes its report; :func:`sample_db` and
:func:`render_sample_week` do the same for sample_logs/, and :func:`sample_truth` is what
the sample week's report must say, from its ground truth. tests/unit/outputs/test_report.py
checks the report's context and HTML, tests/e2e/test_report_browser.py the pages in Chromium.

The fixture week (ISO 2026-W47, plus two sessions in W46 for the week-on-week
change) is built from records in the shapes the real proxy writes, with known
outcomes per session:

===========  ====  =============================================================
session      day   turns (class)
===========  ====  =============================================================
s-ok         Mon   tool call, tool result answered, answer (3 x ok)
s-legacy     Mon   ok tool call; naked 500 with tool results; the same turn
                   retried, 500 again: session lost (legacy, no ladder)
s-ladder-ok  Tue   tool-history-5xx recovered by the ladder at tool_choice_none
s-ladder-x   Tue   tool-history-5xx, every rung failed: session lost
s-length     Wed   thinking on: length-with-no-content at max_tokens 2048, then ok
s-xss        Thu   question ``<script>alert(1)</script>``, tool call arguments with
                   a CREATE SECRET and an s3_secret; then a 400 whose error text
                   carries a bearer token and an API key: session lost
s-wedged     Fri   naked 500 with tool results inside a wedged window: wedged-pod
s-qwen       Sat   qwen3: ok, then a timeout
s-empty      Sun   empty 200 with tool history, then a new question: ok
prev-1/2     W46   ok tool call, 500 retried and rescued; one ok session
===========  ====  =============================================================

plus generation-counter samples for pod ``glm-5-0`` on Friday (flat during the
wedged window, a counter reset at 09:00) and that wedged window.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from analyzer.api import report as make_report
from analyzer.api import ingest
from analyzer.online import log_fields, run_ladder
from analyzer.store.db import connect
from tests.support.fresh_db import fresh_db
from tests.support.metric_rows import insert_samples
from tests.support.records import (
    DONE_ANSWER,
    NAKED_500,
    TOOL_CALL,
    TOOL_PAYLOAD,
    TOOL_RESULT,
    request,
    response_error,
    response_ok,
    write_jsonl,
)
from tests.support.repo import REPO

SAMPLE_LOGS = REPO / "sample_logs"
WEEK = "2026-W47"

XSS = "<script>alert(1)</script>"
EVIL_CLIENT = "evil-agent/<img src=x onerror=alert(2)>"
SECRETS = ("hunter2-topsecret", "wJalrXUtnFEMIsecretvalue", "AKIAIOSFODNN7EXAMPLE",
           "sk-live-abcdefghijklmnopqrstuvwx", "sk-proj-0123456789abcdefghij", "eyJhbGciOiJIUzI1NiJ9.payload.sig")
SECRET_ARGS = json.dumps({
    "sql": "CREATE SECRET s3 (TYPE S3, KEY_ID 'AKIAIOSFODNN7EXAMPLE', SECRET 'wJalrXUtnFEMIsecretvalue'); "
           "SELECT count(*) FROM read_parquet('s3://bucket/x.parquet')",
    "s3_secret": "hunter2-topsecret",
})
SECRET_ERROR = ('Provider returned 400: {"error": "bad header Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", '
                '"api_key": "sk-live-abcdefghijklmnopqrstuvwx", "hint": "try sk-proj-0123456789abcdefghij"}')


def day(d: int, hour: int, minute: float = 0) -> datetime:
    """A time in the fixture week: d = 0 is Monday 2026-11-16 (negative: W46)."""
    return datetime(2026, 11, 16, hour, tzinfo=timezone.utc) + timedelta(days=d, minutes=minute)


# --- building records ------------------------------------------------------

TOOLS_PAYLOAD = {**TOOL_PAYLOAD, "max_tokens": 4096}
ANSWER = DONE_ANSWER


def _ladder_extra(recover_at: str | None) -> dict:
    """log_fields of a real run_ladder whose upstream answers a naked 500 until `recover_at`."""
    def send(payload):
        if payload.get("tool_choice") == "none":
            rung = "tool_choice_none"
        elif "tools" in payload:
            rung = "original"
        else:
            rung = "later"
        return (200, {}, ANSWER) if rung == recover_at else (500, {"content-length": "0"}, b"")
    result = run_ladder(TOOLS_PAYLOAD, send)
    return log_fields(TOOLS_PAYLOAD, result.status, result.body, result)


def _length_extra() -> dict:
    payload = {"model": "glm-5", "max_tokens": 2048, "messages": [{"role": "user", "content": "q"}]}
    body = {"choices": [{"message": {"content": "", "reasoning_content": "…"}, "finish_reason": "length"}],
            "usage": {"completion_tokens": 2048}}
    return log_fields(payload, 200, json.dumps(body).encode())


def _turn(recs: list, rid: str, ts: datetime, session: str, outcome: str, *, req: dict | None = None,
          **resp) -> None:
    recs.append(request(rid, ts, session=session, **(req or {})))
    common = {k: v for k, v in (req or {}).items() if k in ("model", "client", "origin")}
    at = ts + timedelta(seconds=2)
    if outcome == "ok":
        recs.append(response_ok(rid, at, session=session, **common, **resp))
    else:
        recs.append(response_error(rid, at, outcome, session=session, **common, **resp))


def fixture_records() -> list[dict]:
    """Every record of the fixture week (see the module docstring)."""
    r: list[dict] = []
    # Monday
    _turn(r, "a0000001", day(0, 10), "s-ok", "ok", req={"origin": "https://tpl.nrp-nautilus.io/exp1"},
          tool_calls=TOOL_CALL)
    _turn(r, "a0000002", day(0, 10, 1), "s-ok", "ok",
          req={"origin": "https://tpl.nrp-nautilus.io/exp1", "tool_results": TOOL_RESULT, "message_count": 4},
          content="Here.")
    _turn(r, "a0000003", day(0, 10, 2), "s-ok", "ok", req={"origin": "https://tpl.nrp-nautilus.io/exp1",
                                                          "this_turn": "And Marin?"}, content="Marin: 1.")
    _turn(r, "a0000011", day(0, 12), "s-legacy", "ok", tool_calls=TOOL_CALL)
    _turn(r, "a0000012", day(0, 12, 1), "s-legacy", NAKED_500,
          req={"tool_results": TOOL_RESULT, "this_turn": "q2", "message_count": 4})
    _turn(r, "a0000013", day(0, 12, 2), "s-legacy", NAKED_500,
          req={"tool_results": TOOL_RESULT, "this_turn": "q2", "message_count": 4})
    # Tuesday: the ladder, recovered and exhausted
    r.append(request("a0000021", day(1, 9), session="s-ladder-ok", tool_results=TOOL_RESULT))
    r.append(response_ok("a0000021", day(1, 9, 0.1), session="s-ladder-ok", content="Done.",
                         extra=_ladder_extra("tool_choice_none")))
    r.append(request("a0000031", day(1, 11), session="s-ladder-x", tool_results=TOOL_RESULT))
    r.append(response_error("a0000031", day(1, 11, 0.1), NAKED_500, session="s-ladder-x", extra=_ladder_extra(None)))
    # Wednesday: reasoning eats the budget, then an answer
    _turn(r, "a0000041", day(2, 10), "s-length", "ok", req={"enable_thinking": True}, reasoning="r" * 8000,
          completion_tokens=2048, extra=_length_extra())
    _turn(r, "a0000042", day(2, 10, 1), "s-length", "ok", req={"enable_thinking": True, "this_turn": "again"},
          content="A" * 1000, reasoning="r" * 3000, completion_tokens=1200)
    # Thursday: hostile content and secrets
    xss = {"question": XSS, "client": EVIL_CLIENT, "origin": "https://geo.example.org/run-7"}
    _turn(r, "a0000051", day(3, 15), "s-xss", "ok", req=xss,
          tool_calls=[{"name": "query", "arguments": SECRET_ARGS}])
    _turn(r, "a0000052", day(3, 15, 1), "s-xss", SECRET_ERROR, req={**xss, "tool_results": TOOL_RESULT})
    # Friday: a failure inside the wedged window
    _turn(r, "a0000061", day(4, 8, 10), "s-wedged", NAKED_500, req={"tool_results": TOOL_RESULT})
    # Saturday: another model
    qwen = {"model": "qwen3", "client": None, "origin": None, "enable_thinking": None}
    _turn(r, "a0000071", day(5, 10), "s-qwen", "ok", req=qwen, content="Sure.")
    _turn(r, "a0000072", day(5, 10, 1), "s-qwen", "Request timed out after 1200000ms", req={**qwen, "this_turn": "x"})
    # Sunday: an empty answer with tool history, then a new question
    _turn(r, "a0000081", day(6, 20), "s-empty", "ok", req={"tool_results": TOOL_RESULT}, completion_tokens=1)
    _turn(r, "a0000082", day(6, 20, 1), "s-empty", "ok", req={"this_turn": "something else"}, content="Ok.")
    # The week before
    _turn(r, "b0000001", day(-6, 10), "prev-1", "ok", tool_calls=TOOL_CALL)
    _turn(r, "b0000002", day(-6, 10, 1), "prev-1", NAKED_500, req={"tool_results": TOOL_RESULT, "this_turn": "p"})
    _turn(r, "b0000003", day(-6, 10, 2), "prev-1", "ok", req={"tool_results": TOOL_RESULT, "this_turn": "p"},
          content="Fine.")
    _turn(r, "b0000011", day(-5, 10), "prev-2", "ok", content="Hello.")
    return r


def _naive(dt: datetime) -> datetime:
    return dt.replace(tzinfo=None)


def add_fixture_metrics(con) -> None:
    """Friday's generation counter for glm-5-0 (50 tokens/s, flat 08:00–08:30, reset at 09:00) and the wedge."""
    start = _naive(day(4, 6))
    rows, value = [], 0.0
    for m in range(0, 241):
        if m == 180:
            value = 0.0  # the counter resets (a container restart)
        elif m > 0 and not (120 <= m < 150):
            value += 3000.0
        rows.append(("vllm:generation_tokens_total", "glm-5-0", "glm-5", "10.0.0.5:8000", "vllm", "{}",
                     start + timedelta(minutes=m), value, "fixture"))
    insert_samples(con, rows)  # metric_samples is a view over series and points
    con.execute("INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail) VALUES ('glm-5-0', 'glm-5', 'wedged', ?, ?, 'fixture')",
                [_naive(day(4, 8)), _naive(day(4, 8, 30))])


def build_fixture_db(tmp: Path) -> Path:
    """The fixture week ingested into a fresh database (with its metrics)."""
    db = fresh_db(tmp / "fixture.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    logs = write_jsonl(tmp / "logs" / "week.jsonl", fixture_records())
    with logs.open("a") as f:
        f.write('{"timestamp": "2026-11-20T10:00:00.000000Z", "type": "requ\n')  # a cut-off line: quarantined
    ingest([str(logs)], db=db)
    con = connect(db)
    try:
        add_fixture_metrics(con)
    finally:
        con.close()
    return db


def render_fixture_week(tmp: Path, **options) -> Path:
    """The fixture week's report, written under ``tmp``."""
    return make_report(build_fixture_db(tmp), week=WEEK, output=tmp / "report.html", **options)


def sample_truth() -> dict:
    """What the sample week's report must say, from sample_logs/ground_truth.json.

    The sample is regenerated from a seed (sample_logs/generate.py); deriving the
    expected numbers from its ground truth keeps these golden tests exact across
    regenerations. The analyzer classifies the GLM turns of the sample exactly as
    the ground truth does.
    """
    from analyzer.core.focus import is_glm

    truth = json.loads((SAMPLE_LOGS / "ground_truth.json").read_text())
    start = datetime.fromisoformat(truth["start"].replace("Z", "+00:00"))
    glm = [r for r in truth["requests"].values() if is_glm(r["model"])]
    classes: dict[str, int] = {}
    per_day: dict[str, int] = {}
    for r in glm:
        classes[r["class"]] = classes.get(r["class"], 0) + 1
        ts = datetime.fromisoformat(r["ts"].replace("Z", "+00:00"))
        per_day[ts.strftime("%a %m-%d")] = per_day.get(ts.strftime("%a %m-%d"), 0) + 1
    failed = sum(n for c, n in classes.items() if c != "ok")
    # Tool-session ladders the logs can show (an unanswered turn's ladder never reached a response record).
    ladders = [r["ladder"] for r in glm if r["ladder"] and r["ladder"]["trigger"] != "length-with-no-content"
               and r["class"] != "unanswered"]
    year, week, _ = start.isocalendar()
    return {
        "period": f"{year}-W{week:02d}",
        "focus_models": sorted({r["model"] for r in glm}),
        "turns": len(glm),
        "sessions": len({r["session_id"] for r in glm if r["session_id"]}),
        "failed": failed,
        "failure_classes": {c: n for c, n in classes.items() if c != "ok"},
        "per_day": per_day,
        "per_model": {m: sum(c.values()) for m, c in truth["class_counts"].items()},
        "episodes": [(e["kind"], e["pod"], datetime.fromisoformat(e["start"].replace("Z", "")),
                      datetime.fromisoformat(e["end"].replace("Z", "")), bool(e.get("frozen")))
                     for e in truth["episodes"]],
        "quarantined": len(truth["malformed"]),
        "ladders": len(ladders),
        "recovered": sum(1 for lad in ladders if lad["outcome"] == "recovered"),
    }


def sample_db(tmp: Path) -> Path:
    """The sample week ingested (with its metrics); skips while sample_logs/ is not there."""
    if not (SAMPLE_LOGS / "s3").is_dir():
        pytest.skip("sample_logs/ has not been generated yet")
    db = fresh_db(tmp / "sample.duckdb")  # an empty database, copied (tests/support/fresh_db.py)
    ingest([str(SAMPLE_LOGS / d) for d in ("s3", "kubectl", "consolidated") if (SAMPLE_LOGS / d).exists()], db=db)
    if (SAMPLE_LOGS / "metrics").is_dir():
        from analyzer.jobs.metrics import load_metrics

        con = connect(db)
        try:
            load_metrics(con, [str(SAMPLE_LOGS / "metrics")])
        finally:
            con.close()
    return db


def render_sample_week(tmp: Path) -> Path:
    """The sample week's report, the default way (last complete week, default file name)."""
    return make_report(sample_db(tmp), output=tmp / "sample-report.html")
