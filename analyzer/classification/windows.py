"""Wedged and down windows of each pod, computed from the stored samples into ``pod_windows``.

A *unit* is one pod serving one model: the pod identity (``namespace/pod``; see
:func:`~.samples.pod_identity` for the label spellings read) with the ``model_name`` label. Its generation counter may be several
series (one per vLLM engine); the unit generated at an instant if any of them did.
The wedge window ``W`` (default 5 minutes) is both the time a counter must stay
flat under demand and the longest hole between samples that still counts as
continuous observation.

**Wedged.** The counter samples of a unit are cut into *flat runs*: from an
observed increase (or the first sample) to the next observation that shows an
increase or a counter reset. Within a run the counter never moved. A run is also
cut at a scrape gap longer than ``W`` (it ends at the last sample before the gap;
the next run starts at the first sample after it). Within a run, *demand* comes
in spells: consecutive ``vllm:num_requests_running``/``..._waiting`` samples above
0 (a sample at 0 ends the spell). Where a pod's own gauges report during the run,
they alone decide whether *that pod* had demand: an idle sibling whose gauges read
0 is not wedged because the router sent the model's traffic to another pod. Only
a pod without gauges in the run falls back on logged requests to its model
(through ``model_map``) less than ``W`` apart. A run is a wedge when a spell of unserved
demand lasts at least ``W``: requests kept coming or kept waiting for ``W`` and the
counter did not move. The window spans from the start of that spell (the last
increase, when the demand never stopped) to the end of the run: the next increase
or the restart, since a wedged pod stays wedged until something changes it. A
logged request does not count for a pod while another pod of the same model shows
an increase within ``W`` after it (that pod may have served it). ``up == 1`` is
required by cutting the pod's down windows out of its wedged ones: a failed scrape
in the middle of a wedge is down for that instant and wedged on both sides.

**Sleeping.** ``vllm:engine_sleep_state`` (label ``sleep_state``: ``awake`` 0, or
``weights_offloaded``/``discard_all`` 1; without the label, a value above 0)
says an engine was put to sleep on purpose: its counters are flat and its ``up``
is 1, and it is not wedged. A unit sleeps while all its engines do; its sleeping
spans (like down spans: from the first sleeping sample to the first awake one)
are ``sleeping`` windows, shown apart, never relabel a turn, and are cut out of
its wedged windows.

- Idle periods: a flat counter without demand is never a wedge. Neither is an idle
  night that starts with the last request finishing (running above 0 for a sample
  after the last increase) or ends with demand served within ``W``: those spells
  are shorter than ``W``. Idle time before the demand is not part of a window.
- Restarts: a counter that drops is a reset (the process restarted), not negative
  throughput and not a flat stretch: it ends the current run and starts a new one.
- Gaps: a hole longer than ``W`` in a unit's samples is unknown time. It never
  becomes (part of) a wedge, even when the counter is equal on both sides, and it
  does not hide one: a wedge observed before the gap is kept, ending at the last
  sample before it, and one after the gap is found from the first sample after.
- Duplicates are dropped when stored, samples are sorted by time here (so input
  order does not matter), NaN values are never stored.
- Known limits: requests that vLLM rejects without generating (4xx from its
  validation) still count as logged demand, so a client hammering invalid requests
  at an idle pod for ``W`` makes a window (with no upstream failures in it: the
  classes do not change). A window lasts until the counter moves, so a stall
  followed by an idle night stays one window until morning traffic is served.

**Down.** ``up == 0`` samples of the pod's vLLM target: a pod can be several
targets (vLLM and sidecars such as an exporter or a proxy), and only the ``up``
series with the instance and job of the pod's vLLM series counts (all of the
pod's ``up`` series when none matches, e.g. files without target labels). The
window the window runs from the first 0 to the
next 1 (or the last 0 when a gap longer than ``W`` or the end of the data follows).
A pod is also down while its *target is missing*: all of its series stop (a
stale series) for longer than ``W`` while another pod of the same model is still
reporting. The window runs from its last sample until it reports again, a new pod
of that model appears (a replacement), or the other pods' data ends. A model with
a single pod whose series stop, or data that ends for everyone, is *unknown*, not
down: the absence of samples alone cannot tell a dead pod from a dead scraper.
``up`` carries no ``model_name``; a pod's models are those its vLLM series name (or
a ``model_name`` label put on ``up`` by relabeling). Pods with no known model get
no window (the turns cannot be matched to them) and are listed as a warning.

Windows of one pod, model and kind that touch or overlap are merged.

**Episodes.** :func:`wedged_episodes` counts each ``wedged-pod``/``pod-down`` turn
in exactly one window: the earliest-starting window of its class's kind and its
model that contains it (with two pods of a model wedged at once the logs cannot
say which pod served the turn), so the episodes add up to the classes.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

import duckdb

from analyzer.classification.evidence import corroborate
from analyzer.online import parse_error
from analyzer.online.classify import (
    ERROR_BAD_BODY,
    ERROR_CANCELLED,
    ERROR_CONNECT,
    ERROR_CONNECT_TIMEOUT,
    ERROR_HEAD_CHARS,
    ERROR_HTTP,
    ERROR_OTHER,
    ERROR_RESET,
    ERROR_TIMEOUT,
)
from analyzer.core.durations import US, parse_duration, us_to_datetime, us_to_iso
from analyzer.core.isotime import iso_utc
from analyzer.io.metric_samples import DEMAND_METRICS, GENERATION_TOKENS, SLEEP_STATE, UP
from analyzer.store.asking import ask
from analyzer.store.db import transaction
from analyzer.store.holdings import WEDGE_WINDOW_SETTING

WEDGED = "wedged"
DOWN = "down"
SLEEPING = "sleeping"

# Change observed at a counter sample, in order of precedence when several series
# of a unit (engines) say different things about the same instant.
_FLAT, _GAP, _INC, _RESET = range(4)
_END = 4  # the unit's samples end
_REASONS = {_GAP: "a scrape gap", _INC: "the next increase", _RESET: "a counter reset (restart)",
            _END: "the end of its samples"}

Unit = tuple  # (pod, model_name)


@dataclass
class Window:
    """One interval of ``pod_windows`` (times in epoch microseconds)."""

    pod: str | None
    model_name: str
    kind: str
    start_us: int
    end_us: int
    detail: str
    #: a wedge the logs infer because the pod's gauges read 0 (frozen gauges), not one the metrics show
    inferred: bool = False


@dataclass
class WindowResult:
    """What :func:`recompute_windows` wrote and what it could not judge."""

    windows: list[Window] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Windows by kind."""
        out = {WEDGED: 0, DOWN: 0, SLEEPING: 0}
        for w in self.windows:
            out[w.kind] += 1
        return out


# ---------------------------------------------------------------------------
# Loading what the rule reads


def _grouped(con, with_sql: str, points: str, keys: str, params: dict) -> dict[tuple, tuple[list, ...]]:
    """Lists per key from flat rows: -> {key: (list, ...)}, each list sorted by time.

    ``with_sql + points`` returns a group number ``k`` then value columns, one row
    per instant, ordered by ``k`` then time; ``keys`` names the columns of ``s``
    (the CTE of ``with_sql`` that numbers the series ``k``) each ``k`` stands for.
    The flat columns cross to Python through Arrow and each key's lists are slices
    of them: a week of samples is sorted once, never aggregated into lists in SQL
    nor walked as row tuples.
    """
    table = con.sql(with_sql + points, params=params).to_arrow_table()
    ks = table.column(0).to_pylist()
    cols = [c.to_pylist() for c in table.columns[1:]]
    out = {}
    for k, *key in con.execute(f"{with_sql} SELECT DISTINCT k, {keys} FROM s ORDER BY k", params).fetchall():
        lo, hi = bisect.bisect_left(ks, k), bisect.bisect_right(ks, k)
        if hi > lo:  # a group with no point is not listed (as an inner join would not)
            out[tuple(key)] = tuple(c[lo:hi] for c in cols)
    return out


# The loaders read metric_points (series number, time, value) joined to the few
# series of the metric asked (metric_series), grouped by small integer keys the
# series get in SQL (`k`): no label text is read per point. `_LIVE` keeps series
# that hold points (what a DISTINCT over the samples would see).
_LIVE = "series_id IN (SELECT DISTINCT series_id FROM metric_points)"


def _load_counters(con) -> dict[Unit, list[list[tuple[int, float]]]]:
    """{unit: [series sorted by time, ...]} for the generation counter."""
    found = _grouped(con, """
        WITH s AS (
            SELECT series_id, pod, model_name, labels::VARCHAR AS labels,
                   min(series_id) OVER (PARTITION BY pod, model_name, labels::VARCHAR) AS k
            FROM metric_series WHERE metric = $m AND model_name IS NOT NULL
        )""", """
        SELECT s.k, epoch_us(p.ts) AS t, p.value AS v
        FROM metric_points p JOIN s ON s.series_id = p.series_id
        WHERE isfinite(p.value)
        ORDER BY s.k, p.ts""", "pod, model_name, labels", {"m": GENERATION_TOKENS})
    out: dict[Unit, list] = defaultdict(list)
    for (pod, model, _series), (times, values) in sorted(found.items(), key=lambda kv: (
            kv[0][0] is not None, kv[0][0] or "", kv[0][1], kv[0][2])):
        out[(pod, model)].append(list(zip(times, values)))
    return dict(out)


def _load_demand(con) -> dict[Unit, tuple[list[int], list[bool]]]:
    """{unit: (sorted instants of running/waiting samples, whether any was above 0 there)}."""
    return _grouped(con, """
        WITH s AS (
            SELECT series_id, pod, model_name, dense_rank() OVER (ORDER BY pod NULLS FIRST, model_name) AS k
            FROM metric_series WHERE list_contains($metrics, metric) AND model_name IS NOT NULL
        )""", """
        SELECT s.k, epoch_us(p.ts) AS t, max(p.value) > 0 AS busy
        FROM metric_points p JOIN s ON s.series_id = p.series_id
        WHERE isfinite(p.value)
        GROUP BY s.k, p.ts
        ORDER BY s.k, p.ts""", "pod, model_name", {"metrics": list(DEMAND_METRICS)})


def _load_up(con) -> tuple[dict[str | None, list[tuple[int, float]]], list[str]]:
    """{pod: [(instant, up)] sorted} from the pod's vLLM target, and notes on sidecars set aside.

    The target's own ``up`` is the series whose instance and job (else instance
    alone) match those of the pod's vLLM series; several such series at one
    instant: the lowest.
    """
    targets: dict = defaultdict(set)
    for pod, instance, job in con.execute(
            f"SELECT DISTINCT pod, instance, job FROM metric_series WHERE metric <> $m AND {_LIVE}",
            {"m": UP}).fetchall():
        targets[pod].add((instance, job))
    found = _grouped(con, """
        WITH s AS (
            SELECT series_id, pod, instance, job,
                   dense_rank() OVER (ORDER BY pod NULLS FIRST, instance NULLS FIRST, job NULLS FIRST) AS k
            FROM metric_series WHERE metric = $m
        )""", """
        SELECT s.k, epoch_us(p.ts) AS t, min(p.value) AS v
        FROM metric_points p JOIN s ON s.series_id = p.series_id
        WHERE isfinite(p.value)
        GROUP BY s.k, p.ts
        ORDER BY s.k, p.ts""", "pod, instance, job", {"m": UP})
    by_pod: dict = defaultdict(dict)
    for (pod, instance, job), (times, values) in found.items():
        by_pod[pod][(instance, job)] = (times, values)
    out, notes = {}, []
    for pod, series in by_pod.items():
        mine = targets.get(pod, set())
        chosen = [k for k in series if k in mine]
        if not chosen:
            instances = {i for i, _ in mine if i is not None}
            chosen = [k for k in series if k[0] in instances]
        if not chosen:
            chosen = list(series)
        elif len(chosen) < len(series):
            aside = sorted(f"{i or '?'} ({j or '?'})" for i, j in series if (i, j) not in chosen)
            notes.append(f"{pod}: `up` of {', '.join(aside)} not used (not the vLLM target: a sidecar)")
        if len(chosen) == 1:  # one value per instant already (sorted, grouped in SQL)
            out[pod] = list(zip(*series[chosen[0]]))
            continue
        lowest: dict[int, float] = {}
        for key in chosen:
            for t, v in zip(*series[key]):
                lowest[t] = min(v, lowest.get(t, v))
        out[pod] = sorted(lowest.items())
    return out, notes


def _load_sleep(con) -> dict[Unit, list[tuple[int, bool]]]:
    """{unit: [(instant, asleep)] sorted}: a unit sleeps at an instant when all its engines do."""
    found = _grouped(con, """
        WITH s AS (
            SELECT series_id, pod, model_name, dense_rank() OVER (ORDER BY pod NULLS FIRST, model_name) AS k,
                   coalesce(labels ->> 'engine', labels ->> 'engine_id', '') AS engine,
                   labels ->> 'sleep_state' AS state
            FROM metric_series WHERE metric = $m AND model_name IS NOT NULL
        ), e AS (
            SELECT s.k, p.ts, s.engine,
                   bool_or(CASE s.state
                               WHEN 'awake' THEN p.value <= 0
                               WHEN 'weights_offloaded' THEN p.value >= 1
                               WHEN 'discard_all' THEN p.value >= 1
                               ELSE s.state IS NULL AND p.value > 0 END) AS asleep
            FROM metric_points p JOIN s ON s.series_id = p.series_id
            WHERE isfinite(p.value)
            GROUP BY s.k, p.ts, s.engine
        )""", """
        SELECT k, epoch_us(ts) AS t, bool_and(asleep) AS asleep FROM e GROUP BY k, ts ORDER BY k, ts""",
        "pod, model_name", {"m": SLEEP_STATE})
    return {unit: list(zip(times, flags)) for unit, (times, flags) in found.items()}


def _load_pod_models(con) -> dict[str | None, set[str]]:
    """{pod: models its series name}."""
    out: dict[str | None, set[str]] = defaultdict(set)
    for pod, model in con.execute(
        f"SELECT DISTINCT pod, model_name FROM metric_series WHERE model_name IS NOT NULL AND {_LIVE}"
    ).fetchall():
        out[pod].add(model)
    return dict(out)


def _load_presence(con, pods: list) -> dict[str | None, list[int]]:
    """{pod: sorted instants with any sample}, for the pods of multi-pod models."""
    if not pods:
        return {}
    named = [p for p in pods if p is not None]
    found = _grouped(con, """
        WITH s AS (
            SELECT series_id, pod, dense_rank() OVER (ORDER BY pod NULLS FIRST) AS k FROM metric_series
            WHERE list_contains($pods, pod) OR (pod IS NULL AND $with_null)
        )""", """
        SELECT DISTINCT s.k, epoch_us(p.ts) AS t FROM metric_points p JOIN s ON s.series_id = p.series_id
        ORDER BY s.k, t""", "pod", {"pods": named, "with_null": None in pods})
    return {k[0]: v[0] for k, v in found.items()}


#: Error kinds of a logged failure that a wedged pod explains: the request hung or
#: the upstream failed (analyzer.online.parse_error's kinds; an HTTP error only at 5xx).
_HANGING_KINDS = frozenset({ERROR_TIMEOUT, ERROR_CONNECT, ERROR_CONNECT_TIMEOUT, ERROR_RESET, ERROR_CANCELLED,
                            ERROR_BAD_BODY, ERROR_OTHER})


def _load_failing_requests(con, models: list[str]) -> dict[str, list[int]]:
    """{metric model_name: sorted arrival instants of logged requests that failed or hung}.

    A failed response's request arrived ``latency_ms`` before it was logged. Which
    errors count is :func:`analyzer.online.parse_error`'s reading of each distinct
    error head (a 5xx, a timeout, a reset, the caller giving up), never a 4xx.
    """
    if not models:
        return {}
    rows = con.execute(f"""
        SELECT coalesce(m.model_name, r.model), r.provider, left(r.error, {ERROR_HEAD_CHARS}),
               list(epoch_us(r.ts) - coalesce(r.latency_ms, 0) * 1000)
        FROM records r LEFT JOIN model_map m ON m.log_model = r.model
        WHERE r.type = 'response' AND r.error IS NOT NULL
          AND list_contains($models, coalesce(m.model_name, r.model))
        GROUP BY ALL""", {"models": models}).fetchall()
    out: dict[str, list[int]] = defaultdict(list)
    for model, provider, head, instants in rows:
        kind, status = parse_error(head, provider)
        if kind in _HANGING_KINDS or (kind == ERROR_HTTP and status is not None and status >= 500):
            out[model] += instants
    return {m: sorted(ts) for m, ts in out.items()}


def _load_requests(con, models: list[str]) -> dict[str, list[int]]:
    """{metric model_name: sorted instants of logged requests}, through model_map."""
    if not models:
        return {}
    return dict(con.execute("""
        SELECT coalesce(m.model_name, r.model) AS metric_model, list(epoch_us(r.ts) ORDER BY r.ts)
        FROM records r LEFT JOIN model_map m ON m.log_model = r.model
        WHERE r.type = 'request' AND list_contains($models, coalesce(m.model_name, r.model))
        GROUP BY ALL
        """, {"models": models}).fetchall())


# ---------------------------------------------------------------------------
# The rule


def _change(prev_t: int | None, prev_v: float | None, t: int, v: float, w_us: int) -> int:
    """What a sample at ``t`` shows after the one before it (``prev_*``, None for the first)."""
    if prev_t is None:
        return _FLAT  # a first sample says nothing about change
    if t - prev_t > w_us:
        return _GAP
    if v > prev_v:
        return _INC
    if v < prev_v:
        return _RESET
    return _FLAT


def _timeline(series_list: list[list[tuple[int, float]]], w_us: int) -> tuple[list[int], list[int]]:
    """The unit's observation instants and the change each one shows (``_FLAT`` ...)."""
    if len(series_list) == 1:  # one engine (the usual unit): no instants to merge
        one = _single_timeline(series_list[0], w_us)
        if one is not None:
            return one
    status: dict[int, int] = {}
    for series in series_list:
        prev_t, prev_v = None, None
        for t, v in series:
            s = _change(prev_t, prev_v, t, v, w_us)
            status[t] = max(status.get(t, _FLAT), s)
            prev_t, prev_v = t, v
    times = sorted(status)
    changes = [status[t] for t in times]
    for i in range(1, len(times)):
        if times[i] - times[i - 1] > w_us:
            changes[i] = max(changes[i], _GAP)
    return times, changes


def _single_timeline(series: list[tuple[int, float]], w_us: int) -> tuple[list[int], list[int]] | None:
    """:func:`_timeline` of one series whose instants strictly increase (else None).

    Each instant is then observed once, and a hole longer than ``W`` is already a
    gap at the sample after it, so the merging and the second pass add nothing.
    """
    times = [t for t, _v in series]
    if any(b <= a for a, b in zip(times, times[1:])):
        return None
    changes = []
    prev_t = prev_v = None
    for t, v in series:
        changes.append(_change(prev_t, prev_v, t, v, w_us))
        prev_t, prev_v = t, v
    return times, changes


def _flat_runs(times: list[int], changes: list[int]) -> list[tuple[int, int, int]]:
    """(start, end, why it ended) of each stretch over which the counter did not move."""
    if not times:
        return []
    runs = []
    start = times[0]
    for i in range(1, len(times)):
        c = changes[i]
        if c == _FLAT:
            continue
        if c in (_INC, _RESET):  # the change is seen at times[i]: the flat period lasts until then
            runs.append((start, times[i], c))
        else:  # a gap: unknown after times[i-1]
            runs.append((start, times[i - 1], c))
        start = times[i]
    runs.append((start, times[-1], _END))
    return runs


def _first_in(points: list[int], lo: int, hi: int) -> int | None:
    """The first of the sorted ``points`` in ``[lo, hi]``, or None."""
    i = bisect.bisect_left(points, lo)
    return points[i] if i < len(points) and points[i] <= hi else None


def _gauge_spells(gauge: tuple[list[int], list[bool]], lo: int, hi: int, w_us: int) -> list[tuple[int, int]]:
    """(first, last) of each spell of running/waiting demand among the gauge samples in ``[lo, hi]``.

    A spell is consecutive samples above 0; a sample at 0 (the gauges say nothing
    is running or waiting) or a hole longer than ``W`` ends it.
    """
    times, flags = gauge
    spells: list[tuple[int, int]] = []
    first = prev = None
    for i in range(bisect.bisect_left(times, lo), len(times)):
        t = times[i]
        if t > hi:
            break
        if first is not None and (not flags[i] or t - prev > w_us):
            spells.append((first, prev))
            first = None
        if flags[i]:
            first = t if first is None else first
            prev = t
    if first is not None:
        spells.append((first, prev))
    return spells


def _request_spells(requests: list[int], lo: int, hi: int, w_us: int) -> list[tuple[int, int]]:
    """(first, last) of each spell of logged requests in ``[lo, hi]``: requests less than ``W`` apart."""
    spells: list[tuple[int, int]] = []
    for t in requests[bisect.bisect_left(requests, lo):bisect.bisect_right(requests, hi)]:
        if spells and t - spells[-1][1] <= w_us:
            spells[-1] = (spells[-1][0], t)
        else:
            spells.append((t, t))
    return spells


def _wedges(unit: Unit, runs, gauge: tuple[list[int], list[bool]], log_demand: list[int],
            w_us: int) -> list[Window]:
    """The runs of one unit that are wedges under the rule above."""
    out = []
    for start, end, why in runs:
        if end - start < w_us:
            continue  # too short for demand to last W inside it (most runs: one scrape between increases)
        # The sample showing an increase or a reset belongs to the new state, not the flat run.
        hi = end if why in (_GAP, _END) else end - 1
        if _first_in(gauge[0], start, hi) is not None:
            # The pod's own gauges report: they alone say whether this pod had demand.
            source, spells = "requests running/waiting", _gauge_spells(gauge, start, hi, w_us)
        else:
            # No gauges: logged requests to the model stand in. A request logged at
            # the run's first sample was served by the increase seen there.
            source, spells = "logged requests", _request_spells(log_demand, start + 1, hi, w_us)
        lasting = [first for first, last in spells if last - first >= w_us]
        if not lasting:
            continue
        d0 = lasting[0]
        detail = (f"generation counter flat under demand ({source}) for at least "
                  f"{w_us / US:g}s from {us_to_iso(d0)}; flat since {us_to_iso(start)}; ends at {_REASONS[why]}")
        out.append(Window(unit[0], unit[1], WEDGED, d0, end, detail))
    return out


def _frozen_gauge_wedges(unit: Unit, runs, gauge: tuple[list[int], list[bool]], failing: list[int],
                         w_us: int) -> list[Window]:
    """Suspected wedges of a unit whose gauges read 0 while its model's requests failed (frozen gauges).

    The rule above trusts a pod's own gauges; in one captured wedge
    ``vllm:num_requests_running`` read 0 because the hang came before the gauge
    update (vllm-project/vllm PR #46811's incident data). So a flat run in which the
    gauges report and never rise above 0, while logged requests to the model fail
    or hang (``failing``: their arrival instants, as :func:`_log_demand` filters them)
    in a spell lasting at least ``W``, is a wedge *inferred* from the logs.
    """
    out = []
    for start, end, why in runs:
        if end - start < w_us:
            continue
        hi = end if why in (_GAP, _END) else end - 1
        if _first_in(gauge[0], start, hi) is None:
            continue  # no gauges: the rule above used the logged requests already
        # Failing spells lasting W during which the gauges report and never rise above 0.
        lasting = [(first, last) for first, last in _request_spells(failing, start + 1, hi, w_us)
                   if last - first >= w_us and _first_in(gauge[0], first, last) is not None
                   and not _gauge_spells(gauge, first, last, w_us)]
        if not lasting:
            continue
        first, last = lasting[0]
        # The counter has not moved since the run began, so an earlier failure of the run
        # was not served either: the wedge starts there when the gauges read 0 since.
        earliest = _first_in(failing, start + 1, first)
        if earliest is not None and not _gauge_spells(gauge, earliest, last, w_us):
            first = earliest
        detail = (f"suspected (inferred from the logs): generation counter flat while logged requests to "
                  f"{unit[1]} failed or hung for at least {w_us / US:g}s from {us_to_iso(first)}, but the "
                  f"pod's running/waiting gauges read 0 (frozen gauges: a hang before the gauge update); flat "
                  f"since {us_to_iso(start)}; ends at {_REASONS[why]}")
        out.append(Window(unit[0], unit[1], WEDGED, first, end, detail, inferred=True))
    return out


def _outside(instants: list[int], spans: list[tuple[int, int]]) -> list[int]:
    """The sorted ``instants`` that no ``(start, end)`` span holds."""
    return [t for t in instants if not any(a <= t <= b for a, b in spans)]


def _log_demand(requests: list[int], other_increases: list[int], w_us: int) -> list[int]:
    """Logged requests that count as demand for this pod (see the module docstring)."""
    if not other_increases:
        return requests
    # _first_in(other_increases, t, t + w_us) is None, inlined: a week has a request every few seconds
    bisect_left, n = bisect.bisect_left, len(other_increases)
    out = []
    for t in requests:
        i = bisect_left(other_increases, t)
        if i == n or other_increases[i] > t + w_us:
            out.append(t)
    return out


def _spans(points, w_us: int) -> list[tuple[int, int]]:
    """(first, end) of each spell of ``points`` ``(instant, in_state)``: from the first
    sample in the state to the first one out of it, or to the last one in it when a
    hole longer than ``W`` or the end of the data follows (unknown after that)."""
    spans = []
    start = last_in = prev_t = None
    for t, inside in points:
        if start is not None and t - prev_t > w_us:
            spans.append((start, last_in))
            start = None
        if inside:
            if start is None:
                start = t
            last_in = t
        elif start is not None:
            spans.append((start, t))
            start = None
        prev_t = t
    if start is not None:
        spans.append((start, last_in))
    return spans


def _down_from_up(pod, models: set[str], points: list[tuple[int, float]], w_us: int) -> list[Window]:
    """Windows where the pod's `up` said 0."""
    spans = _spans([(t, v <= 0) for t, v in points], w_us)
    return [Window(pod, m, DOWN, s, e, "up == 0") for s, e in spans for m in sorted(models)]


def _sleeping(unit: Unit, points: list[tuple[int, bool]], w_us: int) -> list[Window]:
    """Windows where the unit's engines said they sleep (vllm:engine_sleep_state)."""
    return [Window(unit[0], unit[1], SLEEPING, s, e, "engine asleep (vllm:engine_sleep_state)")
            for s, e in _spans(points, w_us) if e > s]


def _missing_targets(model: str, pods: list, presence: dict, w_us: int) -> list[Window]:
    """Windows where a pod of a multi-pod model stopped reporting while another went on."""
    out = []
    first_seen = {p: presence[p][0] for p in pods if presence.get(p)}
    for pod in pods:
        seen = presence.get(pod) or []
        if not seen:
            continue
        others = [presence[q] for q in pods if q != pod and presence.get(q)]
        absences = [(a, b) for a, b in zip(seen, seen[1:]) if b - a > w_us] + [(seen[-1], None)]
        for a, b in absences:
            end = b if b is not None else max(o[-1] for o in others) if others else a
            newcomers = [t for q, t in first_seen.items() if q != pod and a < t < end]
            if newcomers:
                end = min(newcomers)  # a replacement pod took over
            if end - a <= w_us:
                continue
            if not any(_first_in(o, a + 1, end - 1) is not None for o in others):
                continue  # nobody reported meanwhile: unknown, not down
            how = "until it reported again" if end == b else (
                "until a replacement appeared" if newcomers else "until the other pods' data ends")
            out.append(Window(pod, model, DOWN, a, end,
                              f"target missing (series stopped) while other pods of {model} reported; {how}"))
    return out


def _clip_wedges(windows: list[Window]) -> list[Window]:
    """Cut the down and sleeping windows of a pod out of its wedged windows.

    A pod cannot be up and down at once; a failed scrape in the middle of a wedge
    makes that instant down and leaves the wedge on both sides of it (a wedge is
    judged on the whole flat run, so the pieces may be shorter than ``W``). An
    engine asleep is flat on purpose: never wedged.
    """
    downs: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for w in windows:
        if w.kind in (DOWN, SLEEPING):
            downs[(w.pod, w.model_name)].append((w.start_us, w.end_us))
    out = []
    for w in windows:
        if w.kind != WEDGED or (w.pod, w.model_name) not in downs:
            out.append(w)
            continue
        pieces = [(w.start_us, w.end_us)]
        for ds, de in downs[(w.pod, w.model_name)]:
            # What is left of each piece before and after this down window (either may be empty).
            pieces = [p for s, e in pieces for p in ((s, min(e, ds)), (max(s, de), e)) if p[1] > p[0]]
        out += [Window(w.pod, w.model_name, WEDGED, s, e, w.detail, w.inferred) for s, e in pieces]
    return out


def _merge(windows: list[Window]) -> list[Window]:
    """Merge touching or overlapping windows of the same pod, model and kind.

    The merged window keeps the first one's detail and says how many it absorbed.
    """
    out: list[Window] = []
    absorbed: dict[int, int] = defaultdict(int)
    key = lambda w: (w.kind, w.model_name, w.pod or "", w.pod is None, w.start_us)  # noqa: E731
    for w in sorted(windows, key=key):
        last = out[-1] if out else None
        if last and (last.kind, last.model_name, last.pod) == (w.kind, w.model_name, w.pod) and w.start_us <= last.end_us:
            last.end_us = max(last.end_us, w.end_us)
            last.inferred = last.inferred and w.inferred  # what the metrics show wins over inference
            absorbed[len(out) - 1] += 1
        else:
            out.append(Window(w.pod, w.model_name, w.kind, w.start_us, w.end_us, w.detail, w.inferred))
    for i, n in absorbed.items():
        out[i].detail += f" (merged with {n} adjacent window{'s' if n > 1 else ''})"
    return out


def compute_windows(con: duckdb.DuckDBPyConnection, wedge_window: str | float = "5m",
                    progress: Callable[[int, int, str], None] | None = None) -> WindowResult:
    """Compute the wedged, down and sleeping windows from the stored samples (without writing them).

    ``progress(done, total, what)`` is called per unit (pod and model) judged.
    """
    w_us = round(parse_duration(wedge_window, "--wedge-window") * US)
    result = WindowResult()
    counters = _load_counters(con)
    demand = _load_demand(con)
    up, sidecar_notes = _load_up(con)
    result.warnings += sidecar_notes
    sleep = _load_sleep(con)
    pod_models = _load_pod_models(con)
    models = sorted({m for ms in pod_models.values() for m in ms})
    requests = _load_requests(con, models)
    failing = _load_failing_requests(con, models)

    if not counters:
        result.warnings.append(
            f"no {GENERATION_TOKENS} samples: wedged windows cannot be found, only down ones")

    # Per unit: flat runs and the instants it was seen generating.
    runs_of, increases_of = {}, {}
    for unit, series_list in counters.items():
        times, changes = _timeline(series_list, w_us)
        runs_of[unit] = _flat_runs(times, changes)
        increases_of[unit] = [t for t, c in zip(times, changes) if c == _INC]
        spacing = [b[0] - a[0] for s in series_list for a, b in zip(s, s[1:])]
        if spacing and statistics.median(spacing) > w_us:
            result.warnings.append(
                f"{unit[0]}/{unit[1]}: samples are {statistics.median(spacing) / US:g}s apart, longer than the "
                f"wedge window ({w_us / US:g}s): every interval is a gap and no wedge can be seen "
                "(use a finer step or a longer --wedge-window)")

    def others(unit: Unit) -> list[int]:
        """The increases of the other pods of the unit's model (they may have served its requests);
        made per unit as it is used, not kept for every unit at once (pods x pods x a week of scrapes)."""
        return sorted(t for u, inc in increases_of.items() if u[1] == unit[1] and u != unit for t in inc)

    for i, (unit, runs) in enumerate(runs_of.items()):
        if progress:
            progress(i, len(runs_of), f"pod windows {unit[0]}")
        log_demand = _log_demand(requests.get(unit[1], []), others(unit), w_us)
        result.windows += _wedges(unit, runs, demand.get(unit, ([], [])), log_demand, w_us)

    for unit, points in sleep.items():
        result.windows += _sleeping(unit, points, w_us)

    no_model = []
    for pod, points in up.items():
        models_of_pod = pod_models.get(pod, set())
        if not models_of_pod:
            no_model.append(str(pod))
            continue
        result.windows += _down_from_up(pod, models_of_pod, points, w_us)
    if no_model:
        shown = ", ".join(sorted(no_model)[:5]) + (" ..." if len(no_model) > 5 else "")
        result.warnings.append(
            f"{len(no_model)} pod(s) report `up` but no series names their model_name, so their "
            f"down periods cannot be matched to turns: {shown}")

    pods_of_model: dict[str, list] = defaultdict(list)
    for pod, ms in pod_models.items():
        for m in ms:
            pods_of_model[m].append(pod)
    multi = {m: ps for m, ps in pods_of_model.items() if len(ps) > 1}
    presence = _load_presence(con, sorted({p for ps in multi.values() for p in ps}, key=lambda p: (p is None, p or "")))
    for model, pods in multi.items():
        result.windows += _missing_targets(model, pods, presence, w_us)

    # Frozen gauges, last: a failure another pod's wedged or down window explains is
    # not evidence against this one (an idle sibling of a wedged pod is not wedged).
    for unit, runs in runs_of.items():
        model = unit[1]
        explained = [(w.start_us, w.end_us) for w in result.windows
                     if w.model_name == model and w.kind in (WEDGED, DOWN) and not w.inferred]
        suspects = _log_demand(_outside(failing.get(model, []), explained), others(unit), w_us)
        result.windows += _frozen_gauge_wedges(unit, runs, demand.get(unit, ([], [])), suspects, w_us)

    result.windows = _merge(_clip_wedges(result.windows))
    return result


def recompute_windows(con: duckdb.DuckDBPyConnection, wedge_window: str | float = "5m") -> WindowResult:
    """Replace ``pod_windows`` with the windows the stored samples (and logged requests) show.

    Call again after ingesting more logs (logged requests are demand) or to try
    another wedge window; the result depends only on what is stored. Runs in a
    transaction of its own: on failure the previous windows stay.
    """
    with transaction(con):
        result = write_windows(con, wedge_window)
    return result


def write_windows(con: duckdb.DuckDBPyConnection, wedge_window: str | float = "5m",
                  progress: Callable[[int, int, str], None] | None = None) -> WindowResult:
    """:func:`recompute_windows` inside the caller's transaction (the loaders use it)."""
    result = compute_windows(con, wedge_window, progress)
    con.execute("DELETE FROM pod_windows")
    # The parameters that made the stored windows, stored with them (table settings).
    con.execute("INSERT OR REPLACE INTO settings VALUES (?, ?, now())",
                [WEDGE_WINDOW_SETTING, repr(parse_duration(wedge_window, "--wedge-window"))])
    if result.windows:
        con.executemany(
            "INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail, inferred) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [[w.pod, w.model_name, w.kind, us_to_datetime(w.start_us), us_to_datetime(w.end_us), w.detail,
              w.inferred] for w in result.windows],
        )
    return result


def wedged_episodes(
    con: duckdb.DuckDBPyConnection,
    *,
    models: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[dict]:
    """Every wedged, down or sleeping window with the failed turns it explains, for the summary.

    ``failed_turns`` counts the turns the ``turns`` view classes ``wedged-pod``
    (wedged windows) or ``pod-down`` (down windows) whose response (or request,
    when unanswered) time falls in the window, each turn in one window only (see
    the module docstring), so they add up to the classes; sleeping windows explain
    no failure. ``inferred``: a wedge inferred from failing requests while the
    pod's gauges read 0 (frozen gauges), not shown by the metrics. Wedged windows
    carry ``corroboration``: what the other signals
    said (:func:`~.evidence.corroborate`). ``alert_at``: when the live alert
    (``analyze alerts``) would have fired for a wedged or down window, the start
    plus the wedge window (``alert_fires_at`` in queries/pod_alert_onset.sql), or
    None (a sleeping window, or one too short to page). The rows are the question
    ``wedged_episodes`` of queries/ (``analyze sql wedged_episodes``). Call after
    :func:`analyzer.classification.turns.refresh_turns`. ``models`` (log model names, mapped
    through ``model_map``) and ``since``/``until`` (naive UTC; windows overlapping
    ``[since, until)``) filter like the summary's options.
    """
    rows = ask(con, "wedged_episodes", {"models": models or None, "since": since, "until": until})
    out = [
        {"pod": pod, "model_name": model, "kind": kind,
         "start": iso_utc(start), "end": iso_utc(end),
         "duration_s": float(duration), "failed_turns": int(failed), "detail": detail,
         "alert_at": iso_utc(alert_at), "inferred": bool(inferred)}
        for pod, model, kind, start, end, duration, failed, detail, alert_at, inferred in rows
    ]
    wedged = [(e, (pod, model, start, end)) for e, (pod, model, kind, start, end, *_rest) in zip(out, rows)
              if kind == WEDGED]
    for e, found in zip((e for e, _ in wedged), corroborate(con, [key for _, key in wedged])):
        e["corroboration"] = found
    return out
