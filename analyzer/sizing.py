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

from .online.ladder import TOOL_TRIGGERS
from .sqlrun import ask


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
    tool_sessions, lost_all, lost_eligible, lost_wedged, turns_per_lost = next(
        iter(ask(con, "sizing_lost_sessions", p)), (0, 0, 0, 0, None))
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
        "sessions_lost_by_class": lost_by_class,
        "turns_per_lost_session": round(turns_per_lost, 1) if turns_per_lost else None,
        "baseline": {k: baseline.get(k, 0) for k in ("retried-ok", "retried-failed", "moved-on", "session-ended")},
        # measured: production logs of a proxy running the ladder; replayed:
        # `analyze replay` against a test endpoint. Never blended.
        "ladder_recovery": measured,
        "ladder_rungs": measured_rungs,
        "replay_recovery": replayed,
        "replay_rungs": replayed_rungs,
    }
    sizing["conclusion"] = conclusion(sizing)
    return sizing


def _ladder_stats(con: duckdb.DuckDBPyConnection, p: dict[str, Any], source: str) -> tuple[list[dict], dict | None]:
    """Per-rung recovery and the tool-session headline rate for one source of ladder runs.

    Outside wedged windows only (no rung is expected to fix a wedged pod); the
    headline counts the tool-session triggers, the length ladder is per rung only.
    """
    rungs = []
    so_far: dict[str, int] = {}
    for trigger, rung, ladders, reached, recovered in ask(con, "sizing_ladder_rungs", {**p, "source": source}):
        so_far[trigger] = so_far.get(trigger, 0) + recovered
        rungs.append({
            "trigger": trigger, "rung": rung, "ladders": ladders, "reached": reached, "recovered": recovered,
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


def conclusion(s: dict[str, Any]) -> str:
    """One plain sentence: what the ladder would have saved."""
    lost = s["sessions_lost_to_eligible"]
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
    return (
        f"The ladder would have saved about {saved} of {lost} GLM tool sessions lost to ladder-eligible "
        f"failures ({how} recovery {rec['rate']:.0%}, 95% CI {low:.0%}–{high:.0%}, "
        f"over {rec['ladders']} ladder runs){tail}."
    )
