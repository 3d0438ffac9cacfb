"""``analyze FILES...``: the summary for a person (tables on a terminal, the same laid out
for a wide page into a pipe), or as JSON; and its on-call block."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from analyzer.cli.terminal import (Table, escape, make_console, on_terminal, pct, print_json, safe_text,
                                   shown_text)
from analyzer.cli.terminal import safe_markup as _t
from analyzer.core.focus import is_glm
from analyzer.core.isotime import from_iso_utc
from analyzer.core.paths import shown_path
from analyzer.core.safetext import terminal_text
from analyzer.core.scrub import scrub_strings
from analyzer.store.holdings import describe_seconds

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console


#: The summary's width into a pipe or a file (rich's default there is 80 columns).
PIPED_WIDTH = 140


def show_summary(summary: dict[str, Any], json_out: bool) -> None:
    """Print the summary on stdout: JSON with ``json_out``; else tables for this terminal, or
    laid out for a wide page into a pipe or a file (:func:`summary_text`)."""
    if json_out:
        print_json(summary)
    elif on_terminal():
        print_summary(summary)
    else:
        sys.stdout.write(summary_text(summary))


def summary_text(summary: dict[str, Any]) -> str:
    """The summary's tables as :func:`print_summary` prints them into a pipe or a file (stdout as it is now)."""
    import io

    class Capture(io.StringIO):  # rich draws its boxes for the encoding of the file it writes
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"

    buf = Capture()
    print_summary(summary, make_console(file=buf, highlight=False, soft_wrap=True, width=PIPED_WIDTH))
    # rich pads a left-justified table title to the table's width: into a file, the
    # padding is only trailing blanks (which diffs and editors flag).
    return "\n".join(line.rstrip(" ") for line in buf.getvalue().split("\n"))


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the summary of :func:`analyzer.outputs.summary.build_summary` for a person (every string
    scrubbed of credentials first, :func:`analyzer.core.scrub.scrub_strings`)."""
    summary = scrub_strings(summary)
    # Into a pipe or a file every sentence stays on one line (grep finds it); tables are
    # laid out for a page PIPED_WIDTH wide. On a terminal rich wraps prose at words.
    terminal = on_terminal()
    out = console or make_console(highlight=False, soft_wrap=not terminal, width=None if terminal else PIPED_WIDTH)
    tr = summary["time_range"]
    ing = summary.get("ingest") or {}
    verdict = summary.get("verdict") or {}
    for i, line in enumerate(verdict.get("lines") or []):
        out.print(("[bold]" + _t(line) + "[/]") if i == 0 else _t(line))
    if verdict.get("lines"):
        out.print()
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

    # never cut: the tail of a name is what tells two models apart (too wide: the table stacks)
    models = _table("Turns and sessions per model", ("model", "turns", "sessions", "tool sessions", "failed",
                                                     "ladder addressable", "sessions ended on failure"), names=("model",))
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
        "(tool-history-5xx, and empty-200-stop or answer-in-reasoning with tool history); "
        f"{summary['sessions_ended_on_failure']:,} sessions ended on a failure"
    )
    out.print(f"{inf['turns']:,} turns ({pct(inf['share'])}) are classified on inferred evidence")
    logged = summary.get("logged_classes") or {}
    if logged.get("turns"):
        pairs = ", ".join(f"logged {_t(d['logged_class'])} / derived {_t(d['derived_class'])} {d['turns']:,}"
                          for d in logged["pairs"][:3])
        agreement = (f"would say otherwise for {logged['disagreements']:,} ({pairs})" if logged["disagreements"]
                   else "agrees on every one")
        out.print(f"{logged['turns']:,} turns carry the class the proxy logged (kept); the analyzer's rule {agreement}")
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
    print_deployment(summary.get("deployment"), out)
    print_proxy_health(summary, out)
    if summary.get("sizing"):
        print_sizing(summary["sizing"], out)
    print_oncall(summary.get("oncall"), out)
    print_next(summary.get("next"), out)


def _table(title: str, columns: tuple[str, ...], names: tuple[str, ...], left: tuple[str, ...] = ()) -> Table:
    """A titled table of figures: the ``names`` columns left-justified and never wrapped (a name too
    wide stacks the table, :func:`Table`), the ``left`` ones left-justified, the rest right-justified."""
    t = Table(title=title, title_justify="left")
    for col in columns:
        t.add_column(col, justify="left" if col in names or col in left else "right", no_wrap=col in names)
    return t


def print_next(section: dict[str, Any] | None, out: Console) -> None:
    """Where the database is and what to run next (the summary's last lines)."""
    if not section:
        return
    out.print()
    out.print(f"The database is {_t(section['database'])}. Next:")
    width = max(len(c["command"]) for c in section["commands"])
    for c in section["commands"]:
        out.print(f"  {_t(c['command']).ljust(width)}  {_t(c['does'])}")




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
        t = _table("Per proxy replica (proxy_pod)",
                   ("replica", "turns", "failed", "failure rate", "slow warnings", "lost records"), names=("replica",))
        for r in replicas:
            t.add_row(safe_text(r["proxy_pod"]) if r["proxy_pod"] is not None else "(not said)",
                      f"{r['turns']:,}", f"{r['failed']:,}", pct(r["failure_rate"]),
                      f"{r['slow_warnings']:,}", f"{r['lost_records']:,}")
        out.print(t)


def print_deployment(section: dict[str, Any] | None, out: Console) -> None:
    """What needs a deployment fix rather than a retry (:mod:`analyzer.outputs.deployment`), one line each."""
    findings = (section or {}).get("findings") or []
    if not findings:
        return
    out.print("[bold]Deployment fixes[/] (a retry does not mend these)")
    for f in findings:
        out.print(f"  {_t(f['message'])}")


def print_sizing(s: dict[str, Any], out: Console) -> None:
    """The sizing block: eligible incidents, recovery per rung or the baseline, the conclusion."""
    out.print()
    out.print(f"[bold]Sizing the ladder[/] (GLM: {_t(', '.join(s['models'])) or 'none'})")
    trig = ", ".join(f"{k} {v:,}" for k, v in sorted(s["eligible_by_trigger"].items()))
    out.print(f"  eligible incidents: {s['eligible_incidents']:,}" + (f" ({trig})" if trig else ""))
    in_reasoning = s["eligible_by_trigger"].get("answer-in-reasoning", 0)
    if in_reasoning:
        out.print(f"  answer-in-reasoning (the answer filed as reasoning): {in_reasoning:,} eligible with tool history; "
                  "a retry may get an answer, the lasting fix is the deployment's reasoning parser")
    out.print(
        f"  tool sessions: {s['tool_sessions']:,}; affected by an eligible failure: {s['sessions_affected']:,} "
        f"({pct(s['sessions_affected_share'])}); lost (ended on a failure): {s['sessions_lost']:,}, "
        f"of which to eligible failures {s['sessions_lost_to_eligible']:,}"
        + (f", {s['turns_per_lost_session']} turns per lost session" if s["turns_per_lost_session"] else "")
    )
    if s["ladder_rungs"]:
        out.print(
            f"  of the lost to eligible failures: without a ladder {s['sessions_lost_without_ladder']:,} "
            f"(the projection applies to these only), after the ladder ran out of rungs "
            f"{s['sessions_lost_after_ladder']:,} (measured); saved by the ladder {s['sessions_saved_by_ladder']:,} "
            "(measured)"
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
    if s.get("before_after"):
        out.print(_before_after_table(s["before_after"]))
    out.print(f"[bold]{s['conclusion']}[/]")


def _before_after_table(ba: dict[str, Any]) -> Table:
    """Tool sessions lost per 100 without and with the ladder, per class, with 95% intervals."""
    neither = ba.get("tool_sessions_neither") or 0
    t = _table(f"Did the ladder work? Tool sessions lost per 100, without the ladder "
               f"({ba['tool_sessions_without']:,} sessions) and with it ({ba['tool_sessions_with']:,}), "
               "as the records tell them apart (95% intervals)"
               + (f"; {neither:,} more in neither (the ladder was off for their model, or their records do "
                  "not say)" if neither else ""),
               ("class of the last turn", "without", "with", "change"), names=("class of the last turn",))

    def rate(p, lo, hi, k):
        return f"{p:.1f} [{lo:.1f}–{hi:.1f}] ({k:,})"

    for r in ba["classes"]:
        t.add_row(_t(r["lost_class"]),
                  rate(r["per_100_without"], r["per_100_without_low"], r["per_100_without_high"], r["lost_without"]),
                  rate(r["per_100_with"], r["per_100_with_low"], r["per_100_with_high"], r["lost_with"]),
                  f"{r['change_per_100']:+.1f} [{r['change_low']:+.1f} to {r['change_high']:+.1f}]")
    return t


def _rung_table(rows: list[dict[str, Any]], title: str) -> Table:
    """Per-rung recovery with 95% Wilson intervals."""
    # A rung the upstream refused (400/422) is not reached; the column shows only when one was.
    refused = any(r.get("refused") for r in rows)
    t = _table(f"{title} (outside wedged windows, 95% Wilson intervals)",
               ("trigger", "rung", "reached", "recovered", *(("refused",) if refused else ()),
                "recovered | reached", "cumulative"), names=("trigger", "rung"))
    for r in rows:
        ci, cc = r["conditional_interval"], r["cumulative_interval"]
        t.add_row(
            _t(r["trigger"]), _t(r["rung"]), f"{r['reached']:,}", f"{r['recovered']:,}",
            *((f"{r.get('refused', 0):,}",) if refused else ()),
            f"{pct(r['conditional_rate'])} [{pct(ci[0])}–{pct(ci[1])}]" if ci else "-",
            f"{pct(r['cumulative_rate'])} [{pct(cc[0])}–{pct(cc[1])}]" if cc else "-",
        )
    return t


def _class_table(summary: dict[str, Any]) -> Table:
    """Classes by row; GLM models each in a column (GLM first), other models together."""
    glm = [m for m in summary["models"] if is_glm(m["model"])]
    others = [m for m in summary["models"] if not is_glm(m["model"])]
    groups: list[tuple[str, list[dict]]] = [(_t(m["model"]), [m]) for m in glm[:4]]
    if len(glm) > 4:
        groups.append((f"other GLM ({len(glm) - 4})", glm[4:]))
    if others:
        groups.append((f"other models ({len(others)})", others))
    t = Table(title="Incident classes: count · share of the column's turns", title_justify="left")
    t.add_column("class", no_wrap=True)
    for name, _ in groups:
        t.add_column(name, justify="right")
    t.add_column("all", justify="right")
    totals = {name: sum(m["turns"] for m in ms) for name, ms in groups}
    for cls, total in summary["classes"].items():
        cells = []
        for name, ms in groups:
            n = sum(m["classes"].get(cls, {}).get("count", 0) for m in ms)
            cells.append(f"{n:,} · {pct(n / totals[name])}" if n else "-")
        t.add_row(cls, *cells, f"{total['count']:,} · {pct(total['rate'])}")
    return t


def print_episodes(episodes: list[dict[str, Any]], out: Console) -> None:
    """Wedged, down and sleeping pods from the metrics, the failed turns each one explains
    (each turn in one window, so the column adds up to the classes) and, per wedged
    window, what the other signals said.

    A table too wide for the terminal stacks (:func:`Table`): pod names that share a
    long prefix (``glm-5-vllm-6f9c7d8b5-k7m2q``, ``...-r4t8w``) stay whole.
    """
    if not episodes:
        return
    table = _episode_table(episodes)
    if table.row_count:
        out.print(table)
    print_sleeping(episodes, out)


def _episode_table(episodes: list[dict[str, Any]]) -> Table:
    t = Table(title="Wedged and down pods (failures inside are wedged-pod / pod-down: no retry fixes them)",
              title_justify="left")
    for col, justify in (("pod", "left"), ("model", "left"), ("kind", "left"), ("start (UTC)", "left"),
                         ("duration", "right"), ("alert after", "right"), ("failed turns", "right"),
                         ("corroboration", "left")):
        t.add_column(col, justify=justify, overflow="fold" if col == "corroboration" else "ellipsis",
                     ratio=1 if col == "corroboration" else None, no_wrap=col != "corroboration")
    for e in episodes:
        if e["kind"] == "sleeping":
            continue
        kind = f"{e['kind']} (inferred)" if e.get("inferred") else e["kind"]
        evidence = ("suspected: requests failed while the counter was flat and the gauges read 0 (frozen gauges)"
                    if e.get("inferred") else _t((e.get("corroboration") or {}).get("text", "")))
        t.add_row(_t(e["pod"] or "?"), _t(e["model_name"] or "?"), kind, e["start"][:19].replace("T", " "),
                  _duration(e["duration_s"]), _alert_after(e), f"{e['failed_turns']:,}", evidence)
    return t


def print_sleeping(episodes: list[dict[str, Any]], out: Console) -> None:
    """Engines that vllm:engine_sleep_state says were asleep: flat on purpose, not wedged."""
    asleep = [e for e in episodes if e["kind"] == "sleeping"]
    if not asleep:
        return
    s = _table("Sleeping engines (vllm:engine_sleep_state; flat on purpose, not wedged)",
               ("pod", "model", "start (UTC)", "duration"), names=("pod", "model"), left=("start (UTC)",))
    for e in asleep:
        s.add_row(_t(e["pod"] or "?"), _t(e["model_name"] or "?"),
                  e["start"].replace("T", " ").removesuffix("Z"), _duration(e["duration_s"]))
    out.print(s)


def _alert_after(e: dict[str, Any]) -> str:
    """When the live alert (`analyze alerts`) would have fired, after the window's start; `no page` when
    the window was shorter than its for: (see queries/pod_alert_onset.sql)."""
    if e.get("inferred"):
        return "not seen"  # the alert reads the pod's gauges, which read 0
    if not e.get("alert_at"):
        return "no page"
    lag = from_iso_utc(e["alert_at"]) - from_iso_utc(e["start"])
    return _duration(lag.total_seconds())


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    if minutes >= 120:
        return f"{minutes / 60:.1f} h"
    return f"{minutes:.0f} min" if minutes >= 1 else f"{seconds:.0f} s"


_FORM_NAMES = {"jsonl": "JSONL", "kubectl": "kubectl stdout", "parquet": "Parquet"}


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


# ---------------------------------------------------------------------------
# The on-call block (the summary's `oncall` key, :mod:`analyzer.outputs.oncall`)


def _ms(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:,.1f} s" if value >= 10_000 else f"{value:,.0f} ms"


def print_oncall(section: dict[str, Any] | None, out: Any) -> None:
    """Print the on-call block for a person: incidents, crashes, 429 bursts, latency, tokens, error texts.

    The block's log text is redacted already (:func:`analyzer.outputs.oncall.build_oncall`);
    each piece goes through :func:`shown_text` and is given to rich as plain
    text, never as markup.
    """
    if not section:
        return
    from rich.text import Text

    tt = shown_text
    out.print()
    out.print(Text("What on-call looks at", style="bold"))
    for inc in section["incidents"]:
        out.print(Text("  incident: ", style="bold red") + Text(tt(inc["incident"]))
                  + Text(f" ({tt(inc['first'])} .. {tt(inc['last'])})"))
    crashes = [g for g in section["error_groups"] if g["engine_crash"]]
    for g in crashes:
        out.print(Text("  vLLM engine crash: ", style="bold red")
                  + Text(f"{g['turns']:,} turn(s) of {tt(g['models'])}, last {tt(g['last'])}: {tt(g['pattern'], 160)}"))
    if not section["incidents"] and not crashes:
        out.print("  no provider or model failed every call; no vLLM engine crash texts")

    if section["rate_limit_bursts"]:
        t = _table(f"429 bursts (rate-limited turns of one provider and model at most "
                   f"{section['parameters']['burst_gap_s']:g} s apart)",
                   ("provider", "model", "start (UTC)", "duration", "429s", "calls in window", "ok in window"),
                   names=("provider", "model"), left=("start (UTC)",))
        for b in section["rate_limit_bursts"]:
            t.add_row(Text(tt(b["provider"])), Text(tt(b["model"])), b["start"].replace("T", " ").removesuffix("Z")[:19],
                      f"{b['duration_s']:,.0f} s", f"{b['rate_limited_turns']:,}", f"{b['calls_in_window']:,}",
                      f"{b['ok_in_window']:,}")
        out.print(t)

    if not section["latency"]:
        return  # no turns in scope: nothing more to show
    t = _table("Latency per model and provider", ("model", "provider", "turns", "p50", "p95", "p99", "max"),
               names=("model", "provider"))
    for r in section["latency"]:
        t.add_row(Text(tt(r["model"])), Text(tt(r["provider"])), f"{r['turns']:,}", _ms(r["p50_ms"]),
                  _ms(r["p95_ms"]), _ms(r["p99_ms"]), _ms(r["max_ms"]))
    out.print(t)

    t = _table("Tokens per model (turns with usage)", ("model", "turns", "with usage", "prompt", "completion", "cached",
                                                        "mean prompt", "mean completion"), names=("model",))
    for r in section["tokens"]:
        mp, mc = r["mean_prompt_tokens"], r["mean_completion_tokens"]
        t.add_row(Text(tt(r["model"])), f"{r['turns']:,}", f"{r['turns_with_usage']:,}", f"{r['prompt_tokens']:,}",
                  f"{r['completion_tokens']:,}", f"{r['cached_tokens']:,}",
                  f"{mp:,.0f}" if mp is not None else "-", f"{mc:,.0f}" if mc is not None else "-")
    out.print(t)

    if section["error_groups"]:
        shown = section["error_groups"][:10]
        more = len(section["error_groups"]) - len(shown) + section["error_groups_omitted"]
        t = _table("Error texts, numbers normalised (most frequent first; analyze sql error_groups for all)"
                   + (f"; {more:,} more" if more else ""),
                   ("turns", "error text", "models", "class"), names=("class",), left=("error text", "models"))
        for g in shown:
            pattern = Text(("[engine crash] " if g["engine_crash"] else "") + tt(g["pattern"], 100))
            t.add_row(f"{g['turns']:,}", pattern, Text(tt(g["models"])), Text(tt(g["main_class"])))
        out.print(t)
