"""The simulated week: the public entry point, and its events in time order.

:func:`simulate_week` makes a :class:`SimulatedWeek`, which regenerates its events on
every call: session start times drawn from the demand curve (plus experiment runs),
each :class:`~tools.simulator.sessions.Session`'s events merged by time with a heap
(only the sessions in progress are in memory), with the proxy processes' starts and
exits, the de-duplicated ``system_prompt`` records and the in-flight accounting that
depend on the global order. Every writer consumes these :class:`Event` streams.
"""

from __future__ import annotations

import bisect
import heapq
import random
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import NamedTuple

from tools.simulator.clock import US, UTC, iso, iso_seconds, to_us
from tools.simulator.draws import sorted_uniforms
from tools.simulator.sessions import Session
from tools.simulator.truth import Truth
from tools.simulator.world import (
    DEFAULT_SEED,
    DEFAULT_START,
    MAX_SESSIONS,
    Episode,
    ProxyProcess,
    Run,
    Scenario,
    VllmPod,
    World,
    default_scenario,
    demand,
)


class Event(NamedTuple):
    """One step of the simulated week, in time order.

    ``kind`` is ``"start"`` (a proxy process starts: banner), ``"record"`` (a log
    record, ``record`` set; ``truth`` set on the record that introduces a request
    id), ``"note"`` (a stdout-only line in ``note``) or ``"exit"`` (the process
    ends; ``note`` is ``"crash"`` or ``"deploy"``). ``process`` indexes
    :attr:`SimulatedWeek.processes`.
    """

    t_us: int
    kind: str
    process: int
    record: dict | None
    truth: Truth | None
    note: str | None


class SimulatedWeek:
    """A simulated week: its scenario, and its records regenerated on demand.

    Iterating the object (or :meth:`records`) yields the log records in time order;
    :meth:`truth` yields what each request was meant to be; :meth:`events` yields
    both plus the process starts/exits and stdout-only lines the writers need.
    Every call regenerates the week from the seed, so nothing is held in memory.
    """

    def __init__(self, seed: int, sessions: int, start: datetime, days: int,
                 episodes: Iterable[Episode] | None = None):
        if start.tzinfo is None:
            raise ValueError("start must be timezone-aware (UTC)")
        if not 0 <= sessions < MAX_SESSIONS or days < 1:
            raise ValueError(f"sessions must be in [0, {MAX_SESSIONS}) and days >= 1")
        self.seed = seed
        self.sessions = sessions
        self.start = start.astimezone(UTC)
        self.days = days
        self.end = self.start + timedelta(days=days)
        scenario = default_scenario(self.start, days)
        if episodes is not None:
            scenario = Scenario(**{**scenario.__dict__, "episodes": tuple(episodes)})
        #: The fixed story the week plays (a :class:`~tools.simulator.world.Scenario`).
        self.scenario = scenario

    # -- the scenario -------------------------------------------------------

    @property
    def episodes(self) -> list[Episode]:
        """The wedged/down windows of the model pods (what the analyzer must find)."""
        return list(self.scenario.episodes)

    @property
    def non_episodes(self) -> list[Episode]:
        """Look-alikes that are not episodes: a quiet night, a restart, a scrape gap."""
        return list(self.scenario.non_episodes)

    @property
    def processes(self) -> list[ProxyProcess]:
        """The proxy processes, in start order (indexes of :attr:`Event.process`)."""
        return list(self.scenario.processes)

    @property
    def vllm_pods(self) -> list[VllmPod]:
        """The vLLM pods whose metrics :func:`write_prometheus_exports` writes."""
        return list(self.scenario.vllm_pods)

    # -- the records --------------------------------------------------------

    def events(self) -> Iterator[Event]:
        """Every event of the week in time order (regenerated on each call)."""
        return _merge_events(World(self))

    def records(self) -> Iterator[dict]:
        """The log records in the order the proxy buffered them (time order).

        One exception, faithful to the proxy: a ``system_prompt`` record comes just
        before the request that introduced it although its timestamp is a few
        microseconds later.
        """
        for ev in self.events():
            if ev.record is not None:
                yield ev.record

    __iter__ = records

    def truth(self) -> Iterator[Truth]:
        """The intended class of every request id, in request time order."""
        for ev in self.events():
            if ev.truth is not None:
                yield ev.truth

    @property
    def ground_truth(self) -> dict[str, str]:
        """``{request_id: class}`` for the whole week (materialized: small weeks only)."""
        return {t.request_id: t.cls for t in self.truth()}

    def __repr__(self) -> str:
        return (f"SimulatedWeek(seed={self.seed}, sessions={self.sessions}, "
                f"start={iso_seconds(self.start)}, days={self.days})")


def simulate_week(
    seed: int = DEFAULT_SEED,
    sessions: int = 400,
    start: datetime = DEFAULT_START,
    days: int = 7,
    *,
    episodes: Iterable[Episode] | None = None,
) -> SimulatedWeek:
    """Simulate ``days`` days of proxy traffic starting at ``start`` (a Monday, UTC).

    Args:
        seed: the seed of every random choice; same arguments, same bytes.
        sessions: how many client sessions start during the span (~13 records
            and ~15 KB of S3 JSON each on average: 400 give the sample week, about
            62,000 give 800,000 records and ~1 GB). At most 2**20 - 1.
        start: the first instant, timezone-aware; the scenario is placed relative
            to it (see the module docstring).
        days: the span; scenario items past the end are dropped.
        episodes: replace the default wedged/down windows (for tests).

    Returns:
        A :class:`SimulatedWeek`; nothing is generated until it is iterated.
    """
    return SimulatedWeek(seed, sessions, start, days, episodes)


def records_on(week: SimulatedWeek | Iterable[dict], date: str) -> Iterator[dict]:
    """The records whose timestamp falls on ``date`` (``YYYY-MM-DD``)."""
    source = week.records() if isinstance(week, SimulatedWeek) else week
    for rec in source:
        if rec.get("timestamp", "").startswith(date):
            yield rec


# ---------------------------------------------------------------------------
# Arrivals and the merge


def _arrivals(world: World) -> Iterator[tuple[int, Run | None]]:
    """Session start times in increasing order: regular sessions and experiment runs."""
    sc, n = world.sc, world.week.sessions
    rng = random.Random(world.seed * 7919 + 17)
    n_runs = [int(round(r.share * n)) for r in sc.runs]
    n_regular = max(0, n - sum(n_runs))
    # Piecewise-constant density over 5-minute bins: diurnal x weekday x bursts.
    bin_us = 300 * US
    nbins = (sc.end_us - sc.start_us) // bin_us
    cum, acc = [], 0.0
    for b in range(nbins):
        t = sc.start_us + b * bin_us
        d = demand(t)
        for burst in sc.bursts:
            if burst.start_us <= t < burst.end_us:
                d *= burst.factor
        acc += d
        cum.append(acc)

    def regular() -> Iterator[tuple[int, Run | None]]:
        for u in sorted_uniforms(rng, n_regular):
            x = u * acc
            b = min(bisect.bisect_left(cum, x), nbins - 1)
            lo = cum[b - 1] if b else 0.0
            frac = (x - lo) / (cum[b] - lo) if cum[b] > lo else 0.0
            yield sc.start_us + b * bin_us + int(frac * bin_us), None

    def runs() -> Iterator[tuple[int, Run | None]]:
        for run, k in zip(sc.runs, n_runs):
            rr = random.Random(world.seed * 104729 + run.start_us // US)
            for u in sorted_uniforms(rr, k):
                yield run.start_us + int(u * (run.end_us - run.start_us)), run

    yield from heapq.merge(regular(), runs(), key=lambda x: x[0])


def _merge_events(world: World) -> Iterator[Event]:
    """Merge the sessions' events by time; add process starts/exits and system prompts.

    Sessions join the heap lazily (when the clock reaches their start), so only the
    sessions in progress are in memory. The system-prompt de-duplication and the
    in-flight accounting live here because they depend on the global time order.
    """
    procs = world.procs
    heap: list = []
    order = 0
    for i, p in enumerate(procs):
        heapq.heappush(heap, (to_us(p.started), -2, order, ("start", i)))
        order += 1
        if p.ends_by == "crash":
            heapq.heappush(heap, (to_us(p.accepts_until), -1, order, ("exit", i, "crash")))
            order += 1
    inflight = [0] * len(procs)
    last_t = [0] * len(procs)
    pending_deploy = [i for i, p in enumerate(procs) if p.ends_by == "deploy"]
    seen_system: list[set] = [set() for _ in procs]
    arrivals = _arrivals(world)
    nxt = next(arrivals, None)
    idx = 0
    while heap or nxt is not None:
        while nxt is not None and (not heap or nxt[0] <= heap[0][0]):
            gen = Session(world, idx, nxt[0], nxt[1]).events()
            first = next(gen, None)
            if first is not None:
                heapq.heappush(heap, (first[0], idx, order, (gen, first)))
                order += 1
            idx += 1
            nxt = next(arrivals, None)
        if not heap:
            break
        t, sidx, _, item = heapq.heappop(heap)
        # A deployed-away process exits once its last in-flight call is answered.
        for i in pending_deploy:
            until = world.proc_until[i]
            if t >= until and inflight[i] == 0:
                pending_deploy = [j for j in pending_deploy if j != i]
                exit_t = max(until, last_t[i]) + 1_500_000
                if exit_t <= t:
                    yield Event(exit_t, "exit", i, None, None, "deploy")
                else:
                    heapq.heappush(heap, (exit_t, -1, order, ("exit", i, "deploy")))
                    order += 1
                break
        if item[0] == "start":
            yield Event(t, "start", item[1], None, None, None)
            continue
        if item[0] == "exit":
            yield Event(t, "exit", item[1], None, None, item[2])
            continue
        gen, (et, _seq, proc, rec, truth, extra) = item
        if rec is not None and rec["type"] == "request":
            inflight[proc] += 1
            sysinfo = extra.get("sys") if extra else None
            if sysinfo is not None and sysinfo[0] not in seen_system[proc]:
                seen_system[proc].add(sysinfo[0])
                # Emitted inside log_request after the request's timestamp was
                # taken, but buffered before it (llm_proxy.py's _dedup_messages).
                yield Event(et, "record", proc, {
                    "timestamp": iso(et + 37), "type": "system_prompt", "origin": extra["origin"],
                    "system_sha256": sysinfo[0], "content": sysinfo[1]}, None, None)
        elif extra is not None and extra.get("paired"):
            inflight[proc] -= 1
            last_t[proc] = et
        if rec is not None:
            yield Event(et, "record", proc, rec, truth, None)
        else:
            yield Event(et, "note", proc, None, truth, extra["note"])
        nx = next(gen, None)
        if nx is not None:
            heapq.heappush(heap, (nx[0], sidx, order, (gen, nx)))
            order += 1
