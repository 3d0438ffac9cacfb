"""Sizing the fix: how many GLM tool sessions the ladder would save.

Two sources of evidence, used as available:

- **measured** — logs from a proxy running ``analyzer.online.run_ladder``: every
  attempt is in ``ladder_attempts``, recovery per rung in ``ladder_summary``;
- **baseline** — legacy logs, where no ladder ran: what the client did after each
  ladder-eligible failure (``ladder_baseline``): retried and it worked, retried and
  failed, moved on, or the session ended there.

Failures inside wedged/down windows are never counted as recoverable.
"""

from __future__ import annotations

from typing import Any

import duckdb

from analyzer.online.ladder import TOOL_TRIGGERS
from analyzer.store.asking import ask


def wilson(con: duckdb.DuckDBPyConnection, k: int, n: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval of k successes in n trials (None for n = 0).

    Uses the SQL macros the views use (queries/wilson_interval.sql), so the
    summary and the views report identical bounds.
    """
    if n <= 0:
        return None
    # Python ints bind as INTEGER: pass DOUBLEs, so even a database whose stored
    # macros predate the DOUBLE arithmetic (opened read-only) cannot overflow INT32.
    low, high = con.execute("SELECT wilson_low(?::DOUBLE, ?::DOUBLE), wilson_high(?::DOUBLE, ?::DOUBLE)",
                            [k, n, k, n]).fetchall()[0]
    return round(low, 4), round(high, 4)


def build_sizing(con: duckdb.DuckDBPyConnection, params: dict[str, Any]) -> dict[str, Any]:
    """The sizing block of the summary, over GLM models (filtered like the summary).

    ``params``: ``models`` (exact names, None: every model), ``since``, ``until``.
    Every figure is a question of queries/ (``sizing_*``, ``ladder_baseline_outcomes``).
    """
    # Busiest first, as the summary lists the models.
    glm_models = [m for m, glm, _n in sorted(ask(con, "models_in_scope"), key=lambda r: (-r[2], r[0])) if glm]
    wanted = params.get("models")
    models = [m for m in glm_models if not wanted or m in wanted]
    p = {"since": params.get("since"), "until": params.get("until"),
         "models": models or ["\x00no GLM model\x00"]}

    (eligible, wedged, by_trigger, late, no_answer, affected) = next(
        iter(ask(con, "sizing_turns", p)), (0, 0, None, 0, 0, 0))
    deadline = con.execute("SELECT max(CAST(value AS DOUBLE)) FROM settings WHERE name = 'caller_deadline_s'").fetchall()[0][0]

    # Sessions lost: GLM tool sessions whose last turn failed for the client.
    (tool_sessions, lost_all, lost_eligible, lost_wedged, turns_per_lost,
     lost_without_ladder, lost_after_ladder, saved_by_ladder) = next(
        iter(ask(con, "sizing_lost_sessions", p)), (0, 0, 0, 0, None, 0, 0, 0))
    lost_by_class = dict(ask(con, "sizing_lost_by_class", p))

    baseline: dict[str, int] = {}
    for _model, _trigger, next_step, failures, _share, _ms in ask(con, "ladder_baseline_outcomes", p):
        baseline[next_step] = baseline.get(next_step, 0) + failures

    measured_rungs, measured = _ladder_stats(con, p, "proxy")
    replayed_rungs, replayed = _ladder_stats(con, p, "replay")

    sizing = {
        "models": models,
        "eligible_incidents": eligible,
        "eligible_by_trigger": by_trigger or {},
        "wedged_or_down_failures": wedged,
        # Failures no payload change fixes (never ladder-eligible): answers that
        # came after the callers' deadline, and 200s with no usable answer.
        "late_answers": late,
        "caller_deadline_s": deadline,
        "no_answer_200": no_answer,
        "tool_sessions": tool_sessions,
        "sessions_affected": affected,
        "sessions_affected_share": round(affected / tool_sessions, 4) if tool_sessions else 0.0,
        "sessions_lost": lost_all,
        "sessions_lost_to_eligible": lost_eligible,
        "sessions_lost_to_wedged_or_down": lost_wedged,
        # The three parts of a week in which the ladder may have run: lost to an
        # eligible failure with no ladder on it (the only sessions a projection
        # applies to), lost after the ladder ran out of rungs, saved by the ladder.
        "sessions_lost_without_ladder": lost_without_ladder,
        "sessions_lost_after_ladder": lost_after_ladder,
        "sessions_saved_by_ladder": saved_by_ladder,
        "sessions_lost_by_class": lost_by_class,
        "turns_per_lost_session": round(turns_per_lost, 1) if turns_per_lost else None,
        "baseline": {k: baseline.get(k, 0) for k in ("retried-ok", "retried-failed", "moved-on", "session-ended")},
        # measured: production logs of a proxy running the ladder; replayed:
        # `analyze replay` against a test endpoint. Never blended.
        "ladder_recovery": measured,
        "ladder_rungs": measured_rungs,
        "replay_recovery": replayed,
        "replay_rungs": replayed_rungs,
        "before_after": before_after(con, p),
    }
    ba = sizing["before_after"]
    if ba:
        # Tool sessions in neither era: the ladder was off for their model (ladder_armed
        # false), or their records do not say (sessions.ladder_era); said, not dropped.
        ba["tool_sessions_neither"] = tool_sessions - ba["tool_sessions_without"] - ba["tool_sessions_with"]
    sizing["conclusion"] = conclusion(sizing)
    return sizing


def _ladder_stats(con: duckdb.DuckDBPyConnection, p: dict[str, Any], source: str) -> tuple[list[dict], dict | None]:
    """Per-rung recovery and the tool-session headline rate for one source of ladder runs.

    Outside wedged windows only (no rung is expected to fix a wedged pod); the
    headline counts the tool-session triggers, the length ladder is per rung only.
    """
    rungs = []
    so_far: dict[str, int] = {}
    for trigger, rung, ladders, reached, recovered, refused in ask(con, "sizing_ladder_rungs", {**p, "source": source}):
        so_far[trigger] = so_far.get(trigger, 0) + recovered
        rungs.append({
            "trigger": trigger, "rung": rung, "ladders": ladders, "reached": reached, "recovered": recovered,
            "refused": refused,
            "conditional_rate": round(recovered / reached, 4) if reached else None,
            "conditional_interval": wilson(con, recovered, reached),
            "cumulative_rate": round(so_far[trigger] / ladders, 4) if ladders else None,
            "cumulative_interval": wilson(con, so_far[trigger], ladders),
        })
    total, recovered_total, in_wedge, recovered_in_wedge = next(iter(ask(
        con, "sizing_ladder_runs", {**p, "source": source, "triggers": list(TOOL_TRIGGERS)})), (0, 0, 0, 0))
    if not total:
        return rungs, None
    return rungs, {
        "ladders": total,
        "recovered": recovered_total,
        "rate": round(recovered_total / total, 4),
        "interval": wilson(con, recovered_total, total),
        "inside_wedged_windows": {"ladders": in_wedge, "recovered": recovered_in_wedge},
    }


def before_after(con: duckdb.DuckDBPyConnection, p: dict[str, Any]) -> dict[str, Any] | None:
    """Tool sessions lost per 100 without the ladder and with it, per class (question ``ladder_before_after``).

    None unless the scope holds tool sessions of both eras, as their records tell
    them apart (log fields of a proxy running the ladder, or none).
    """
    rows = [dict(zip(_BEFORE_AFTER_KEYS, r)) for r in ask(con, "ladder_before_after", p)]
    if not rows or not rows[0]["tool_sessions_without"] or not rows[0]["tool_sessions_with"]:
        return None
    first = rows[0]
    return {
        "tool_sessions_without": first["tool_sessions_without"],
        "tool_sessions_with": first["tool_sessions_with"],
        "classes": [{k: v for k, v in r.items() if not k.startswith("tool_sessions_")} for r in rows],
    }


_BEFORE_AFTER_KEYS = (
    "lost_class", "tool_sessions_without", "lost_without", "per_100_without", "per_100_without_low",
    "per_100_without_high", "tool_sessions_with", "lost_with", "per_100_with", "per_100_with_low",
    "per_100_with_high", "change_per_100", "change_low", "change_high",
)


def conclusion(s: dict[str, Any]) -> str:
    """Plain sentences: what the ladder saved and would have saved.

    The projection (measured or replayed recovery times the sessions lost) applies
    only to sessions lost to an eligible failure with no ladder on it; sessions
    lost after the ladder ran out of rungs, and those it saved, are measured.
    """
    lost = s["sessions_lost_without_ladder"]
    wedged = s["sessions_lost_to_wedged_or_down"]
    tail = (f"; {wedged} more {'was' if wedged == 1 else 'were'} lost to wedged or down pods, which no retry fixes"
            if wedged else "")
    rec = s["ladder_recovery"] or s["replay_recovery"]
    how = "measured" if s["ladder_recovery"] else "replayed"
    if not s["models"]:
        return "No GLM traffic in the selected range."
    if rec is None:
        b = s["baseline"]
        return (
            f"No ladder data yet: {lost} GLM tool sessions ended on a ladder-eligible failure "
            f"({b['retried-ok']} of {s['eligible_incidents']} eligible failures were rescued by a client retry)"
            f"{tail}."
        )
    low, high = rec["interval"]
    saved = round(lost * rec["rate"])
    measured = ""
    if s["ladder_recovery"]:
        after, kept = s["sessions_lost_after_ladder"], s["sessions_saved_by_ladder"]
        lost_after = "none was" if not after else f"{after} {'was' if after == 1 else 'were'}"
        measured = (f"The ladder saved {kept} GLM tool session{'' if kept == 1 else 's'} and "
                    f"{lost_after} lost after every rung it tried had failed. ")
    if not lost:
        return (f"{measured}No GLM tool session was lost to a ladder-eligible failure without the ladder "
                f"({how} recovery {rec['rate']:.0%}, 95% CI {low:.0%}–{high:.0%}, over {rec['ladders']} "
                f"ladder runs){tail}.")
    return (
        f"{measured}The ladder would have saved about {saved} of {lost} GLM tool sessions lost to "
        f"ladder-eligible failures without it ({how} recovery {rec['rate']:.0%}, 95% CI {low:.0%}–{high:.0%}, "
        f"over {rec['ladders']} ladder runs){tail}."
    )
