"""The simulated deployment and the week's story.

The proxy replicas (:class:`ProxyProcess`: each container run of a proxy pod, its
version, capture mode and missing keys, how it ends), the vLLM pods Prometheus scrapes
(:class:`VllmPod`), their wedged/down windows and look-alikes (:class:`Episode`), the
fixed scenario placed on the simulated span (:func:`default_scenario`), demand over
the day and the week (:func:`demand`), and :class:`World`, the per-generation lookups
every session shares (which process serves a time, which window a model is in, the
system prompts and tool schemas).
"""

from __future__ import annotations

import bisect
import hashlib
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from tools.simulator.apps import APPS, App, system_prompt_text
from tools.simulator.clock import DAY_US, US, UTC, iso_seconds, to_us
from tools.simulator.draws import mix32, ri
from tools.simulator.models import MODEL_MIX


class _Week(Protocol):
    """What :class:`World` reads of a :class:`tools.simulator.week.SimulatedWeek` (which
    builds the world: named by what it offers, so there is no import back)."""

    seed: int
    sessions: int
    scenario: Any


#: The seed and week of the committed sample (ISO week 2026-W47). The seed was
#: picked, among a few, for a sample where every class and episode shows up.
DEFAULT_SEED = 54
DEFAULT_START = datetime(2026, 11, 16, tzinfo=UTC)


# Request ids are a bijection of (session index, request number), so they never
# collide: 20 bits of session, 12 of request.
MAX_SESSIONS = 1 << 20


@dataclass(frozen=True)
class Episode:
    """A metric window of one vLLM pod.

    ``kind`` is ``"wedged"`` or ``"down"`` for the episodes the analyzer must find;
    :attr:`SimulatedWeek.non_episodes` uses ``"quiet"`` (flat counters, no demand),
    ``"restart"`` (a counter reset) and ``"scrape-gap"`` (Prometheus missed scrapes)
    for look-alikes that are *not* episodes. A ``frozen`` wedge's running and
    waiting gauges read 0 throughout (the engine hung before the gauge update): the
    analyzer can only infer it from the requests that fail inside it.
    """

    kind: str
    model_name: str
    pod: str
    start: datetime
    end: datetime
    note: str = ""
    frozen: bool = False

    def to_json(self) -> dict[str, Any]:
        """The episode as a JSON-ready dict (ISO timestamps with ``Z``)."""
        return {
            "kind": self.kind,
            "model_name": self.model_name,
            "pod": self.pod,
            "start": iso_seconds(self.start),
            "end": iso_seconds(self.end),
            "note": self.note,
            **({"frozen": True} if self.frozen else {}),
        }


@dataclass(frozen=True)
class ProxyProcess:
    """One proxy process (a container run) inside a proxy pod.

    Requests arriving in ``[accepts_from, accepts_until)`` are served (and logged)
    by this process; it keeps answering its in-flight requests after
    ``accepts_until`` when it ends by a deploy, and loses them when it crashes.

    Attributes:
        pod: the Kubernetes pod name (also ``HOSTNAME`` in chunk names).
        pid: the process id in chunk names.
        started: when the process printed its banner.
        version: ``"legacy"`` (old proxy: PID-only chunk names), ``"current"``, or
            ``"ladder"`` (runs analyzer.online and logs its extra fields).
        capture: ``"summary"`` or ``"full"`` (``LOG_CAPTURE_MODE``).
        missing_keys: providers whose API key this process lacks.
        ends_by: ``"crash"``, ``"deploy"`` or None (still running at the end).
    """

    pod: str
    pid: int
    started: datetime
    accepts_from: datetime
    accepts_until: datetime | None
    version: str
    capture: str = "summary"
    missing_keys: tuple[str, ...] = ()
    ends_by: str | None = None

    @property
    def chunk_style(self) -> str:
        """``"pid"`` for the old ``HH-MM-SS-<pid>`` chunk names, else ``"host"``."""
        return "pid" if self.version == "legacy" else "host"

    def to_json(self) -> dict[str, Any]:
        """The process as a JSON-ready dict."""
        return {
            "pod": self.pod,
            "pid": self.pid,
            "started": iso_seconds(self.started),
            "accepts_from": iso_seconds(self.accepts_from),
            "accepts_until": iso_seconds(self.accepts_until) if self.accepts_until else None,
            "version": self.version,
            "capture": self.capture,
            "missing_keys": list(self.missing_keys),
            "ends_by": self.ends_by,
        }


@dataclass(frozen=True)
class VllmPod:
    """A vLLM pod whose metrics Prometheus scrapes.

    ``model_name`` is the served model name (the id clients send, e.g. ``glm-5``).
    ``first``/``last`` bound the series (None: before/after the week);
    ``counter_start`` is ``vllm:generation_tokens_total`` at the first sample;
    ``restarts`` are container restarts that reset the counter to ~0;
    ``background_tokens_per_s`` is other NRP tenants' peak generation rate.
    """

    model_name: str
    pod: str
    instance: str
    first: datetime | None = None
    last: datetime | None = None
    counter_start: int = 0
    restarts: tuple[datetime, ...] = ()
    background_tokens_per_s: float = 0.0
    job: str = "vllm"
    engine: str = "0"


@dataclass(frozen=True)
class Burst:
    """A stretch of higher demand (a workshop, a demo): arrivals times ``factor``."""

    start_us: int
    end_us: int
    factor: float


@dataclass(frozen=True)
class Run:
    """A headless experiment run: sessions tagged by a path on the origin."""

    start_us: int
    end_us: int
    app: str
    path: str
    models: tuple[str, ...]
    share: float  # fraction of all sessions


@dataclass(frozen=True)
class Scenario:
    """The week's fixed story in microsecond times: processes, windows, pods, bursts, runs."""

    start_us: int
    end_us: int
    processes: tuple[ProxyProcess, ...]
    episodes: tuple[Episode, ...]
    non_episodes: tuple[Episode, ...]
    vllm_pods: tuple[VllmPod, ...]
    bursts: tuple[Burst, ...]
    runs: tuple[Run, ...]
    credit_outages: tuple[tuple[int, int], ...]  # OpenRouter answers 402 in these windows
    glm53_from_us: int | None = None  # from then on glm-5 is served by GLM-5.3 weights (same name)


def _at(start: datetime, day: int, hms: str) -> datetime:
    h, m, s = (int(x) for x in hms.split(":"))
    return start + timedelta(days=day, hours=h, minutes=m, seconds=s)


def default_scenario(start: datetime, days: int) -> Scenario:
    """The week's fixed story, placed relative to ``start`` (a Monday 00:00 UTC)."""
    end = start + timedelta(days=days)
    at = lambda day, hms: _at(start, day, hms)  # noqa: E731

    legacy_pod = "glm-proxy-5f7b8c9d4-h2x9k"
    processes = [
        ProxyProcess(legacy_pod, 7, at(-2, "14:31:07"), at(-2, "14:31:19"), at(1, "19:31:34"), "legacy",
                     ends_by="crash"),
        ProxyProcess(legacy_pod, 7, at(1, "19:31:43"), at(1, "19:31:55"), at(2, "16:40:00"), "legacy",
                     ends_by="deploy"),
        ProxyProcess("glm-proxy-6c9d7f8b5-m4q7t", 1, at(2, "16:39:41"), at(2, "16:40:00"), at(2, "18:05:00"),
                     "current", missing_keys=("openrouter", "anthropic", "nimbus"), ends_by="deploy"),
        ProxyProcess("glm-proxy-7b5c8d9f6-w8n3v", 1, at(2, "18:04:41"), at(2, "18:05:00"), at(3, "14:00:00"),
                     "current", ends_by="deploy"),
        ProxyProcess("glm-proxy-84d6f9c7b-t2k8r", 1, at(3, "13:59:40"), at(3, "14:00:00"), at(4, "03:00:00"),
                     "current", capture="full", ends_by="deploy"),
        ProxyProcess("glm-proxy-7b5c8d9f6-q9z4x", 1, at(4, "02:59:44"), at(4, "03:00:00"), at(5, "00:02:00"),
                     "current", ends_by="deploy"),
        ProxyProcess("glm-proxy-9f8e7d6c5-b3n6m", 1, at(5, "00:01:39"), at(5, "00:02:00"), None, "ladder"),
    ]
    # Keep the processes that accept requests inside the simulated span.
    kept = [p for p in processes if p.accepts_from < end]
    kept = [
        p if (p.accepts_until is None or p.accepts_until < end) else
        ProxyProcess(p.pod, p.pid, p.started, p.accepts_from, None, p.version, p.capture, p.missing_keys, None)
        for p in kept
    ]

    glm_old, glm_new = "glm-5-vllm-6f9c7d8b5-k7m2q", "glm-5-vllm-6f9c7d8b5-r4t8w"
    down_start, down_end = at(3, "17:25:00"), at(3, "17:35:00")
    # On Friday evening the operator restarts the replacement on GLM-5.3 weights,
    # still served as glm-5.
    glm53 = at(4, "18:40:00")
    episodes = [
        Episode("wedged", "glm-5", glm_old, at(1, "20:10:00"), at(1, "20:35:00"),
                "engine stuck during a workshop burst; recovered on its own"),
        Episode("wedged", "glm-5", glm_old, at(3, "16:35:00"), at(3, "17:25:00"),
                "engine hung before its gauges updated: running and waiting read 0 (frozen gauges); "
                "the operator deleted the pod at the end", frozen=True),
        Episode("down", "glm-5", glm_new, down_start, down_end,
                "replacement pod loading weights: up == 0, connections refused"),
    ]
    non_episodes = [
        Episode("quiet", "glm-5", glm_old, at(2, "07:00:00"), at(2, "13:00:00"),
                "no demand at all: counters flat, nothing running or waiting; not a wedge"),
        Episode("restart", "qwen3", "qwen3-vllm-7c6d9f8b4-j5w2h", at(2, "11:02:10"), at(2, "11:02:25"),
                "container restart between two scrapes: the counter resets to ~0, up stays 1"),
        Episode("scrape-gap", "*", "*", at(4, "05:10:00"), at(4, "05:15:00"),
                "Prometheus missed scrapes: no samples for any series"),
    ]
    vllm_pods = [
        VllmPod("glm-5", glm_old, "10.244.17.23:8000", None, down_start - timedelta(seconds=30),
                1_843_311_245, (), 260.0),
        VllmPod("glm-5", glm_new, "10.244.19.41:8000", down_start, None, 0, (glm53,), 260.0),
        VllmPod("qwen3", "qwen3-vllm-7c6d9f8b4-j5w2h", "10.244.11.7:8000", None, None, 2_210_774_903,
                (at(2, "11:02:10"),), 180.0),
    ]
    bursts = [
        Burst(to_us(at(1, "19:30:00")), to_us(at(1, "21:00:00")), 3.0),  # a workshop on ca-30x30
        Burst(to_us(at(3, "16:00:00")), to_us(at(3, "18:00:00")), 2.5),  # a demo
    ]
    runs = [
        Run(to_us(at(2, "20:00:00")), to_us(at(2, "21:30:00")), "ca-30x30", "/agent_runner_bench3",
            ("glm-5", "qwen3", "anthropic/claude-sonnet-4.5", "z-ai/glm-4.6"), 0.025),
        Run(to_us(at(4, "18:00:00")), to_us(at(4, "19:00:00")), "tpl", "/or-openmodel-bench",
            ("glm-5", "openai/gpt-5-mini", "qwen/qwen3-235b-a22b-2507", "gpt-oss"), 0.015),
    ]
    credit = [(to_us(at(3, "21:00:00")), to_us(at(3, "22:20:00")))]

    def inside(e: Episode) -> bool:
        return e.start < end

    return Scenario(
        start_us=to_us(start),
        end_us=to_us(end),
        processes=tuple(kept),
        episodes=tuple(e for e in episodes if inside(e)),
        non_episodes=tuple(e for e in non_episodes if inside(e)),
        vllm_pods=tuple(p for p in vllm_pods if p.first is None or p.first < end),
        bursts=tuple(b for b in bursts if b.start_us < to_us(end)),
        runs=tuple(r for r in runs if r.end_us <= to_us(end)),
        credit_outages=tuple(c for c in credit if c[1] <= to_us(end)),
        glm53_from_us=to_us(glm53) if glm53 < end else None,
    )


# Hourly demand (UTC; US daytime is 15:00-01:00 UTC) and weekday factors (Mon..Sun).
_HOURLY = (0.80, 0.62, 0.45, 0.30, 0.18, 0.10, 0.06, 0.05, 0.05, 0.06, 0.08, 0.12,
           0.22, 0.40, 0.62, 0.82, 0.95, 1.00, 1.00, 0.97, 1.00, 0.98, 0.94, 0.88)
_WEEKDAY = (1.0, 1.05, 1.0, 1.1, 0.85, 0.45, 0.5)


def demand(t_us: int) -> float:
    """Relative demand at a time: diurnal x weekday (no bursts)."""
    day, rem = divmod(t_us, DAY_US)
    weekday = (day + 3) % 7  # 1970-01-01 was a Thursday
    return _HOURLY[rem // (3600 * US)] * _WEEKDAY[weekday]


class World:
    """Per-generation state shared by every session: scenario lookups, prompts."""

    def __init__(self, week: _Week):
        sc = week.scenario
        self.week = week
        self.seed = week.seed
        self.sc = sc
        self.start_us = sc.start_us
        self.end_us = sc.end_us
        self.procs = sc.processes
        self.proc_from = [to_us(p.accepts_from) for p in sc.processes]
        self.proc_until = [to_us(p.accepts_until) if p.accepts_until else None for p in sc.processes]
        self.id_salt = mix32(week.seed * 0x9E3779B1 + 0x5BD1E995)
        # Windows of the pod-backed models: (start, end, kind).
        self.windows: dict[str, list[tuple[int, int, str]]] = {}
        for e in sc.episodes:
            self.windows.setdefault(e.model_name, []).append((to_us(e.start), to_us(e.end), e.kind))
        quiet = [e for e in sc.non_episodes if e.kind == "quiet"]
        # No session of the quiet model starts in the 90 min before a quiet window or
        # inside it, and sessions reaching it end, so its counters stay truly flat.
        self.quiet = [(e.model_name, to_us(e.start) - 90 * 60 * US, to_us(e.end)) for e in quiet]
        self.quiet_hard = [(e.model_name, to_us(e.start), to_us(e.end)) for e in quiet]
        self.credit_outages = sc.credit_outages
        self.glm53_from_us = sc.glm53_from_us
        self._system_prompts: dict[tuple[str, str | None], tuple[str, str, int]] = {}
        self._tool_defs: dict[str, list] = {}
        mix_total = sum(w for _, w in MODEL_MIX)
        self.mix_models = [m for m, _ in MODEL_MIX]
        acc, self.mix_cum = 0.0, []
        for _, w in MODEL_MIX:
            acc += w / mix_total
            self.mix_cum.append(acc)
        app_total = sum(a.weight for a in APPS)
        acc, self.app_cum = 0.0, []
        for a in APPS:
            acc += a.weight / app_total
            self.app_cum.append(acc)
        self.online = None
        if any(p.version == "ladder" for p in self.procs):
            import analyzer.online as online  # stdlib-only; the very module the proxy runs

            self.online = online

    # -- scenario lookups ---------------------------------------------------

    def process_at(self, t_us: int) -> int | None:
        """The index of the process accepting requests at ``t_us`` (None in a gap)."""
        i = bisect.bisect_right(self.proc_from, t_us) - 1
        if i < 0:
            return None
        until = self.proc_until[i]
        if until is not None and t_us >= until:
            return None
        return i

    def admit(self, t_us: int, rng: random.Random) -> tuple[int, int]:
        """Shift a request out of a restart gap (the client retried) and pick its process."""
        i = self.process_at(t_us)
        if i is None:
            j = bisect.bisect_right(self.proc_from, t_us)
            if j < len(self.procs):
                t_us = self.proc_from[j] + ri(rng, 500_000, 6_000_000)
                i = j
            else:
                i = len(self.procs) - 1
        return t_us, i

    def window(self, model: str, t_us: int) -> str | None:
        """The kind of episode (``"wedged"``/``"down"``) ``model``'s pod is in at ``t_us``, if any."""
        for s, e, kind in self.windows.get(model, ()):
            if s <= t_us < e:
                return kind
        return None

    def glm_weights(self, model: str, t_us: int) -> str | None:
        """Which GLM weights serve ``model`` at ``t_us``: ``"5.3"`` after the restart, ``"5.2"``
        (the GLM-4.5 to 5.2 template) for the other self-hosted GLMs, None otherwise."""
        if model == "glm-5" and self.glm53_from_us is not None and t_us >= self.glm53_from_us:
            return "5.3"
        return "5.2" if model in ("glm-5", "glm-4.6") else None

    def window_end(self, model: str, t_us: int) -> int:
        """The end of the episode of ``model`` around ``t_us`` (``t_us`` outside one)."""
        for s, e, _ in self.windows.get(model, ()):
            if s <= t_us < e:
                return e
        return t_us

    def next_window_start(self, model: str, t_us: int, until_us: int) -> int | None:
        """The start of a window of ``model`` in ``(t_us, until_us]``, if any."""
        for s, _, _ in self.windows.get(model, ()):
            if t_us < s <= until_us:
                return s
        return None

    def barrier_between(self, model: str, t_us: int, until_us: int) -> int | None:
        """The start of a wedged, down or quiet window of ``model`` in ``(t_us, until_us]``."""
        s = self.next_window_start(model, t_us, until_us)
        if s is not None:
            return s
        for m, qs, _ in self.quiet_hard:
            if m == model and t_us < qs <= until_us:
                return qs
        return None

    def quiet_blocked(self, model: str, t_us: int, hard: bool = False) -> bool:
        """Whether ``model`` must not be used at ``t_us`` (the quiet night, with a margin unless ``hard``)."""
        return any(m == model and s <= t_us < e for m, s, e in (self.quiet_hard if hard else self.quiet))

    def credit_outage(self, t_us: int) -> bool:
        """Whether OpenRouter answers 402 (out of credits) at ``t_us``."""
        return any(s <= t_us < e for s, e in self.credit_outages)

    # -- prompts and tools ----------------------------------------------------

    def system_prompt(self, app: App, client: str | None) -> tuple[str, str, int]:
        """``(body, sha256, prompt_tokens)`` of an app's system prompt (per client build)."""
        key = (app.key, client)
        hit = self._system_prompts.get(key)
        if hit is None:
            body = system_prompt_text(app, client)
            sha = hashlib.sha256(body.encode("utf-8")).hexdigest()
            # The real prompt plus tool schemas is ~9k tokens; the stored text is a
            # compact stand-in, the token count keeps the real order of magnitude.
            tokens = 8600 + int(sha[:4], 16) % 1200
            hit = (body, sha, tokens)
            self._system_prompts[key] = hit
        return hit

    def tool_defs(self, app: App) -> list:
        """The ``tools`` array an app sends (one function schema per tool, cached)."""
        defs = self._tool_defs.get(app.key)
        if defs is None:
            defs = [
                {"type": "function", "function": {"name": name, "description": f"{name.replace('_', ' ')} tool",
                                                  "parameters": {"type": "object", "properties": {}}}}
                for name in app.tools
            ]
            self._tool_defs[app.key] = defs
        return defs
