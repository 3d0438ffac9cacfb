"""The sizing summary: how big each failure class is, and what the ladder could address."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import duckdb

from .metrics import wedged_episodes
from .online import CLASSES

_FILTERED_TURNS = """
CREATE TEMP TABLE summary_turns AS
SELECT * FROM turns
WHERE ($models IS NULL OR list_contains($models, model))
  AND ($since IS NULL OR ts >= $since)
  AND ($until IS NULL OR ts < $until)
"""


def _drop_summary_turns(con: duckdb.DuckDBPyConnection) -> None:
    """Forget the last summary's scope (a temp table when filtered, else a view)."""
    for kind in ("VIEW", "TABLE"):
        try:
            con.execute(f"DROP {kind} IF EXISTS temp.summary_turns")
        except duckdb.CatalogException:  # it is the other kind
            pass


def is_glm(model: str | None) -> bool:
    """GLM models are the focus: they are listed first everywhere."""
    return bool(model) and "glm" in model.lower()


# An age relative to now, for --since/--until: 90s, 30m, 24h, 7d, 2w.
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$", re.I)
_AGE_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(value: str | None, name: str, now: datetime | None = None) -> datetime | None:
    """Parse a bound: ISO 8601 (a date, or a date and time; UTC unless an offset is given),
    or an age before now such as ``24h`` or ``7d`` (``s``, ``m``, ``h``, ``d``, ``w``).

    Returns naive UTC.
    """
    if value is None:
        return None
    from datetime import timedelta, timezone

    from .errors import AnalyzerError, ExitCode

    age = _AGE.match(value)
    if age:
        now = now or datetime.now(timezone.utc).replace(tzinfo=None)
        return now - timedelta(seconds=float(age.group(1)) * _AGE_SECONDS[age.group(2).lower()])
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise AnalyzerError(f"{name}: not an ISO-8601 date or time, nor an age such as 24h or 7d: {value!r}",
                            ExitCode.USAGE, param=name) from exc
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


def parse_range(since: str | None, until: str | None) -> tuple[datetime | None, datetime | None]:
    """``--since``/``--until`` as naive UTC; an empty or reversed range is a usage error."""
    from datetime import timezone

    from .errors import AnalyzerError, ExitCode

    now = datetime.now(timezone.utc).replace(tzinfo=None)  # one "now" for both ages
    since_dt, until_dt = parse_time(since, "since", now), parse_time(until, "until", now)
    if since_dt is not None and until_dt is not None and since_dt >= until_dt:
        raise AnalyzerError(f"--since {since} is not before --until {until}: the range "
                            f"[{since_dt.isoformat()}Z, {until_dt.isoformat()}Z) is empty", ExitCode.USAGE)
    return since_dt, until_dt


def like_match(value: str | None, pattern: str) -> bool:
    """SQL ``ILIKE`` in Python: ``%`` any run, ``_`` any one character, case-insensitive.

    The model patterns of ``--model`` (summary), ``--only-model`` (replay) and the
    ``model`` parameter of ``analyze sql`` questions all mean this.
    """
    if value is None:
        return False
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, re.I | re.S) is not None


def resolve_models(con: duckdb.DuckDBPyConnection, patterns: list[str] | None) -> list[str] | None:
    """The models the ``--model`` patterns name (``ILIKE``, as in ``analyze sql``), or None for all.

    Raises:
        AnalyzerError: (usage) a pattern that matches no model in the database; the
            message lists the models it holds.
    """
    if not patterns:
        return None
    from .errors import AnalyzerError, ExitCode

    known = con.execute("SELECT model, count(*) FROM turns WHERE model IS NOT NULL "
                        "GROUP BY model ORDER BY count(*) DESC, model").fetchall()
    chosen: list[str] = []
    for pattern in patterns:
        hits = [m for m, _ in known if like_match(m, pattern)]
        if not hits:
            import difflib

            from .safetext import terminal_text

            names = [m for m, _ in known]
            close = difflib.get_close_matches(pattern, names, n=1, cutoff=0.6)
            listing = ", ".join(f"{terminal_text(m)} ({n:,} turns)" for m, n in known[:12]) or "none"
            raise AnalyzerError(
                f"--model {pattern!r} matches no model in the database"
                + (f"; did you mean {terminal_text(close[0])!r}?" if close else "")
                + f" The models are: {listing}{' ...' if len(known) > 12 else ''} "
                "(a name, or a LIKE pattern such as 'glm%')", ExitCode.USAGE)
        chosen += [m for m in hits if m not in chosen]
    return chosen


def filter_notes(summary: dict[str, Any]) -> list[str]:
    """What a filtered summary does not filter, said once each (empty when unfiltered)."""
    f = summary.get("filters") or {}
    if not (f.get("models") or f.get("since") or f.get("until")):
        return []
    notes = []
    if summary.get("quarantined_lines"):
        notes.append("quarantined lines are counted over the whole database (a malformed line has no model or time)")
    if summary.get("ingest"):
        notes.append("the ingest line counts this run's files, whatever the filter")
    if f.get("models") and (summary.get("metrics") or {}).get("samples"):
        notes.append("metric samples and windows are counted for every pod; the episodes are filtered")
    return notes


def build_summary(
    con: duckdb.DuckDBPyConnection,
    *,
    models: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    with_oncall: bool = True,
) -> dict[str, Any]:
    """Compute the sizing summary over the (filtered) turns in the database.

    Returns a JSON-ready dict; ``analyze --json`` prints exactly this.
    ``with_oncall=False`` leaves out the on-call block (``oncall`` is None), for
    callers that take it from another summary.
    """
    from .turns import ensure_turns

    ensure_turns(con)
    _drop_summary_turns(con)
    if models or since or until:
        con.execute(_FILTERED_TURNS, {"models": models or None, "since": since, "until": until})
    else:  # no filter: read the table itself, rather than copy every column of it
        con.execute("CREATE TEMP VIEW summary_turns AS SELECT * FROM turns")
    q = lambda sql, p=None: con.execute(sql, p or {}).fetchall()  # noqa: E731

    (turns, sessions, first, last, inferred, addressable) = q(
        """SELECT count(*), count(DISTINCT session_id), min(ts), max(ts),
                  count(*) FILTER (WHERE evidence = 'inferred'),
                  count(*) FILTER (WHERE ladder_trigger IS NOT NULL)
           FROM summary_turns"""
    )[0]

    per_model = []
    for model, n, n_sessions, n_tool_sessions in sorted(
        q("""SELECT model, count(*), count(DISTINCT session_id),
                    count(DISTINCT session_id) FILTER (WHERE tool_history)
             FROM summary_turns GROUP BY model"""),
        key=lambda r: (not is_glm(r[0]), -r[1], r[0] or ""),  # GLM first, busiest first
    ):
        per_model.append({"model": model, "turns": n, "sessions": n_sessions, "tool_sessions": n_tool_sessions})

    by_class: dict[tuple, int] = {
        (m, c): n for m, c, n in q("SELECT model, incident_class, count(*) FROM summary_turns GROUP BY ALL")
    }
    triggers = {
        (m, t): n
        for m, t, n in q(
            "SELECT model, ladder_trigger, count(*) FROM summary_turns WHERE ladder_trigger IS NOT NULL GROUP BY ALL"
        )
    }
    ended = {
        m: (n, f)
        for m, n, f in q(
            # Sessions that started in the range (as the sizing counts them), by the
            # model of their last turn.
            """SELECT s.model, count(*), count(*) FILTER (WHERE s.ended_on_failure)
               FROM sessions s
               WHERE ($models IS NULL OR list_contains($models, s.model))
                 AND ($since IS NULL OR s.first_ts >= $since) AND ($until IS NULL OR s.first_ts < $until)
               GROUP BY ALL""",
            {"models": models or None, "since": since, "until": until},
        )
    }
    for row in per_model:
        m = row["model"]
        counts = {c: by_class.get((m, c), 0) for c in CLASSES if by_class.get((m, c), 0)}
        row["classes"] = {
            c: {"count": n, "rate": round(n / row["turns"], 4)} for c, n in counts.items()
        }
        row["ladder_addressable"] = {t: n for (mm, t), n in triggers.items() if mm == m}
        row["ladder_addressable_total"] = sum(row["ladder_addressable"].values())
        row["sessions_ended_on_failure"] = ended.get(m, (0, 0))[1]

    totals = {c: sum(n for (m, cc), n in by_class.items() if cc == c) for c in CLASSES}
    quarantined = q("SELECT count(*) FROM quarantine")[0][0]
    samples = [
        {"path": p, "line_no": n, "reason": r}
        for p, n, r in q("SELECT path, line_no, reason FROM quarantine ORDER BY path, line_no LIMIT 5")
    ]
    n_samples, n_windows = q("SELECT (SELECT count(*) FROM metric_samples), (SELECT count(*) FROM pod_windows)")[0]
    ended_total = sum(f for _, f in ended.values())
    from .sizing import build_sizing

    sizing = build_sizing(con, {"models": models or None, "since": since, "until": until})
    return {
        "time_range": {
            "first": first.isoformat() + "Z" if first else None,
            "last": last.isoformat() + "Z" if last else None,
        },
        "filters": {
            "models": models or None,
            "since": since.isoformat() + "Z" if since else None,
            "until": until.isoformat() + "Z" if until else None,
        },
        "turns": turns,
        "sessions": sessions,
        "classes": {c: {"count": n, "rate": round(n / turns, 4) if turns else 0.0} for c, n in totals.items() if n},
        "models": per_model,
        "ladder_addressable": addressable,
        "sessions_ended_on_failure": ended_total,
        "inferred": {"turns": inferred, "share": round(inferred / turns, 4) if turns else 0.0},
        "quarantined_lines": quarantined,
        "quarantine_samples": samples,
        "sizing": sizing,
        "oncall": oncall_summary(con, models=models, since=since, until=until) if with_oncall else None,
        "skipped_files": skipped_files_summary(con),
        "lost_records": lost_records_summary(con, since=since, until=until),
        "slow_completions": slow_completions_summary(con, models=models, since=since, until=until),
        "replicas": replicas_summary(con, since=since, until=until),
        "metrics": {
            "episodes": wedged_episodes(con, models=models, since=since, until=until) if n_windows else [],
            "samples": n_samples,
            "windows": n_windows,
            "note": None
            if n_samples
            else "no metrics given: wedged-pod and pod-down cannot be told apart from other failures (use --metrics)",
        },
    }


# ---------------------------------------------------------------------------
# What the inputs and the proxy itself say: skipped files, lost records, slow
# completions, replicas (issue 11). Each reads the summary's filters; the
# per-replica figures read the `summary_turns` table build_summary made.

#: What each kind of proxy_events line means, for the lines that say records were lost.
LOST_KINDS: dict[str, str] = {
    "buffer-dropped": "the S3 buffer overflowed during an outage and dropped its oldest records",
    "logging-imbalance": "a flush window logged fewer responses than requests (the shortfall)",
    "log-response-failed": "log_response raised: that response record was not written",
    "log-request-failed": "log_request raised: that request record was not written",
    "flush-failed": "an S3 flush failed; its records were re-queued (lost only if the buffer then overflowed)",
    "log-failures": "the proxy's alarm after repeated logging failures (already counted line by line)",
}

# proxy_events, each event once: a stdout file read again after it grew holds the
# same (file, line); the same stamped line in two files is the same event.
_EVENTS_ONCE = """
WITH by_line AS (
    SELECT * FROM proxy_events
    QUALIFY row_number() OVER (PARTITION BY file_id, line_no ORDER BY kind) = 1
)
SELECT * FROM by_line
QUALIFY ts IS NULL
     OR row_number() OVER (PARTITION BY kind, ts, proxy_pod, text ORDER BY file_id, line_no) = 1
"""

# Events in the period: with a time inside [since, until); without a time only
# when the period is open (nothing places them in a bounded one).
_EVENT_IN_PERIOD = """
    (($since IS NULL AND $until IS NULL) OR ts IS NOT NULL)
    AND ($since IS NULL OR ts >= $since) AND ($until IS NULL OR ts < $until)
"""


def skipped_files_summary(con: duckdb.DuckDBPyConnection, *, limit: int = 5) -> dict[str, Any]:
    """How many files the database keeps in ``skipped_files``, and the latest few (path, reason, when).

    The files skipped by *this* run are in the ingest report (``summary["ingest"]["skipped_files"]``).
    """
    kept = con.execute("SELECT count(*) FROM skipped_files").fetchall()[0][0]
    latest = [
        {"path": p, "reason": r, "seen_at": t.isoformat() + "Z" if t else None}
        for p, r, t in con.execute(
            "SELECT path, reason, seen_at FROM skipped_files ORDER BY seen_at DESC NULLS LAST, path LIMIT $limit",
            {"limit": limit},
        ).fetchall()
    ]
    return {"kept": kept, "latest": latest}


def lost_records_summary(
    con: duckdb.DuckDBPyConnection, *, since: datetime | None = None, until: datetime | None = None
) -> dict[str, Any]:
    """How many records the proxy itself says it lost in the period, by kind of line (``proxy_events.lost``).

    Every model: the lines do not say which model a lost record was for. Lines
    without a time (stdout read without ``--timestamps``) count only when the
    period is open; ``untimed_events`` says how many there are either way.
    """
    kinds = list(LOST_KINDS)
    rows = con.execute(
        f"""SELECT kind, count(*), coalesce(sum(lost), 0)::BIGINT, count(*) FILTER (WHERE ts IS NULL)
            FROM ({_EVENTS_ONCE}) e
            WHERE list_contains($kinds, kind) AND {_EVENT_IN_PERIOD}
            GROUP BY kind""",
        {"kinds": kinds, "since": since, "until": until},
    ).fetchall()
    untimed = con.execute(
        f"SELECT count(*) FROM ({_EVENTS_ONCE}) e WHERE list_contains($kinds, kind) AND ts IS NULL",
        {"kinds": kinds},
    ).fetchall()[0][0]
    order = {k: i for i, k in enumerate(kinds)}
    by_kind = [{"kind": k, "events": n, "lost": lost, "meaning": LOST_KINDS[k]}
               for k, n, lost, _ in sorted(rows, key=lambda r: order[r[0]])]
    open_period = since is None and until is None
    note = None
    if untimed and open_period:
        note = (f"{untimed:,} of these line(s) carry no time (stdout read without --timestamps): "
                "counted because the period is open")
    elif untimed:
        note = (f"{untimed:,} such line(s) carry no time (stdout read without --timestamps): "
                "not counted in a bounded period")
    return {
        "total": sum(r["lost"] for r in by_kind),
        "events": sum(r["events"] for r in by_kind),
        "by_kind": by_kind,
        "untimed_events": untimed,
        "untimed_counted": open_period,
        "note": note,
    }


def slow_completions_summary(
    con: duckdb.DuckDBPyConnection,
    *,
    models: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    """The proxy's slow-completion warnings in the period, and the turns they flag (view ``slow_turns``).

    A warning says the deployment's threshold was passed, so the caller may have
    given up; it is a flag on the turn, not a failure class.
    """
    p = {"models": models or None, "since": since, "until": until}
    warned = {
        m: (n, mx) for m, n, mx in con.execute(
            f"""SELECT model, count(*), max(value) FROM ({_EVENTS_ONCE}) e
                WHERE kind = 'slow-completion' AND ($models IS NULL OR list_contains($models, model))
                  AND {_EVENT_IN_PERIOD}
                GROUP BY model""", p).fetchall()
    }
    flagged = {
        m: (n, f) for m, n, f in con.execute(
            """SELECT model, count(*), count(*) FILTER (WHERE incident_class <> 'ok') FROM slow_turns
               WHERE slow_warning AND ($models IS NULL OR list_contains($models, model))
                 AND ($since IS NULL OR ts >= $since) AND ($until IS NULL OR ts < $until)
               GROUP BY model""", p).fetchall()
    }
    by_model = []
    for m in sorted(set(warned) | set(flagged), key=lambda m: (not is_glm(m), m or "")):
        n, mx = warned.get(m, (0, None))
        t, f = flagged.get(m, (0, 0))
        by_model.append({"model": m, "warnings": n, "turns_flagged": t, "failed_flagged": f, "max_ms": mx})
    return {
        "warnings": sum(r["warnings"] for r in by_model),
        "turns_flagged": sum(r["turns_flagged"] for r in by_model),
        "by_model": by_model,
        "note": "a warning that the completion passed the deployment's client-side threshold "
                "(the caller may have given up): a flag, not a failure",
    }


def replicas_summary(
    con: duckdb.DuckDBPyConnection, *, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, Any]]:
    """Turns, failures, slow warnings and lost records per proxy replica (``proxy_pod``).

    Empty when no turn in scope says its replica (S3 chunks of older proxies,
    single-pod stdout). Turns whose replica is not known are one row with
    ``proxy_pod`` None. Reads ``summary_turns`` (build_summary's filtered turns).
    """
    if not con.execute("SELECT count(*) FROM summary_turns WHERE proxy_pod IS NOT NULL").fetchall()[0][0]:
        return []
    turns = {
        pod: (n, f) for pod, n, f in con.execute(
            "SELECT proxy_pod, count(*), count(*) FILTER (WHERE incident_class <> 'ok') FROM summary_turns GROUP BY ALL"
        ).fetchall()
    }
    slow = dict(con.execute(
        """SELECT s.proxy_pod, count(*) FROM slow_turns s
           SEMI JOIN summary_turns t ON t.request_id = s.request_id AND t.ts = s.ts
                AND t.session_id IS NOT DISTINCT FROM s.session_id
           WHERE s.slow_warning GROUP BY ALL""").fetchall())
    lost = dict(con.execute(
        f"""SELECT proxy_pod, coalesce(sum(lost), 0)::BIGINT FROM ({_EVENTS_ONCE}) e
            WHERE list_contains($kinds, kind) AND {_EVENT_IN_PERIOD} GROUP BY ALL""",
        {"kinds": list(LOST_KINDS), "since": since, "until": until}).fetchall())
    pods = set(turns) | {p for p, n in lost.items() if n and p is not None}
    rows = []
    for pod in sorted(pods, key=lambda p: (p is None, p or "")):
        n, f = turns.get(pod, (0, 0))
        rows.append({"proxy_pod": pod, "turns": n, "failed": f, "failure_rate": round(f / n, 4) if n else 0.0,
                     "slow_warnings": slow.get(pod, 0), "lost_records": lost.get(pod, 0)})
    return rows


# ---------------------------------------------------------------------------
# What on-call people look for (the summary's `oncall` block; analyzer.oncall)


def oncall_summary(
    con: duckdb.DuckDBPyConnection,
    *,
    models: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    """The summary's ``oncall`` block: :func:`analyzer.oncall.build_oncall` with the summary's filters."""
    from .oncall import build_oncall

    return build_oncall(con, models=models, since=since, until=until)
