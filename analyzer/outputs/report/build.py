"""Build the report's context objects from the database.

Every figure comes from a question of ``queries/`` (run by name, as ``analyze
sql NAME`` runs it): periods, models and limits are ``$named`` parameters,
never pasted into the SQL. The headline numbers come
from :func:`analyzer.outputs.summary.build_summary` (and its sizing block), not
recomputed here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

import duckdb

from analyzer import __version__
from analyzer.classification.turns import ensure_turns
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.isotime import from_iso_utc, parse_time
from analyzer.core.paths import shown_path
from analyzer.core.safetext import terminal_text
from analyzer.core.scrub import scrub, scrub_json, shorten
from analyzer.online import CLASSES
from analyzer.outputs.report import charts
from analyzer.outputs.report.context import (
    Assets,
    Baseline,
    BeforeAfter,
    BeforeAfterRow,
    Breakdown,
    BreakdownRow,
    BreakdownsSection,
    CapRow,
    DeploymentFinding,
    DeploymentSection,
    ClassCount,
    ErrorGroup,
    Headline,
    HeadlineNumbers,
    LadderSection,
    LatencyRow,
    LengthBudgetSection,
    LostKindRow,
    Methods,
    OnCallSection,
    PodThroughput,
    PodWindow,
    PositionRow,
    PositionSection,
    PromptGrowth,
    ProviderIncident,
    QuarantineSample,
    RateLimitBurst,
    ReasoningRow,
    Recovery,
    ReplicaRow,
    ReplicasSection,
    ReportContext,
    RungRow,
    SessionRow,
    SlowModelRow,
    ThroughputSection,
    TimelineBucket,
    TimelineSection,
    TokenRow,
    TopSessionsSection,
    TurnRow,
)
from analyzer.outputs.rows import records
from analyzer.outputs.sizing import wilson
from analyzer.outputs.summary import build_summary
from analyzer.store.asking import ask

#: How many rows a breakdown shows, sessions the top list shows, turns per session.
BREAKDOWN_LIMIT = 12
TOP_SESSIONS = 10
TURNS_PER_SESSION = 25
TEXT_LIMIT = 300
#: The ladder's default answer reserve (analyzer.online.run_ladder), used without data.
DEFAULT_ANSWER_RESERVE = 256
GENERATION_COUNTER = "vllm:generation_tokens_total"
PLOTLY_CDN = "https://cdn.plot.ly/plotly-{version}.min.js"


# ---------------------------------------------------------------------------
# The period


@dataclass(frozen=True)
class Period:
    """The reported range ``[since, until)`` and the one before it, with labels."""

    since: datetime
    until: datetime
    label: str
    previous_since: datetime
    previous_label: str
    file_stem: str


def _range_label(since: datetime, until: datetime) -> str:
    fmt = "%Y-%m-%d" if since.time() == until.time() == datetime.min.time() else "%Y-%m-%d %H:%M"
    return f"{since:{fmt}} – {until:{fmt}}"


def parse_week(week: str) -> date:
    """The Monday of an ISO week written ``2026-W47`` (or ``2026W47``)."""
    m = re.fullmatch(r"\s*(\d{4})-?[Ww](\d{1,2})\s*", week)
    if not m:
        raise AnalyzerError(f"week: expected an ISO week like 2026-W47, got {week!r}", ExitCode.USAGE, param="week")
    try:
        return date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    except ValueError as exc:
        raise AnalyzerError(f"week: no such ISO week: {week!r}", ExitCode.USAGE, param="week") from exc


def _week_period(monday: date) -> Period:
    since = datetime.combine(monday, datetime.min.time())
    year, week, _ = monday.isocalendar()
    prev_year, prev_week, _ = (monday - timedelta(days=7)).isocalendar()
    return Period(since, since + timedelta(days=7), f"{year}-W{week:02d}", since - timedelta(days=7),
                  f"{prev_year}-W{prev_week:02d}", f"{year}-W{week:02d}")


def _as_datetime(value: str | date | datetime | None, name: str) -> datetime | None:
    if value is None or isinstance(value, str):
        return parse_time(value, name)
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).replace(tzinfo=None) if value.tzinfo else value
    return datetime.combine(value, datetime.min.time())


def resolve_period(
    con: duckdb.DuckDBPyConnection,
    *,
    week: str | None = None,
    since: str | date | datetime | None = None,
    until: str | date | datetime | None = None,
) -> Period:
    """The period to report: ``week``, or ``[since, until)``, or the last complete ISO week.

    A week counts as complete when the data reaches its Sunday; when the data
    covers only part of one week, that week is reported (the methods footer
    says the period is partial).
    """
    since_dt, until_dt = _as_datetime(since, "since"), _as_datetime(until, "until")
    if week and (since_dt or until_dt):
        raise AnalyzerError("give either week or since/until, not both", ExitCode.USAGE, param="week",
                            names={"week": "week", "since": "since", "until": "until"})
    if week:
        return _week_period(parse_week(week))
    first, last = _bounds(con)
    if first is None:
        raise AnalyzerError("no turns in the database: ingest some logs first (analyze report FILES...)",
                            ExitCode.NO_INPUT)
    if since_dt or until_dt:
        since_dt = since_dt or datetime.combine(first.date(), datetime.min.time())
        until_dt = until_dt or datetime.combine(last.date(), datetime.min.time()) + timedelta(days=1)
        if until_dt <= since_dt:
            raise AnalyzerError("until must be after since", ExitCode.USAGE, param="until",
                                names={"until": "until", "since": "since"})
        span = until_dt - since_dt
        return Period(since_dt, until_dt, _range_label(since_dt, until_dt), since_dt - span,
                      _range_label(since_dt - span, since_dt), f"{since_dt:%Y-%m-%d}_{until_dt:%Y-%m-%d}")
    last_monday = last.date() - timedelta(days=last.weekday())
    monday = last_monday if last.weekday() == 6 else last_monday - timedelta(days=7)
    if datetime.combine(monday + timedelta(days=7), datetime.min.time()) <= first:
        monday = last_monday  # the data covers part of a single week: report that week
    return _week_period(monday)


# ---------------------------------------------------------------------------
# SQL: the questions of queries/ (all parameters are $named), the methods
# footer's inventory of the database (files, records) included; only the
# migrations it lists (the schema's own bookkeeping) are read here.

_INDEX_BUCKETS = {1: "1", 2: "2", 3: "3–4", 4: "5–8", 5: "9–16", 6: "17–32", 7: "33+"}
_DEPTH_BUCKETS = {1: "0", 2: "1", 3: "2–3", 4: "4–7", 5: "8–15", 6: "16+"}


def _bounds(con: duckdb.DuckDBPyConnection) -> tuple[datetime | None, datetime | None]:
    """The request time of the first and last turn in the database (None, None without turns)."""
    first, last, _turns = next(iter(ask(con, "turn_time_range")), (None, None, 0))
    return first, last


def _scope(p: dict[str, Any], *, models: bool = True) -> dict[str, Any]:
    """The question parameters of the report's scope: the period, and the focus models."""
    return {"since": p["since"], "until": p["until"], **({"models": p.get("models")} if models else {})}


def _rate(k: int, n: int) -> float:
    return round(k / n, 4) if n else 0.0


def _wilson(con: duckdb.DuckDBPyConnection, k: int, n: int) -> tuple[float, float]:
    """The sizing's Wilson interval (the SQL macros), (0, 0) for n = 0."""
    return wilson(con, k, n) or (0.0, 0.0)


def _text(value: str | None, limit: int = TEXT_LIMIT) -> str | None:
    return shorten(scrub(value), limit) if value else None


def _focus_models(con: duckdb.DuckDBPyConnection, p: dict[str, Any]) -> tuple[str, list[str]]:
    found = ask(con, "models_in_scope", _scope(p, models=False))
    models = [m for m, _glm, _n in found]
    glm = [m for m, is_glm, _n in found if is_glm]
    return ("GLM", glm) if glm else ("all models", models)


def _numbers(label: str, summary: dict[str, Any]) -> HeadlineNumbers:
    s = summary["sizing"]
    ok = summary["classes"].get("ok", {}).get("count", 0)
    failed = summary["turns"] - ok
    rec = s["ladder_recovery"]
    return HeadlineNumbers(
        label=label, turns=summary["turns"], sessions=summary["sessions"], failed_turns=failed,
        failure_rate=_rate(failed, summary["turns"]), tool_sessions=s["tool_sessions"],
        sessions_lost=s["sessions_lost"], sessions_lost_to_eligible=s["sessions_lost_to_eligible"],
        ladder_eligible=s["eligible_incidents"], recovery_rate=rec["rate"] if rec else None,
    )


def _recovery(sizing: dict[str, Any]) -> Recovery | None:
    rec = sizing["ladder_recovery"]
    if not rec:
        return None
    low, high = rec["interval"]
    return Recovery(ladders=rec["ladders"], recovered=rec["recovered"], rate=rec["rate"], low=low, high=high,
                    inside_wedged_ladders=rec["inside_wedged_windows"]["ladders"],
                    inside_wedged_recovered=rec["inside_wedged_windows"]["recovered"])


def _baseline(sizing: dict[str, Any]) -> Baseline:
    b = sizing["baseline"]
    total = sum(b.values())
    return Baseline(failures=total, retried_ok=b["retried-ok"], retried_failed=b["retried-failed"],
                    moved_on=b["moved-on"], session_ended=b["session-ended"],
                    rescued_rate=_rate(b["retried-ok"], total) if total else None)


def _headline(focus: str, models: list[str], period: Period, current: dict, previous: dict | None) -> Headline:
    classes = sorted(((c, v) for c, v in current["classes"].items() if c != "ok"),
                     key=lambda cv: (-cv[1]["count"], CLASSES.index(cv[0]) if cv[0] in CLASSES else 99))
    return Headline(
        focus=focus, models=[scrub(m) or "" for m in models], current=_numbers(period.label, current),
        previous=_numbers(period.previous_label, previous) if previous and previous["turns"] else None,
        failure_classes=[ClassCount(incident_class=c, count=v["count"], rate=v["rate"]) for c, v in classes],
        recovery=_recovery(current["sizing"]), baseline=_baseline(current["sizing"]),
        conclusion=current["sizing"]["conclusion"],
    )


def _windows(summary_all: dict[str, Any]) -> list[PodWindow]:
    """The wedged and down windows overlapping the period, from the summary's episodes (every
    model): each failure counted in one window, with the wedged windows' corroboration."""
    out = []
    for e in summary_all["metrics"]["episodes"]:
        if e["kind"] not in ("wedged", "down"):
            continue  # sleeping engines are not failures of the pod
        start, end = from_iso_utc(e["start"]), from_iso_utc(e["end"])
        out.append(PodWindow(
            pod=scrub(e["pod"]) or "", model_name=scrub(e["model_name"]) or "", kind=e["kind"], start=start,
            end=end, minutes=round((end - start).total_seconds() / 60, 1), failures=e["failed_turns"],
            corroboration=scrub((e.get("corroboration") or {}).get("text")),
            alert_at=from_iso_utc(e["alert_at"]) if e.get("alert_at") else None, inferred=bool(e.get("inferred"))))
    return out


def _timeline(con: duckdb.DuckDBPyConnection, p: dict[str, Any], period: Period, windows: list[PodWindow],
              metrics_note: str | None) -> TimelineSection:
    hourly = period.until - period.since <= timedelta(days=2)
    width = timedelta(hours=1) if hourly else timedelta(days=1)
    counts: dict[datetime, dict[str, int]] = {}
    for bucket, cls, n in ask(con, "classes_by_bucket", {**_scope(p), "width": width}):
        counts.setdefault(bucket, {})[cls] = n
    present = {c for per in counts.values() for c in per}
    classes = [c for c in CLASSES if c in present] + sorted(present - set(CLASSES))
    buckets = []
    # Buckets align like time_bucket's: on the hour, or at midnight.
    start = (period.since.replace(minute=0, second=0, microsecond=0) if hourly
             else datetime.combine(period.since.date(), datetime.min.time()))
    while start < period.until:
        per = counts.get(start, {})
        total = sum(per.values())
        failed = total - per.get("ok", 0)
        buckets.append(TimelineBucket(
            start=start, label=start.strftime("%m-%d %H:%M" if hourly else "%a %m-%d"), turns=total, failed=failed,
            failure_rate=_rate(failed, total), counts={c: per.get(c, 0) for c in classes},
        ))
        start += width
    granularity = "hour" if hourly else "day"
    return TimelineSection(granularity=granularity, classes=classes, buckets=buckets, windows=windows,
                           metrics_note=metrics_note,
                           chart=charts.timeline_chart(buckets, classes, windows, granularity))


def _throughput(con: duckdb.DuckDBPyConnection, p: dict[str, Any], period: Period, windows: list[PodWindow],
                metrics_note: str | None) -> ThroughputSection:
    span_minutes = (period.until - period.since).total_seconds() / 60
    # About 500 points per pod: 5-minute buckets for a day, 30 minutes for a week.
    bucket_minutes = next((m for m in (1, 5, 10, 15, 30, 60, 120, 360, 1440) if span_minutes / m <= 500), 1440)
    # Every pod's counter (not only the focus models'); resets and gaps: queries/counter_rules.sql.
    rows = ask(con, "generation_throughput", {**_scope(p, models=False), "width": timedelta(minutes=bucket_minutes)})
    if not rows:
        note = metrics_note or f"no `{GENERATION_COUNTER}` samples in this period"
        return ThroughputSection(available=False, note=note, bucket_minutes=bucket_minutes, pods=[],
                                 windows=windows, chart=None)
    series: dict[tuple[str, str], list[tuple[datetime, float]]] = {}
    for pod, model, bucket, rate in rows:
        series.setdefault((pod, model), []).append((bucket + timedelta(minutes=bucket_minutes / 2), rate or 0.0))
    minutes: dict[tuple[str, str], float] = {
        (pod, kind): m for pod, kind, m in ask(con, "pod_window_minutes", _scope(p, models=False))}
    pods = []
    for (pod, model), points in series.items():
        rates = [r for _, r in points]
        pods.append(PodThroughput(
            pod=scrub(pod) or "", model_name=scrub(model) or "",
            mean_tokens_per_s=round(sum(rates) / len(rates), 1), peak_tokens_per_s=round(max(rates), 1),
            idle_buckets=sum(1 for r in rates if r <= 0),
            wedged_minutes=round(minutes.get((pod, "wedged"), 0.0), 1),
            down_minutes=round(minutes.get((pod, "down"), 0.0), 1),
        ))
    safe_series = {(scrub(pod) or "", scrub(model) or ""): pts for (pod, model), pts in series.items()}
    return ThroughputSection(available=True, note=None, bucket_minutes=bucket_minutes, pods=pods, windows=windows,
                             chart=charts.throughput_chart(safe_series, windows))


def _ladder(sizing: dict[str, Any]) -> LadderSection:
    rungs = []
    for r in sizing["ladder_rungs"]:
        ci, cc = r["conditional_interval"] or (None, None), r["cumulative_interval"] or (None, None)
        rungs.append(RungRow(
            trigger=scrub(r["trigger"]) or "", rung=scrub(r["rung"]) or "", ladders=r["ladders"], reached=r["reached"],
            recovered=r["recovered"], refused=r["refused"], conditional_rate=r["conditional_rate"], conditional_low=ci[0],
            conditional_high=ci[1], cumulative_rate=r["cumulative_rate"], cumulative_low=cc[0],
            cumulative_high=cc[1],
        ))
    baseline = _baseline(sizing)
    chart = charts.ladder_chart(rungs) if rungs else charts.baseline_chart(baseline)
    return LadderSection(
        measured=bool(rungs), rungs=rungs, recovery=_recovery(sizing), baseline=baseline,
        eligible_by_trigger=dict(sorted(sizing["eligible_by_trigger"].items())),
        wedged_or_down_failures=sizing["wedged_or_down_failures"], conclusion=sizing["conclusion"], chart=chart,
        sessions_lost_without_ladder=sizing["sessions_lost_without_ladder"],
        sessions_lost_after_ladder=sizing["sessions_lost_after_ladder"],
        sessions_saved_by_ladder=sizing["sessions_saved_by_ladder"],
        before_after=_before_after(sizing.get("before_after")),
    )


def _before_after(ba: dict[str, Any] | None) -> BeforeAfter | None:
    if not ba:
        return None
    return BeforeAfter(tool_sessions_without=ba["tool_sessions_without"], tool_sessions_with=ba["tool_sessions_with"],
                       classes=[BeforeAfterRow(**{**r, "lost_class": scrub(r["lost_class"]) or ""})
                                for r in ba["classes"]])


_DIMENSIONS = (
    ("model", "By model"),
    ("origin", "By origin (app)"),
    ("client", "By client version"),
    ("thinking", "By thinking on/off"),
)


def _breakdowns(con: duckdb.DuckDBPyConnection, p: dict[str, Any], focus: str,
                summary_all: dict[str, Any]) -> BreakdownsSection:
    items = []
    for dimension, title in _DIMENSIONS:
        if dimension == "model":
            rows = _model_rows(con, summary_all)
            scope = "all models"
        else:
            rows = [
                BreakdownRow(key=scrub(key) or "", turns=turns, sessions=sessions, failed=failed,
                             failure_rate=_rate(failed, turns), failure_low=round(low, 4), failure_high=round(high, 4),
                             ladder_eligible=eligible, top_failure=top)
                for key, turns, sessions, failed, eligible, top, low, high
                in ask(con, "failures_by_dimension", {**_scope(p), "dimension": dimension})
            ]
            scope = f"{focus} turns"
        shown = rows[:BREAKDOWN_LIMIT]
        chart = charts.rate_chart(f"chart-breakdown-{dimension}", f"Failure rate {title.lower()}", shown,
                                  horizontal=True, axis_title=dimension)
        items.append(Breakdown(dimension=dimension, title=title, scope=scope, rows=shown,
                               omitted=max(0, len(rows) - BREAKDOWN_LIMIT), limit=BREAKDOWN_LIMIT, chart=chart))
    growth = {}
    for thinking, _index, _n, _median, _mean, per_turn, mode_turns in ask(con, "prompt_growth", _scope(p)):
        growth[thinking] = PromptGrowth(thinking=thinking, tokens_per_turn=per_turn, turns=mode_turns)
    order = ("on", "off", "default")
    return BreakdownsSection(items=items, prompt_growth=[growth[k] for k in order if k in growth])


def _model_rows(con: duckdb.DuckDBPyConnection, summary_all: dict[str, Any]) -> list[BreakdownRow]:
    """Per model, from the summary (build_summary already counts these)."""
    rows = []
    for m in summary_all["models"]:
        ok = m["classes"].get("ok", {}).get("count", 0)
        failed = m["turns"] - ok
        failures = [(c, v["count"]) for c, v in m["classes"].items() if c != "ok"]
        top = max(failures, key=lambda cv: cv[1])[0] if failures else None
        low, high = _wilson(con, failed, m["turns"])
        rows.append(BreakdownRow(
            key=scrub(m["model"]) or "(none)", turns=m["turns"], sessions=m["sessions"], failed=failed,
            failure_rate=_rate(failed, m["turns"]), failure_low=low, failure_high=high,
            ladder_eligible=m["ladder_addressable_total"], top_failure=top,
        ))
    # Largest first, like the other breakdowns (the summary lists GLM first).
    return sorted(rows, key=lambda r: (-r.turns, r.key))


def _positions(con: duckdb.DuckDBPyConnection, p: dict[str, Any]) -> PositionSection:
    by: dict[str, list[PositionRow]] = {"index": [], "depth": []}
    for axis, bucket, turns, failed, eligible in ask(con, "failures_by_position", _scope(p)):
        low, high = _wilson(con, failed, turns)
        label = (_INDEX_BUCKETS if axis == "index" else _DEPTH_BUCKETS)[bucket]
        by[axis].append(PositionRow(bucket=label, turns=turns, failed=failed, failure_rate=_rate(failed, turns),
                                    failure_low=low, failure_high=high, ladder_eligible=eligible))
    return PositionSection(
        by_turn_index=by["index"], by_tool_depth=by["depth"],
        turn_index_chart=charts.rate_chart("chart-position-index", "Failure rate by position in the session",
                                           by["index"], horizontal=False, axis_title="turn index"),
        tool_depth_chart=charts.rate_chart("chart-position-depth", "Failure rate by tool-history depth",
                                           by["depth"], horizontal=False,
                                           axis_title="earlier turns that called tools"),
    )


def _median(values: list[int]) -> int | None:
    if not values:
        return None
    s = sorted(values)
    return s[(len(s) - 1) // 2]


def _length_budget(con: duckdb.DuckDBPyConnection, p: dict[str, Any]) -> LengthBudgetSection:
    # (completion tokens, reasoning chars, cap, cap logged, request id, time, evidence) per failure.
    failures = [(r["completion_tokens"], r["reasoning_chars"] or 0,
                 r["max_tokens"] if r["max_tokens"] is not None else r["completion_tokens"],
                 r["max_tokens"] is not None, r["request_id"], r["ts"], r["evidence"])
                for r in records(con, "length_no_content", _scope(p))]
    thinking, answered, completion_p50, completion_p95, answer_p95 = next(
        iter(ask(con, "thinking_answers", _scope(p))), (0, 0, None, None, None))
    answer_p95 = int(answer_p95) if answer_p95 is not None else None
    reserve = max(64, math.ceil(answer_p95 / 64) * 64) if answer_p95 else DEFAULT_ANSWER_RESERVE
    per_cap: dict[int, list[tuple]] = {}
    for row in failures:
        if row[2] is not None:
            per_cap.setdefault(int(row[2]), []).append(row)
    caps = [
        CapRow(cap=cap, turns=len(rows), logged=sum(1 for r in rows if r[3]),
               median_reasoning_chars=_median([r[1] for r in rows]),
               suggested_thinking_budget=max(0, cap - reserve - 2))
        for cap, rows in sorted(per_cap.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    n = len(failures)
    if not n:
        conclusion = "No turn ran out of tokens before answering in this period."
    else:
        top = caps[0] if caps else None
        conclusion = (
            f"{n} turn{'s' if n != 1 else ''} spent the whole completion budget on reasoning"
            + (f", most at max_tokens {top.cap}" if top else "")
            + f". Keeping {reserve} tokens for the answer"
            + (f" means a thinking_token_budget of {top.suggested_thinking_budget} at that cap" if top else "")
            + (f"; {completion_p95} completion tokens covered 95% of answered thinking turns" if completion_p95 else "")
            + "."
        )
    points = ask(con, "thinking_points", {**_scope(p), "limit": 3000})
    return LengthBudgetSection(
        turns=n, thinking_turns=thinking, share_of_thinking=_rate(n, thinking),
        inferred=sum(1 for r in failures if r[6] == "inferred"),
        median_reasoning_chars=_median([r[1] for r in failures]),
        answered_turns=answered, answered_completion_p50=completion_p50, answered_completion_p95=completion_p95,
        answer_tokens_p95=answer_p95, answer_reserve=reserve, caps=caps, conclusion=conclusion,
        chart=charts.length_chart([(r[0], r[1], r[2], r[4], r[5]) for r in failures], points, reserve),
    )


def _tool_calls_text(raw: str | None) -> str | None:
    if not raw:
        return None
    try:
        calls = json.loads(raw)
    except ValueError:
        return _text(raw)
    if not isinstance(calls, list) or not calls:
        return None
    parts = []
    for call in calls:
        if not isinstance(call, dict):
            parts.append(json.dumps(scrub_json(call), ensure_ascii=False))
            continue
        fn = call.get("function") if isinstance(call.get("function"), dict) else call
        name = fn.get("name") or "?"
        args = scrub_json(fn.get("arguments"), "arguments")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        parts.append(f"{scrub(str(name))}({args})")
    return shorten("; ".join(parts), TEXT_LIMIT)


def _top_sessions(con: duckdb.DuckDBPyConnection, p: dict[str, Any]) -> TopSessionsSection:
    top = ask(con, "failing_sessions", {**_scope(p), "limit": TOP_SESSIONS})
    turns: dict[str, list[tuple]] = {}
    if top:
        for row in ask(con, "session_turns", {"sessions": [r[0] for r in top]}):
            turns.setdefault(row[0], []).append(row)
    sessions = []
    for (sid, model, origin, client, first_ts, last_ts, n, failed, recovered, last_class, ended) in top:
        rows = turns.get(sid, [])
        keep = [r for i, r in enumerate(rows) if r[5] != "ok" or r[8] is not None or i in (0, len(rows) - 1)]
        keep = keep[:TURNS_PER_SESSION]
        sessions.append(SessionRow(
            session_id=scrub(sid) or "", model=scrub(model), origin=_text(origin, 120), client=_text(client, 120),
            first_ts=first_ts, last_ts=last_ts, turns=n, failed_turns=failed, recovered_turns=recovered,
            last_class=last_class, ended_on_failure=bool(ended),
            turn_rows=[
                TurnRow(turn_index=r[1], request_id=scrub(r[2]) or "", ts=r[3], model=scrub(r[4]) or "",
                        incident_class=r[5], evidence=r[6], status=r[7], recovered_at=scrub(r[8]), latency_ms=r[9],
                        error=_text(r[10]), question=_text(r[11]), tool_calls=_tool_calls_text(r[12]))
                for r in keep
            ],
            hidden_turns=n - len(keep),
        ))
    return TopSessionsSection(limit=TOP_SESSIONS, sessions=sessions)


#: Error patterns the report shows (engine crashes always, on top of these).
ONCALL_ERROR_GROUPS = 15


def _oncall(block: dict[str, Any]) -> OnCallSection:
    """The on-call section from the summary's ``oncall`` block (all models; log text already redacted)."""
    groups = [g for i, g in enumerate(block["error_groups"]) if i < ONCALL_ERROR_GROUPS or g["engine_crash"]]
    latency = [LatencyRow(model=r["model"] or "(none)", provider=r["provider"] or "(none)", turns=r["turns"],
                          timed_turns=r["timed_turns"], p50_ms=r["p50_ms"], p95_ms=r["p95_ms"], p99_ms=r["p99_ms"],
                          max_ms=r["max_ms"])
               for r in block["latency"]]
    return OnCallSection(
        incidents=[ProviderIncident(incident=i["incident"] or "", scope=i["scope"], models=i["models"] or "",
                                    symptom=i["symptom"], first=from_iso_utc(i["first"]), last=from_iso_utc(i["last"]))
                   for i in block["incidents"]],
        incident_min_calls=block["parameters"]["incident_min_calls"],
        engine_crash_turns=block["engine_crash_turns"],
        bursts=[RateLimitBurst(provider=b["provider"] or "(none)", model=b["model"] or "(none)",
                               start=from_iso_utc(b["start"]), end=from_iso_utc(b["end"]), duration_s=b["duration_s"],
                               rate_limited_turns=b["rate_limited_turns"], calls_in_window=b["calls_in_window"],
                               ok_in_window=b["ok_in_window"])
                for b in block["rate_limit_bursts"]],
        burst_gap_s=block["parameters"]["burst_gap_s"],
        latency=latency,
        tokens=[TokenRow(model=r["model"] or "(none)", providers=r["providers"] or "", turns=r["turns"],
                         turns_with_usage=r["turns_with_usage"], prompt_tokens=r["prompt_tokens"],
                         completion_tokens=r["completion_tokens"], cached_tokens=r["cached_tokens"],
                         mean_completion_tokens=r["mean_completion_tokens"])
                for r in block["tokens"]],
        error_groups=[ErrorGroup(pattern=shorten(g["pattern"], TEXT_LIMIT) or "", turns=g["turns"],
                                 models=g["models"] or "", main_class=g["main_class"] or "",
                                 engine_crash=g["engine_crash"], last=from_iso_utc(g["last"]),
                                 example_request_id=g["example_request_id"] or "")
                      for g in groups],
        error_groups_omitted=len(block["error_groups"]) - len(groups) + block["error_groups_omitted"],
    )


def _log_label(value: str | None, missing: str) -> str:
    """A name taken from the logs (a pod, a model): redacted, control characters shown escaped."""
    return terminal_text(value) if value is not None else missing


def _deployment(summary_all: dict[str, Any]) -> DeploymentSection:
    """The summary's ``deployment`` block (every model), names and messages redacted."""
    d = summary_all["deployment"]
    return DeploymentSection(
        findings=[DeploymentFinding(kind=f["kind"], model=_log_label(f["model"], "(none)"), turns=f["turns"],
                                    message=scrub(f["message"]) or "") for f in d["findings"]],
        reasoning=[ReasoningRow(model=_log_label(r["model"], "(none)"),
                                **{k: r[k] for k in ("answer_in_reasoning", "answer_in_reasoning_tool_history",
                                                     "reasoning_leaked", "leaked_after_thinking_off", "repaired")})
                   for r in d["reasoning"]],
        repaired=d["repaired"],
    )


def _replicas(con: duckdb.DuckDBPyConnection, summary_all: dict[str, Any]) -> ReplicasSection:
    """Replicas and lost records, from the summary's ``replicas``, ``lost_records`` and ``slow_completions``."""
    rows = []
    for r in summary_all["replicas"]:
        low, high = _wilson(con, r["failed"], r["turns"])
        rows.append(ReplicaRow(replica=_log_label(r["proxy_pod"], "(not said)"), turns=r["turns"], failed=r["failed"],
                               failure_rate=r["failure_rate"], failure_low=low, failure_high=high,
                               slow_warnings=r["slow_warnings"], lost_records=r["lost_records"]))
    lost = summary_all["lost_records"]
    slow = summary_all["slow_completions"]
    return ReplicasSection(
        replicas=rows,
        lost=[LostKindRow(kind=k["kind"], meaning=k["meaning"], events=k["events"], lost=k["lost"])
              for k in lost["by_kind"]],
        lost_total=lost["total"],
        # A report's period is always bounded: lines without a time cannot be placed in it.
        untimed_events=lost["untimed_events"],
        slow=[SlowModelRow(model=_log_label(m["model"], "(none)"), warnings=m["warnings"],
                           turns_flagged=m["turns_flagged"], failed_flagged=m["failed_flagged"], max_ms=m["max_ms"])
              for m in slow["by_model"]],
        slow_note=slow["note"],
    )


def _versions() -> dict[str, str]:
    import platform

    import jinja2
    import plotly
    import plotly.offline
    import pydantic

    return {
        "analyzer": __version__, "duckdb": duckdb.__version__, "plotly": plotly.__version__,
        "plotly.js": plotly.offline.get_plotlyjs_version(), "jinja2": jinja2.__version__,
        "pydantic": pydantic.VERSION, "python": platform.python_version(),
    }


def _methods(con: duckdb.DuckDBPyConnection, p: dict[str, Any], period: Period, summary_all: dict[str, Any],
             generated_at: datetime) -> Methods:
    first, last = _bounds(con)
    forms = ask(con, "input_files_by_form")
    n_files, n_bytes = sum(r[1] for r in forms), sum(r[4] for r in forms)
    records = next(iter(ask(con, "records_held")), (None, None, 0))[2]
    # The schema's bookkeeping, not a question: which migrations made this database.
    migrations = [name for (name,) in con.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]
    # Partial: the data starts after the period's first day or ends before its last day.
    partial = (first is None or first >= period.since + timedelta(days=1)
               or last < period.until - timedelta(days=1))
    return Methods(
        since=period.since, until=period.until, data_first=first, data_last=last, partial_period=partial,
        input_files=n_files, input_forms={form: n for form, n, *_rest in forms}, input_bytes=int(n_bytes),
        # As the user gave them (relative to where analyze runs): a report is shared, so it
        # carries no absolute path of this machine for an input given relatively.
        input_examples=[scrub(shown_path(path)) or "" for (path,) in ask(con, "input_file_examples", {"limit": 5})],
        records=records, turns=summary_all["turns"], inferred_turns=summary_all["inferred"]["turns"],
        inferred_share=summary_all["inferred"]["share"],
        truncated_turns=next(iter(ask(con, "truncated_turns", _scope(p, models=False))), (0,))[0],
        quarantined_lines=summary_all["quarantined_lines"],
        quarantine_samples=[QuarantineSample(path=scrub(shown_path(s["path"])) or "", line_no=s["line_no"],
                                             reason=scrub(s["reason"]) or "")
                            for s in summary_all["quarantine_samples"]],
        metric_samples=summary_all["metrics"]["samples"], pod_windows=summary_all["metrics"]["windows"],
        metrics_note=summary_all["metrics"]["note"], versions=_versions(), migrations=migrations,
        generated_at=generated_at,
    )


def plotly_assets(plotly: str = "inline") -> Assets:
    """plotly.js embedded inline (default) or linked from its CDN (``plotly="cdn"``)."""
    from plotly import offline

    version = offline.get_plotlyjs_version()
    if plotly == "inline":
        return Assets(plotly_js=offline.get_plotlyjs(), plotly_cdn_url=None, plotly_js_version=version)
    if plotly == "cdn":
        return Assets(plotly_js=None, plotly_cdn_url=PLOTLY_CDN.format(version=version), plotly_js_version=version)
    raise AnalyzerError(f"plotly must be 'inline' or 'cdn', not {plotly!r}", ExitCode.USAGE)


def build_context(
    con: duckdb.DuckDBPyConnection,
    period: Period,
    *,
    plotly: str = "inline",
    generated_at: datetime | None = None,
    refresh: bool = True,
) -> ReportContext:
    """Every section of the report for ``period``, from the database.

    ``refresh=False`` reads ``turns`` as it is (a lake holds the classes as exported).
    """
    if refresh:
        ensure_turns(con)  # every query below reads one materialized copy of `turns`
    p: dict[str, Any] = {"since": period.since, "until": period.until}
    focus, models = _focus_models(con, p)
    if not models:
        first, last = _bounds(con)
        raise AnalyzerError(f"no turns in {period.label}; the data covers {first:%Y-%m-%d %H:%M} .. "
                            f"{last:%Y-%m-%d %H:%M} UTC", ExitCode.NO_INPUT)
    p["models"] = models
    # The on-call section covers every model: it comes from summary_all alone.
    # `turns` is current (or, from a lake, as exported): the summaries read it as it is.
    summary_focus = build_summary(con, models=models, since=period.since, until=period.until, with_oncall=False,
                                  refresh=False)
    summary_prev = build_summary(con, models=models, since=period.previous_since, until=period.since,
                                 with_oncall=False, refresh=False)
    summary_all = build_summary(con, since=period.since, until=period.until, refresh=False)
    windows = _windows(summary_all)
    focus_metric_models = {scrub(m) for (m,) in ask(con, "metric_models", _scope(p))}
    metrics_note = summary_all["metrics"]["note"]
    generated_at = generated_at or datetime.now(timezone.utc).replace(tzinfo=None, microsecond=0)
    return ReportContext(
        title=f"LLM proxy weekly report — {period.label}",
        period=period.label,
        headline=_headline(focus, models, period, summary_focus, summary_prev),
        timeline=_timeline(con, p, period, [w for w in windows if w.model_name in focus_metric_models], metrics_note),
        throughput=_throughput(con, p, period, windows, metrics_note),
        ladder=_ladder(summary_focus["sizing"]),
        breakdowns=_breakdowns(con, p, focus, summary_all),
        positions=_positions(con, p),
        length_budget=_length_budget(con, p),
        top_sessions=_top_sessions(con, p),
        deployment=_deployment(summary_all),
        oncall=_oncall(summary_all["oncall"]),
        replicas=_replicas(con, summary_all),
        methods=_methods(con, p, period, summary_all, generated_at),
        assets=plotly_assets(plotly),
    )

