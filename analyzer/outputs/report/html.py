"""Render the report context into one self-contained HTML file with jinja2.

The templates live in ``dashboards/`` (``report.html.j2`` and its partials); the
environment autoescapes everything and fails on any name the context does not
define (``StrictUndefined``), so a template cannot silently read something that
is not documented in :mod:`analyzer.outputs.report.context`.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from analyzer.core.paths import dashboards_dir
from analyzer.core.safetext import cut_long_words, page_text
from analyzer.core.scrub import scrub
from analyzer.outputs.report.context import ReportContext

TEMPLATE = "report.html.j2"


# ---------------------------------------------------------------------------
# Filters the templates use (documented in docs/report.md)


def num(value: float | int | None, digits: int = 0) -> str:
    """A number with thousands separators (``–`` for None)."""
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def pct(rate: float | None, digits: int = 1) -> str:
    """A rate in [0, 1] as a percentage (``–`` for None)."""
    return "–" if rate is None else f"{rate * 100:.{digits}f}%"


def interval(low: float | None, high: float | None) -> str:
    """A 95% interval of rates: ``[12.0%–34.5%]``."""
    if low is None or high is None:
        return ""
    return f"[{low * 100:.1f}%–{high * 100:.1f}%]"


def when(value: datetime | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """A UTC time (``–`` for None)."""
    return "–" if value is None else value.strftime(fmt)


def change(current: int | float | None, previous: int | float | None) -> str:
    """Change of a count: ``+12 (+8%)``."""
    if current is None or previous is None:
        return "–"
    diff = current - previous
    rel = f" ({diff / previous * 100:+.0f}%)" if previous else ""
    return f"{diff:+,}{rel}" if isinstance(diff, int) else f"{diff:+,.1f}{rel}"


def pp_change(current: float | None, previous: float | None) -> str:
    """Change of a rate in percentage points: ``+1.2 pp``."""
    if current is None or previous is None:
        return "–"
    return f"{(current - previous) * 100:+.1f} pp"


def size(n: int | None) -> str:
    """A byte count for people: ``4.6 MB``."""
    if n is None:
        return "–"
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


FILTERS = {"num": num, "pct": pct, "interval": interval, "when": when, "change": change,
           "pp_change": pp_change, "size": size}


def _finalize(value: Any) -> Any:
    """Every value a template prints: a plain string (log text) is scrubbed of credentials
    (:func:`analyzer.core.scrub.scrub`, a last pass: the context's log text is scrubbed already),
    has its control characters shown as escapes (:func:`analyzer.core.safetext.page_text`) and
    its over-long words cut (:func:`analyzer.core.safetext.cut_long_words`: a 5,000-character
    model name would make the page that wide); markup (``tojson`` of a chart, plotly.js) is ours."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return cut_long_words(page_text(scrub(value)))
    return value


def template_environment(
    templates: str | Path | None = None, environment_class: type[jinja2.Environment] = jinja2.Environment
) -> jinja2.Environment:
    """The jinja2 environment over ``dashboards/`` (or ``templates``): autoescaped, strict,
    every printed string scrubbed and its control characters escaped (:func:`_finalize`)."""
    env = environment_class(
        loader=jinja2.FileSystemLoader(str(templates or dashboards_dir())),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.filters.update(FILTERS)
    return env


def template_variables(context: ReportContext) -> dict[str, Any]:
    """The template's variables: the fields of the context, by name."""
    return {name: getattr(context, name) for name in type(context).model_fields}


def render_html(context: ReportContext, environment: jinja2.Environment | None = None) -> str:
    """The report page as one HTML string."""
    js = context.assets.plotly_js
    if js is not None and "</script" in js.lower():
        # Inline JavaScript must not be able to close its own <script> element.
        raise ValueError("the plotly.js source contains '</script' and cannot be inlined")
    env = environment or template_environment()
    return env.get_template(TEMPLATE).render(**template_variables(context))


def write_html(html: str, output: str | Path) -> Path:
    """Write the page atomically (a reader never sees half a report); return its path."""
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(html)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
