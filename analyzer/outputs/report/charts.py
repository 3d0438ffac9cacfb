"""The report's plotly figures, as JSON ready for the templates.

plotly renders trace names, category labels and hover text as (a subset of)
HTML, so every string that comes from the logs goes through :func:`esc` before
it reaches a figure: ``&``, ``<`` and ``>`` become entities (a model name or
origin like ``<img onerror=...>`` is shown as text, never parsed) and control
characters are shown as ``\\x1b``. Quotes stay as they are: no tag can open
without ``<``, and plotly does not decode ``&quot;`` (a label would show it).
The templates embed the figure with jinja's ``tojson``, which escapes ``<``,
``>``, ``&`` and ``'`` once more for the ``<script>`` element; the browser's JSON
reading undoes that, so plotly sees the text escaped exactly once.
"""

from __future__ import annotations

import html
import json
from datetime import datetime, timedelta
from typing import Any, Iterable, Sequence

import plotly.graph_objects as go

from analyzer.core.safetext import cut_long_words, printable
from analyzer.core.scrub import scrub
from analyzer.outputs.report.context import (
    Baseline,
    BreakdownRow,
    ChartSpec,
    PodWindow,
    PositionRow,
    RungRow,
    TimelineBucket,
)
from analyzer.outputs.report.html import pct

#: One colour per class, the same in every chart (failures warm, ok grey-green).
CLASS_COLORS: dict[str, str] = {
    "ok": "#9fc5a8",
    "tool-history-5xx": "#d62728",
    "empty-200-stop": "#ff7f0e",
    "length-with-no-content": "#9467bd",
    "wedged-pod": "#8c564b",
    "pod-down": "#7f7f7f",
    "timeout": "#e377c2",
    "connection-error": "#bcbd22",
    "other-5xx": "#f7b6d2",
    "rate-limited": "#17becf",
    "client-error": "#aec7e8",
    "client-cancelled": "#c5b0d5",
    "unanswered": "#c49c94",
    "tool-call-stop-mismatch": "#1f77b4",
    "answer-in-reasoning": "#ffbb78",
    "reasoning-leaked": "#dbdb8d",
    "no-answer-200": "#98df8a",
    "connect-timeout": "#ff9896",
    "late-200": "#c7c7c7",
}
WINDOW_COLORS = {"wedged": "#d62728", "down": "#555555"}
_FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"


#: The longest word a chart label shows whole (a longer model name would squeeze the plot to nothing).
LABEL_WORD = 60


def esc(text: Any) -> str:
    """Untrusted text for plotly (names, labels, hover text): credentials scrubbed, over-long words
    cut (:func:`analyzer.core.safetext.cut_long_words`), ``&<>`` escaped once, controls shown escaped."""
    return html.escape(cut_long_words(printable(scrub(text)), LABEL_WORD), quote=False)


def _layout(**extra: Any) -> dict[str, Any]:
    # template "none" keeps each figure small (the default template is ~10 KB of JSON).
    base = {
        "template": "none",
        "font": {"family": _FONT, "size": 12, "color": "#222"},
        "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "hoverlabel": {"font": {"family": _FONT}},
        # Legends above the plot: below it they collide with tick labels on narrow (printed) pages.
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        "xaxis": {"gridcolor": "#eee", "linecolor": "#999", "automargin": True},
        "yaxis": {"gridcolor": "#eee", "linecolor": "#999", "zerolinecolor": "#ccc", "automargin": True},
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


def _spec(chart_id: str, title: str, fig: go.Figure, height: int) -> ChartSpec:
    fig.update_layout(height=height)
    return ChartSpec(id=chart_id, title=title, figure=json.loads(fig.to_json()), height=height)


def _window_shapes(fig: go.Figure, windows: Iterable[PodWindow]) -> None:
    seen: set[str] = set()
    for w in windows:
        fig.add_vrect(
            x0=w.start, x1=w.end, fillcolor=WINDOW_COLORS[w.kind], opacity=0.18, line_width=0, layer="below",
            name=f"{w.kind} window", legendgroup=w.kind, showlegend=w.kind not in seen,
        )
        seen.add(w.kind)


# ---------------------------------------------------------------------------


def timeline_chart(buckets: Sequence[TimelineBucket], classes: Sequence[str], windows: Sequence[PodWindow],
                   granularity: str) -> ChartSpec:
    """Turns per bucket stacked by class; wedged/down windows shaded."""
    fig = go.Figure()
    width_ms = (86_400_000 if granularity == "day" else 3_600_000) * 0.85
    # Bars sit in the middle of their bucket, so shaded windows line up in time.
    half = timedelta(hours=12) if granularity == "day" else timedelta(minutes=30)
    xs = [b.start + half for b in buckets]
    for cls in classes:
        fig.add_trace(go.Bar(
            x=xs, y=[b.counts.get(cls, 0) for b in buckets], name=esc(cls), width=width_ms,
            marker_color=CLASS_COLORS.get(cls, "#999"),
            customdata=[[esc(b.label), b.turns] for b in buckets],
            hovertemplate="%{customdata[0]}<br>" + esc(cls) + ": %{y} of %{customdata[1]} turns<extra></extra>",
        ))
    _window_shapes(fig, windows)
    fig.update_layout(_layout(barmode="stack", yaxis={"title": {"text": "turns"}},
                              xaxis={"type": "date", "tickformat": "%a %m-%d" if granularity == "day" else "%m-%d %H:%M"}))
    return _spec("chart-timeline", f"Turns per {granularity} by class", fig, 380)


def throughput_chart(series: dict[tuple[str, str], list[tuple[datetime, float]]],
                     windows: Sequence[PodWindow]) -> ChartSpec:
    """Generation tokens/s per pod over time; wedged/down windows shaded."""
    fig = go.Figure()
    for (pod, model), points in series.items():
        name = esc(pod if not model else f"{pod} ({model})")
        fig.add_trace(go.Scatter(
            x=[p[0] for p in points], y=[round(p[1], 2) for p in points], mode="lines", name=name,
            line={"width": 1.4}, connectgaps=False,
            hovertemplate=name + "<br>%{x|%a %m-%d %H:%M}: %{y:.1f} tokens/s<extra></extra>",
        ))
    _window_shapes(fig, windows)
    fig.update_layout(_layout(yaxis={"title": {"text": "generation tokens/s"}, "rangemode": "tozero"},
                              xaxis={"type": "date"}))
    return _spec("chart-throughput", "Generation throughput per pod", fig, 360)


def ladder_chart(rungs: Sequence[RungRow]) -> ChartSpec:
    """The funnel: per rung, ladders that reached it vs recovered there; cumulative rate with intervals.

    Rungs are grouped by trigger on a two-level axis (trigger, rung).
    """
    x = [[esc(r.trigger) for r in rungs], [esc(r.rung) for r in rungs]]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=[r.reached for r in rungs], name="reached", marker_color="#c7c7c7",
                         hovertemplate="%{x}: reached by %{y} ladders<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=[r.recovered for r in rungs], name="recovered here", marker_color="#2ca02c",
                         customdata=[[pct(r.conditional_rate), pct(r.conditional_low), pct(r.conditional_high)]
                                     for r in rungs],
                         hovertemplate="%{x}: recovered %{y} (%{customdata[0]} of those reaching it, "
                                       "95% CI %{customdata[1]}–%{customdata[2]})<extra></extra>"))
    triggers = list(dict.fromkeys(r.trigger for r in rungs))
    for i, trigger in enumerate(triggers):
        mine = [r for r in rungs if r.trigger == trigger]
        fig.add_trace(go.Scatter(
            x=[[esc(r.trigger) for r in mine], [esc(r.rung) for r in mine]], y=[r.cumulative_rate for r in mine],
            name="recovered so far (rate, 95% CI)", legendgroup="cumulative", showlegend=i == 0, yaxis="y2",
            mode="lines+markers", marker={"color": "#1f77b4", "size": 8}, line={"color": "#1f77b4"},
            error_y={"type": "data", "symmetric": False,
                     "array": [(r.cumulative_high or 0) - (r.cumulative_rate or 0) for r in mine],
                     "arrayminus": [(r.cumulative_rate or 0) - (r.cumulative_low or 0) for r in mine]},
            hovertemplate="%{x}: %{y:.0%} recovered by this rung<extra></extra>",
        ))
    fig.update_layout(_layout(
        barmode="group", yaxis={"title": {"text": "ladders"}},
        yaxis2={"title": {"text": "cumulative recovery"}, "overlaying": "y", "side": "right", "range": [0, 1.05],
                "tickformat": ".0%", "showgrid": False},
        xaxis={"type": "multicategory"}, margin={"r": 70, "b": 70},
    ))
    return _spec("chart-ladder", "Ladder funnel: reached vs recovered per rung", fig, 400)


def baseline_chart(baseline: Baseline) -> ChartSpec:
    """Without ladder data: what the client did after each ladder-eligible failure."""
    steps = [("retried, worked", baseline.retried_ok, "#2ca02c"), ("retried, failed", baseline.retried_failed, "#d62728"),
             ("moved on", baseline.moved_on, "#ff7f0e"), ("session ended", baseline.session_ended, "#7f7f7f")]
    fig = go.Figure(go.Bar(
        x=[s[0] for s in steps], y=[s[1] for s in steps], marker_color=[s[2] for s in steps],
        hovertemplate="%{x}: %{y} failures<extra></extra>",
    ))
    fig.update_layout(_layout(yaxis={"title": {"text": "eligible failures"}}, showlegend=False))
    return _spec("chart-ladder", "No ladder yet: what the client did after an eligible failure", fig, 320)


def rate_chart(chart_id: str, title: str, rows: Sequence[BreakdownRow] | Sequence[PositionRow],
               *, horizontal: bool, axis_title: str) -> ChartSpec:
    """Failure rate per row with its 95% Wilson interval (breakdowns and positions)."""
    keys = [esc(getattr(r, "key", None) or getattr(r, "bucket", "")) for r in rows]
    rates = [r.failure_rate for r in rows]
    plus = [r.failure_high - r.failure_rate for r in rows]
    minus = [r.failure_rate - r.failure_low for r in rows]
    custom = [[r.turns, r.failed, pct(r.failure_low), pct(r.failure_high),
               esc(getattr(r, "top_failure", None) or "–")] for r in rows]
    hover = ("%{customdata[1]} of %{customdata[0]} turns failed (95% CI %{customdata[2]}–%{customdata[3]})"
             "<br>top failure: %{customdata[4]}<extra></extra>")
    err = {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "color": "#444"}
    if horizontal:
        # Largest first from the top.
        bar = go.Bar(y=keys[::-1], x=rates[::-1], orientation="h", error_x={**err, "array": plus[::-1],
                     "arrayminus": minus[::-1]}, customdata=custom[::-1], hovertemplate="%{y}<br>" + hover,
                     marker_color="#d62728")
        layout = _layout(xaxis={"title": {"text": "failure rate"}, "tickformat": ".0%", "rangemode": "tozero"},
                         yaxis={"type": "category"}, margin={"l": 10}, showlegend=False)
        height = max(180, 48 + 30 * len(rows))
    else:
        bar = go.Bar(x=keys, y=rates, error_y=err, customdata=custom, hovertemplate="%{x}<br>" + hover,
                     marker_color="#d62728")
        layout = _layout(yaxis={"title": {"text": "failure rate"}, "tickformat": ".0%", "rangemode": "tozero"},
                         xaxis={"type": "category", "title": {"text": axis_title}}, showlegend=False)
        height = 300
    fig = go.Figure(bar)
    fig.update_layout(layout)
    return _spec(chart_id, title, fig, height)


def length_chart(failures: Sequence[tuple], answered: Sequence[tuple], reserve: int) -> ChartSpec:
    """Completion tokens vs reasoning characters: turns cut at the cap vs answered thinking turns.

    ``failures``: (completion_tokens, reasoning_chars, cap, request_id, ts);
    ``answered``: (completion_tokens, reasoning_chars).
    """
    fig = go.Figure()
    fig.add_trace(go.Scatter(
        x=[a[0] for a in answered], y=[a[1] for a in answered], mode="markers", name="answered thinking turns",
        marker={"color": "#9fc5a8", "size": 5, "opacity": 0.6},
        hovertemplate="answered: %{x} completion tokens, %{y} reasoning chars<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        x=[f[0] for f in failures], y=[f[1] for f in failures], mode="markers",
        name="length-with-no-content", marker={"color": CLASS_COLORS["length-with-no-content"], "size": 8,
                                               "symbol": "x"},
        customdata=[[f[2], esc(f[3]), f[4].strftime("%m-%d %H:%M") if f[4] else ""] for f in failures],
        hovertemplate="%{customdata[1]} at %{customdata[2]}<br>cut at cap %{customdata[0]}: %{x} tokens, "
                      "%{y} reasoning chars, no answer<extra></extra>",
    ))
    fig.update_layout(_layout(xaxis={"title": {"text": "completion tokens"}, "rangemode": "tozero"},
                              yaxis={"title": {"text": "reasoning characters"}, "rangemode": "tozero"}))
    return _spec("chart-length", f"Reasoning vs completion tokens (answer reserve {reserve} tokens)", fig, 360)
