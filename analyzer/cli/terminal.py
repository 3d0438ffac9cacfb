"""Everything ``analyze`` prints for a person: the summary's tables, the on-call block,
the replay, forget and export reports, warnings on stderr, JSON, progress bars.

The command layer (:mod:`analyzer.cli`) calls the library for data and hands
it here. Log text is untrusted: every string from the data goes through
:mod:`analyzer.core.safetext` (credentials redacted, control characters escaped) or
:func:`shown_text` (already-redacted text: controls escaped), and is never read
as rich markup.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterator

from analyzer.core.focus import is_glm
from analyzer.core.isotime import iso_utc
from analyzer.core.safetext import printable, terminal_text
from analyzer.core.scrub import scrub_strings
from analyzer.jobs.replay import NOT_RECOVERED
from analyzer.online.ladder import NOT_TRIGGERED
from analyzer.store.holdings import describe_seconds

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console
    from rich.table import Table as RichTable

    from analyzer.ingestion.logs import IngestReport
    from analyzer.jobs.forget import ForgetReport
    from analyzer.jobs.lake_build import LakeBuildReport
    from analyzer.jobs.replay import ReplayPlan, ReplayReport
    from analyzer.outputs.export import ExportReport
    from analyzer.outputs.lake import LakeReport


def _t(value: Any) -> str:
    """Log text for a rich string: credentials redacted, controls escaped, never read as markup."""
    return escape(terminal_text(value))


# rich is imported when something is drawn, not with this module: JSON on stdout and
# the lines on stderr need none of it, and a re-run that finds nothing new
# (`analyze s3/ --db X --json`) should not wait for it.


def escape(text: str) -> str:
    """rich's markup escape: log and metric text is untrusted, never read it as markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def Table(*args: Any, **kwargs: Any) -> "RichTable":  # noqa: N802 - stands for rich's class
    """A rich ``Table`` (rich imported on first use)."""
    from rich.table import Table as RichTable

    return RichTable(*args, **kwargs)


def _Console(**kwargs: Any) -> "Console":  # noqa: N802 - stands for the class it makes
    """A rich console that reports a closed pipe as ``BrokenPipeError``.

    Rich's own handling exits with 1; the command line ends a closed pipe
    (``analyze ... | head -1``) quietly with 0.
    """
    return _console_class()(**kwargs)


@lru_cache(maxsize=None)
def _console_class() -> type:
    from rich.console import Console

    class PipeAwareConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError()

    return PipeAwareConsole


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


#: The summary's width into a pipe or a file (rich's default there is 80 columns).
PIPED_WIDTH = 140


def summary_text(summary: dict[str, Any]) -> str:
    """The summary's tables as :func:`print_summary` prints them into a pipe or a file (stdout as it is now)."""
    import io

    class Capture(io.StringIO):  # rich draws its boxes for the encoding of the file it writes
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"

    buf = Capture()
    print_summary(summary, _Console(file=buf, highlight=False, soft_wrap=False, width=PIPED_WIDTH))
    # rich pads a left-justified table title to the table's width: into a file, the
    # padding is only trailing blanks (which diffs and editors flag).
    return "\n".join(line.rstrip(" ") for line in buf.getvalue().split("\n"))


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    """Print the summary of :func:`analyzer.outputs.summary.build_summary` for a person (every string
    scrubbed of credentials first, :func:`analyzer.core.scrub.scrub_strings`)."""
    summary = scrub_strings(summary)
    out = console or _Console(highlight=False, soft_wrap=False, width=None if _on_terminal() else PIPED_WIDTH)
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
        "(tool-history-5xx, and empty-200-stop or answer-in-reasoning with tool history); "
        f"{summary['sessions_ended_on_failure']:,} sessions ended on a failure"
    )
    out.print(f"{inf['turns']:,} turns ({_pct(inf['share'])}) are classified on inferred evidence")
    logged = summary.get("logged_classes") or {}
    if logged.get("turns"):
        pairs = ", ".join(f"logged {_t(d['logged_class'])} / derived {_t(d['derived_class'])} {d['turns']:,}"
                          for d in logged["pairs"][:3])
        verdict = (f"would say otherwise for {logged['disagreements']:,} ({pairs})" if logged["disagreements"]
                   else "agrees on every one")
        out.print(f"{logged['turns']:,} turns carry the class the proxy logged (kept); the analyzer's rule {verdict}")
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


def shown_text(text: Any, limit: int | None = None) -> str:
    """Text for the terminal that needs no redaction (already redacted, or a path): control
    characters shown escaped (:func:`analyzer.core.safetext.printable`), None as ``-``, cut to
    ``limit`` characters with ``…``.

    Escape sequences (``\\x1b]0;...``), carriage returns, bidirectional overrides
    and zero-width characters are written out visibly, so a model name or error
    text can neither retitle the window nor rewrite what was printed before it.
    The caller still escapes rich markup (or prints it as a rich ``Text``).
    """
    if text is None:
        return "-"
    s = printable(text)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    return s


def safe_text(value: Any, limit: int | None = None) -> str:
    """Log text (a path, a reason, a pod name) for a rich string: :func:`shown_text`, markup escaped."""
    return escape(shown_text(value, limit))


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
        f"({_pct(s['sessions_affected_share'])}); lost (ended on a failure): {s['sessions_lost']:,}, "
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
    t = Table(title=f"Did the ladder work? Tool sessions lost per 100, without the ladder "
                    f"({ba['tool_sessions_without']:,} sessions) and with it ({ba['tool_sessions_with']:,}), "
                    "as the records tell them apart (95% intervals)", title_justify="left")
    for col in ("class of the last turn", "without", "with", "change"):
        t.add_column(col, justify="left" if col.startswith("class") else "right")

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
    t = Table(title=f"{title} (outside wedged windows, 95% Wilson intervals)", title_justify="left")
    # A rung the upstream refused (400/422) is not reached; the column shows only when one was.
    refused = any(r.get("refused") for r in rows)
    for col in ("trigger", "rung", "reached", "recovered", *(("refused",) if refused else ()),
                "recovered | reached", "cumulative"):
        t.add_column(col, justify="left" if col in ("trigger", "rung") else "right")
    for r in rows:
        ci, cc = r["conditional_interval"], r["cumulative_interval"]
        t.add_row(
            _t(r["trigger"]), _t(r["rung"]), f"{r['reached']:,}", f"{r['recovered']:,}",
            *((f"{r.get('refused', 0):,}",) if refused else ()),
            f"{_pct(r['conditional_rate'])} [{_pct(ci[0])}–{_pct(ci[1])}]" if ci else "-",
            f"{_pct(r['cumulative_rate'])} [{_pct(cc[0])}–{_pct(cc[1])}]" if cc else "-",
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
                         ("duration", "right"), ("alert after", "right"), ("failed turns", "right"),
                         ("corroboration", "left"))[:8 if evidence else 7]:
        t.add_column(col, justify=justify, overflow="fold" if col in ("pod", "model", "corroboration") else "ellipsis",
                     ratio=1 if col == "corroboration" else None)
    for e, pod in zip(episodes, pods):
        if e["kind"] == "sleeping":
            continue
        kind = f"{e['kind']} (inferred)" if e.get("inferred") else e["kind"]
        cells = [escape(pod), _t(e["model_name"] or "?"), kind, e["start"].replace("T", " ").removesuffix("Z"),
                 _duration(e["duration_s"]), _alert_after(e), f"{e['failed_turns']:,}"]
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


def _alert_after(e: dict[str, Any]) -> str:
    """When the live alert (`analyze alerts`) would have fired, after the window's start; `no page` when
    the window was shorter than its for: (see queries/pod_alert_onset.sql)."""
    if e.get("inferred"):
        return "not seen"  # the alert reads the pod's gauges, which read 0
    if not e.get("alert_at"):
        return "no page"
    from datetime import datetime

    lag = datetime.fromisoformat(e["alert_at"].removesuffix("Z")) - datetime.fromisoformat(e["start"].removesuffix("Z"))
    return _duration(lag.total_seconds())


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
        t = Table(title=f"429 bursts (rate-limited turns of one provider and model at most "
                        f"{section['parameters']['burst_gap_s']:g} s apart)", title_justify="left")
        for col in ("provider", "model", "start (UTC)", "duration", "429s", "calls in window", "ok in window"):
            t.add_column(col, justify="left" if col in ("provider", "model", "start (UTC)") else "right")
        for b in section["rate_limit_bursts"]:
            t.add_row(Text(tt(b["provider"])), Text(tt(b["model"])), b["start"].replace("T", " ").removesuffix("Z")[:19],
                      f"{b['duration_s']:,.0f} s", f"{b['rate_limited_turns']:,}", f"{b['calls_in_window']:,}",
                      f"{b['ok_in_window']:,}")
        out.print(t)

    if not section["latency"]:
        return  # no turns in scope: nothing more to show
    t = Table(title="Latency per model and provider", title_justify="left")
    for col in ("model", "provider", "turns", "p50", "p95", "p99", "max"):
        t.add_column(col, justify="left" if col in ("model", "provider") else "right")
    for r in section["latency"]:
        t.add_row(Text(tt(r["model"])), Text(tt(r["provider"])), f"{r['turns']:,}", _ms(r["p50_ms"]),
                  _ms(r["p95_ms"]), _ms(r["p99_ms"]), _ms(r["max_ms"]))
    out.print(t)

    t = Table(title="Tokens per model (turns with usage)", title_justify="left")
    for col in ("model", "turns", "with usage", "prompt", "completion", "cached", "mean prompt", "mean completion"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for r in section["tokens"]:
        mp, mc = r["mean_prompt_tokens"], r["mean_completion_tokens"]
        t.add_row(Text(tt(r["model"])), f"{r['turns']:,}", f"{r['turns_with_usage']:,}", f"{r['prompt_tokens']:,}",
                  f"{r['completion_tokens']:,}", f"{r['cached_tokens']:,}",
                  f"{mp:,.0f}" if mp is not None else "-", f"{mc:,.0f}" if mc is not None else "-")
    out.print(t)

    if section["error_groups"]:
        shown = section["error_groups"][:10]
        more = len(section["error_groups"]) - len(shown) + section["error_groups_omitted"]
        t = Table(title="Error texts, numbers normalised (most frequent first; analyze sql error_groups for all)"
                        + (f"; {more:,} more" if more else ""), title_justify="left")
        for col in ("turns", "error text", "models", "class"):
            t.add_column(col, justify="right" if col == "turns" else "left")
        for g in shown:
            pattern = Text(("[engine crash] " if g["engine_crash"] else "") + tt(g["pattern"], 100))
            t.add_row(f"{g['turns']:,}", pattern, Text(tt(g["models"], 40)), Text(tt(g["main_class"])))
        out.print(t)


# ---------------------------------------------------------------------------
# Lines on stderr, JSON on stdout, progress


def json_text(doc: Any) -> str:
    """``--json``'s text of ``doc``: indented, times and the like as text, a newline at the end;
    every string scrubbed of credentials (:func:`analyzer.core.scrub.scrub_strings`)."""
    return json.dumps(scrub_strings(doc), indent=2, default=str) + "\n"


def print_json(doc: Any) -> None:
    """``--json``: the document on stdout (:func:`json_text`)."""
    sys.stdout.write(json_text(doc))


def warn(text: str) -> None:
    """``analyze: warning: TEXT`` on stderr; ``text`` is log text (pod names, paths), shown safe."""
    print(f"analyze: warning: {terminal_text(text)}", file=sys.stderr)


def print_ingest_diagnostics(report: "IngestReport") -> None:
    """The files an ingest skipped and its notes, one line each on stderr."""
    for s in report.skipped_files:
        print(f"analyze: warning: skipped {terminal_text(s['path'])}: {terminal_text(s['reason'])}", file=sys.stderr)
    for n in report.notes:
        print(f"analyze: note: {terminal_text(n['path'])}: {terminal_text(n['note'])}", file=sys.stderr)


@contextmanager
def byte_progress(description: str, enabled: bool) -> Iterator:
    """A rich progress bar over bytes on stderr, or a no-op when not on a terminal."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), transient=True,
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


# ---------------------------------------------------------------------------
# `analyze export`, `analyze forget`


def print_export_report(report: "ExportReport") -> None:
    """One line: how many turns went into how many day partitions, and where."""
    removed = f", removed {len(report.removed_days)} stale day(s)" if report.removed_days else ""
    span = f" ({report.days[0]} .. {report.days[-1]})" if report.days else ""
    print(f"exported {report.rows:,} turns in {len(report.days)} day partition(s){span} to {report.path}{removed}")


def print_lake_report(report: "LakeReport") -> None:
    """One line: how many rows of how many relations went into the lake, and where."""
    removed = f", removed {safe_text(', '.join(report.removed))}" if report.removed else ""
    print(f"exported {report.rows:,} rows of {len(report.tables)} relations ({report.files} Parquet files) "
          f"to {safe_text(report.path)}{removed}")


def print_lake_build_report(report: "LakeBuildReport") -> None:
    """What a lake build wrote: the lake's rows and files, the days of records written, what was skipped."""
    lake = report.lake
    days = report.days_written
    span = f" ({days[0]} .. {days[-1]})" if days else ""
    print(f"built {safe_text(lake['path'])} on Spark ({safe_text(report.master)}) in {report.seconds:.0f} s: "
          f"{lake['rows']:,} rows of {len(lake['tables'])} relations ({lake['files']} Parquet files)")
    print(f"  {report.files_read:,} log files read; records of {len(days)} day(s) written{span}, "
          f"{lake['tables'].get('records', 0):,} records and {lake['tables'].get('turns', 0):,} turns in the lake")
    for s in report.skipped_files:
        warn(f"skipped {s['path']}: {s['reason']}")
    for w in report.warnings:
        warn(w)


def print_forget_report(report: "ForgetReport") -> None:
    """What ``forget`` removed (or would), what it read again and re-derived."""
    verb = "would forget" if report.dry_run else "forgot"
    if report.resumed:
        print(f"{'would finish' if report.dry_run else 'finished'} an interrupted forget of "
              f"{len(report.resumed):,} file(s)")
    print(f"{verb} {len(report.files):,} file(s): {report.records:,} records, {report.quarantined:,} quarantined lines"
          + (f", {report.replay_attempts:,} replay attempts" if report.replay_attempts else "")
          + (f", {report.metric_samples:,} metric samples from {len(report.metric_sources)} source(s)"
             if report.metric_sources else ""))
    for p in report.files[:10]:
        print(f"  {terminal_text(p)}")
    if len(report.files) > 10:
        print(f"  ... and {len(report.files) - 10} more")
    if report.kept_straddling:
        print(f"kept {report.kept_straddling} file(s) with records on both sides of the range")
    if report.reread:
        print(f"read again {len(report.reread)} file(s) that held copies of forgotten records")
    if report.reread_missing:
        print(f"note: {len(report.reread_missing)} file(s) that held copies are gone from disk; "
              "their copies are not in the database", file=sys.stderr)
    if report.windows_recomputed:
        print("pod windows recomputed with the stored wedge window; classification up to date")


# ---------------------------------------------------------------------------
# `analyze replay`


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
    counts: dict[str, int] = {}
    for o in report.outcomes:
        counts[o.outcome] = counts.get(o.outcome, 0) + 1
    _say()
    _say("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if counts.get(NOT_TRIGGERED):
        _say(f"{counts[NOT_TRIGGERED]} turn(s) did not fail again on replay (not-triggered): "
             "they count in no recovery rate")
    _say(f"stored {report.stored_attempts} attempt(s) in replay_attempts "
         "(ladder_attempts / ladder_summary rows with source = 'replay')")
    sys.stdout.flush()
