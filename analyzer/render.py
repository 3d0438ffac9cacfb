"""Printing the sizing summary as tables on stdout (rich; plain text when piped)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape  # log and metric text is untrusted: never read it as markup
from rich.table import Table


def _on_terminal() -> bool:
    import sys

    return sys.stdout.isatty()


def _pct(rate: float) -> str:
    return f"{rate * 100:.1f}%"


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the summary of :func:`analyzer.summary.build_summary` for a person."""
    # Piped output gets a fixed, wide layout instead of rich's 80-column default.
    out = console or Console(highlight=False, soft_wrap=False, width=None if _on_terminal() else 140)
    tr = summary["time_range"]
    ing = summary.get("ingest") or {}
    out.print(
        f"[bold]{summary['turns']:,} turns[/] in {summary['sessions']:,} sessions, "
        f"{tr['first'] or '-'} .. {tr['last'] or '-'}"
    )
    if ing:
        out.print(
            f"ingested {ing['files_ingested']} file(s) ({ing['files_unchanged']} unchanged), "
            f"{ing['new_records']:,} new records, {ing['duplicates']:,} duplicates skipped, "
            f"{ing['quarantined']:,} lines quarantined"
        )
    print_skipped_files(summary, out)

    models = Table(title="Turns and sessions per model", title_justify="left")
    for col in ("model", "turns", "sessions", "tool sessions", "failed", "ladder-addressable", "sessions ended on failure"):
        models.add_column(col, justify="left" if col == "model" else "right")
    for m in summary["models"]:
        failed = sum(v["count"] for c, v in m["classes"].items() if c != "ok")
        models.add_row(
            escape(str(m["model"])), f"{m['turns']:,}", f"{m['sessions']:,}", f"{m['tool_sessions']:,}",
            f"{failed:,}", f"{m['ladder_addressable_total']:,}", f"{m['sessions_ended_on_failure']:,}",
        )
    out.print(models)

    out.print(_class_table(summary))

    inf = summary["inferred"]
    out.print(
        f"across all models the ladder could address [bold]{summary['ladder_addressable']:,}[/] turns "
        "(tool-history-5xx, and empty-200-stop with tool history); "
        f"{summary['sessions_ended_on_failure']:,} sessions ended on a failure"
    )
    out.print(f"{inf['turns']:,} turns ({_pct(inf['share'])}) are classified on inferred evidence")
    if summary["quarantined_lines"]:
        out.print(f"[yellow]{summary['quarantined_lines']:,} malformed lines quarantined[/], e.g.:")
        for s in summary["quarantine_samples"]:
            out.print(f"  {safe_text(s['path'])}:{s['line_no']}: {safe_text(s['reason'])}", markup=False)
    note = summary["metrics"]["note"]
    if note:
        out.print(f"[yellow]note:[/] {note}")
    print_episodes(summary["metrics"].get("episodes") or [], out)
    print_proxy_health(summary, out)
    if summary.get("sizing"):
        print_sizing(summary["sizing"], out)
    from .summary import print_oncall

    print_oncall(summary.get("oncall"), out)


def safe_text(value: Any, limit: int | None = None) -> str:
    """Log text (a path, a reason, a pod name) for the terminal: control characters shown as
    ``\\xNN`` (:func:`analyzer.oncall.terminal_text`), rich markup escaped."""
    from .oncall import terminal_text

    return escape(terminal_text(value, limit))


#: Skipped files listed one by one; the rest are counted.
SKIPPED_SHOWN = 20


def print_skipped_files(summary: dict[str, Any], out: Console) -> None:
    """The files this run skipped (path and reason), and how many the database keeps in ``skipped_files``."""
    skipped = (summary.get("ingest") or {}).get("skipped_files") or []
    kept = (summary.get("skipped_files") or {}).get("kept", 0)
    if skipped:
        out.print(f"[yellow]skipped {len(skipped):,} file(s)[/] that could not be read as logs "
                  "(the other files were read):")
        for s in skipped[:SKIPPED_SHOWN]:
            out.print(f"  {safe_text(s['path'])}: {safe_text(s['reason'])}")
        if len(skipped) > SKIPPED_SHOWN:
            out.print(f"  ... and {len(skipped) - SKIPPED_SHOWN:,} more (--json lists them all)")
    if kept:
        out.print(f"the database keeps {kept:,} skipped file(s) in skipped_files "
                  "(analyze sql 'SELECT * FROM skipped_files')")


def print_proxy_health(summary: dict[str, Any], out: Console) -> None:
    """What the proxy itself says: records it lost, slow-completion warnings, and the per-replica line."""
    lost = summary.get("lost_records")
    if lost and lost["events"]:
        style = "yellow" if lost["total"] else "dim"
        out.print(f"[{style}]the proxy says it lost {lost['total']:,} record(s)[/] in this period "
                  "(its own log lines, every model):")
        for r in lost["by_kind"]:
            out.print(f"  {r['kind']}: {r['lost']:,} lost in {r['events']:,} line(s) ({escape(r['meaning'])})")
    if lost and lost["note"]:
        out.print(f"  note: {escape(lost['note'])}")
    slow = summary.get("slow_completions")
    if slow and (slow["warnings"] or slow["turns_flagged"]):
        models = ", ".join(f"{safe_text(r['model'])} {r['warnings']:,}" for r in slow["by_model"] if r["warnings"])
        out.print(f"{slow['warnings']:,} slow-completion warning(s)" + (f" ({models})" if models else "")
                  + f", flagging {slow['turns_flagged']:,} turn(s) (slow_turns.slow_warning): "
                  "a flag, not a failure")
    replicas = summary.get("replicas") or []
    if replicas:
        t = Table(title="Per proxy replica (proxy_pod)", title_justify="left")
        for col in ("replica", "turns", "failed", "failure rate", "slow warnings", "lost records"):
            t.add_column(col, justify="left" if col == "replica" else "right")
        for r in replicas:
            t.add_row(safe_text(r["proxy_pod"]) if r["proxy_pod"] is not None else "(not said)",
                      f"{r['turns']:,}", f"{r['failed']:,}", _pct(r["failure_rate"]),
                      f"{r['slow_warnings']:,}", f"{r['lost_records']:,}")
        out.print(t)


def print_sizing(s: dict[str, Any], out: Console) -> None:
    """The sizing block: eligible incidents, recovery per rung or the baseline, the conclusion."""
    out.print()
    out.print(f"[bold]Sizing the ladder[/] (GLM: {escape(', '.join(s['models'])) or 'none'})")
    trig = ", ".join(f"{k} {v:,}" for k, v in sorted(s["eligible_by_trigger"].items()))
    out.print(f"  eligible incidents: {s['eligible_incidents']:,}" + (f" ({trig})" if trig else ""))
    out.print(
        f"  tool sessions: {s['tool_sessions']:,}; affected by an eligible failure: {s['sessions_affected']:,} "
        f"({_pct(s['sessions_affected_share'])}); lost (ended on a failure): {s['sessions_lost']:,}, "
        f"of which to eligible failures {s['sessions_lost_to_eligible']:,}"
        + (f", {s['turns_per_lost_session']} turns per lost session" if s["turns_per_lost_session"] else "")
    )
    out.print(
        f"  wedged/down failures (no retry fixes these, not counted as recoverable): "
        f"{s['wedged_or_down_failures']:,}; sessions lost to them: {s['sessions_lost_to_wedged_or_down']:,}"
    )
    b = s["baseline"]
    out.print(
        "  without a ladder, after an eligible failure the client "
        f"retried and it worked {b['retried-ok']:,}, retried and failed {b['retried-failed']:,}, "
        f"moved on {b['moved-on']:,}, and the session ended {b['session-ended']:,} times"
    )
    for key, title in (("ladder_rungs", "Measured ladder recovery per rung"),
                       ("replay_rungs", "Replayed ladder recovery per rung (analyze replay)")):
        if s.get(key):
            out.print(_rung_table(s[key], title))
    if not s["ladder_rungs"] and not s.get("replay_rungs"):
        out.print("  no ladder data yet (no response records carry analyzer.online's `ladder` field)")
    out.print(f"[bold]{s['conclusion']}[/]")


def _rung_table(rows: list[dict[str, Any]], title: str) -> Table:
    """Per-rung recovery with 95% Wilson intervals."""
    t = Table(title=f"{title} (outside wedged windows, 95% Wilson intervals)", title_justify="left")
    for col in ("trigger", "rung", "reached", "recovered", "recovered | reached", "cumulative"):
        t.add_column(col, justify="left" if col in ("trigger", "rung") else "right")
    for r in rows:
        ci, cc = r["conditional_interval"], r["cumulative_interval"]
        t.add_row(
            r["trigger"], r["rung"], f"{r['reached']:,}", f"{r['recovered']:,}",
            f"{_pct(r['conditional_rate'])} [{_pct(ci[0])}–{_pct(ci[1])}]" if ci else "-",
            f"{_pct(r['cumulative_rate'])} [{_pct(cc[0])}–{_pct(cc[1])}]" if cc else "-",
        )
    return t


def _class_table(summary: dict[str, Any]) -> Table:
    """Classes by row; GLM models each in a column (GLM first), other models together."""
    from .summary import is_glm

    glm = [m for m in summary["models"] if is_glm(m["model"])]
    others = [m for m in summary["models"] if not is_glm(m["model"])]
    groups: list[tuple[str, list[dict]]] = [(escape(str(m["model"])), [m]) for m in glm[:4]]
    if len(glm) > 4:
        groups.append((f"other GLM ({len(glm) - 4})", glm[4:]))
    if others:
        groups.append((f"other models ({len(others)})", others))
    t = Table(title="Incident classes: count · share of the column's turns", title_justify="left")
    t.add_column("class")
    for name, _ in groups:
        t.add_column(name, justify="right")
    t.add_column("all", justify="right")
    totals = {name: sum(m["turns"] for m in ms) for name, ms in groups}
    for cls, total in summary["classes"].items():
        cells = []
        for name, ms in groups:
            n = sum(m["classes"].get(cls, {}).get("count", 0) for m in ms)
            cells.append(f"{n:,} · {_pct(n / totals[name])}" if n else "-")
        t.add_row(cls, *cells, f"{total['count']:,} · {_pct(total['rate'])}")
    return t


def print_episodes(episodes: list[dict[str, Any]], out: Console) -> None:
    """Wedged, down and sleeping pods from the metrics, the failed turns each one explains
    (each turn in one window, so the column adds up to the classes) and, per wedged
    window, what the other signals said."""
    if not episodes:
        return
    t = Table(title="Wedged and down pods (failures inside are wedged-pod / pod-down: no retry fixes them)",
              title_justify="left")
    for col, justify in (("pod", "left"), ("model", "left"), ("kind", "left"), ("start (UTC)", "left"),
                         ("duration", "right"), ("failed turns", "right"), ("corroboration", "left")):
        t.add_column(col, justify=justify)
    asleep = [e for e in episodes if e["kind"] == "sleeping"]
    for e in episodes:
        if e["kind"] == "sleeping":
            continue
        evidence = (e.get("corroboration") or {}).get("text", "")
        t.add_row(escape(e["pod"] or "?"), escape(e["model_name"] or "?"), e["kind"],
                  e["start"].replace("T", " ").removesuffix("Z"), _duration(e["duration_s"]),
                  f"{e['failed_turns']:,}", escape(evidence))
    if t.row_count:
        out.print(t)
    if asleep:
        s = Table(title="Sleeping engines (vllm:engine_sleep_state; flat on purpose, not wedged)",
                  title_justify="left")
        for col, justify in (("pod", "left"), ("model", "left"), ("start (UTC)", "left"), ("duration", "right")):
            s.add_column(col, justify=justify)
        for e in asleep:
            s.add_row(escape(e["pod"] or "?"), escape(e["model_name"] or "?"),
                      e["start"].replace("T", " ").removesuffix("Z"), _duration(e["duration_s"]))
        out.print(s)


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    if minutes >= 120:
        return f"{minutes / 60:.1f} h"
    return f"{minutes:.0f} min" if minutes >= 1 else f"{seconds:.0f} s"
