"""The sizing summary: how big each failure class is, and what the ladder could address."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

from analyzer.classification.turns import ensure_turns
from analyzer.classification.windows import wedged_episodes
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.focus import is_glm, like_match
from analyzer.core.isotime import iso_utc
from analyzer.core.safetext import terminal_text
from analyzer.online import CLASSES
from analyzer.outputs.deployment import deployment_findings
from analyzer.outputs.oncall import build_oncall
from analyzer.outputs.sizing import build_sizing
from analyzer.outputs.verdict import build_verdict
from analyzer.store.asking import ask


def resolve_models(con: duckdb.DuckDBPyConnection, patterns: list[str] | None) -> list[str] | None:
    """The models the ``patterns`` name (``ILIKE``, as in ``analyze sql``), or None for all.

    Raises:
        AnalyzerError: (usage, ``param="models"``) a pattern that matches no model in
            the database; the message lists the models it holds.
    """
    if not patterns:
        return None

    # Every model in the database, busiest first.
    known = sorted(((m, n) for m, _glm, n in ask(con, "models_in_scope")), key=lambda mn: (-mn[1], mn[0]))
    chosen: list[str] = []
    for pattern in patterns:
        hits = [m for m, _ in known if like_match(m, pattern)]
        if not hits:
            import difflib

            names = [m for m, _ in known]
            close = difflib.get_close_matches(pattern, names, n=1, cutoff=0.6)
            listing = ", ".join(f"{terminal_text(m)} ({n:,} turn{'' if n == 1 else 's'})" for m, n in known[:12]) or "none"
            raise AnalyzerError(
                f"model {pattern!r} matches no model in the database"
                + (f"; did you mean {terminal_text(close[0])!r}?" if close else "")
                + f" The models are: {listing}{' ...' if len(known) > 12 else ''} "
                "(a name, or a LIKE pattern such as 'glm%')", ExitCode.USAGE,
                param="models", names={"model": "models"})
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
    refresh: bool = True,
) -> dict[str, Any]:
    """Compute the sizing summary over the (filtered) turns in the database.

    Returns a JSON-ready dict; ``analyze --json`` prints exactly this.
    ``with_oncall=False`` leaves out the on-call block (``oncall`` is None), for
    callers that take it from another summary. ``refresh=False`` reads ``turns``
    as it is (a lake holds the classes as exported).
    """
    if refresh:
        ensure_turns(con)
    scope = {"models": models or None, "since": since, "until": until}

    (turns, sessions, first, last, inferred, addressable, logged_turns) = next(
        iter(ask(con, "scope_totals", scope)), (0, 0, None, None, 0, 0, 0))
    disagreements = [{"logged_class": lc, "derived_class": dc, "kept": src, "turns": n}
                     for lc, dc, src, n in ask(con, "class_disagreements", scope)]

    per_model = []
    for model, n, n_sessions, n_tool_sessions in sorted(
        ask(con, "scope_models", scope),
        key=lambda r: (not is_glm(r[0]), -r[1], r[0] or ""),  # GLM first, busiest first
    ):
        per_model.append({"model": model, "turns": n, "sessions": n_sessions, "tool_sessions": n_tool_sessions})

    by_class: dict[tuple, int] = {}
    triggers: dict[tuple, int] = {}
    for m, c, t, n in ask(con, "scope_classes", scope):
        by_class[(m, c)] = by_class.get((m, c), 0) + n
        if t is not None:
            triggers[(m, t)] = triggers.get((m, t), 0) + n
    # Sessions that started in the range (as the sizing counts them), by the model of their last turn.
    ended = {m: (n, f) for m, n, f in ask(con, "sessions_ended_by_model", scope)}
    for row in per_model:
        m = row["model"]
        counts = {c: by_class.get((m, c), 0) for c in CLASSES if by_class.get((m, c), 0)}
        row["classes"] = {
            c: {"count": n, "rate": round(n / row["turns"], 4)} for c, n in counts.items()
        }
        row["ladder_addressable"] = dict(sorted(((t, n) for (mm, t), n in triggers.items() if mm == m),
                                                key=lambda tn: (-tn[1], tn[0])))  # most first
        row["ladder_addressable_total"] = sum(row["ladder_addressable"].values())
        row["sessions_ended_on_failure"] = ended.get(m, (0, 0))[1]

    totals = {c: sum(n for (m, cc), n in by_class.items() if cc == c) for c in CLASSES}
    # What the database holds whatever the filters (quarantined lines, metrics): the whole database.
    quarantined = next(iter(ask(con, "quarantined_lines")), (0,))[0]
    samples = [{"path": p, "line_no": n, "reason": r} for p, n, r in ask(con, "quarantine_samples", {"limit": 5})]
    n_samples, _first, _last, n_windows = next(iter(ask(con, "metrics_held")), (0, None, None, 0))
    ended_total = sum(f for _, f in ended.values())

    sizing = build_sizing(con, scope)
    episodes = wedged_episodes(con, models=models, since=since, until=until) if n_windows else []
    summary = {
        "time_range": {"first": iso_utc(first), "last": iso_utc(last)},
        "filters": {"models": models or None, "since": iso_utc(since), "until": iso_utc(until)},
        "turns": turns,
        "sessions": sessions,
        "classes": {c: {"count": n, "rate": round(n / turns, 4) if turns else 0.0} for c, n in totals.items() if n},
        "models": per_model,
        "ladder_addressable": addressable,
        "sessions_ended_on_failure": ended_total,
        "inferred": {"turns": inferred, "share": round(inferred / turns, 4) if turns else 0.0},
        # The proxy's logged class is kept; where the analyzer's own rule would say
        # otherwise is a data-quality count (class_disagreements), not an override.
        "logged_classes": {
            "turns": logged_turns,
            "disagreements": sum(d["turns"] for d in disagreements),
            "pairs": disagreements,
        },
        "quarantined_lines": quarantined,
        "quarantine_samples": samples,
        "sizing": sizing,
        "deployment": deployment_findings(con, scope, episodes),
        "oncall": build_oncall(con, models=models, since=since, until=until) if with_oncall else None,
        "skipped_files": skipped_files_summary(con),
        "lost_records": lost_records_summary(con, since=since, until=until),
        "slow_completions": slow_completions_summary(con, scope),
        "replicas": replicas_summary(con, scope),
        "metrics": {
            "episodes": episodes,
            "samples": n_samples,
            "windows": n_windows,
            "note": None
            if n_samples
            else "no metrics given: wedged-pod and pod-down cannot be told apart from other failures (use --metrics)",
        },
    }
    summary["verdict"] = build_verdict(summary)
    return summary


# ---------------------------------------------------------------------------
# What the inputs and the proxy itself say: skipped files, lost records, slow
# completions, replicas. Each reads the summary's filters (skipped files: the
# whole database); the SQL is in queries/ (skipped_files_kept,
# skipped_files_latest, lost_records_by_kind, slow_completions_by_model, replicas).

#: What each kind of proxy_events line means, for the lines that say records were lost.
LOST_KINDS: dict[str, str] = {
    "buffer-dropped": "the S3 buffer overflowed during an outage and dropped its oldest records",
    "logging-imbalance": "a flush window logged fewer responses than requests (the shortfall)",
    "log-response-failed": "log_response raised: that response record was not written",
    "log-request-failed": "log_request raised: that request record was not written",
    "flush-failed": "an S3 flush failed; its records were re-queued (lost only if the buffer then overflowed)",
    "log-failures": "the proxy's alarm after repeated logging failures (already counted line by line)",
}


def skipped_files_summary(con: duckdb.DuckDBPyConnection, *, limit: int = 5) -> dict[str, Any]:
    """How many files the database keeps in ``skipped_files``, and the latest few (path, reason, when).

    The files skipped by *this* run are in the ingest report (``summary["ingest"]["skipped_files"]``).
    """
    kept = next(iter(ask(con, "skipped_files_kept")), (0,))[0]
    latest = [
        {"path": p, "reason": r, "seen_at": iso_utc(t)}
        for p, r, t in ask(con, "skipped_files_latest", {"limit": limit})
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
    rows = ask(con, "lost_records_by_kind", {"kinds": kinds, "since": since, "until": until})
    untimed = sum(r[3] for r in rows)
    rows = [r for r in rows if r[1]]  # the kinds with lines in the period
    order = {k: i for i, k in enumerate(kinds)}
    by_kind = [{"kind": k, "events": n, "lost": lost, "meaning": LOST_KINDS[k]}
               for k, n, lost, _ in sorted(rows, key=lambda r: order[r[0]])]
    open_period = since is None and until is None
    note = None
    if untimed and open_period:
        note = (f"{untimed:,} of these line(s) carry no time (kubectl logs read without --timestamps): a summary "
                "of everything counts them, a bounded period such as the weekly report's cannot place them and "
                "leaves them out")
    elif untimed:
        note = (f"{untimed:,} such line(s) carry no time (kubectl logs read without --timestamps): this bounded "
                "period cannot place them, so they are not counted; a summary of everything (no --since/--until) "
                "counts them")
    return {
        "total": sum(r["lost"] for r in by_kind),
        "events": sum(r["events"] for r in by_kind),
        "by_kind": by_kind,
        "untimed_events": untimed,
        "untimed_counted": open_period,
        "note": note,
    }


def slow_completions_summary(con: duckdb.DuckDBPyConnection, scope: dict[str, Any]) -> dict[str, Any]:
    """The proxy's slow-completion warnings in the summary's ``scope`` (models, since, until), and the
    turns they flag (view ``slow_turns``).

    A warning says the deployment's threshold was passed, so the caller may have
    given up; it is a flag on the turn, not a failure class.
    """
    found = ask(con, "slow_completions_by_model", scope)
    by_model = []
    for m, n, mx, t, f in sorted(found, key=lambda r: (not is_glm(r[0]), r[0] or "")):
        by_model.append({"model": m, "warnings": int(n), "turns_flagged": int(t), "failed_flagged": int(f),
                         "max_ms": mx})
    return {
        "warnings": sum(r["warnings"] for r in by_model),
        "turns_flagged": sum(r["turns_flagged"] for r in by_model),
        "by_model": by_model,
        "note": "a warning that the completion passed the deployment's client-side threshold "
                "(the caller may have given up): a flag, not a failure",
    }


def replicas_summary(con: duckdb.DuckDBPyConnection, scope: dict[str, Any]) -> list[dict[str, Any]]:
    """Turns, failures, slow warnings and lost records per proxy replica (``proxy_pod``) in the summary's
    ``scope`` (models, since, until).

    Empty when no turn in scope says its replica (S3 chunks of older proxies,
    single-pod stdout). Turns whose replica is not known are one row with
    ``proxy_pod`` None. The question ``replicas`` of queries/.
    """
    found = ask(con, "replicas", {**scope, "kinds": list(LOST_KINDS)})
    if not any(pod is not None and n for pod, n, _f, _s, _l in found):
        return []
    # A replica is listed for its turns, or for the records it says it lost.
    rows = []
    for pod, n, f, slow, lost in sorted(found, key=lambda r: (r[0] is None, r[0] or "")):
        if not n and not (lost and pod is not None):
            continue
        rows.append({"proxy_pod": pod, "turns": n, "failed": f, "failure_rate": round(f / n, 4) if n else 0.0,
                     "slow_warnings": slow, "lost_records": lost})
    return rows
