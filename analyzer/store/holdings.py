"""The database as a record of what it holds: its files, sources, periods and stored settings.

One database may collect many weeks. The summary says what it holds (files per
form, the sources they came from, the periods its records cover), a run that adds
a period apart from the others or a new source says so, and the wedge window the
pod windows were computed with is stored, so a one-off ``--wedge-window`` does
not change what later commands (the report, ``analyze sql``) see unless
``--save-wedge-window`` asks for it.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from pathlib import PurePath
from typing import Any

import duckdb

from analyzer.core.isotime import iso_utc as _iso
from analyzer.store.asking import ask

#: The wedge window when neither the option nor the database says one. It is also
#: the counter rules' scrape gap (queries/counter_rules.sql reads the same setting
#: and default): a hole longer than the window is unknown time.
DEFAULT_WEDGE_WINDOW_S = 300.0
_DAY_DIR = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# Record days further apart than this are separate periods.
_PERIOD_GAP = timedelta(days=1)


def source_of(path: str) -> str:
    """The source a file belongs to: its folder, above a ``YYYY-MM-DD`` day folder."""
    if "://" in path:
        scheme, _, rest = path.partition("://")
        parts = rest.split("/")
        keep = [p for p in parts[:-1]]
        while keep and _DAY_DIR.match(keep[-1]):
            keep.pop()
        return f"{scheme}://{'/'.join(keep)}"
    parent = PurePath(path).parent
    while _DAY_DIR.match(parent.name) or parent.name == "consolidated":
        parent = parent.parent
    return str(parent)


def _periods(days: list[date]) -> list[tuple[date, date]]:
    spans: list[tuple[date, date]] = []
    for d in sorted(days):
        if spans and d - spans[-1][1] <= _PERIOD_GAP:
            spans[-1] = (spans[-1][0], d)
        else:
            spans.append((d, d))
    return spans


def holdings(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """What the database holds: files per form, sources, record time range and periods, metrics.

    JSON-ready; the summary prints it as its ``database`` part.
    """
    # The questions of queries/ (input_files_by_form, input_folders, records_held,
    # record_days, metrics_held), run by name over the whole database.
    forms = {form: {"files": n, "records": int(r or 0), "quarantined": int(q or 0)}
             for form, n, r, q, _bytes in ask(con, "input_files_by_form")}
    sources: dict[str, int] = {}
    # One row per folder, not per file: a database of 10,000 chunks has a few folders.
    # (parse_dirpath, not a regexp: half the cost, and this runs twice on every run.)
    for folder, n, example in ask(con, "input_folders"):
        src = source_of(example)
        sources[src] = sources.get(src, 0) + n
    first, last, n_records = next(iter(ask(con, "records_held")), (None, None, 0))
    days = [d for (d,) in ask(con, "record_days")]
    samples, s_first, s_last, _windows = next(iter(ask(con, "metrics_held")), (0, None, None, 0))
    return {
        "files": sum(f["files"] for f in forms.values()),
        "forms": forms,
        "sources": [{"source": s, "files": n} for s, n in sources.items()],
        "records": n_records,
        "first": _iso(first),
        "last": _iso(last),
        "periods": [{"first_day": a.isoformat(), "last_day": b.isoformat()} for a, b in _periods(days)],
        "metric_samples": samples,
        "metrics_first": _iso(s_first),
        "metrics_last": _iso(s_last),
        "wedge_window_s": stored_wedge_window(con),
    }


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What a run added that the operator should know: a period apart from the others, a new source.

    ``before``/``after`` are :func:`holdings` taken around the run. Nothing is said
    for the first run into an empty database.
    """
    if not before["records"] and not before["files"]:
        return []
    notes = []
    old_days = {(p["first_day"], p["last_day"]) for p in before["periods"]}
    old_spans = [(date.fromisoformat(a), date.fromisoformat(b)) for a, b in old_days]
    for p in after["periods"]:
        a, b = date.fromisoformat(p["first_day"]), date.fromisoformat(p["last_day"])
        if old_spans and not any(a <= ob and oa <= b for oa, ob in old_spans):
            held = ", ".join(f"{x} .. {y}" for x, y in sorted(old_days))
            notes.append(f"this run added records from {a} to {b}, a period apart from what the database "
                         f"held ({held}): the summary covers all of it; narrow it with --since/--until, "
                         "or keep each period in its own --db")
    old_sources = {s["source"] for s in before["sources"]}
    new_sources = [s["source"] for s in after["sources"] if s["source"] not in old_sources]
    if new_sources and old_sources:
        notes.append(f"this run added {len(new_sources)} new source(s): {', '.join(new_sources[:3])}"
                     f"{' ...' if len(new_sources) > 3 else ''} (the database held {', '.join(sorted(old_sources)[:3])}"
                     f"{' ...' if len(old_sources) > 3 else ''})")
    return notes


# ---------------------------------------------------------------------------
# The stored wedge window


#: The setting that keeps the wedge window of the stored pod windows (seconds).
WEDGE_WINDOW_SETTING = "pod_windows.wedge_window_s"


def stored_wedge_window(con: duckdb.DuckDBPyConnection) -> float | None:
    """The wedge window (seconds) the database's pod windows were computed with, or None if never recorded."""
    row = con.execute("SELECT value FROM settings WHERE name = ?", [WEDGE_WINDOW_SETTING]).fetchall()
    return float(row[0][0]) if row else None


def store_wedge_window(con: duckdb.DuckDBPyConnection, seconds: float) -> None:
    """Record ``seconds`` as the wedge window of the stored pod windows (later runs recompute with it)."""
    con.execute("INSERT OR REPLACE INTO settings VALUES (?, ?, ?)",
                [WEDGE_WINDOW_SETTING, repr(float(seconds)), datetime.now(timezone.utc).replace(tzinfo=None)])


def plan_wedge_window(con: duckdb.DuckDBPyConnection, requested_s: float | None, save: bool) -> tuple[float, float | None]:
    """Which wedge window to store windows with, and which to use for this run only.

    Returns ``(stored_s, one_off_s)``: the pod windows the database keeps are
    computed with ``stored_s`` (the database's setting, else 5 min, or the
    requested one with ``save``); ``one_off_s`` is the requested window when it
    differs and was not saved (None otherwise).
    """
    stored = stored_wedge_window(con)
    if requested_s is not None and save:
        return requested_s, None
    base = stored if stored is not None else DEFAULT_WEDGE_WINDOW_S
    if requested_s is None or abs(requested_s - base) < 1e-9:
        return base, None
    return base, requested_s


def describe_seconds(seconds: float | None) -> str:
    """``300.0`` as ``5m``, ``3600`` as ``1h``, ``90`` as ``90s``."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
