"""Metric samples as the parsers produce them, and the names and labels the analyzer keeps.

Every input format becomes a stream of :class:`Sample`; :func:`normalize` then keeps
the metrics the wedge rule reads, under one spelling each, and drops values that
carry no information (NaN, including Prometheus' staleness markers, and infinities).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple

UP = "up"
GENERATION_TOKENS = "vllm:generation_tokens_total"
REQUESTS_RUNNING = "vllm:num_requests_running"
REQUESTS_WAITING = "vllm:num_requests_waiting"

#: Demand gauges: a value above 0 means requests are in the engine.
DEMAND_METRICS = (REQUESTS_RUNNING, REQUESTS_WAITING)

# Spellings as they really arrive -> the one stored. vLLM declares the counter
# `vllm:generation_tokens` and exposes `vllm:generation_tokens_total`; scrapes that
# escape names for OpenMetrics/UTF-8 negotiation store `vllm_generation_tokens_total`.
_ALIASES = {
    UP: UP,
    GENERATION_TOKENS: GENERATION_TOKENS,
    "vllm_generation_tokens_total": GENERATION_TOKENS,
    "vllm:generation_tokens": GENERATION_TOKENS,
    "vllm_generation_tokens": GENERATION_TOKENS,
    REQUESTS_RUNNING: REQUESTS_RUNNING,
    "vllm_num_requests_running": REQUESTS_RUNNING,
    REQUESTS_WAITING: REQUESTS_WAITING,
    "vllm_num_requests_waiting": REQUESTS_WAITING,
}

#: Labels that identify the pod, most specific first.
POD_LABELS = ("pod", "instance", "job")


class Sample(NamedTuple):
    """One sample as read: metric name as spelled in the input, labels, time, value.

    ``ts_us`` is microseconds since the epoch (UTC). ``pod`` is the identity the
    input gave the target; parsers fill it from :func:`pod_identity`.
    """

    metric: str
    labels: dict[str, str]
    ts_us: int
    value: float
    pod: str | None


@dataclass
class NormalizeStats:
    """What :func:`normalize` dropped, for the load report."""

    read: int = 0
    non_finite: int = 0
    other_metrics: Counter = field(default_factory=Counter)


def canonical_name(name: str) -> str | None:
    """The stored name of a metric the wedge rule reads, or None for any other metric."""
    return _ALIASES.get(name)


def pod_identity(labels: dict[str, str], fallback: str | None = None) -> str | None:
    """The pod a series belongs to: its ``pod`` label, else ``instance``, else ``job``.

    ``up`` and the vLLM series of one target carry the same target labels, so the
    same rule ties them together. ``fallback`` is used when none is present (a
    scrape file of a bare vLLM ``/metrics`` names no target).
    """
    for key in POD_LABELS:
        value = labels.get(key)
        if value:
            return value
    return fallback


def labels_json(labels: dict[str, str]) -> str:
    """Labels as canonical JSON (sorted keys, no spaces): the identity of a series."""
    return json.dumps({k: labels[k] for k in sorted(labels) if k != "__name__"}, separators=(",", ":"))


def normalize(samples: Iterable[Sample], stats: NormalizeStats) -> Iterator[Sample]:
    """Keep the samples the analyzer uses, renamed to their canonical spelling.

    Drops other metrics (counted by name in ``stats``) and non-finite values: NaN
    says nothing about whether a counter moved, and Prometheus writes a NaN as the
    staleness marker of a series that disappeared.
    """
    for s in samples:
        stats.read += 1
        name = canonical_name(s.metric)
        if name is None:
            stats.other_metrics[s.metric] += 1
            continue
        if not math.isfinite(s.value):
            stats.non_finite += 1
            continue
        yield s._replace(metric=name) if name != s.metric else s
