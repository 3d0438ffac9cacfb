"""``analyze replay``: what will be sent (or would be), per turn its outcome and attempts,
recovery per rung, and what was stored."""

from __future__ import annotations

import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from analyzer.core.isotime import iso_utc
from analyzer.core.safetext import terminal_text
from analyzer.core.urls import public_url
from analyzer.cli.terminal import print_json
from analyzer.jobs.replay import NOT_RECOVERED
from analyzer.online.ladder import NOT_TRIGGERED

if TYPE_CHECKING:  # pragma: no cover
    from analyzer.jobs.replay import ReplayPlan, ReplayReport, ReplayRun


def show_replay(run: "ReplayRun", json_out: bool) -> None:
    """What ``analyze replay`` did, as JSON or for a person."""
    if json_out:
        print_json(run.doc)
    elif run.dry_run:
        print_replay_dry_run(run.plan, run.doc)
    elif run.report is None:
        print_replay_header(run.plan, public_url(run.url), dry=False)
    else:
        print_replay_report(run.report)


def _say(text: str = "") -> None:
    """Print a line of the replay's text report: request ids, model names and skip reasons are
    log text, shown scrubbed and escaped."""
    print(terminal_text(text))


def _turn_time(ts: Any) -> str:
    return iso_utc(ts, "microseconds")


def print_replay_header(plan: "ReplayPlan", endpoint: str | None, *, dry: bool) -> None:
    """What will be replayed (or would be), the rungs, and what was skipped or cannot be recovered."""
    which = "GLM models" if not plan.models else ", ".join(plan.models)
    n = len(plan.turns)
    if dry:
        _say(f"dry run: {n} eligible turn(s) ({which}) would be replayed"
             + (f" to {endpoint}" if endpoint else "") + "; nothing is sent")
    else:
        _say(f"replaying {n} eligible turn(s) ({which}) to {endpoint}")
    _say(f"ladder rungs: {', '.join(plan.rungs)}")
    if plan.not_captured:
        _say(f"{plan.not_captured} more eligible turn(s) were not captured in full mode (no messages): not replayable")
    for s in plan.skipped:
        _say(f"skipped {s.request_id} {_turn_time(s.ts)}: {s.reason}")
    if not n:
        _say("nothing to replay: no ladder-eligible turn with full-capture messages"
             + ("" if not plan.models else " for these models"))
        return
    stand_ins = sum(1 for t in plan.turns if t.tools_source == "stand-in")
    if stand_ins:
        _say(f"tools: {stand_ins} turn(s) offer minimal stand-ins named after the tools in their transcript "
             "(definitions are not logged; pass --tools FILE for the real ones)")
    _say("not recovered from the logs: " + "; ".join(NOT_RECOVERED))


def print_replay_dry_run(plan: "ReplayPlan", doc: dict[str, Any]) -> None:
    """The dry run: per turn, what each rung would send (messages, tools, max_tokens, bytes)."""
    print_replay_header(plan, doc["endpoint"], dry=True)
    for t, d in zip(plan.turns, doc["turns"]):
        _say()
        _say(f"{t.request_id} {_turn_time(t.ts)} {t.model} -> {t.payload.get('model')}  logged: {t.logged_trigger}  "
             f"session {t.session_id or '-'}  system prompts re-hydrated: {t.system_prompts}  tools: {t.tools_source}")
        for note in t.notes:
            _say(f"  note: {note}")
        for p in d["payloads"]:
            _say(f"  {p['rung']:<19} {p['messages']:>3} messages  {p['tools']:>2} tools  "
                 f"tool_choice={p['tool_choice'] or '-':<5} max_tokens={p['max_tokens'] or '-':<6} {p['bytes']:>8,} bytes")


def print_replay_report(report: "ReplayReport") -> None:
    """The replay: per turn its outcome and attempts, recovery per rung, and what was stored."""
    print_replay_header(report.plan, report.endpoint, dry=False)
    _say()
    _say(f"{'request_id':<10} {'ts':<27} {'logged trigger':<17} {'replay trigger':<17} {'outcome':<14} "
         f"{'recovered at':<17} attempts")
    for o in report.outcomes:
        _say(f"{o.turn.request_id:<10} {_turn_time(o.turn.ts):<27} {o.turn.logged_trigger:<17} {o.trigger or '-':<17} "
             f"{o.outcome:<14} {o.recovered_at or '-':<17} {' > '.join(f'{a.rung}:{a.status or a.incident_class}' for a in o.attempts)}")
    rows = report.per_rung()
    if rows:
        _say()
        _say(f"{'trigger':<17} {'rung':<19} {'reached':>7} {'recovered':>9}")
        for r in rows:
            _say(f"{r['trigger']:<17} {r['rung']:<19} {r['reached']:>7} {r['recovered']:>9}")
    counts = Counter(o.outcome for o in report.outcomes)
    _say()
    _say("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if counts.get(NOT_TRIGGERED):
        _say(f"{counts[NOT_TRIGGERED]} turn(s) did not fail again on replay (not-triggered): "
             "they count in no recovery rate")
    _say(f"stored {report.stored_attempts} attempt(s) in replay_attempts "
         "(ladder_attempts / ladder_summary rows with source = 'replay')")
    sys.stdout.flush()
