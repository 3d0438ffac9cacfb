"""Do the live alerts agree with the analyzer's windows? The sample week in a real Prometheus.

The offline rule (:mod:`analyzer.classification.windows`) and the alerting rules
(:mod:`analyzer.outputs.alerts`) are the same rule written twice; this runs both on the
same metrics and compares them:

1. the sample week's metrics (``sample_logs/metrics/*.json``) are written as
   OpenMetrics and backfilled with ``promtool tsdb create-blocks-from openmetrics``;
2. a real ``prometheus`` serves them with the generated rule file loaded
   (``/api/v1/rules`` must list every rule healthy);
3. a Prometheus evaluates rules only from the time it starts, so each alert's
   expression, its recording rules written out
   (:func:`analyzer.outputs.alerts.inline_recording_rules`: a group evaluates them first at
   the same timestamp), is evaluated over the week with ``query_range`` at the rule
   group's interval (what the rule manager's evaluations would return), and
   ``for:`` is applied as the rule manager applies it: firing once the expression
   has held at every evaluation for ``for:``;
4. the firing intervals are compared with the analyzer's own windows
   (:func:`analyzer.jobs.metrics.load_metrics` on the same files): every wedged and
   down window must fire, nothing may fire outside one, and each onset lag
   (first firing evaluation minus the window's start) must be at most the wedge
   window plus one evaluation interval.

Backfilled samples carry no staleness markers (a live Prometheus writes them when
a target disappears), so the server looks back less than one step
(``--query.lookback-delta``): a series that ends, ends there, as it would live.

    python -m tools.alert_agreement        # prints the agreement figure; exit 1 on a disagreement
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import httpx

from tools.prometheus_process import prometheus_process

ROOT = Path(__file__).resolve().parent.parent
METRICS = ROOT / "sample_logs" / "metrics"
MAX_POINTS = 11_000


@dataclass
class Interval:
    """One alert's firing interval (first and last firing evaluation, epoch seconds)."""

    alert: str
    labels: dict[str, str]
    first: float
    last: float
    kind: str = ""  # wedged / down, as the offline windows
    pod: str | None = None  # the pod identity, as the offline rule reads it from the labels


@dataclass
class Agreement:
    """The comparison: offline windows, alert intervals, and what matched."""

    wedge_window_s: float
    interval_s: float
    windows: list[dict] = field(default_factory=list)  # + "fired_at", "lag_s", "resolved_at"
    intervals: list[Interval] = field(default_factory=list)
    outside: list[Interval] = field(default_factory=list)
    rules_loaded: int = 0
    seconds: float = 0.0

    @property
    def missed(self) -> list[dict]:
        return [w for w in self.windows if w.get("fired_at") is None]

    @property
    def late(self) -> list[dict]:
        bound = self.wedge_window_s + self.interval_s
        return [w for w in self.windows if w.get("lag_s") is not None and w["lag_s"] > bound]

    @property
    def ok(self) -> bool:
        return bool(self.windows) and not self.missed and not self.outside and not self.late

    def figure(self) -> str:
        """The agreement as printed."""
        from analyzer.outputs.alerts import prom_duration

        kinds = {k: sum(1 for w in self.windows if w["kind"] == k) for k in ("wedged", "down")}
        fired = {k: sum(1 for w in self.windows if w["kind"] == k and w.get("fired_at") is not None)
                 for k in kinds}
        bound = self.wedge_window_s + self.interval_s
        lags = [w["lag_s"] for w in self.windows if w.get("lag_s") is not None]
        lines = [
            f"alert agreement, sample week in a real Prometheus ({self.rules_loaded} rules loaded, "
            f"evaluated every {prom_duration(self.interval_s)}, {self.seconds:.1f} s):",
            f"  offline windows that fired: {sum(fired.values())}/{len(self.windows)} "
            f"(wedged {fired['wedged']}/{kinds['wedged']}, down {fired['down']}/{kinds['down']}); "
            f"alert intervals outside every window: {len(self.outside)}/{len(self.intervals)}; "
            f"onset lag max {_dur(max(lags)) if lags else '-'} (bound: wedge window + one interval = {_dur(bound)})",
        ]
        for w in self.windows:
            lag = f"lag {_dur(w['lag_s'])}" if w.get("lag_s") is not None else "DID NOT FIRE"
            resolved = f", resolved {_t(w['resolved_at'])}" if w.get("resolved_at") else ""
            lines.append(f"  {w['kind']:<6} {w['pod']} {_t(w['start'])} -> {_t(w['end'])}: "
                         f"fired {_t(w['fired_at']) if w.get('fired_at') else '-'} ({lag}){resolved}")
        for iv in self.outside:
            lines.append(f"  OUTSIDE: {iv.alert} {iv.labels} {_t(iv.first)} -> {_t(iv.last)}")
        lines.append("  agreement: " + ("yes" if self.ok else "NO"))
        return "\n".join(lines)


def _t(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _dur(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m}m{s:02d}s"


# ---------------------------------------------------------------------------
# The metrics as OpenMetrics


def openmetrics(paths: list[str]) -> tuple[str, float, float]:
    """The ``query_range`` exports as one OpenMetrics text (every family ``unknown``), with the first
    and last sample times."""
    families: dict[str, list[str]] = {}
    lo, hi = float("inf"), float("-inf")
    for path in sorted(paths):
        data = json.loads(Path(path).read_text())
        for series in data["data"]["result"]:
            labels = dict(series["metric"])
            name = labels.pop("__name__")
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            lines = families.setdefault(name, [])
            for ts, value in series["values"]:
                lines.append(f"{name}{{{inner}}} {value} {ts}")
                lo, hi = min(lo, float(ts)), max(hi, float(ts))
    out = []
    for name, lines in families.items():
        out.append(f"# TYPE {name} unknown")
        out += lines
    out.append("# EOF")
    return "\n".join(out) + "\n", lo, hi


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# ---------------------------------------------------------------------------
# Prometheus


def _binary(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise FileNotFoundError(f"{name} is not installed (apt-get install prometheus)")
    return path


@contextmanager
def prometheus(workdir: Path, data: Path, rules: Path, lookback_s: float) -> Iterator[str]:
    """Run Prometheus on 127.0.0.1 over ``data`` with ``rules`` loaded; yield its URL."""
    config = f"global:\n  evaluation_interval: 1m\nrule_files:\n  - {rules}\nscrape_configs: []\n"
    with prometheus_process(_binary("prometheus"), config, workdir, data=data,
                            args=("--storage.tsdb.retention.time=100y",
                                  f"--query.lookback-delta={int(lookback_s * 1000)}ms")) as url:
        yield url


def _run(*args: str) -> None:
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])} ... failed ({p.returncode}): {(p.stderr or p.stdout)[-2000:]}")


def _get(url: str, path: str, params: dict) -> dict:
    r = httpx.get(url + path, params=params, timeout=60)
    body = r.json()
    if r.status_code != 200 or body.get("status") != "success":
        raise RuntimeError(f"{path} {params}: HTTP {r.status_code}: {body}")
    return body["data"]


def true_at(url: str, expr: str, start: float, end: float, step: float) -> dict[tuple, list[float]]:
    """{labels: sorted evaluation times at which ``expr`` returned that series} over [start, end]."""
    out: dict[tuple, list[float]] = {}
    t = start
    while t <= end:
        chunk_end = min(end, t + (MAX_POINTS - 1) * step)
        for s in _get(url, "/api/v1/query_range", {"query": expr, "start": t, "end": chunk_end, "step": step})["result"]:
            out.setdefault(tuple(sorted(s["metric"].items())), []).extend(float(ts) for ts, _v in s["values"])
        t = chunk_end + step
    return {k: sorted(v) for k, v in out.items()}


def apply_for(times: list[float], step: float, hold: float) -> list[tuple[float, float]]:
    """Firing intervals (first, last firing evaluation) of an alert whose expression held at ``times``
    (evaluations ``step`` apart): as Prometheus' rule manager, active from the first evaluation that
    returns the series, firing once ``evaluation - active >= for``, reset by an evaluation without it."""
    out = []
    active = prev = None
    first_fire = None
    for t in times + [None]:
        if t is not None and prev is not None and t - prev <= step * 1.001:
            prev = t
        else:
            if first_fire is not None:
                out.append((first_fire, prev))
            if t is None:
                break
            active = prev = t
            first_fire = None
        if first_fire is None and t - active >= hold - 1e-6:
            first_fire = t
    return out


# ---------------------------------------------------------------------------
# The comparison


def offline_windows(paths: list[str], wedge_window_s: float, workdir: Path) -> list[dict]:
    """The analyzer's wedged and down windows on the same files."""
    from analyzer.store.db import connect
    from analyzer.jobs.metrics import load_metrics

    con = connect(workdir / "analyzer.duckdb")
    try:
        load_metrics(con, paths, wedge_window=wedge_window_s)
        rows = con.execute("SELECT pod, model_name, kind, epoch(start_ts), epoch(end_ts) FROM pod_windows "
                           "WHERE kind IN ('wedged', 'down') ORDER BY start_ts").fetchall()
    finally:
        con.close()
    return [{"pod": p, "model_name": m, "kind": k, "start": float(s), "end": float(e)} for p, m, k, s, e in rows]


def agreement(paths: list[str] | None = None, workdir: Path | None = None) -> Agreement:
    """Run the whole comparison with the default rules (see the module docstring)."""
    from analyzer.outputs.alerts import (DOWN_ALERT, WEDGED_ALERT, AlertSettings, alerting_rules, inline_recording_rules,
                                 render_rules)
    from analyzer.io.metric_samples import pod_identity
    from analyzer.core.durations import parse_duration

    began = time.monotonic()
    paths = paths or sorted(glob.glob(str(METRICS / "*.json")))
    settings = AlertSettings()
    step, w = settings.evaluation_interval_s, settings.wedge_window_s
    own = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="alert-agreement-")) if own else Path(workdir)
    try:
        rules = workdir / "vllm-alerts.rules.yml"
        rules.write_text(render_rules(settings))
        text, lo, hi = openmetrics(paths)
        (workdir / "week.om").write_text(text)
        data = workdir / "data"
        _run(_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=168h",
             str(workdir / "week.om"), str(data))
        # Evaluations on the samples' grid, as a rule group and scrapes of one interval would line up.
        start, end = (lo // step) * step, hi
        with prometheus(workdir, data, rules, lookback_s=step - 1) as url:
            groups = _get(url, "/api/v1/rules", {})["groups"]
            loaded = [r for g in groups for r in g["rules"]]
            bad = [r["name"] for r in loaded if r.get("health") == "err"]
            if bad:
                raise RuntimeError(f"rules unhealthy in Prometheus: {bad}")
            result = Agreement(wedge_window_s=w, interval_s=step, rules_loaded=len(loaded))
            for rule in alerting_rules(settings):
                assert rule["alert"] in (WEDGED_ALERT, DOWN_ALERT) and parse_duration(rule["for"]) == w
                kind = "wedged" if rule["alert"] == WEDGED_ALERT else "down"
                expr = inline_recording_rules(rule["expr"], settings)
                for labels, times in true_at(url, expr, start, end, step).items():
                    lab = dict(labels)
                    for first, last in apply_for(times, step, w):
                        result.intervals.append(Interval(rule["alert"], lab, first, last, kind, pod_identity(lab)))
        result.windows = offline_windows(paths, w, workdir)
        for wd in result.windows:
            mine = [iv for iv in result.intervals if (iv.kind, iv.pod) == (wd["kind"], wd["pod"])
                    and iv.first >= wd["start"] and iv.first <= wd["end"] + step]
            if mine:
                first = min(mine, key=lambda iv: iv.first)
                wd.update(fired_at=first.first, lag_s=first.first - wd["start"], resolved_at=first.last + step)
        for iv in result.intervals:
            if not any((iv.kind, iv.pod) == (wd["kind"], wd["pod"]) and wd["start"] <= iv.first
                       and iv.last <= wd["end"] + step for wd in result.windows):
                result.outside.append(iv)
        result.seconds = time.monotonic() - began
        return result
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    result = agreement()
    print(result.figure())
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
