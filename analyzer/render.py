"""Printing the sizing summary as tables on stdout (rich; plain text when piped)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape  # log and metric text is untrusted: never read it as markup
from rich.table import Table

from .safetext import terminal_text


def _t(value: Any) -> str:
    """Log text for a rich string: credentials redacted, controls escaped, never read as markup."""
    return escape(terminal_text(value))


class _Console(Console):
    """A rich console that reports a closed pipe as ``BrokenPipeError``.

    Rich's own handling exits with 1; the command line ends a closed pipe
    (``analyze ... | head -1``) quietly with 0.
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError()


def shown_path(path: str) -> str:
    """A stored (absolute) path as the operator typed it: relative when under the current folder."""
    import os

    try:
        cwd = os.getcwd()
    except OSError:
        return path
    if path.startswith(cwd + os.sep):
        return os.path.relpath(path, cwd)
    return path


def _on_terminal() -> bool:
    import sys

    return sys.stdout.isatty()


def _pct(rate: float) -> str:
    return f"{rate * 100:.1f}%"


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the summary of :func:`analyzer.summary.build_summary` for a person."""
    # Piped output gets a fixed, wide layout instead of rich's 80-column default.
    out = console or _Console(highlight=False, soft_wrap=False, width=None if _on_terminal() else 140)
    tr = summary["time_range"]
    ing = summary.get("ingest") or {}
    out.print(
        f"[bold]{summary['turns']:,} turns[/] in {summary['sessions']:,} sessions, "
        f"{tr['first'] or '-'} .. {tr['last'] or '-'}"
    )
    print_filters(summary, out)
    if ing:
        out.print(
            f"this run ingested {ing['files_ingested']} file(s) ({ing['files_unchanged']} unchanged), "
            f"{ing['new_records']:,} new records, {ing['duplicates']:,} duplicates skipped, "
            f"{ing['quarantined']:,} lines quarantined"
        )
    print_skipped_files(summary, out)
    print_holdings(summary, out)

    models = Table(title="Turns and sessions per model", title_justify="left")
    for col in ("model", "turns", "sessions", "tool sessions", "failed", "ladder-addressable", "sessions ended on failure"):
        # fold, never cut: the tail of a name is what tells two models apart
        models.add_column(col, justify="left" if col == "model" else "right",
                          overflow="fold" if col == "model" else "ellipsis")
    for m in summary["models"]:
        failed = sum(v["count"] for c, v in m["classes"].items() if c != "ok")
        models.add_row(
            _t(m["model"]), f"{m['turns']:,}", f"{m['sessions']:,}", f"{m['tool_sessions']:,}",
            f"{failed:,}", f"{m['ladder_addressable_total']:,}", f"{m['sessions_ended_on_failure']:,}",
        )
    out.print(models)

    out.print(_class_table(summary))

    inf = summary["inferred"]
    scope = ("across the selected models" if (summary.get("filters") or {}).get("models")
             else "across all models")
    out.print(
        f"{scope} the ladder could address [bold]{summary['ladder_addressable']:,}[/] turns "
        "(tool-history-5xx, and empty-200-stop with tool history); "
        f"{summary['sessions_ended_on_failure']:,} sessions ended on a failure"
    )
    out.print(f"{inf['turns']:,} turns ({_pct(inf['share'])}) are classified on inferred evidence")
    if summary["quarantined_lines"]:
        whole = " (in the whole database)" if summary.get("not_filtered") else ""
        out.print(f"[yellow]{summary['quarantined_lines']:,} malformed lines quarantined{whole}[/], e.g.:")
        for s in summary["quarantine_samples"]:
            out.print(f"  {terminal_text(shown_path(s['path']))}:{s['line_no']}: {terminal_text(s['reason'])}",
                      markup=False)
    note = summary["metrics"]["note"]
    if note:
        out.print(f"[yellow]note:[/] {note}")
    for note in summary.get("notes") or []:
        out.print(f"[yellow]note:[/] {_t(note)}")
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
    out.print(f"[bold]Sizing the ladder[/] (GLM: {_t(', '.join(s['models'])) or 'none'})")
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
            _t(r["trigger"]), _t(r["rung"]), f"{r['reached']:,}", f"{r['recovered']:,}",
            f"{_pct(r['conditional_rate'])} [{_pct(ci[0])}–{_pct(ci[1])}]" if ci else "-",
            f"{_pct(r['cumulative_rate'])} [{_pct(cc[0])}–{_pct(cc[1])}]" if cc else "-",
        )
    return t


def _class_table(summary: dict[str, Any]) -> Table:
    """Classes by row; GLM models each in a column (GLM first), other models together."""
    from .summary import is_glm

    glm = [m for m in summary["models"] if is_glm(m["model"])]
    others = [m for m in summary["models"] if not is_glm(m["model"])]
    groups: list[tuple[str, list[dict]]] = [(_t(m["model"]), [m]) for m in glm[:4]]
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
    window, what the other signals said.

    Pod names share long prefixes (``glm-5-vllm-6f9c7d8b5-k7m2q``, ``...-r4t8w``):
    when the table is wider than the terminal, the common prefix is elided (and
    named under the table), never the tail that tells the pods apart.
    """
    if not episodes:
        return
    pods = [terminal_text(e["pod"] or "?") for e in episodes]
    # Measured without the corroboration text, which wraps: only the names decide
    # whether the pods' common prefix must go.
    excess = out.measure(_episode_table(episodes, pods, evidence=False),
                         options=out.options.update_width(10_000)).maximum - out.width
    prefix = ""
    if excess > 0:
        prefix, pods = elide_common_prefix(pods, max(len(p) for p in pods) - excess)
    table = _episode_table(episodes, pods)
    if table.row_count:
        out.print(table)
        if prefix:
            out.print(f"  (pod names start with {escape(prefix)}…)")
    print_sleeping(episodes, out)


def _episode_table(episodes: list[dict[str, Any]], pods: list[str], evidence: bool = True) -> Table:
    t = Table(title="Wedged and down pods (failures inside are wedged-pod / pod-down: no retry fixes them)",
              title_justify="left")
    for col, justify in (("pod", "left"), ("model", "left"), ("kind", "left"), ("start (UTC)", "left"),
                         ("duration", "right"), ("failed turns", "right"), ("corroboration", "left"))[:7 if evidence else 6]:
        t.add_column(col, justify=justify, overflow="fold" if col in ("pod", "model", "corroboration") else "ellipsis",
                     ratio=1 if col == "corroboration" else None)
    for e, pod in zip(episodes, pods):
        if e["kind"] == "sleeping":
            continue
        cells = [escape(pod), _t(e["model_name"] or "?"), e["kind"], e["start"].replace("T", " ").removesuffix("Z"),
                 _duration(e["duration_s"]), f"{e['failed_turns']:,}"]
        if evidence:
            cells.append(_t((e.get("corroboration") or {}).get("text", "")))
        t.add_row(*cells)
    return t


def print_sleeping(episodes: list[dict[str, Any]], out: Console) -> None:
    """Engines that vllm:engine_sleep_state says were asleep: flat on purpose, not wedged."""
    asleep = [e for e in episodes if e["kind"] == "sleeping"]
    if not asleep:
        return
    s = Table(title="Sleeping engines (vllm:engine_sleep_state; flat on purpose, not wedged)", title_justify="left")
    for col, justify in (("pod", "left"), ("model", "left"), ("start (UTC)", "left"), ("duration", "right")):
        s.add_column(col, justify=justify)
    for e in asleep:
        s.add_row(_t(e["pod"] or "?"), _t(e["model_name"] or "?"),
                  e["start"].replace("T", " ").removesuffix("Z"), _duration(e["duration_s"]))
    out.print(s)


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    if minutes >= 120:
        return f"{minutes / 60:.1f} h"
    return f"{minutes:.0f} min" if minutes >= 1 else f"{seconds:.0f} s"


_SEPARATORS = "-_./:@"
_FORM_NAMES = {"jsonl": "JSONL", "kubectl": "kubectl stdout", "parquet": "Parquet"}


def elide_common_prefix(names: list[str], width: int) -> tuple[str, list[str]]:
    """Shorten ``names`` to about ``width`` characters by dropping what they all start with.

    Returns ``(prefix, shortened)``: the prefix cut at a separator (``-``, ``_``,
    ``.``, ``/``...) so the part left starts a word, and each name as ``…`` plus
    what follows. Names that differ early, or a single name, are returned whole.
    """
    distinct = sorted(set(names))
    if len(distinct) < 2:
        return "", names
    import os

    common = os.path.commonprefix(distinct)
    cut = max((i + 1 for i, ch in enumerate(common) if ch in _SEPARATORS), default=0)
    if cut < 4:  # nothing worth eliding
        return "", names
    del width  # the prefix goes whole: a shorter cut would leave the reader guessing
    return names[0][:cut], ["…" + n[cut:] for n in names]


def print_filters(summary: dict[str, Any], out: Console) -> None:
    """The filters of a filtered summary, and the figures they do not apply to."""
    f = summary.get("filters") or {}
    parts = []
    if f.get("models"):
        parts.append("models " + ", ".join(terminal_text(m) for m in f["models"]))
    if f.get("since"):
        parts.append(f"since {f['since']}")
    if f.get("until"):
        parts.append(f"until {f['until']}")
    if parts:
        out.print(f"filtered: {escape('; '.join(parts))}")
    for note in summary.get("not_filtered") or []:
        out.print(f"  not filtered: {escape(note)}")


def print_holdings(summary: dict[str, Any], out: Console) -> None:
    """What the database holds: files per form, sources, periods, metrics and the wedge window."""
    h = summary.get("database")
    if not h:
        return
    from .holdings import describe_seconds

    forms = ", ".join(f"{n['files']:,} {_FORM_NAMES.get(form, form)}" for form, n in h["forms"].items())
    srcs = h["sources"]
    shown = ", ".join(terminal_text(shown_path(s["source"])) for s in srcs[:3]) + (f" and {len(srcs) - 3} more" if len(srcs) > 3 else "")
    periods = h["periods"]
    span = "; ".join(f"{p['first_day']} .. {p['last_day']}" for p in periods[:4]) + (" ..." if len(periods) > 4 else "")
    out.print(f"the database holds {h['files']:,} file(s) ({forms}) from {len(srcs)} source(s): {escape(shown)}")
    out.print(f"  records {span or '-'}" + (f" in {len(periods)} separate periods" if len(periods) > 1 else ""))
    m = summary.get("metrics") or {}
    if h.get("metric_samples"):
        stored = "" if m.get("wedge_window_stored", True) else " (this run only, not stored)"
        out.print(f"  metrics: {h['metric_samples']:,} samples, {h['metrics_first'] or '-'} .. {h['metrics_last'] or '-'}; "
                  f"pod windows with wedge window {describe_seconds(m.get('wedge_window_s'))}{stored}")
