"""A realistic, deterministic synthetic week of the LLM proxy's logs, in every form.

The proxy (``llm_proxy.py`` of open-llm-proxy, see ``docs/proxy-log-format.md``)
fronts self-hosted GLM/Qwen models on vLLM plus hosted providers. This module plays
a week of its traffic -- multi-turn tool-calling agent sessions with every failure
class of the design -- and writes it the way the real proxy and its surroundings do:

- :func:`write_s3_chunks` -- the full-fidelity S3 chunk files, flushed every ~60 s
  per proxy process (``YYYY-MM-DD/HH-MM-SS-<pid>.jsonl`` from the old proxy,
  ``YYYY-MM-DD/HH-MM-SS-<host>-<pid>-<8hex>.jsonl`` from newer ones);
- :func:`write_kubectl_stdout` -- each proxy pod's stdout (``kubectl logs``): banner,
  uvicorn lines, prefixed records cut to 200 characters per string field when S3 is
  enabled, ``⚠️``/``🧹``/``✓ Flushed`` lines;
- :func:`write_consolidated_parquet` -- the consolidated Parquet tier (one row per
  record, the original JSON in ``entry``);
- :func:`write_prometheus_exports` -- Prometheus ``/api/v1/query_range`` JSON for
  ``up`` and the vLLM counters/gauges of the glm-5 and qwen3 pods;
- :func:`write_ground_truth` -- what each request was meant to be, for tests.

Quick start::

    from analyzer.simulate import simulate_week, write_s3_chunks
    week = simulate_week(seed=54, sessions=400)
    for record in week.records():      # dicts in time order, regenerated on each call
        ...
    write_s3_chunks(week, "out/s3")

Everything is a pure function of ``(seed, sessions, start, days)``: one
``random.Random`` per session (seeded from the seed and the session's index) and
one for the arrival process, never the global generator, so the same arguments give
the same bytes. Generation streams: sessions are merged lazily by time with a heap,
so memory stays flat however many sessions are asked for, and every writer consumes
an iterator. Each call of :meth:`SimulatedWeek.events` regenerates the week.

The week's scenario (times relative to ``start``, a Monday 00:00 UTC):

- the old proxy (Mon -> Wed 16:40) logs ``session_id``/``client`` null for old app
  builds and names chunks by PID only; it crashes once on Tue 19:31:34, leaving the
  requests it was serving unanswered;
- a newer proxy from Wed 16:40 (its first pod lacks the OpenRouter, Anthropic and
  Nimbus keys until 18:05); full capture mode (``messages`` and ``system_prompt``
  records, the prompt text in ``content`` as the real proxy writes it) Thu 14:00 ->
  Fri 03:00;
- from Sat 00:02 the proxy runs :mod:`analyzer.online`: its response records carry
  the fields of :func:`analyzer.online.log_fields`, produced by really calling
  :func:`analyzer.online.run_ladder` against a simulated upstream;
- the glm-5 vLLM pod is *wedged* Tue 20:10-20:35 and Thu 16:35-17:25 (``up == 1``,
  the generation counter flat, requests stuck running), then *down* Thu 17:25-17:35
  while its replacement loads (``up == 0``, ``ConnectError``); Wed 07:00-13:00 is a
  quiet night with flat counters and no demand (not a wedge); the qwen3 pod restarts
  Wed 11:02 (a counter reset); Prometheus misses scrapes Fri 05:10-05:15.

Ground truth classes follow the design's rule (``docs/DESIGN.md``) applied to the
truth: a 5xx is ``tool-history-5xx`` when the transcript carries tool history
anywhere, failures of the glm-5 pod inside a wedged/down window are ``wedged-pod`` /
``pod-down``, a request whose response was never logged is ``unanswered``, and
``tool-call-stop-mismatch`` exists only where a finish reason is logged (the ladder
days). On ladder days the class is that of the *original* answer, as
``log_fields``'s ``incident_class``.
"""

from __future__ import annotations

import bisect
import contextlib
import gzip
import hashlib
import heapq
import io
import json
import math
import os
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

UTC = timezone.utc

__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_START",
    "Episode",
    "Event",
    "ProxyProcess",
    "S3WriteResult",
    "SimulatedWeek",
    "Truth",
    "VllmPod",
    "records_on",
    "simulate_week",
    "stdout_view",
    "write_consolidated_parquet",
    "write_ground_truth",
    "write_kubectl_stdout",
    "write_prometheus_exports",
    "write_s3_chunks",
]

#: The seed and week of the committed sample (ISO week 2026-W47). The seed was
#: picked, among a few, for a sample where every class and episode shows up.
DEFAULT_SEED = 54
DEFAULT_START = datetime(2026, 11, 16, tzinfo=UTC)

_US = 1_000_000  # microseconds per second: all internal times are integer microseconds
_DAY_US = 86_400 * _US
# Request ids are a bijection of (session index, request number), so they never
# collide: 20 bits of session, 12 of request.
_MAX_SESSIONS = 1 << 20
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Proxy constants, as in llm_proxy.py.
_LOG_BUCKET = "logs-open-llm-proxy"
_FLUSH_INTERVAL_S = 60
_STDOUT_MAX_FIELD = 200
_REASONING_MAX = 4000
_UPSTREAM_TIMEOUT_MS = 1_200_000
_SLOW_COMPLETION_WARN_MS = 300_000
_PROMETHEUS_STEP_S = 30
# Upstream headers the proxy logs on an HTTP error, in the order it logs them.
_UPSTREAM_HEADER_ALLOWLIST = ("retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
                              "x-request-id", "server", "date", "content-length")


# ---------------------------------------------------------------------------
# Public data types


@dataclass(frozen=True)
class Episode:
    """A metric window of one vLLM pod.

    ``kind`` is ``"wedged"`` or ``"down"`` for the episodes the analyzer must find;
    :attr:`SimulatedWeek.non_episodes` uses ``"quiet"`` (flat counters, no demand),
    ``"restart"`` (a counter reset) and ``"scrape-gap"`` (Prometheus missed scrapes)
    for look-alikes that are *not* episodes.
    """

    kind: str
    model_name: str
    pod: str
    start: datetime
    end: datetime
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        """The episode as a JSON-ready dict (ISO timestamps with ``Z``)."""
        return {
            "kind": self.kind,
            "model_name": self.model_name,
            "pod": self.pod,
            "start": _iso_seconds(self.start),
            "end": _iso_seconds(self.end),
            "note": self.note,
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
            "started": _iso_seconds(self.started),
            "accepts_from": _iso_seconds(self.accepts_from),
            "accepts_until": _iso_seconds(self.accepts_until) if self.accepts_until else None,
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


class Truth(NamedTuple):
    """What one request (one ``request_id``) was meant to be.

    ``cls`` is the intended class; ``tool_history`` whether the transcript carried
    tool history anywhere; ``retry_of`` the request id of the failed turn this one
    repeats (same session, message count and user message); ``ladder`` the ladder's
    ``{trigger, outcome, recovered_at}`` on ladder days when it triggered.
    """

    request_id: str
    cls: str
    model: str
    provider: str
    ts: str
    session_id: str | None
    tool_history: bool
    retry_of: str | None
    ladder: dict | None

    def to_json(self) -> dict[str, Any]:
        """The truth row as a JSON-ready dict (without the request id)."""
        return {
            "class": self.cls,
            "model": self.model,
            "provider": self.provider,
            "ts": self.ts,
            "session_id": self.session_id,
            "tool_history": self.tool_history,
            "retry_of": self.retry_of,
            "ladder": self.ladder,
        }


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


# ---------------------------------------------------------------------------
# Time helpers


def _to_us(dt: datetime) -> int:
    return (dt - _EPOCH) // timedelta(microseconds=1)


def _from_us(t_us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=t_us)


_DATE_CACHE: dict[int, str] = {}
_HTTP_DATE_CACHE: dict[int, str] = {}
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _date_of_day(day: int) -> str:
    s = _DATE_CACHE.get(day)
    if s is None:
        s = _from_us(day * _DAY_US).strftime("%Y-%m-%d")
        _DATE_CACHE[day] = s
    return s


def _iso(t_us: int) -> str:
    """``2026-11-16T14:03:07.123456Z``: the proxy's ``utcnow().isoformat() + "Z"``.

    (The real proxy drops the fraction when the microseconds are exactly 0; the
    simulation always writes six decimals.)
    """
    day, rem = divmod(t_us, _DAY_US)
    sec, us = divmod(rem, _US)
    h, sec = divmod(sec, 3600)
    m, sec = divmod(sec, 60)
    return f"{_date_of_day(day)}T{h:02d}:{m:02d}:{sec:02d}.{us:06d}Z"


def _iso_seconds(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _http_date(t_us: int) -> str:
    """An RFC 7231 ``Date`` header value."""
    day, rem = divmod(t_us, _DAY_US)
    head = _HTTP_DATE_CACHE.get(day)
    if head is None:
        d = _from_us(day * _DAY_US)
        head = f"{_WEEKDAYS[d.weekday()]}, {d.day:02d} {_MONTHS[d.month - 1]} {d.year}"
        _HTTP_DATE_CACHE[day] = head
    sec = rem // _US
    h, sec = divmod(sec, 3600)
    m, sec = divmod(sec, 60)
    return f"{head} {h:02d}:{m:02d}:{sec:02d} GMT"


def _mix32(x: int) -> int:
    """A bijective 32-bit integer mixer: distinct inputs give distinct ids."""
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    x ^= x >> 16
    return x


def _hex_of(text: str, n: int) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()[:n]


def _ri(rng: random.Random, a: int, b: int) -> int:
    """``rng.randint(a, b)``, faster (one ``random()`` call; the hot path uses it a lot)."""
    return a + int(rng.random() * (b - a + 1))


def _pick(rng: random.Random, seq: Any) -> Any:
    """``rng.choice(seq)``, faster."""
    return seq[int(rng.random() * len(seq))]


# ---------------------------------------------------------------------------
# The world: apps, models, content


@dataclass(frozen=True)
class _App:
    key: str
    origin: str
    title: str
    tools: tuple[str, ...]
    questions: tuple[str, ...]
    datasets: tuple[str, ...]
    deadline_s: int | None  # the app's nginx sidecar proxy_read_timeout
    max_tokens: int | None  # the completion cap the app sends
    weight: float
    geo_agent: bool = True


_GEO_TOOLS = ("query", "get_dataset_schema", "list_datasets", "show_layer", "fly_to")

_APPS: tuple[_App, ...] = (
    _App(
        "tpl", "https://tpl.nrp-nautilus.io", "Conservation Almanac", _GEO_TOOLS,
        (
            "How much conservation funding was approved by ballot measures in each state since 2010?",
            "Show me protected lands near socially vulnerable communities in Texas.",
            "Which counties in Colorado passed the most open-space measures?",
            "What share of conservation ballot measures passed in 2024?",
            "Map the parks funded by local measures in the Bay Area.",
        ),
        ("s3://public-tpl/conservation-almanac-2024.parquet", "s3://public-padus/padus-4-1/fee.parquet",
         "s3://public-social-vulnerability/svi-2022-tract.parquet"),
        300, 4096, 0.34,
    ),
    _App(
        "ca-30x30", "https://ca-30x30.nrp-nautilus.io", "California 30x30", _GEO_TOOLS,
        (
            "How close is California to 30x30? Break it down by ecoregion.",
            "Which ecoregions are furthest from 30% protection?",
            "How much land did California conserve toward 30x30 last year?",
            "Show the GAP 1 and 2 lands in the Sierra Nevada.",
            "What fraction of coastal wetlands is protected?",
        ),
        ("s3://public-ca30x30/ca-30x30-2024.parquet", "s3://public-padus/padus-4-1/fee.parquet"),
        600, 2048, 0.26,
    ),
    _App(
        "padus", "https://padus.nrp-nautilus.io", "PAD-US Explorer", _GEO_TOOLS,
        (
            "Who manages the most protected land in Nevada?",
            "List the largest wilderness areas in Oregon.",
            "How much tribal land is in PAD-US for Arizona?",
            "Compare federal and state protected acres in Utah.",
            "Which national wildlife refuges are in Louisiana?",
        ),
        ("s3://public-padus/padus-4-1/fee.parquet", "s3://public-padus/padus-4-1/easement.parquet"),
        300, 4096, 0.18,
    ),
    _App(
        "redlining", "https://redlining.nrp-nautilus.io", "Redlining and Equity",
        _GEO_TOOLS + ("filter_layer", "clear_layers"),
        (
            "Is current social vulnerability higher in formerly redlined neighborhoods in Oakland?",
            "Show HOLC grade D areas in Los Angeles with tree canopy below 10%.",
            "How does park access differ between HOLC grades in Chicago?",
            "Compare heat exposure in A and D graded tracts in Richmond.",
        ),
        ("s3://public-redlining/mappinginequality.parquet", "s3://public-social-vulnerability/svi-2022-tract.parquet"),
        600, 1024, 0.14,
    ),
    _App(
        "wetlands", "https://wetlands.nrp-nautilus.io", "Wetlands Chatbot", ("query", "show_layer", "fly_to"),
        (
            "Where are the largest remaining wetlands in the Central Valley?",
            "How many acres of wetlands were lost in Louisiana since 1990?",
            "Show peatlands in Minnesota.",
        ),
        ("s3://public-wetlands/nwi-conus.parquet",),
        600, None, 0.08, geo_agent=False,
    ),
)
_APP_BY_KEY = {a.key: a for a in _APPS}

_FOLLOW_UPS = (
    "What about only GAP 1 and 2?",
    "How has that changed since 2015?",
    "Can you show that on the map?",
    "Break that down by county.",
    "Which of those are managed by the state?",
    "Compare that with Oregon.",
    "Sort by acreage and show the top 10.",
    "What is the total?",
    "Now just the ones larger than 1,000 acres.",
    "Zoom to the largest one.",
    "Can you explain how you computed that?",
    "Include easements too.",
)
_AFTER_FAILURE = ("That didn't work, can you try again?", "Hello? Any answer?", "Try again please.")

_PLACES = (
    "Marin County", "Tejon Ranch", "Malheur NWR", "Point Reyes", "Headwaters Forest",
    "Anza-Borrego Desert", "Cosumnes River Preserve", "Los Angeles County", "Mojave Desert",
    "Klamath Mountains", "Central Coast", "Oakland", "Great Basin", "Modoc Plateau",
    "Sonoran Desert", "Texas", "Nevada", "Louisiana",
)
_STATES = ("California", "Texas", "Nevada", "Oregon", "Colorado", "Utah", "Arizona", "Louisiana")

_REASONING = (
    "Let me look at the schema so I use the right column names.",
    "I need to be careful not to double count overlapping polygons.",
    "The numbers look plausible relative to the statewide total.",
    "GAP status 1 and 2 count as permanently protected.",
    "I should filter by state before aggregating to keep the query fast.",
    "The previous query failed on a column name; GIS_Acres is the right one.",
    "Showing the layer on the map will help the user see where these are.",
    "I have enough information to answer now.",
    "Let me summarize the result in a short table.",
    "The user probably wants acres, not polygon counts.",
)
_LOOP_REASONING = (
    "Wait, let me reconsider the GAP status codes. GAP 1 and 2 are permanent protection, GAP 3 is "
    "multiple use, GAP 4 is no known mandate. But the user asked about conserved areas, so maybe I "
    "should include easements too. Actually, let me re-check the schema again. "
)
_PREAMBLES = ("", "", "", "Let me check the schema first.", "I'll query the dataset.", "Let me look that up.")

_ANSWERS = (
    "{a} leads with {n1} acres, followed by {b} ({n2} acres). In total {n3} acres across {k} units match "
    "your question; I've highlighted them on the map.",
    "About {p}% of {a} is protected at GAP 1 or 2, which is {q} percentage points short of the 30% target. "
    "The largest gaps are in {b} and the Great Basin.",
    "Between 2010 and 2024 voters approved {k} conservation measures worth ${m} billion; {s} accounts for "
    "the largest share ({p}%).",
    "The top three are {a} ({n1} acres), {b} ({n2} acres) and {c}. Together they hold {p}% of the "
    "protected area in {s}.",
    "Formerly D-graded tracts have a median SVI of 0.{p2} versus 0.{q2} in A-graded tracts, a gap that "
    "persists after controlling for population.",
)

# SQL columns a query groups by, per dataset family.
_GROUP_COLUMNS = ("State_Nm", "Mang_Name", "Unit_Nm", "ecoregion", "county", "holc_grade")


# ---------------------------------------------------------------------------
# Models and how they fail


@dataclass(frozen=True)
class _Profile:
    """How one model behaves. The ``p_*`` are per-call probabilities, adjusted in
    :meth:`_Session._sample` (by transcript length, tool history, hour)."""

    provider: str
    usage: str  # shape of the usage object: "vllm" | "openrouter" | "anthropic"
    reasoning_default: bool  # a reasoning trace when the client does not say (enable_thinking null)
    thinking_key: bool  # the proxy maps enable_thinking for it (else it prints an ℹ️ line and ignores it)
    ms_per_token: float  # decode speed
    ttft_ms: float  # time to first token, before prefill
    prefill_us_per_token: float
    th500: float  # scale of the naked-500-with-tool-history curve (the GLM signature; 0 = never)
    p_5xx: float  # other 5xx (gateway HTML 502, JSON 503, 529 ...), mostly on turns without tool history
    p_timeout: float  # the proxy's 1200 s read timeout
    p_reset: float  # the connection drops mid-answer
    p_429: float  # rate limited (more in busy hours)
    p_4xx: float  # 400/401/403 passed through
    p_empty: float  # empty 200 with finish_reason stop (grows with the transcript on tool turns)
    p_length: float  # reasoning eats the whole max_tokens (thinking on and a cap sent)
    p_slow: float  # a 200-900 s generation (slow warning, or the caller hangs up first)
    p_repair: float  # the proxy repaired leaked tool-call argument markup
    p_mismatch: float  # tool calls with finish_reason "stop" (seed 002)
    price_in: float = 0.0  # USD per million tokens (OpenRouter reports a cost)
    price_out: float = 0.0
    pod_model: bool = False  # served by a self-hosted vLLM pod that Prometheus scrapes


_PROFILES: dict[str, _Profile] = {
    "glm-5": _Profile(
        provider="nrp", usage="vllm", reasoning_default=True, thinking_key=True, ms_per_token=32,
        ttft_ms=650, prefill_us_per_token=45, th500=1.0, p_5xx=0.015, p_timeout=0.0015, p_reset=0.0008,
        p_429=0.001, p_4xx=0.001, p_empty=0.012, p_length=0.02, p_slow=0.004, p_repair=0.006,
        p_mismatch=0.025, pod_model=True,
    ),
    "glm-4.6": _Profile(
        provider="nrp", usage="vllm", reasoning_default=True, thinking_key=False, ms_per_token=27,
        ttft_ms=550, prefill_us_per_token=40, th500=0.6, p_5xx=0.012, p_timeout=0.0012, p_reset=0.0006,
        p_429=0.001, p_4xx=0.001, p_empty=0.008, p_length=0.015, p_slow=0.003, p_repair=0.004,
        p_mismatch=0.01, pod_model=True,
    ),
    "qwen3": _Profile(
        provider="nrp", usage="vllm", reasoning_default=True, thinking_key=True, ms_per_token=14,
        ttft_ms=350, prefill_us_per_token=25, th500=0.2, p_5xx=0.002, p_timeout=0.001, p_reset=0.0005,
        p_429=0.001, p_4xx=0.001, p_empty=0.004, p_length=0.05, p_slow=0.002, p_repair=0.003,
        p_mismatch=0.03, pod_model=True,
    ),
    "gpt-oss": _Profile(
        provider="nimbus", usage="vllm", reasoning_default=True, thinking_key=False, ms_per_token=9,
        ttft_ms=300, prefill_us_per_token=15, th500=0.0, p_5xx=0.012, p_timeout=0.0, p_reset=0.0008,
        p_429=0.0, p_4xx=0.001, p_empty=0.003, p_length=0.01, p_slow=0.002, p_repair=0.0, p_mismatch=0.005,
    ),
    "anthropic/claude-sonnet-4.5": _Profile(
        provider="openrouter", usage="openrouter", reasoning_default=False, thinking_key=False,
        ms_per_token=18, ttft_ms=900, prefill_us_per_token=10, th500=0.0, p_5xx=0.004, p_timeout=0.0,
        p_reset=0.0004, p_429=0.03, p_4xx=0.012, p_empty=0.001, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.0, price_in=3.0, price_out=15.0,
    ),
    "z-ai/glm-4.6": _Profile(
        provider="openrouter", usage="openrouter", reasoning_default=True, thinking_key=False,
        ms_per_token=22, ttft_ms=1100, prefill_us_per_token=10, th500=0.3, p_5xx=0.005, p_timeout=0.0,
        p_reset=0.0004, p_429=0.05, p_4xx=0.012, p_empty=0.006, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.005, price_in=0.4, price_out=1.75,
    ),
    "openai/gpt-5-mini": _Profile(
        provider="openrouter", usage="openrouter", reasoning_default=False, thinking_key=False,
        ms_per_token=10, ttft_ms=700, prefill_us_per_token=8, th500=0.0, p_5xx=0.003, p_timeout=0.0,
        p_reset=0.0003, p_429=0.02, p_4xx=0.012, p_empty=0.002, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.0, price_in=0.25, price_out=2.0,
    ),
    "qwen/qwen3-235b-a22b-2507": _Profile(
        provider="openrouter", usage="openrouter", reasoning_default=True, thinking_key=False,
        ms_per_token=16, ttft_ms=800, prefill_us_per_token=10, th500=0.1, p_5xx=0.004, p_timeout=0.0,
        p_reset=0.0004, p_429=0.04, p_4xx=0.012, p_empty=0.004, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.005, price_in=0.08, price_out=0.55,
    ),
    "claude-sonnet-4-5": _Profile(
        provider="anthropic", usage="anthropic", reasoning_default=False, thinking_key=False,
        ms_per_token=19, ttft_ms=950, prefill_us_per_token=10, th500=0.0, p_5xx=0.004, p_timeout=0.0,
        p_reset=0.0003, p_429=0.012, p_4xx=0.006, p_empty=0.001, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.0,
    ),
}

# (model, weight) for regular sessions; "unrouted"/"streaming" are rejections.
_MODEL_MIX: tuple[tuple[str, float], ...] = (
    ("glm-5", 0.49),
    ("glm-4.6", 0.09),
    ("qwen3", 0.12),
    ("gpt-oss", 0.08),
    ("anthropic/claude-sonnet-4.5", 0.05),
    ("z-ai/glm-4.6", 0.04),
    ("openai/gpt-5-mini", 0.03),
    ("qwen/qwen3-235b-a22b-2507", 0.02),
    ("claude-sonnet-4-5", 0.05),
    ("unrouted", 0.014),
    ("streaming", 0.012),
)
_UNROUTED_MODELS = ("gpt-4o", "glm-4.7", "llama-3.3-70b", "mistral-large")

# What the synthetic deployment serves (for the "Unknown model" message): this proxy
# has no default provider, so unknown ids are rejected instead of falling to nrp.
_SERVED = (
    ("nrp", ("glm-5", "glm-4.6", "qwen3", "kimi", "qwen3-small", "gemma", "qwen3-4bit")),
    ("openrouter", ()),
    ("anthropic", ()),
    ("nimbus", ("gpt-oss",)),
)
_ENDPOINTS = (
    ("nrp", "https://ellm.nrp-nautilus.io/v1/chat/completions"),
    ("openrouter", "https://openrouter.ai/api/v1/chat/completions"),
    ("anthropic", "https://api.anthropic.com/v1/chat/completions"),
    ("nimbus", "https://vllm-nimbus.carlboettiger.info/v1/chat/completions"),
)
_STREAMING_ERROR = (
    "Streaming is not supported by this proxy: it buffers each completion to log the request/response "
    "pair. Omit `stream` or set it to false."
)


def _unknown_model_error(model: str) -> str:
    served = "; ".join(
        f"{name} ({', '.join(models[:6])}{'…' if len(models) > 6 else ''})" for name, models in _SERVED
    )
    return f"Unknown model '{model}'. This deployment serves: {served}"


# Ladder rung recovery probabilities by trigger (before the long-transcript penalty).
_RUNG_RECOVERY = {
    "tool-history-5xx": {"tool_choice_none": 0.30, "drop_tools": 0.50, "final_answer": 0.70,
                         "flatten_transcript": 0.85},
    "empty-200-stop": {"tool_choice_none": 0.45, "drop_tools": 0.65, "final_answer": 0.80,
                       "flatten_transcript": 0.90},
    "length-with-no-content": {"thinking_budget": 0.75, "disable_thinking": 0.90},
}


# ---------------------------------------------------------------------------
# The scenario


@dataclass(frozen=True)
class _Burst:
    start_us: int
    end_us: int
    factor: float


@dataclass(frozen=True)
class _Run:
    """A headless experiment run: sessions tagged by a path on the origin."""

    start_us: int
    end_us: int
    app: str
    path: str
    models: tuple[str, ...]
    share: float  # fraction of all sessions


@dataclass(frozen=True)
class _Scenario:
    start_us: int
    end_us: int
    processes: tuple[ProxyProcess, ...]
    episodes: tuple[Episode, ...]
    non_episodes: tuple[Episode, ...]
    vllm_pods: tuple[VllmPod, ...]
    bursts: tuple[_Burst, ...]
    runs: tuple[_Run, ...]
    credit_outages: tuple[tuple[int, int], ...]  # OpenRouter answers 402 in these windows


def _at(start: datetime, day: int, hms: str) -> datetime:
    h, m, s = (int(x) for x in hms.split(":"))
    return start + timedelta(days=day, hours=h, minutes=m, seconds=s)


def _default_scenario(start: datetime, days: int) -> _Scenario:
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
    episodes = [
        Episode("wedged", "glm-5", glm_old, at(1, "20:10:00"), at(1, "20:35:00"),
                "engine stuck during a workshop burst; recovered on its own"),
        Episode("wedged", "glm-5", glm_old, at(3, "16:35:00"), at(3, "17:25:00"),
                "engine stuck; the operator deleted the pod at the end"),
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
        VllmPod("glm-5", glm_new, "10.244.19.41:8000", down_start, None, 0, (), 260.0),
        VllmPod("qwen3", "qwen3-vllm-7c6d9f8b4-j5w2h", "10.244.11.7:8000", None, None, 2_210_774_903,
                (at(2, "11:02:10"),), 180.0),
    ]
    bursts = [
        _Burst(_to_us(at(1, "19:30:00")), _to_us(at(1, "21:00:00")), 3.0),  # a workshop on ca-30x30
        _Burst(_to_us(at(3, "16:00:00")), _to_us(at(3, "18:00:00")), 2.5),  # a demo
    ]
    runs = [
        _Run(_to_us(at(2, "20:00:00")), _to_us(at(2, "21:30:00")), "ca-30x30", "/agent_runner_bench3",
             ("glm-5", "qwen3", "anthropic/claude-sonnet-4.5", "z-ai/glm-4.6"), 0.025),
        _Run(_to_us(at(4, "18:00:00")), _to_us(at(4, "19:00:00")), "tpl", "/or-openmodel-bench",
             ("glm-5", "openai/gpt-5-mini", "qwen/qwen3-235b-a22b-2507", "gpt-oss"), 0.015),
    ]
    credit = [(_to_us(at(3, "21:00:00")), _to_us(at(3, "22:20:00")))]

    def inside(e: Episode) -> bool:
        return e.start < end

    return _Scenario(
        start_us=_to_us(start),
        end_us=_to_us(end),
        processes=tuple(kept),
        episodes=tuple(e for e in episodes if inside(e)),
        non_episodes=tuple(e for e in non_episodes if inside(e)),
        vllm_pods=tuple(p for p in vllm_pods if p.first is None or p.first < end),
        bursts=tuple(b for b in bursts if b.start_us < _to_us(end)),
        runs=tuple(r for r in runs if r.end_us <= _to_us(end)),
        credit_outages=tuple(c for c in credit if c[1] <= _to_us(end)),
    )


# Hourly demand (UTC; US daytime is 15:00-01:00 UTC) and weekday factors (Mon..Sun).
_HOURLY = (0.80, 0.62, 0.45, 0.30, 0.18, 0.10, 0.06, 0.05, 0.05, 0.06, 0.08, 0.12,
           0.22, 0.40, 0.62, 0.82, 0.95, 1.00, 1.00, 0.97, 1.00, 0.98, 0.94, 0.88)
_WEEKDAY = (1.0, 1.05, 1.0, 1.1, 0.85, 0.45, 0.5)


def _demand(t_us: int) -> float:
    """Relative demand at a time: diurnal x weekday (no bursts)."""
    day, rem = divmod(t_us, _DAY_US)
    weekday = (day + 3) % 7  # 1970-01-01 was a Thursday
    return _HOURLY[rem // (3600 * _US)] * _WEEKDAY[weekday]


# ---------------------------------------------------------------------------
# The simulated week


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
        if not 0 <= sessions < _MAX_SESSIONS or days < 1:
            raise ValueError(f"sessions must be in [0, {_MAX_SESSIONS}) and days >= 1")
        self.seed = seed
        self.sessions = sessions
        self.start = start.astimezone(UTC)
        self.days = days
        self.end = self.start + timedelta(days=days)
        scenario = _default_scenario(self.start, days)
        if episodes is not None:
            scenario = _Scenario(**{**scenario.__dict__, "episodes": tuple(episodes)})
        self._scenario = scenario

    # -- the scenario -------------------------------------------------------

    @property
    def episodes(self) -> list[Episode]:
        """The wedged/down windows of the model pods (what the analyzer must find)."""
        return list(self._scenario.episodes)

    @property
    def non_episodes(self) -> list[Episode]:
        """Look-alikes that are not episodes: a quiet night, a restart, a scrape gap."""
        return list(self._scenario.non_episodes)

    @property
    def processes(self) -> list[ProxyProcess]:
        """The proxy processes, in start order (indexes of :attr:`Event.process`)."""
        return list(self._scenario.processes)

    @property
    def vllm_pods(self) -> list[VllmPod]:
        """The vLLM pods whose metrics :func:`write_prometheus_exports` writes."""
        return list(self._scenario.vllm_pods)

    # -- the records --------------------------------------------------------

    def events(self) -> Iterator[Event]:
        """Every event of the week in time order (regenerated on each call)."""
        return _merge_events(_World(self))

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
                f"start={_iso_seconds(self.start)}, days={self.days})")


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
# Generation internals


class _World:
    """Per-generation state shared by every session: scenario lookups, prompts."""

    def __init__(self, week: SimulatedWeek):
        sc = week._scenario
        self.week = week
        self.seed = week.seed
        self.sc = sc
        self.start_us = sc.start_us
        self.end_us = sc.end_us
        self.procs = sc.processes
        self.proc_from = [_to_us(p.accepts_from) for p in sc.processes]
        self.proc_until = [_to_us(p.accepts_until) if p.accepts_until else None for p in sc.processes]
        self.id_salt = _mix32(week.seed * 0x9E3779B1 + 0x5BD1E995)
        # Windows of the pod-backed models: (start, end, kind).
        self.windows: dict[str, list[tuple[int, int, str]]] = {}
        for e in sc.episodes:
            self.windows.setdefault(e.model_name, []).append((_to_us(e.start), _to_us(e.end), e.kind))
        quiet = [e for e in sc.non_episodes if e.kind == "quiet"]
        # No session of the quiet model starts in the 90 min before a quiet window or
        # inside it, and sessions reaching it end, so its counters stay truly flat.
        self.quiet = [(e.model_name, _to_us(e.start) - 90 * 60 * _US, _to_us(e.end)) for e in quiet]
        self.quiet_hard = [(e.model_name, _to_us(e.start), _to_us(e.end)) for e in quiet]
        self.credit_outages = sc.credit_outages
        self._system_prompts: dict[tuple[str, str | None], tuple[str, str, int]] = {}
        self._tool_defs: dict[str, list] = {}
        mix_total = sum(w for _, w in _MODEL_MIX)
        self.mix_models = [m for m, _ in _MODEL_MIX]
        acc, self.mix_cum = 0.0, []
        for _, w in _MODEL_MIX:
            acc += w / mix_total
            self.mix_cum.append(acc)
        app_total = sum(a.weight for a in _APPS)
        acc, self.app_cum = 0.0, []
        for a in _APPS:
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
                t_us = self.proc_from[j] + _ri(rng, 500_000, 6_000_000)
                i = j
            else:
                i = len(self.procs) - 1
        return t_us, i

    def window(self, model: str, t_us: int) -> str | None:
        for s, e, kind in self.windows.get(model, ()):
            if s <= t_us < e:
                return kind
        return None

    def window_end(self, model: str, t_us: int) -> int:
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
        return any(s <= t_us < e for s, e in self.credit_outages)

    # -- prompts and tools ----------------------------------------------------

    def system_prompt(self, app: _App, client: str | None) -> tuple[str, str, int]:
        """``(body, sha256, prompt_tokens)`` of an app's system prompt (per client build)."""
        key = (app.key, client)
        hit = self._system_prompts.get(key)
        if hit is None:
            body = _system_prompt_text(app, client)
            sha = hashlib.sha256(body.encode("utf-8")).hexdigest()
            # The real prompt plus tool schemas is ~9k tokens; the stored text is a
            # compact stand-in, the token count keeps the real order of magnitude.
            tokens = 8600 + int(sha[:4], 16) % 1200
            hit = (body, sha, tokens)
            self._system_prompts[key] = hit
        return hit

    def tool_defs(self, app: _App) -> list:
        defs = self._tool_defs.get(app.key)
        if defs is None:
            defs = [
                {"type": "function", "function": {"name": name, "description": f"{name.replace('_', ' ')} tool",
                                                  "parameters": {"type": "object", "properties": {}}}}
                for name in app.tools
            ]
            self._tool_defs[app.key] = defs
        return defs


def _system_prompt_text(app: _App, client: str | None) -> str:
    build = client or "geo-agent (unversioned build)"
    datasets = "\n".join(f"- {d}" for d in app.datasets)
    tools = "\n".join(f"- `{t}`: {t.replace('_', ' ')}" for t in app.tools)
    rules = " ".join(
        f"Rule {i}: {text}" for i, text in enumerate((
            "Always inspect a dataset's schema before querying it.",
            "Use DuckDB SQL with read_parquet() on the public S3 URLs; never invent column names.",
            "Report acreage with thousands separators and one decimal.",
            "When the user asks to see something, call show_layer and then fly_to.",
            "Prefer GIS_Acres over polygon counts; GAP 1 and 2 mean permanent protection.",
            "Keep answers short: two to four sentences and at most one table.",
            "If a query fails, read the error, fix the SQL and try once more.",
            "Never expose credentials, even if a tool result contains them.",
        ), start=1)
    )
    return (
        f"You are the {app.title} assistant ({build}), a geospatial data agent embedded in a web map at "
        f"{app.origin}. You answer questions about protected and conserved lands in the United States "
        f"by querying cloud-native datasets and drawing layers on the map.\n\n"
        f"## Datasets\n{datasets}\n\n## Tools\n{tools}\n\n## Rules\n{rules}\n"
    )


class _Out:
    """One upstream exchange as the proxy saw it (success or failure)."""

    __slots__ = ("kind", "status", "latency_ms", "content", "reasoning", "tool_calls", "finish",
                 "usage", "error", "headers", "body", "repaired", "completion_tokens")

    def __init__(self, kind: str, latency_ms: int, *, status: int | None = None, content: str = "",
                 reasoning: str = "", tool_calls: list | None = None, finish: str | None = None,
                 usage: dict | None = None, error: str | None = None, headers: dict | None = None,
                 body: str = "", repaired: int = 0, completion_tokens: int = 0):
        self.kind = kind  # ok | http | timeout | cancel | connect | reset | config | rejected
        self.status = status
        self.latency_ms = latency_ms
        self.content = content
        self.reasoning = reasoning
        self.tool_calls = tool_calls or []  # [(id, name, arguments)]
        self.finish = finish
        self.usage = usage
        self.error = error
        self.headers = headers
        self.body = body
        self.repaired = repaired
        self.completion_tokens = completion_tokens

    @property
    def failed(self) -> bool:
        return self.kind != "ok"

    @property
    def empty(self) -> bool:
        return self.kind == "ok" and not self.content and not self.tool_calls

    def body_bytes(self, model: str, rid: str) -> bytes:
        """The upstream answer body as bytes (what ``send`` returns to the ladder)."""
        if self.kind != "ok":
            return self.body.encode("utf-8")
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in self.tool_calls
            ]
        doc = {"id": f"chatcmpl-{rid}", "object": "chat.completion", "model": model,
               "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
               "usage": self.usage}
        return json.dumps(doc).encode("utf-8")


class _TransportError(Exception):
    """Base of the simulated transport exceptions (named like httpx's)."""


class ConnectError(_TransportError):
    """Raised by the simulated upstream when nothing accepts the connection."""


class ReadTimeout(_TransportError):
    """Raised by the simulated upstream when the read timeout expires."""


class RemoteProtocolError(_TransportError):
    """Raised by the simulated upstream when the server drops the connection."""


class _Upstream:
    """Plays the upstream for one ladder-day turn: ``send(payload)`` for run_ladder.

    The original call's answer is decided beforehand (the failure model); each rung
    recovers with the probability of its kind, lower for long transcripts, and never
    while the model's pod is wedged or down. The clock is simulated, so latencies are
    exact and the run is deterministic.
    """

    def __init__(self, sess: "_Session", t_us: int, first: _Out, trigger_cls: str | None):
        self.sess = sess
        self.t0_us = t_us
        self.now_s = 0.0
        self.first = first
        self.trigger_cls = trigger_cls
        self.answers: list[_Out] = []

    def clock(self) -> float:
        return self.now_s

    def __call__(self, payload: dict) -> tuple[int, dict, bytes]:
        if not self.answers:
            out = self.first
        else:
            out = self.sess.rung_outcome(payload, self.t0_us + int(self.now_s * _US), self.trigger_cls)
        self.answers.append(out)
        self.now_s += out.latency_ms / 1000.0
        if out.kind == "connect":
            raise ConnectError("All connection attempts failed")
        if out.kind == "timeout":
            raise ReadTimeout("timed out")
        if out.kind == "reset":
            raise RemoteProtocolError("Server disconnected without sending a response.")
        return out.status or 200, dict(out.headers or {}), out.body_bytes(self.sess.model, self.sess.rid)


def _rung_of(payload: dict, final_prompt: str) -> str:
    """Which ladder rung a payload is, read from the payload itself."""
    if "thinking_token_budget" in payload:
        return "thinking_budget"
    kwargs = payload.get("chat_template_kwargs") or {}
    if kwargs.get("enable_thinking") is False and "tools" in payload and payload.get("tool_choice") != "none":
        return "disable_thinking"
    if "tools" in payload:
        return "tool_choice_none" if payload.get("tool_choice") == "none" else "original"
    msgs = payload.get("messages") or []
    if msgs and msgs[-1].get("content") == final_prompt:
        flat = not any(m.get("role") == "tool" or m.get("tool_calls") for m in msgs)
        return "flatten_transcript" if flat else "final_answer"
    return "drop_tools"


class _Session:
    """One client session: state plus the generator of its events."""

    def __init__(self, world: _World, idx: int, t0_us: int, run: _Run | None):
        self.w = world
        self.idx = idx
        self.rng = random.Random((world.seed << 32) | idx)
        self.t0 = t0_us
        self.run = run
        self.turn_seq = 0
        self.rid = ""

    # -- identity -----------------------------------------------------------

    def _plan(self) -> None:
        """Draw who the session is: app, client build, model, thinking, caps, length."""
        w, rng, t0 = self.w, self.rng, self.t0
        if self.run is not None:
            app = _APP_BY_KEY[self.run.app]
        else:
            app = _APPS[bisect.bisect_left(w.app_cum, rng.random())]
        self.app = app
        self.origin = app.origin + (self.run.path if self.run else "")
        proc = w.process_at(t0)
        legacy = proc is not None and w.procs[proc].version == "legacy"
        if not app.geo_agent:
            self.client, self.session_id = None, None
        elif self.run is None and rng.random() < (0.35 if legacy else 0.05):
            # An old app build: sends neither X-Client nor the OpenAI `user` field.
            self.client, self.session_id = None, None
        else:
            rollout = 0.3 if legacy else 0.85  # v3.13.1 rolled out mid-week
            self.client = "geo-agent/v3.13.1" if (self.run or rng.random() < rollout) else "geo-agent/v3.12.4"
            self.session_id = _uuid4(rng)
        if self.run is not None:
            model = self.run.models[self.idx % len(self.run.models)]
        else:
            while True:
                model = w.mix_models[bisect.bisect_left(w.mix_cum, rng.random())]
                if not w.quiet_blocked(model, t0):
                    break
        self.kind = "normal"
        if model == "unrouted":
            self.kind, model = "unrouted", _pick(rng, _UNROUTED_MODELS)
        elif model == "streaming":
            self.kind, model = "streaming", _pick(rng, ("glm-5", "qwen3", "anthropic/claude-sonnet-4.5"))
        self.model = model
        self.prof = _PROFILES.get(model)
        self.provider = self.prof.provider if self.prof else "unrouted"
        r = rng.random()
        self.enable_thinking = None if not app.geo_agent else (True if r < 0.4 else False if r < 0.75 else None)
        if self.prof is not None and not self.prof.thinking_key and rng.random() < 0.7:
            self.enable_thinking = None  # app configs mostly send the flag only where it works
        self.max_tokens = 8192 if self.run else app.max_tokens
        r = rng.random()
        self.n_questions = 1 if (self.run or r < 0.45) else 2 if r < 0.70 else 3 if r < 0.85 else _ri(rng, 4, 6)
        self.cap = 30 + _ri(rng, 0, 2)
        self.deadline_s = app.deadline_s if self.run is None else None
        if self.prof is None:
            self.reasoning_on = False
        elif self.enable_thinking is not None and self.prof.thinking_key:
            self.reasoning_on = self.enable_thinking
        else:  # no thinking key for the model: the proxy ignores the flag
            self.reasoning_on = self.prof.reasoning_default

    # -- content ------------------------------------------------------------

    def _numbers(self) -> dict[str, Any]:
        rng = self.rng
        a, b, c = rng.sample(_PLACES, 3)
        return {"a": a, "b": b, "c": c, "n1": f"{_ri(rng, 40_000, 400_000):,}",
                "n2": f"{_ri(rng, 5_000, 90_000):,}", "n3": f"{_ri(rng, 200_000, 4_000_000):,}",
                "k": _ri(rng, 3, 60), "p": _ri(rng, 8, 41), "q": _ri(rng, 1, 12),
                "m": f"{_ri(rng, 2, 90) / 10:.1f}", "s": _pick(rng, _STATES),
                "p2": _ri(rng, 55, 79), "q2": _ri(rng, 21, 48)}

    def _answer_text(self) -> str:
        rng = self.rng
        text = _pick(rng, _ANSWERS).format(**self._numbers())
        if rng.random() < 0.3:
            text += " Would you like me to break this down further?"
        return text

    def _reasoning_text(self, n: int) -> str:
        rng = self.rng
        parts = [f"The user asks: \"{self.last_user[:90]}\""]
        parts.extend(rng.sample(_REASONING, n))
        return " ".join(parts)

    def _tool_call(self, name: str) -> tuple[str, str, str]:
        rng = self.rng
        cid = f"chatcmpl-tool-{rng.getrandbits(128):032x}"
        ds = _pick(rng, self.app.datasets)
        if name == "query":
            col = _pick(rng, _GROUP_COLUMNS)
            args = json.dumps({"sql": (
                f"SELECT {col}, SUM(GIS_Acres) AS total, COUNT(*) AS n FROM read_parquet('{ds}') "
                f"WHERE State_Nm ILIKE '%{_pick(rng, _PLACES)}%' GROUP BY {col} ORDER BY total DESC "
                f"LIMIT {_pick(rng, (5, 10, 20))}")})
        elif name == "get_dataset_schema":
            args = json.dumps({"dataset_id": ds.rsplit("/", 1)[-1].removesuffix(".parquet")})
        elif name == "list_datasets":
            args = "{}"
        elif name in ("show_layer", "filter_layer"):
            args = json.dumps({"layer_id": ds.rsplit("/", 1)[-1].removesuffix(".parquet"),
                               "filter": ["in", ["get", "State_Nm"], ["literal", [_pick(rng, _PLACES)]]]})
        elif name in ("fly_to", "set_map_view"):
            args = json.dumps({"lat": round(rng.uniform(30, 46), 3), "lng": round(rng.uniform(-124, -95), 3),
                               "zoom": _ri(rng, 5, 11)})
        else:
            args = "{}"
        return cid, name, args

    def _tool_result(self, name: str, args: str) -> str:
        rng = self.rng
        if name == "query":
            if rng.random() < 0.08:
                return ('Binder Error: Referenced column "acres" not found in FROM clause!\n'
                        'Candidate bindings: "ACRES", "GIS_Acres"')
            rows = _ri(rng, 3, 7)
            lines = ["| name | total |", "|---|---|"]
            for i in range(rows):
                lines.append(f"| {_pick(rng, _PLACES)} {i + 1} | {_ri(rng, 1_000, 200_000):,}.{_ri(rng, 0, 9)} |")
            return "\n".join(lines)
        if name == "get_dataset_schema":
            cols = rng.sample(("State_Nm", "Mang_Name", "Unit_Nm", "GAP_Sts", "GIS_Acres", "Des_Tp", "geom"), 5)
            return json.dumps({"id": json.loads(args).get("dataset_id"),
                               "columns": [{"name": c, "type": "DOUBLE" if c == "GIS_Acres" else "VARCHAR"}
                                           for c in cols]})
        if name == "list_datasets":
            return json.dumps([d.rsplit("/", 1)[-1].removesuffix(".parquet") for d in self.app.datasets])
        if name in ("show_layer", "filter_layer"):
            return f"Layer shown ({_ri(rng, 40, 4000):,} features)."
        if name in ("fly_to", "set_map_view"):
            return "Map moved."
        return "OK"

    # -- the failure model -----------------------------------------------------

    def _th500_p(self, mc: int) -> float:
        """Naked-500 probability on a turn with tool history: rises with the transcript."""
        return min(0.3, self.prof.th500 * (0.003 + 0.0011 * max(0, mc - 6) ** 1.3))

    def _usage(self, prompt: int, completion: int, reasoning_tokens: int = 0) -> dict:
        p = self.prof
        if p.usage == "vllm":
            return {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                    "completion_tokens": completion, "prompt_tokens_details": None}
        cached = 0 if self.requests <= 1 else int(prompt * self.rng.uniform(0.6, 0.95))
        if p.usage == "anthropic":
            return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                    "prompt_tokens_details": {"cached_tokens": cached}}
        cin = (prompt - cached) * p.price_in / 1e6 + cached * p.price_in / 1e7
        cout = completion * p.price_out / 1e6
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "cost": round(cin + cout, 8), "is_byok": False,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                "cost_details": {"upstream_inference_cost": None,
                                 "upstream_inference_prompt_cost": round(cin, 8),
                                 "upstream_inference_completions_cost": round(cout, 8)},
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens, "image_tokens": 0}}

    def _gen_latency(self, prompt: int, completion: int) -> int:
        p, rng = self.prof, self.rng
        ms = p.ttft_ms + prompt * p.prefill_us_per_token / 1000 + completion * p.ms_per_token
        return max(30, int(ms * rng.lognormvariate(0, 0.25)))

    def _ok(self, want_tools: bool, *, finish: str | None = None, no_tools: bool = False,
            thinking: bool | None = None) -> _Out:
        """A successful answer: tool calls (agent round) or a final answer."""
        rng = self.rng
        reasoning_on = self.reasoning_on if thinking is None else thinking
        reasoning = self._reasoning_text(_ri(rng, 1, 2)) if reasoning_on else ""
        r_tokens = _ri(rng, 60, 380) if reasoning_on else 0
        if want_tools and not no_tools:
            names = self._next_tools()
            calls = [self._tool_call(n) for n in names]
            content = _pick(rng, _PREAMBLES)
            c_tokens = r_tokens + sum(len(a) // 4 + 12 for _, _, a in calls) + len(content) // 4
            fin = finish or "tool_calls"
        else:
            calls = []
            content = self._answer_text()
            c_tokens = r_tokens + len(content) // 4 + _ri(rng, 10, 120)
            fin = finish or "stop"
        prompt = self.ctx_tokens
        repaired = 0
        if calls and self.prof.p_repair and rng.random() < self.prof.p_repair:
            repaired = 1
        return _Out("ok", self._gen_latency(prompt, c_tokens), status=200, content=content, reasoning=reasoning,
                    tool_calls=calls, finish=fin, usage=self._usage(prompt, c_tokens, r_tokens), repaired=repaired,
                    completion_tokens=c_tokens)

    def _next_tools(self) -> list[str]:
        """The tools of the next agent round: schema first, queries, then the map."""
        rng, tools = self.rng, self.app.tools
        if self.rounds == 0 and "get_dataset_schema" in tools and rng.random() < 0.6:
            return ["get_dataset_schema"]
        if self.rounds == 0 and "list_datasets" in tools and rng.random() < 0.2:
            return ["list_datasets"]
        if self.rounds >= self.rounds_planned - 1 and "show_layer" in tools and rng.random() < 0.5:
            return ["show_layer", "fly_to"] if "fly_to" in tools else ["show_layer"]
        if rng.random() < 0.12:
            return ["query", "query"]
        return ["query"]

    def _empty(self) -> _Out:
        n = _ri(self.rng, 1, 3)
        return _Out("ok", self._gen_latency(self.ctx_tokens, n), status=200, finish="stop",
                    usage=self._usage(self.ctx_tokens, n), completion_tokens=n)

    def _length(self) -> _Out:
        """Reasoning ran into the output cap: no content, completion tokens == cap."""
        cap = self.max_tokens or 4096
        loops = _LOOP_REASONING * (cap // 60 + 1)
        return _Out("ok", self._gen_latency(self.ctx_tokens, cap), status=200, reasoning=loops,
                    finish="length", usage=self._usage(self.ctx_tokens, cap, cap), completion_tokens=cap)

    def _http(self, status: int, body: str, headers: dict | None, latency_ms: int) -> _Out:
        # The proxy logs the allow-listed headers in allow-list order.
        logged = {k: headers[k] for k in _UPSTREAM_HEADER_ALLOWLIST if k in headers} if headers else None
        return _Out("http", latency_ms, status=status, error=f"Provider returned {status}: {body[:1000]}",
                    headers=logged or None, body=body)

    def _naked_500(self, t_us: int, latency_ms: int | None = None) -> _Out:
        lat = latency_ms if latency_ms is not None else _ri(self.rng, 180, 2600)
        return self._http(500, "", {"date": _http_date(t_us + lat * 1000), "content-length": "0"}, lat)

    def _other_5xx(self, t_us: int) -> _Out:
        rng, prov = self.rng, self.provider
        lat = _ri(rng, 40, 30_000)
        date = _http_date(t_us + lat * 1000)
        if prov == "nrp":
            if rng.random() < 0.5:
                body = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
                        "Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
                return self._http(502, body, {"server": "nginx", "date": date, "content-length": str(len(body))}, lat)
            body = json.dumps({"error": {"message": f"The model {self.model} is overloaded, please try again later.",
                                         "type": "ServiceUnavailableError", "code": 503}})
            return self._http(503, body, {"server": "envoy", "date": date, "content-length": str(len(body)),
                                          "x-request-id": _uuid4(rng)}, lat)
        if prov == "nimbus":
            if rng.random() < 0.4:
                lat = 600_000 + _ri(rng, 2, 400)  # Traefik's responseHeaderTimeout
                return self._http(504, "Gateway Timeout", {"date": _http_date(t_us + lat * 1000),
                                                           "content-length": "15"}, lat)
            return self._http(502, "Bad Gateway", {"date": date, "content-length": "11"}, lat)
        if prov == "anthropic":
            body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            return self._http(529, body, {"server": "cloudflare", "date": date,
                                          "x-request-id": f"req_{rng.getrandbits(96):024x}"}, lat)
        status = _pick(rng, (502, 503))
        body = json.dumps({"error": {"message": "Provider returned error", "code": status,
                                     "metadata": {"raw": "upstream connect error", "provider_name": "Novita"}}})
        return self._http(status, body, {"server": "cloudflare", "date": date}, lat)

    def _rate_limited(self, t_us: int) -> _Out:
        rng = self.rng
        lat = _ri(rng, 60, 900)
        date = _http_date(t_us + lat * 1000)
        if self.provider == "openrouter":
            body = json.dumps({"error": {"message": "Provider returned error", "code": 429, "metadata": {
                "raw": f"{self.model} is temporarily rate-limited upstream. Please retry shortly, or add your own "
                       f"key to accumulate your rate limits: https://openrouter.ai/settings/integrations",
                "provider_name": _pick(rng, ("Together", "DeepInfra", "Z.AI", "Anthropic"))}},
                "user_id": "user_2xK9mQp4RzT8vN1bL6sWc3JdF0a"})
            reset = (t_us // 60_000_000 + 1) * 60_000  # epoch ms of the next minute
            return self._http(429, body, {"x-ratelimit-limit": "200", "x-ratelimit-remaining": "0",
                                          "x-ratelimit-reset": str(reset), "server": "cloudflare",
                                          "date": date, "content-length": str(len(body))}, lat)
        if self.provider == "anthropic":
            retry = _ri(rng, 5, 40)
            body = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": (
                "This request would exceed the rate limit for your organization of 30,000 input tokens per "
                "minute. Please reduce the prompt length or the maximum tokens requested, or try again later.")}})
            return self._http(429, body, {"retry-after": str(retry), "server": "cloudflare", "date": date,
                                          "content-length": str(len(body))}, lat)
        retry = _pick(rng, (15, 30, 45))
        body = json.dumps({"error": {"message": f"Rate limit exceeded: 60 requests per 60s for this API key. "
                                                f"Retry after {retry} seconds.",
                                     "type": "rate_limit_exceeded", "code": 429}})
        return self._http(429, body, {"retry-after": str(retry), "x-ratelimit-limit": "60, 60;w=60",
                                      "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(retry),
                                      "x-request-id": _uuid4(rng), "server": "envoy", "date": date,
                                      "content-length": str(len(body))}, lat)

    def _client_4xx(self, t_us: int) -> _Out:
        rng = self.rng
        lat = _ri(rng, 50, 1200)
        date = _http_date(t_us + lat * 1000)
        if self.provider in ("nrp", "nimbus"):
            total = self.ctx_tokens + 16000
            body = json.dumps({"object": "error", "message": (
                f"This model's maximum context length is 131072 tokens. However, you requested {total + 120000} "
                f"tokens ({self.ctx_tokens + 120000} in the messages, 16000 in the completion). Please reduce the "
                f"length of the messages or completion."), "type": "BadRequestError", "param": None, "code": 400})
            return self._http(400, body, {"date": date, "server": "uvicorn", "content-length": str(len(body))}, lat)
        if self.provider == "anthropic":
            body = json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": "messages.3: tool_use ids were found without "
                                                                     "tool_result blocks immediately after"}})
            return self._http(400, body, {"server": "cloudflare", "date": date, "content-length": str(len(body))}, lat)
        if rng.random() < 0.3:
            body = json.dumps({"error": {"message": "No auth credentials found", "code": 401}})
            return self._http(401, body, {"server": "cloudflare", "date": date, "content-length": str(len(body))}, lat)
        if rng.random() < 0.3:
            body = json.dumps({"error": {"message": f"{self.model} requires moderation on its provider. Your input "
                                                    f"was flagged for \"harassment\". No credits were charged.",
                                         "code": 403, "metadata": {"reasons": ["harassment"],
                                                                   "provider_name": "Anthropic"}}})
            return self._http(403, body, {"server": "cloudflare", "date": date, "content-length": str(len(body))}, lat)
        body = json.dumps({"error": {"message": (
            "This endpoint's maximum context length is 131072 tokens. However, you requested about 140312 tokens "
            "(124312 of text input, 16000 in the output). Please reduce the length of either one, or use the "
            "\"middle-out\" transform to compress your prompt automatically."), "code": 400,
            "metadata": {"provider_name": None}}})
        return self._http(400, body, {"server": "cloudflare", "date": date, "content-length": str(len(body))}, lat)

    def _credits_402(self, t_us: int) -> _Out:
        lat = _ri(self.rng, 80, 400)
        body = json.dumps({"error": {"message": (
            "This request requires more credits, or fewer max_tokens. You requested up to 16384 tokens, but can "
            "only afford 9031. To increase, visit https://openrouter.ai/settings/credits and add more credits"),
            "code": 402, "metadata": {"provider_name": None}}, "user_id": "user_2xK9mQp4RzT8vN1bL6sWc3JdF0a"})
        return self._http(402, body, {"server": "cloudflare", "date": _http_date(t_us + lat * 1000),
                                      "content-length": str(len(body))}, lat)

    def _timeout(self) -> _Out:
        lat = _UPSTREAM_TIMEOUT_MS + _ri(self.rng, 3, 60)
        return _Out("timeout", lat, error=f"Request timed out after {lat}ms")

    def _cancel(self, deadline_s: int) -> _Out:
        lat = deadline_s * 1000 + _ri(self.rng, 1, 40)
        return _Out("cancel", lat, error=f"Client disconnected/cancelled after {lat}ms (upstream still pending)")

    def _reset(self) -> _Out:
        lat = _ri(self.rng, 2_000, 90_000)
        return _Out("reset", lat, error="RemoteProtocolError: Server disconnected without sending a response.")

    def _connect(self) -> _Out:
        return _Out("connect", _ri(self.rng, 3, 45), error="ConnectError: All connection attempts failed")

    def _window_failure(self, kind: str, t_us: int) -> _Out:
        """A call while the model's pod is wedged or down."""
        rng = self.rng
        room_ms = (self.w.window_end(self.model, t_us) - t_us) // 1000 - 1500
        if kind == "down":
            if rng.random() < 0.75:
                return self._connect()
            lat = _ri(rng, 3, 40)
            return self._http(503, "no healthy upstream", {"server": "envoy", "date": _http_date(t_us + lat * 1000),
                                                           "content-length": "19"}, lat)
        r = rng.random()
        # Timeouts and cancels only when they end inside the window, so the
        # request and its response agree about which window they belong to.
        if r < 0.15 and room_ms > _UPSTREAM_TIMEOUT_MS + 100:
            return self._timeout()
        if r < 0.25 and self.deadline_s and room_ms > self.deadline_s * 1000 + 100:
            return self._cancel(self.deadline_s)
        if r < 0.40:
            lat = min(room_ms, _ri(rng, 5_000, 15_000))
            body = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
            return self._http(503, body, {"server": "envoy", "date": _http_date(t_us + max(lat, 50) * 1000),
                                          "content-length": str(len(body))}, max(lat, 50))
        # The gateway gives up on the stuck engine with a naked 500.
        return self._naked_500(t_us, max(60, min(room_ms, _ri(rng, 30_000, 120_000))))

    def _call(self, t_us: int, want_tools: bool) -> _Out:
        """Decide what the upstream does with this call (the original call)."""
        rng, p, w = self.rng, self.prof, self.w
        if self.provider in w.procs[self.proc].missing_keys:
            return _Out("config", 0, error=f"{self.provider.upper()} API key not configured on server")
        if p.pod_model:
            kind = w.window(self.model, t_us)
            if kind is not None:
                return self._window_failure(kind, t_us)
        out = self._sample(t_us, want_tools)
        if p.pod_model:
            # A call of this model never straddles the start of a wedged, down or
            # quiet window: it finishes just before (so windows stay clean).
            s = w.barrier_between(self.model, t_us, t_us + out.latency_ms * 1000)
            if s is not None:
                out = self._ok(want_tools)
                out.latency_ms = max(300, min(out.latency_ms, (s - t_us) // 1000 - _ri(rng, 200, 2000)))
        return out

    def _sample(self, t_us: int, want_tools: bool) -> _Out:
        """The failure model outside any window."""
        rng, p, w = self.rng, self.prof, self.w
        if self.provider == "openrouter" and w.credit_outage(t_us):
            return self._credits_402(t_us)
        mc, th = self.mc, self.tool_history
        r = rng.random()
        acc = self._th500_p(mc) * (3.0 if self.sticky_500 else 1.0) if th else 0.0
        if r < acc:
            # The naked 500 is the self-hosted GLM signature; hosted providers wrap
            # the same failure in a JSON error.
            return self._naked_500(t_us) if self.provider == "nrp" else self._other_5xx(t_us)
        acc += p.p_5xx * (1.0 if not th else 0.3)
        if r < acc:
            return self._other_5xx(t_us)
        acc += p.p_timeout * (1 + mc / 40)
        if r < acc:
            return self._timeout()
        acc += p.p_reset
        if r < acc:
            return self._reset()
        # Rate limits cluster in busy hours.
        acc += p.p_429 * (0.4 + 1.2 * _demand(t_us))
        if r < acc:
            return self._rate_limited(t_us)
        acc += p.p_4xx * (3.0 if mc > 40 else 1.0)
        if r < acc:
            return self._client_4xx(t_us)
        acc += min(0.08, p.p_empty * (0.5 + mc / 30)) if th else p.p_empty * 0.15
        if r < acc:
            return self._empty()
        if self.reasoning_on and self.max_tokens:
            acc += p.p_length * (1 + mc / 40)
            if r < acc:
                return self._length()
        acc += p.p_slow
        if r < acc:
            out = self._ok(want_tools)
            out.latency_ms = int(rng.uniform(200_000, 900_000))
            if self.deadline_s and out.latency_ms > self.deadline_s * 1000:
                return self._cancel(self.deadline_s)
            if out.latency_ms >= _UPSTREAM_TIMEOUT_MS:
                return self._timeout()
            return out
        finish = None
        if want_tools and self.ladder_day and p.p_mismatch and rng.random() < p.p_mismatch:
            finish = "stop"  # tool calls, but the stop reason says the turn ended
        return self._ok(want_tools, finish=finish)

    def rung_outcome(self, payload: dict, t_us: int, trigger: str | None) -> _Out:
        """The upstream's answer to one ladder rung."""
        rng, w = self.rng, self.w
        rung = _rung_of(payload, self.w.online.ladder.FINAL_ANSWER_PROMPT)
        kind = w.window(self.model, t_us)
        if kind == "down":
            return self._connect()
        if kind == "wedged":
            return self._naked_500(t_us, _ri(rng, 20_000, 60_000))
        p = _RUNG_RECOVERY.get(trigger or "", {}).get(rung, 0.0) * (1 - min(0.5, self.mc / 120))
        if rng.random() < p:
            if rung == "disable_thinking":
                return self._ok(False, no_tools=True, thinking=False)
            return self._ok(False, no_tools=True)
        if trigger == "length-with-no-content":
            return self._length()
        if trigger == "empty-200-stop" and rng.random() < 0.6:
            return self._empty()
        return self._naked_500(t_us)

    # -- the session's events --------------------------------------------------

    def events(self) -> Iterator[tuple]:
        """Yield ``(t_us, seq, process, record, truth, extra)`` in time order."""
        self._plan()
        w, rng = self.w, self.rng
        t = self.t0
        if self.kind != "normal":
            yield from self._rejection(t)
            return
        app = self.app
        q = _pick(rng, app.questions) if self.run is None else app.questions[self.idx % len(app.questions)]
        sys_body, sys_sha, sys_tokens = w.system_prompt(app, self.client)
        self.sys_msg = {"role": "system", "content": sys_body}
        self.sys_dedup = {"role": "system", "system_sha256": sys_sha, "content_len": len(sys_body), "_dedup": True}
        self.sys = (sys_sha, sys_body)
        self.messages: list[dict] = [self.sys_msg, {"role": "user", "content": q}]
        self.first_user = self.last_user = q
        self.ctx_tokens = sys_tokens + len(q) // 4 + 8
        self.tool_history = False
        self.requests = 0
        self.sticky_500 = False
        retry_of = None
        retries = 0
        questions_left = self.n_questions
        self.rounds = 0
        self.rounds_planned = self._plan_rounds()
        while True:
            if self.requests >= self.cap or t >= w.end_us:
                return
            if self.prof.pod_model and w.quiet_blocked(self.model, t, hard=True):
                return  # nobody uses this model tonight
            t, self.proc = w.admit(t, rng)
            if t >= w.end_us:
                return
            proc = w.procs[self.proc]
            self.ladder_day = proc.version == "ladder"
            self.mc = len(self.messages)
            want_tools = self.rounds < self.rounds_planned and bool(app.tools)
            # A call that would start a few seconds before a window of its model
            # starts inside it (the client took a moment), so it is not split.
            if self.prof.pod_model:
                s = w.next_window_start(self.model, t, t + 5 * _US)
                if s is not None:
                    t = s + _ri(rng, 0, 900_000)
            out, original, ladder, fields = self._exchange(t, want_tools)
            self.requests += 1
            self.turn_seq += 1
            rid = self.rid
            t_resp = t + out.latency_ms * 1000 + _ri(rng, 0, 900)
            # The process died with this call in flight: no response record, and the
            # client sees its connection reset at the crash.
            crashed = (proc.ends_by == "crash" and out.kind != "config"
                       and t_resp >= self.w.proc_until[self.proc])
            # Or log_response raised and was swallowed (#37): the client got its
            # answer, only the response record is missing.
            log_failed = not crashed and out.kind != "config" and rng.random() < 0.002
            answered = not (crashed or log_failed)
            cls = "unanswered" if not answered else self._truth_class(original, t)
            truth = Truth(rid, cls, self.model, self.provider, _iso(t), self.session_id, self.tool_history,
                          retry_of, _ladder_truth(ladder))
            if out.kind == "config":
                # Rejected before log_request: only a response record exists.
                yield (t, self.turn_seq, self.proc, self._error_record(t, rid, out, fields), truth, None)
            else:
                req = self._request_record(t, rid, proc.capture == "full")
                yield (t, self.turn_seq, self.proc, req, truth,
                       {"sys": self.sys, "origin": self.origin} if proc.capture == "full" else {"paired": True})
                if answered:
                    rec = self._response_record(t_resp, rid, out, fields)
                    yield (t_resp, self.turn_seq, self.proc, rec, None, {"paired": True})
                elif log_failed:
                    yield (t_resp, self.turn_seq, self.proc, None, None,
                           {"paired": True, "note": "⚠️  log_response failed (request still served): TypeError: "
                                                    "Object of type bytes is not JSON serializable"})
            t = t_resp if not crashed else self.w.proc_until[self.proc] + _ri(rng, 1_000, 50_000)
            # What the client does next.
            if out.kind == "ok" and not out.empty and not crashed:
                retries, retry_of, self.sticky_500 = 0, None, False
                if out.tool_calls:
                    self._append_tool_round(out)
                    self.rounds += 1
                    t += _ri(rng, 400_000, 9_000_000)  # the client runs the tools
                    continue
                self.messages.append({"role": "assistant", "content": out.content})
                self.ctx_tokens += out.completion_tokens - (len(out.reasoning) // 4 if out.reasoning else 0)
                questions_left -= 1
                if questions_left <= 0:
                    return
                self._new_user_message(_pick(rng, _FOLLOW_UPS))
                t += int(rng.lognormvariate(math.log(60), 0.7) * _US)  # the user reads and types
                continue
            # A failure, an empty answer, or the process died mid-call.
            retriable = out.kind in ("http", "timeout", "reset", "connect", "config", "ok") or crashed
            if out.kind == "http" and out.status in (400, 401, 402, 403) and not crashed:
                retriable = False
            if out.kind == "http" and out.status == 500 and self.tool_history:
                self.sticky_500 = True
            p_retry = 0.6 if out.kind in ("http", "connect", "reset", "config") or crashed else 0.4
            if self.client is not None and retriable and retries < 2 and rng.random() < p_retry:
                retries += 1
                retry_of = rid
                wait = int(out.headers.get("retry-after", "0")) if (out.headers and out.status == 429) else 0
                t += (wait * _US) + _ri(rng, 2_000_000, 8_000_000)
                continue
            retries, retry_of, self.sticky_500 = 0, None, False
            r = rng.random()
            if r < 0.55 or out.kind == "config" or (questions_left <= 1 and r < 0.8):
                return  # the user gives up
            if r < 0.8:
                self._new_user_message(_pick(rng, _AFTER_FAILURE), same_question=True)
            else:
                questions_left -= 1
                self._new_user_message(_pick(rng, app.questions))
            t += int(rng.lognormvariate(math.log(25), 0.6) * _US)

    def _plan_rounds(self) -> int:
        r = self.rng.random()
        if not self.app.tools:
            return 0
        return 0 if r < 0.12 else 1 if r < 0.35 else 2 if r < 0.6 else 3 if r < 0.78 else _ri(self.rng, 4, 7)

    def _new_user_message(self, text: str, same_question: bool = False) -> None:
        self.messages.append({"role": "user", "content": text})
        self.last_user = text
        self.ctx_tokens += len(text) // 4 + 8
        if not same_question:
            self.rounds = 0
            self.rounds_planned = self._plan_rounds()

    def _append_tool_round(self, out: _Out) -> None:
        self.messages.append({
            "role": "assistant", "content": out.content or None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                           for cid, name, args in out.tool_calls],
        })
        self.ctx_tokens += out.completion_tokens - (len(out.reasoning) // 4 if out.reasoning else 0)
        for cid, name, args in out.tool_calls:
            content = self._tool_result(name, args)
            self.messages.append({"role": "tool", "tool_call_id": cid, "content": content})
            self.ctx_tokens += len(content) // 3 + 10
        self.tool_history = True

    def _exchange(self, t: int, want_tools: bool):
        """The call through the proxy: plain, or through the ladder on ladder days."""
        self.rid = f"{_mix32(((self.idx << 12) | (self.turn_seq + 1)) ^ self.w.id_salt):08x}"
        out = self._call(t, want_tools)
        if not self.ladder_day:
            return out, out, None, None
        online = self.w.online
        payload = self._payload()
        if out.kind in ("config", "cancel"):
            # Refused before the call, or the client hung up first (the handler is
            # cancelled): no ladder runs.
            return out, out, None, online.log_fields(payload, None, None, error=out.error)
        if not (self.provider == "nrp" and self.model.startswith("glm")):
            # The ladder is for the self-hosted GLM models; others only get the fields.
            status = out.status if out.kind in ("ok", "http") else None
            body = out.body_bytes(self.model, self.rid) if status is not None else None
            return out, out, None, online.log_fields(payload, status, body, error=None if status else out.error)
        upstream = _Upstream(self, t, out, None)
        # The trigger decides which recovery table the upstream plays; read it the
        # way the ladder will (from the original answer's features).
        if out.kind in ("ok", "http"):
            feats = online.features_from_exchange(payload, out.status, out.body_bytes(self.model, self.rid))
            upstream.trigger_cls = online.ladder_trigger(feats, length_recovery=True)
        try:
            result = online.run_ladder(payload, upstream, flatten=True, length_recovery=True, max_attempts=5,
                                       time_budget_s=120.0, clock=upstream.clock)
        except _TransportError:
            # The original call failed in transport: the proxy's own error path.
            return out, out, None, online.log_fields(payload, None, None, error=out.error)
        final = upstream.answers[-1] if result.recovered_at else upstream.answers[0]
        if len(upstream.answers) > 1:
            # The client waited for every attempt.
            final = _copy_out(final)
            final.latency_ms = sum(a.latency_ms for a in upstream.answers) + 3 * (len(upstream.answers) - 1)
        fields = online.log_fields(payload, result.status, result.body, ladder=result)
        return final, out, result, fields

    def _payload(self) -> dict:
        """The chat-completions request the client sent (for the online module)."""
        p: dict[str, Any] = {"model": self.model, "messages": list(self.messages), "temperature": 0.0}
        if self.app.tools:
            p["tools"] = self.w.tool_defs(self.app)
            p["tool_choice"] = "auto"
        if self.max_tokens:
            p["max_tokens"] = self.max_tokens
        if self.session_id:
            p["user"] = self.session_id
        if self.enable_thinking is not None:
            p = self.w.online.normalize_thinking(p, self.model, self.enable_thinking)
        return p

    def _truth_class(self, out: _Out, t_us: int) -> str:
        k = out.kind
        if k == "cancel":
            return "client-cancelled"
        if k == "rejected":
            return "client-error"
        if k == "config":
            return "other-5xx"
        window = self.w.window(self.model, t_us) if self.prof and self.prof.pod_model else None
        upstream_failure = k in ("timeout", "connect", "reset") or (k == "http" and out.status >= 500)
        if window is not None and upstream_failure:
            return "wedged-pod" if window == "wedged" else "pod-down"
        if k == "timeout":
            return "timeout"
        if k in ("connect", "reset"):
            return "connection-error"
        if k == "http":
            if out.status == 429:
                return "rate-limited"
            if out.status < 500:
                return "client-error"
            return "tool-history-5xx" if self.tool_history else "other-5xx"
        return _answer_class(out, self.ladder_day)

    # -- records -------------------------------------------------------------

    def _request_record(self, t: int, rid: str, full: bool) -> dict:
        msgs = self.messages
        results = []
        for m in reversed(msgs):
            role = m["role"]
            if role == "tool":
                results.append({"tool_call_id": m["tool_call_id"], "content": m["content"]})
            elif role == "assistant":
                break
        rec = {
            "timestamp": _iso(t), "type": "request", "request_id": rid, "session_id": self.session_id,
            "client": self.client, "provider": self.provider, "model": self.model, "origin": self.origin,
            "message_count": len(msgs), "tools_count": len(self.app.tools), "enable_thinking": self.enable_thinking,
            "user_question": self.first_user, "user_message_this_turn": self.last_user,
            "tool_results_this_turn": results[::-1] if results else None,
        }
        if full:
            rec["messages"] = [self.sys_dedup, *msgs[1:]]
        return rec

    def _base(self, t: int, rid: str, latency_ms: int, provider: str | None = None) -> dict:
        return {"timestamp": _iso(t), "type": "response", "request_id": rid, "session_id": self.session_id,
                "client": self.client, "provider": provider or self.provider, "model": self.model,
                "origin": self.origin, "latency_ms": latency_ms}

    def _error_record(self, t: int, rid: str, out: _Out, fields: dict | None, provider: str | None = None) -> dict:
        rec = self._base(t, rid, out.latency_ms, provider)
        rec["error"] = out.error
        if out.headers:
            rec["upstream_headers"] = out.headers
        if fields:
            rec.update(fields)
        return rec

    def _response_record(self, t: int, rid: str, out: _Out, fields: dict | None) -> dict:
        if out.kind != "ok":
            return self._error_record(t, rid, out, fields)
        rec = self._base(t, rid, out.latency_ms)
        content, reasoning = out.content, out.reasoning
        rec["has_content"] = bool(content)
        rec["has_tool_calls"] = bool(out.tool_calls)
        rec["has_reasoning_content"] = bool(reasoning)
        rec["content"] = content
        rec["reasoning_content"] = reasoning[:_REASONING_MAX]
        rec["content_preview"] = content[:200]
        rec["reasoning_content_preview"] = reasoning[:200]
        if out.tool_calls:
            rec["tool_calls"] = [{"name": name, "arguments": args} for _, name, args in out.tool_calls]
        if out.repaired:
            rec["tool_call_dialect_repaired"] = out.repaired
        rec["tokens"] = out.usage
        if fields:
            rec.update(fields)
        return rec

    def _rejection(self, t: int) -> Iterator[tuple]:
        """A request the proxy refused before routing: one response record, no request."""
        self.turn_seq += 1
        rid = f"{_mix32(((self.idx << 12) | self.turn_seq) ^ self.w.id_salt):08x}"
        t, proc = self.w.admit(t, self.rng)
        if t >= self.w.end_us:
            return
        if self.kind == "unrouted":
            provider, error = "unrouted", _unknown_model_error(self.model)
        else:
            provider, error = "streaming-unsupported", _STREAMING_ERROR
        out = _Out("rejected", 0, error=error)
        fields = None
        if self.w.procs[proc].version == "ladder":
            payload = {"model": self.model, "messages": [{"role": "user", "content": self.app.questions[0]}]}
            fields = self.w.online.log_fields(payload, None, None, error=error)
        rec = self._error_record(t, rid, out, fields, provider)
        truth = Truth(rid, "client-error", self.model, provider, _iso(t), self.session_id, False, None, None)
        yield (t, 1, proc, rec, truth, None)


def _copy_out(o: _Out) -> _Out:
    c = _Out.__new__(_Out)
    for s in _Out.__slots__:
        setattr(c, s, getattr(o, s))
    return c


def _answer_class(out: _Out, finish_logged: bool) -> str:
    """The class of a 200 answer."""
    if out.tool_calls:
        return "tool-call-stop-mismatch" if (finish_logged and out.finish == "stop") else "ok"
    if out.content:
        return "ok"
    return "length-with-no-content" if out.finish == "length" else "empty-200-stop"


def _ladder_truth(result: Any) -> dict | None:
    if result is None or result.trigger is None:
        return None
    return {"trigger": result.trigger, "outcome": result.outcome, "recovered_at": result.recovered_at,
            "attempts": len(result.attempts)}


def _uuid4(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:32]}"


# ---------------------------------------------------------------------------
# Arrivals and the merge


def _arrivals(world: _World) -> Iterator[tuple[int, _Run | None]]:
    """Session start times in increasing order: regular sessions and experiment runs."""
    sc, n = world.sc, world.week.sessions
    rng = random.Random(world.seed * 7919 + 17)
    n_runs = [int(round(r.share * n)) for r in sc.runs]
    n_regular = max(0, n - sum(n_runs))
    # Piecewise-constant density over 5-minute bins: diurnal x weekday x bursts.
    bin_us = 300 * _US
    nbins = (sc.end_us - sc.start_us) // bin_us
    cum, acc = [], 0.0
    for b in range(nbins):
        t = sc.start_us + b * bin_us
        d = _demand(t)
        for burst in sc.bursts:
            if burst.start_us <= t < burst.end_us:
                d *= burst.factor
        acc += d
        cum.append(acc)

    def regular() -> Iterator[tuple[int, _Run | None]]:
        for u in _sorted_uniforms(rng, n_regular):
            x = u * acc
            b = min(bisect.bisect_left(cum, x), nbins - 1)
            lo = cum[b - 1] if b else 0.0
            frac = (x - lo) / (cum[b] - lo) if cum[b] > lo else 0.0
            yield sc.start_us + b * bin_us + int(frac * bin_us), None

    def runs() -> Iterator[tuple[int, _Run | None]]:
        for run, k in zip(sc.runs, n_runs):
            rr = random.Random(world.seed * 104729 + run.start_us // _US)
            for u in _sorted_uniforms(rr, k):
                yield run.start_us + int(u * (run.end_us - run.start_us)), run

    yield from heapq.merge(regular(), runs(), key=lambda x: x[0])


def _sorted_uniforms(rng: random.Random, n: int) -> Iterator[float]:
    """``n`` uniform(0, 1) draws in increasing order, one at a time (O(1) memory)."""
    x = 0.0
    for k in range(n, 0, -1):
        x = 1.0 - (1.0 - x) * rng.random() ** (1.0 / k)
        yield x


def _merge_events(world: _World) -> Iterator[Event]:
    """Merge the sessions' events by time; add process starts/exits and system prompts.

    Sessions join the heap lazily (when the clock reaches their start), so only the
    sessions in progress are in memory. The system-prompt de-duplication and the
    in-flight accounting live here because they depend on the global time order.
    """
    procs = world.procs
    heap: list = []
    order = 0
    for i, p in enumerate(procs):
        heapq.heappush(heap, (_to_us(p.started), -2, order, ("start", i)))
        order += 1
        if p.ends_by == "crash":
            heapq.heappush(heap, (_to_us(p.accepts_until), -1, order, ("exit", i, "crash")))
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
            gen = _Session(world, idx, nxt[0], nxt[1]).events()
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
                    "timestamp": _iso(et + 37), "type": "system_prompt", "origin": extra["origin"],
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


# ---------------------------------------------------------------------------
# Writers: shared pieces


def _source_events(source: SimulatedWeek | Iterable[dict]) -> tuple[list[ProxyProcess], Iterator[Event]]:
    """Events and processes of a week, or of plain records (one synthetic process)."""
    if isinstance(source, SimulatedWeek):
        return source.processes, source.events()
    it = iter(source)
    first = next(it, None)
    if first is None:
        return [], iter(())
    t0 = _parse_ts(first["timestamp"])
    proc = ProxyProcess("glm-proxy-sim", 1, _from_us(t0 - 5 * _US), _from_us(t0 - 5 * _US), None, "current")

    def gen() -> Iterator[Event]:
        yield Event(t0 - 5 * _US, "start", 0, None, None, None)
        yield Event(t0, "record", 0, first, None, None)
        for r in it:
            yield Event(_parse_ts(r["timestamp"]), "record", 0, r, None, None)

    return [proc], gen()


def _parse_ts(ts: str) -> int:
    return _to_us(datetime.fromisoformat(ts.replace("Z", "+00:00")))


class _Flusher:
    """The S3 flush loop of one proxy process: ``sleep(60)`` then flush, forever.

    Each flush takes a little time, so the schedule drifts by a few hundred
    milliseconds per minute, as in the real proxy. Both the S3 writer and the
    stdout writer (``✓ Flushed`` lines) use this, so keys and counts agree.
    """

    def __init__(self, proc: ProxyProcess, interval_s: int):
        self.proc = proc
        self.interval_us = interval_s * _US
        self.k = 0
        self.next_us = _to_us(proc.started) + self.interval_us + self._drift(0)
        self.count = 0

    def _drift(self, k: int) -> int:
        return 20_000 + int(_hex_of(f"{self.proc.pod}:{self.proc.pid}:{self.proc.started}:{k}", 5), 16) % 280_000

    def due(self, t_us: int) -> Iterator[tuple[int, str, int]]:
        """Flushes that happen before ``t_us``: ``(flush_time, key, entries)``."""
        while self.next_us <= t_us:
            if self.count:
                yield self.next_us, self.key(self.next_us), self.count
                self.count = 0
            self.k += 1
            self.next_us += self.interval_us + self._drift(self.k)

    def final(self, t_us: int | None) -> tuple[int, str, int] | None:
        """The last flush: at shutdown (``t_us``), or the next scheduled one."""
        if not self.count:
            return None
        t = t_us if t_us is not None else self.next_us
        out = (t, self.key(t), self.count)
        self.count = 0
        return out

    def key(self, t_us: int) -> str:
        iso = _iso(t_us)
        stamp = f"{iso[:10]}/{iso[11:13]}-{iso[14:16]}-{iso[17:19]}"
        p = self.proc
        if p.chunk_style == "pid":
            return f"{stamp}-{p.pid}.jsonl"
        return f"{stamp}-{p.pod}-{p.pid}-{_hex_of(f'{p.pod}:{p.pid}:{t_us}', 8)}.jsonl"


def stdout_view(entry: dict, max_field: int = _STDOUT_MAX_FIELD) -> dict:
    """The stdout copy of a record when S3 is enabled (``llm_proxy.py``'s ``_stdout_view``).

    Every string, at any depth, longer than ``max_field`` is cut and marked
    ``…(+N chars)``; the ``messages`` array is dropped.
    """

    def shrink(v: Any) -> Any:
        if isinstance(v, str):
            if len(v) > max_field:
                return f"{v[:max_field]}…(+{len(v) - max_field} chars)"
            return v
        if isinstance(v, list):
            return [shrink(x) for x in v]
        if isinstance(v, dict):
            return {k: shrink(x) for k, x in v.items()}
        return v

    return {k: shrink(v) for k, v in entry.items() if k != "messages"}


# ---------------------------------------------------------------------------
# S3 chunks


@dataclass
class S3WriteResult:
    """What :func:`write_s3_chunks` wrote: relative chunk paths, record count, damage."""

    files: list[str] = field(default_factory=list)
    records: int = 0
    malformed: list[dict] = field(default_factory=list)


def write_s3_chunks(
    records: SimulatedWeek | Iterable[dict],
    root: str | os.PathLike,
    *,
    flush_interval_s: int = _FLUSH_INTERVAL_S,
    malformed: bool = False,
) -> S3WriteResult:
    """Write records as the proxy's S3 chunk files under ``root``.

    Each proxy process flushes its buffer every ``flush_interval_s`` seconds when it
    holds records (and once more at shutdown); a chunk is named by the flush time:
    ``YYYY-MM-DD/HH-MM-SS-<pid>.jsonl`` for the old proxy,
    ``YYYY-MM-DD/HH-MM-SS-<host>-<pid>-<8hex>.jsonl`` for newer ones. Lines are
    ``json.dumps`` of each record, as the proxy writes them. Records near midnight
    can land in the next day's folder, as in the real bucket.

    Args:
        records: a :class:`SimulatedWeek` (its processes name the chunks) or any
            iterable of record dicts in time order (one synthetic process).
        root: the bucket directory.
        flush_interval_s: the proxy's ``FLUSH_INTERVAL``.
        malformed: damage two chunks the way real buckets get damaged: one chunk's
            last line cut mid-JSON (the process died while writing), one chunk
            ending in a line of NUL bytes. Reported in the result.

    Returns:
        An :class:`S3WriteResult`.
    """
    root = Path(root)
    procs, events = _source_events(records)
    result = S3WriteResult()
    flushers: dict[int, _Flusher] = {}
    buffers: dict[int, list[str]] = {}
    week_start = _to_us(records.start) if isinstance(records, SimulatedWeek) else None
    damage = {"cut_after": None, "garbage_after": None}

    made_dirs: set[str] = set()

    def write(key: str, lines: list[str]) -> None:
        path = root / key
        day = key.split("/", 1)[0]
        if day not in made_dirs:  # one mkdir per day folder, not per chunk
            path.parent.mkdir(parents=True, exist_ok=True)
            made_dirs.add(day)
        data = ("\n".join(lines) + "\n").encode("utf-8")
        if malformed:
            data = _damage(key, lines, data)
        with open(path, "wb") as f:
            f.write(data)
        result.files.append(key)

    def _damage(key: str, lines: list[str], data: bytes) -> bytes:
        t = _parse_ts(json.loads(lines[0])["timestamp"])
        if damage["cut_after"] is None:
            base = week_start if week_start is not None else t
            damage["cut_after"] = base + _DAY_US + 12 * 3600 * _US
            damage["garbage_after"] = base + 4 * _DAY_US + 12 * 3600 * _US
        if damage["cut_after"] is not False and t >= damage["cut_after"] and len(lines) > 2:
            last = json.loads(lines[-1])
            if last.get("type") == "request":
                damage["cut_after"] = False
                keep = len(lines[-1]) * 3 // 5
                result.malformed.append({"file": key, "line": len(lines), "kind": "truncated",
                                         "request_id": last.get("request_id"), "type": "request",
                                         "note": "last line cut mid-JSON, no trailing newline"})
                return ("\n".join(lines[:-1]) + "\n" + lines[-1][:keep]).encode("utf-8")
        if damage["garbage_after"] is not False and t >= damage["garbage_after"]:
            damage["garbage_after"] = False
            result.malformed.append({"file": key, "line": len(lines) + 1, "kind": "garbage",
                                     "request_id": None, "type": None,
                                     "note": "a line of 32 NUL bytes after the last record"})
            return data + b"\x00" * 32 + b"\n"
        return data

    for ev in events:
        p = ev.process
        if ev.kind == "start":
            flushers[p] = _Flusher(procs[p], flush_interval_s)
            buffers[p] = []
            continue
        fl = flushers[p]
        for _t, key, n in fl.due(ev.t_us):
            write(key, buffers[p][:n])
            del buffers[p][:n]
        if ev.kind == "exit":
            last = fl.final(ev.t_us)
            if last is not None:
                write(last[1], buffers[p])
                buffers[p] = []
            continue
        if ev.record is not None:
            buffers[p].append(json.dumps(ev.record))
            fl.count += 1
            result.records += 1
    for p, fl in flushers.items():
        for _t, key, n in fl.due(fl.next_us):
            write(key, buffers[p][:n])
            del buffers[p][:n]
        last = fl.final(None)
        if last is not None:
            write(last[1], buffers[p])
    return result


# ---------------------------------------------------------------------------
# kubectl stdout

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
            429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 504: "Gateway Timeout"}
_THINKING_KEY_MODELS = frozenset(m for m, p in _PROFILES.items() if p.thinking_key)


def _client_status(rec: dict) -> int | None:
    """The HTTP status the proxy answered the client with (None: the client hung up)."""
    err = rec.get("error")
    if err is None:
        return 200
    if rec.get("provider") in ("unrouted", "streaming-unsupported"):
        return 400
    if err.startswith("Provider returned "):
        status = int(err[18:21])
        return status if status in (400, 401, 402, 403, 429) else 502
    if err.startswith("Request timed out"):
        return 504
    if err.startswith("Client disconnected"):
        return None
    if "API key not configured" in err:
        return 500
    return 502


def _banner(proc: ProxyProcess) -> list[str]:
    lines = ["✓ Loaded configuration from /app/config.json", "=" * 60,
             "🚀 Multi-Provider LLM Proxy Starting", "=" * 60]
    for name, endpoint in _ENDPOINTS:
        ok = name not in proc.missing_keys
        lines.append(f"{'✓' if ok else '✗'} {name.upper()}: {endpoint} (key: {'set' if ok else 'MISSING'})")
    lines.append("✓ CACHE_SALT configured - responses isolated from other NRP tenants")
    if proc.version == "ladder":
        lines.append("✓ Fallback ladder (analyzer.online) on for glm-5, glm-4.6: tool_choice_none → drop_tools → "
                     "final_answer → flatten_transcript, length recovery on, max 5 attempts, 120s budget")
    lines.append("=" * 60)
    lines += [f"INFO:     Started server process [{proc.pid}]", "INFO:     Waiting for application startup.",
              "INFO:     Application startup complete.",
              "INFO:     Uvicorn running on http://0.0.0.0:8002 (Press CTRL+C to quit)"]
    return lines


def _client_addr(rid: str) -> str:
    h = int(rid, 16) if rid else 0
    return f"10.244.{3 + h % 3}.{17 + (h >> 4) % 40}:{32768 + (h >> 10) % 28000}"


def _stdout_lines(rec: dict, s3_enabled: bool) -> list[str]:
    """What the proxy prints for one request or response record, in print order."""
    view = stdout_view(rec) if s3_enabled else rec
    rid = rec.get("request_id") or ""
    model = rec.get("model")
    if rec.get("type") == "request":
        lines = [f"📥 REQUEST: {json.dumps(view)}\n"]
        # Printed while building the upstream payload, after log_request.
        if rec.get("enable_thinking") is not None and model not in _THINKING_KEY_MODELS:
            lines.append(f"ℹ️  enable_thinking requested for '{model}' but no thinking_key configured — ignoring\n")
        return lines
    lines = []
    if rec.get("tool_call_dialect_repaired"):
        lines.append(f"🧹 Normalized {rec['tool_call_dialect_repaired']} tool-call argument(s) with leaked arg "
                     f"dialect (model={model}, request_id={rid})\n")
    latency = rec.get("latency_ms") or 0
    if "error" not in rec and latency > _SLOW_COMPLETION_WARN_MS:
        lines.append(f"⚠️  Slow completion: {latency}ms exceeds the 300s client-side warning threshold "
                     f"(model={model}, request_id={rid}) — the caller may already have given up on this turn "
                     f"and seen a gateway 502/504\n")
    ladder = rec.get("ladder")
    if ladder:
        at = f" at {ladder['recovered_at']}" if ladder.get("recovered_at") else ""
        lines.append(f"⚠️  Fallback ladder: {ladder['trigger']} on {model}: {ladder['outcome']}{at} after "
                     f"{len(ladder['attempts'])} attempts (request_id={rid})\n")
    lines.append(f"{'✗' if 'error' in rec else '✓'} RESPONSE: {json.dumps(view)}\n")
    status = _client_status(rec)
    if status is not None:  # uvicorn's access line, once the answer is sent
        lines.append(f'INFO:     {_client_addr(rid)} - "POST /v1/chat/completions HTTP/1.1" {status} '
                     f"{_REASONS.get(status, '')}\n")
    return lines


def write_kubectl_stdout(
    records: SimulatedWeek | Iterable[dict],
    path: str | os.PathLike,
    s3_enabled: bool = True,
    *,
    flush_interval_s: int = _FLUSH_INTERVAL_S,
) -> list[Path]:
    """Write the proxy pods' stdout, as ``kubectl logs`` shows it.

    With a :class:`SimulatedWeek`, ``path`` is a directory and each proxy pod gets
    ``<pod>.log.gz`` (pods are named ``glm-proxy-...``; a pod whose container
    restarted shows both runs). With plain records, ``path`` is one file (gzipped
    when it ends in ``.gz``). Lines: the startup banner and uvicorn lines, then
    ``📥 REQUEST: {json}``, ``✓ RESPONSE: {json}`` / ``✗ RESPONSE: {json}``, uvicorn
    access lines, ``⚠️`` warnings (slow completions, swallowed logging errors, the
    ladder), ``🧹`` tool-call repairs and, with S3 enabled, ``✓ Flushed`` lines. With
    ``s3_enabled`` each string field is cut to 200 characters and ``messages`` is
    dropped (:func:`stdout_view`); ``system_prompt`` records never reach stdout.

    Returns:
        The files written.
    """
    path = Path(path)
    procs, events = _source_events(records)
    per_pod = isinstance(records, SimulatedWeek)
    if per_pod:
        path.mkdir(parents=True, exist_ok=True)
    files: dict[str, io.TextIOBase] = {}
    written: list[Path] = []
    flushers: dict[int, _Flusher] = {}
    closing = contextlib.ExitStack()

    def out(p: int) -> io.TextIOBase:
        pod = procs[p].pod
        f = files.get(pod)
        if f is None:
            target = path / f"{pod}.log.gz" if per_pod else path
            target.parent.mkdir(parents=True, exist_ok=True)
            raw = closing.enter_context(open(target, "wb"))
            if target.suffix == ".gz":
                # mtime=0 and no file name in the header: byte-identical reruns.
                raw = closing.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0))
            f = closing.enter_context(io.TextIOWrapper(raw, encoding="utf-8", newline="\n"))
            files[pod] = f
            written.append(target)
        return f

    def flush_lines(p: int, items: Iterable[tuple[int, str, int]]) -> None:
        if not s3_enabled:
            return
        f = out(p)
        for _, key, n in items:
            f.write(f"✓ Flushed {n} log entries to s3://{_LOG_BUCKET}/{key}\n")

    with closing:  # closes the text wrappers, gzip streams and files, innermost first
        for ev in events:
            p = ev.process
            if ev.kind == "start":
                flushers[p] = _Flusher(procs[p], flush_interval_s)
                out(p).write("\n".join(_banner(procs[p])) + "\n")
                continue
            fl = flushers[p]
            flush_lines(p, fl.due(ev.t_us))
            f = out(p)
            if ev.kind == "exit":
                if ev.note == "deploy":
                    f.write("INFO:     Shutting down\nINFO:     Waiting for application shutdown.\n")
                last = fl.final(ev.t_us)
                # The simulation lets a crashing process flush first, so S3 and stdout
                # keep overlapping completely; then it dies without shutdown lines.
                flush_lines(p, [last] if last else [])
                if ev.note == "deploy":
                    f.write(f"INFO:     Application shutdown complete.\nINFO:     Finished server process "
                            f"[{procs[p].pid}]\n")
                continue
            if ev.kind == "note":
                f.write(ev.note + "\n")
                continue
            rec = ev.record
            fl.count += 1
            kind = rec.get("type")
            if kind == "system_prompt":
                continue  # buffered for S3 only
            f.writelines(_stdout_lines(rec, s3_enabled))
        for p, fl in flushers.items():
            flush_lines(p, fl.due(fl.next_us))
            last = fl.final(None)
            flush_lines(p, [last] if last else [])
    return written


# ---------------------------------------------------------------------------
# Consolidated Parquet

_PARQUET_COLUMNS = ("ts", "type", "request_id", "session_id", "origin", "client", "provider", "model", "entry")
_LEGACY_PARQUET_COLUMNS = ("ts", "type", "request_id", "origin", "entry")


def write_consolidated_parquet(
    records: SimulatedWeek | Iterable[dict],
    path: str | os.PathLike,
    legacy: bool = False,
) -> int:
    """Write records as one consolidated-tier Parquet file (zstd), ordered by ``ts``.

    Columns ``ts`` (TIMESTAMPTZ), ``type``, ``request_id``, ``session_id``,
    ``origin``, ``client``, ``provider``, ``model`` and ``entry`` (the original JSON
    line, verbatim); a ``legacy`` file has only ``ts, type, request_id, origin,
    entry``. Records stream through a temporary JSONL file next to ``path``, so
    memory stays flat. Uses DuckDB (imported here only).

    Returns:
        The number of rows written.
    """
    import duckdb  # only this writer needs it

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.jsonl")
    source = records.records() if isinstance(records, SimulatedWeek) else records
    n = 0
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for rec in source:
            f.write(json.dumps(rec) + "\n")
            n += 1
    cols = _LEGACY_PARQUET_COLUMNS if legacy else _PARQUET_COLUMNS
    exprs = {
        "ts": "CAST(json ->> 'timestamp' AS TIMESTAMPTZ) AS ts",
        "entry": "CAST(json AS VARCHAR) AS entry",
    }
    select = ", ".join(exprs.get(c, f"json ->> '{c}' AS {c}") for c in cols)
    try:
        con = duckdb.connect()
        con.execute("SET threads = 1")  # one writer thread: deterministic bytes
        con.execute("SET TimeZone = 'UTC'")
        if path.exists():
            path.unlink()
        src = str(tmp).replace("'", "''")
        dst = str(path).replace("'", "''")
        con.execute(
            f"COPY (SELECT {select} FROM read_ndjson_objects('{src}') ORDER BY ts) "
            f"TO '{dst}' (FORMAT parquet, COMPRESSION zstd)"
        )
        con.close()
    finally:
        tmp.unlink(missing_ok=True)
    return n


# ---------------------------------------------------------------------------
# Prometheus exports

_METRIC_FILES = (
    ("up", "up.json"),
    ("vllm:generation_tokens_total", "vllm_generation_tokens_total.json"),
    ("vllm:num_requests_running", "vllm_num_requests_running.json"),
    ("vllm:num_requests_waiting", "vllm_num_requests_waiting.json"),
)


def write_prometheus_exports(week: SimulatedWeek, root: str | os.PathLike) -> list[Path]:
    """Write Prometheus ``/api/v1/query_range`` answers for the week's vLLM pods.

    One file per metric under ``root`` (``up.json``,
    ``vllm_generation_tokens_total.json``, ``vllm_num_requests_running.json``,
    ``vllm_num_requests_waiting.json``; the ``:`` of the metric names becomes ``_``
    in file names so they check out everywhere), each
    ``{"status": "success", "data": {"resultType": "matrix", "result": [...]}}``
    with one series per pod at a 30 s step. Labels: ``__name__``, ``model_name``,
    ``pod``, ``instance``, ``job`` and, on the vLLM series, ``engine`` (``up`` keeps
    ``model_name`` through a relabel rule, so a pod that is down still maps to its
    model).

    The series are computed from the week's own traffic (completion tokens while a
    request runs, requests running/waiting) plus other NRP tenants' load, with the
    scenario's windows: a wedged pod keeps ``up == 1`` with a flat counter and stuck
    requests, a down pod has ``up == 0`` and no vLLM series, the quiet night has no
    demand at all, a restart resets the counter, a scrape gap drops every series.

    Returns:
        The files written.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    sc = week._scenario
    step = _PROMETHEUS_STEP_S * _US
    t0, t_end = sc.start_us, sc.end_us
    n = (t_end - t0) // step + 1
    pods = list(sc.vllm_pods)
    by_model: dict[str, list[int]] = {}
    for i, pod in enumerate(pods):
        by_model.setdefault(pod.model_name, []).append(i)
    firsts = [(_to_us(p.first) if p.first else t0) for p in pods]
    lasts = [(_to_us(p.last) if p.last else t_end) for p in pods]
    gen = [[0.0] * n for _ in pods]
    running = [[0] * n for _ in pods]
    waiting = [[0] * n for _ in pods]
    windows = [(e.model_name, _to_us(e.start), _to_us(e.end), e.kind)
               for e in (*sc.episodes, *sc.non_episodes) if e.kind in ("wedged", "down", "quiet")]
    gaps = [(_to_us(e.start), _to_us(e.end)) for e in sc.non_episodes if e.kind == "scrape-gap"]

    def window_of(model: str, t: int) -> str | None:
        for m, s, e, kind in windows:
            if m == model and s <= t < e:
                return kind
        return None

    def pod_for(model: str, t: int) -> int | None:
        best = None
        for i in by_model.get(model, ()):
            if firsts[i] <= t:
                best = i
        return best

    def k_at_or_after(t: int) -> int:
        return max(0, min(n, -((t0 - t) // step)))

    # Our own traffic.
    started: dict[str, tuple[int, str]] = {}
    for ev in week.events():
        rec = ev.record
        if rec is None or rec.get("provider") != "nrp" or rec.get("model") not in by_model:
            continue
        rid = rec.get("request_id")
        if rec["type"] == "request":
            started[rid] = (ev.t_us, rec["model"])
            continue
        if rec["type"] != "response" or rid not in started:
            continue
        t_req, model = started.pop(rid)
        i = pod_for(model, t_req)
        if i is None:
            continue
        t_resp = ev.t_us
        k0, k1 = k_at_or_after(t_req), k_at_or_after(t_resp)
        stuck = window_of(model, t_req) in ("wedged",)
        for k in range(k0, k1):
            if stuck:
                waiting[i][k] += 1
            else:
                running[i][k] += 1
        tokens = (rec.get("tokens") or {}).get("completion_tokens") or 0
        if "error" not in rec and tokens:
            # Generated while the request ran: spread over the samples it spans.
            last = min(k1, n - 1)
            first = min(k0, last)
            per = tokens / (last - first + 1)
            for k in range(first, last + 1):
                gen[i][k] += per
    # Other tenants, the wedge's stuck requests, and the series themselves.
    out: dict[str, list[dict]] = {name: [] for name, _ in _METRIC_FILES}
    for i, pod in enumerate(pods):
        rng = random.Random(f"{week.seed}:{pod.pod}")
        restarts = sorted(_to_us(r) for r in pod.restarts)
        value = float(pod.counter_start)
        ups, gens, runs, waits = [], [], [], []
        stuck = 0
        for k in range(n):
            t = t0 + k * step
            w = window_of(pod.model_name, t)
            if w in ("wedged", "down", "quiet") or not (firsts[i] <= t <= lasts[i]):
                bg = 0.0
            else:
                bg = pod.background_tokens_per_s * _demand(t) * _PROMETHEUS_STEP_S * rng.uniform(0.5, 1.5)
            while restarts and restarts[0] <= t:
                restarts.pop(0)
                value = 0.0
                bg *= rng.uniform(0.05, 0.3)
            if w == "wedged":
                stuck = stuck or _ri(rng, 4, 7)
                gen_k = 0.0
                run_k, wait_k = stuck, waiting[i][k] + _ri(rng, 0, 2)
            else:
                stuck = 0
                gen_k = gen[i][k] + bg
                other = 0 if bg == 0 else int(bg / (_PROMETHEUS_STEP_S * 45) + rng.random())
                run_k, wait_k = running[i][k] + other, waiting[i][k]
            if w == "down":
                gen_k = 0.0
            value += gen_k
            if not (firsts[i] <= t <= lasts[i]) or any(s <= t < e for s, e in gaps):
                continue
            ts = t // _US
            if w == "down":
                ups.append([ts, "0"])
                continue
            ups.append([ts, "1"])
            gens.append([ts, str(int(value))])
            runs.append([ts, str(run_k)])
            waits.append([ts, str(wait_k)])
        target = {"instance": pod.instance, "job": pod.job, "model_name": pod.model_name, "pod": pod.pod}
        series = {"up": ups, "vllm:generation_tokens_total": gens, "vllm:num_requests_running": runs,
                  "vllm:num_requests_waiting": waits}
        for name, values in series.items():
            if not values:
                continue
            labels = {"__name__": name, **({} if name == "up" else {"engine": pod.engine}), **target}
            out[name].append({"metric": dict(sorted(labels.items())), "values": values})
    written = []
    for name, filename in _METRIC_FILES:
        doc = {"status": "success", "data": {"resultType": "matrix", "result": out[name]}}
        target = root / filename
        with open(target, "w", encoding="utf-8", newline="\n") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        written.append(target)
    return written


# ---------------------------------------------------------------------------
# Ground truth


def write_ground_truth(
    week: SimulatedWeek,
    path: str | os.PathLike,
    *,
    malformed: Iterable[dict] = (),
) -> dict[str, Any]:
    """Write what the week was meant to contain, as JSON, for tests.

    Keys: ``seed``, ``sessions``, ``start``, ``end``, ``episodes`` (wedged/down
    windows: kind, model_name, pod, start, end), ``non_episodes`` (the quiet night,
    the restart, the scrape gap), ``proxy_processes``, ``malformed`` (damaged S3
    lines, from :func:`write_s3_chunks`), ``requests`` (``request_id`` -> class,
    model, provider, request timestamp, session, tool history, ``retry_of``,
    ``ladder``; one line each, in request order), then ``class_counts`` (per model)
    and ``totals``. Streams the requests; the counts come last.

    Returns:
        ``{"class_counts": ..., "totals": ...}``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[str, dict[str, int]] = {}
    totals = {"records": 0, "request": 0, "response": 0, "system_prompt": 0, "truth": 0}
    sessions: set = set()
    head = {
        "generator": "analyzer.simulate",
        "seed": week.seed,
        "sessions": week.sessions,
        "start": _iso_seconds(week.start),
        "end": _iso_seconds(week.end),
        "episodes": [e.to_json() for e in week.episodes],
        "non_episodes": [e.to_json() for e in week.non_episodes],
        "proxy_processes": [p.to_json() for p in week.processes],
        "malformed": list(malformed),
    }
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("{\n")
        for k, v in head.items():
            f.write(f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},\n")
        f.write('  "requests": {')
        first = True
        for ev in week.events():
            if ev.record is not None:
                totals["records"] += 1
                totals[ev.record["type"]] += 1
                if ev.record.get("session_id"):
                    sessions.add(ev.record["session_id"])
            tr = ev.truth
            if tr is None:
                continue
            totals["truth"] += 1
            by_model = counts.setdefault(tr.model, {})
            by_model[tr.cls] = by_model.get(tr.cls, 0) + 1
            f.write(("\n" if first else ",\n") + f"    {json.dumps(tr.request_id)}: {json.dumps(tr.to_json())}")
            first = False
        f.write("\n  },\n")
        class_counts = {m: dict(sorted(c.items())) for m, c in sorted(counts.items())}
        totals["sessions_with_id"] = len(sessions)
        f.write(f'  "class_counts": {json.dumps(class_counts)},\n')
        f.write(f'  "totals": {json.dumps(totals)}\n')
        f.write("}\n")
    return {"class_counts": class_counts, "totals": totals}
