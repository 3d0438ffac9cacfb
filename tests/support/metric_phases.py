"""Metric scenarios in scrapes: phases of a vLLM pod at a 15 s scrape interval, written as CSV exports.

:func:`phases` turns a list of ``(kind, scrapes)`` (busy, idle, wedged, stuck, restart,
restart-stuck, gap; tests/unit/classification/test_metrics_windows.py says what each is)
into ``(epoch, counter, running)`` per scrape, :func:`t_of` is the time of scrape ``i``,
:func:`write_csv` writes rows as a CSV export, and :func:`windows` reads back the
``pod_windows`` the wedge rule found, for a wedge window of :data:`W` (8 scrapes).
"""

from __future__ import annotations

import csv
from pathlib import Path

from tests.support.records import T0

EPOCH0 = int(T0.timestamp())  # 2026-11-16T14:00:00Z, the log records' T0
STEP = 15
W = "2m"


def t_of(i: int) -> int:
    """Epoch seconds of scrape number ``i``."""
    return EPOCH0 + STEP * i


def phases(*spec: tuple[str, int]) -> list[tuple[int, float | None, float | None]]:
    """(epoch, counter, running) per scrape; None where nothing was scraped."""
    out, v, i = [], 1000.0, 0
    for kind, n in spec:
        for k in range(n):
            if kind == "busy":
                v, running = v + 250, 2
            elif kind == "idle":
                running = 0
            elif kind == "wedged":
                running = 3
            elif kind == "stuck":
                running = 0
            elif kind == "restart":
                v, running = (40.0 if k == 0 else v + 250), 1
            elif kind == "restart-stuck":  # restarted, then generates nothing under demand
                v, running = 0.0, 3
            elif kind == "gap":
                out.append((t_of(i), None, None))
                i += 1
                continue
            else:
                raise ValueError(kind)
            out.append((t_of(i), v, running))
            i += 1
    return out


def write_csv(path: Path, rows) -> str:
    """``rows`` as a metrics CSV export (timestamp, metric, labels, value) at ``path``; returns the path."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "metric", "labels", "value"])
        w.writerows(rows)
    return str(path)


def windows(con, kind=None):
    """(pod, model, kind, start epoch, end epoch) of pod_windows, sorted."""
    rows = con.execute(
        "SELECT pod, model_name, kind, epoch(start_ts)::BIGINT, epoch(end_ts)::BIGINT FROM pod_windows "
        "WHERE $k IS NULL OR kind = $k ORDER BY pod, kind, start_ts", {"k": kind}).fetchall()
    return [tuple(r) for r in rows]
