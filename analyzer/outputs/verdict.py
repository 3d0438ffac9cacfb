"""The summary's first lines: what failed, what the ladder saves, what needs a deployment fix.

A newcomer reads the summary top down; the answer to "should we build the ladder,
and what would it save" comes first, as a few sentences, with the same facts as
data for ``--json``. Everything here is read from the summary already built
(:func:`analyzer.outputs.summary.build_summary`): no second computation of a figure.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from analyzer.core.paths import DEFAULT_DB_NAME

#: What a deployment-fix finding kind is, in a few words, for the verdict's third line.
_FIX_WORDS = {
    "answer-in-reasoning": "answers filed as reasoning (the reasoning parser)",
    "thinking-off-leaks": "thinking-off requests leaking reasoning into the content (the template override)",
    "reasoning-leaked": "reasoning leaked into the content (the reasoning parser)",
    "budget-refused": "thinking budgets refused (no reasoning config)",
    "budget-never-recovered": "a budget rung that never recovers (MTP, or no reasoning parser)",
}


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}%" if d else "0.0%"


def build_verdict(summary: dict[str, Any]) -> dict[str, Any]:
    """The verdict of a summary: ``lines`` (the sentences the summary opens with) and the facts behind them.

    Keys: ``turns``, ``failed_turns``, ``largest`` (the three biggest failure
    classes, ``[class, turns]``), ``ladder`` (the sizing's sessions lost without a
    ladder, saved by it, what it would save and its measured or replayed recovery
    rate; None without GLM traffic), ``deployment_fixes`` (finding kind -> turns),
    ``wedged_or_down_failures`` and ``lines``.
    """
    turns = summary["turns"]
    classes = summary["classes"]
    failed = turns - classes.get("ok", {}).get("count", 0)
    largest = sorted(((c, v["count"]) for c, v in classes.items() if c != "ok"), key=lambda cv: (-cv[1], cv[0]))[:3]
    lines = [f"{failed:,} of {turns:,} turns failed ({_pct(failed, turns)})"
             + (": most often " + ", ".join(f"{c} {n:,}" for c, n in largest) if largest else "") + "."]

    s = summary.get("sizing") or {}
    ladder = None
    if s.get("models"):
        rec = s.get("ladder_recovery") or s.get("replay_recovery")
        lost = s["sessions_lost_without_ladder"]
        ladder = {
            "models": s["models"],
            "tool_sessions": s["tool_sessions"],
            "sessions_lost_without_ladder": lost,
            "sessions_saved_by_ladder": s["sessions_saved_by_ladder"],
            "sessions_lost_after_ladder": s["sessions_lost_after_ladder"],
            "recovery_rate": rec["rate"] if rec else None,
            "recovery_source": ("measured" if s.get("ladder_recovery") else "replayed") if rec else None,
            "would_save": round(lost * rec["rate"]) if rec else None,
        }
        lines.append(f"Ladder sizing ({', '.join(s['models'])}): {s['conclusion']}")

    findings = (summary.get("deployment") or {}).get("findings") or []
    fixes: dict[str, int] = {}
    for f in findings:
        if f["kind"] != "repaired":  # a repair is the proxy's mend, not a fix still to make
            fixes[f["kind"]] = fixes.get(f["kind"], 0) + f["turns"]
    wedged = s.get("wedged_or_down_failures", 0) if s else 0
    parts = [f"{_FIX_WORDS[k]}: {n:,}" for k, n in fixes.items() if k in _FIX_WORDS]
    if wedged:
        frozen = fixes.get("frozen-gauges", 0)
        parts.append(f"failures on wedged or down pods (restart the pod): {wedged:,}"
                     + (f", {frozen:,} of them in a wedge whose gauges read 0, which the alert cannot see"
                        if frozen else ""))
    if parts:
        lines.append("Needs a deployment fix, not a retry: " + "; ".join(parts)
                     + " (Deployment fixes and the pod windows below say where).")
    return {"turns": turns, "failed_turns": failed, "largest": [list(x) for x in largest], "ladder": ladder,
            "deployment_fixes": fixes, "wedged_or_down_failures": wedged, "lines": lines}


def next_steps(db: str | None) -> dict[str, Any]:
    """Where the database is and the commands that read it next (the summary's last lines).

    ``db`` is the database as the user named it (``--db``), or None for the default
    (``$ANALYZER_DB``, else ``./analyzer.duckdb``), which the commands need not name.
    """
    shown = db if db is not None else (os.environ.get("ANALYZER_DB") or DEFAULT_DB_NAME)
    flag = f" --db {shlex.quote(db)}" if db is not None else ""
    return {
        "database": shown,
        "commands": [
            {"command": f"analyze report{flag}", "does": "the weekly HTML report of the latest complete week in it"},
            {"command": f"analyze sql --list{flag}", "does": "the questions you can ask it (then: analyze sql NAME)"},
        ],
    }
