"""Metric samples as the Python parsers produce them, and the names and labels the analyzer keeps.

The stored metric names are canonical (:func:`canonical_name` maps every spelling
that arrives to one); the pod a series belongs to is :func:`pod_identity`.
Storing (the kept names, NaN dropped) happens in SQL: see :mod:`analyzer.ingestion.metric_stage`.
"""

from __future__ import annotations

import json
from typing import NamedTuple

UP = "up"
GENERATION_TOKENS = "vllm:generation_tokens_total"
REQUESTS_RUNNING = "vllm:num_requests_running"
REQUESTS_WAITING = "vllm:num_requests_waiting"
#: ``sleep_state`` = awake | weights_offloaded | discard_all; awake == 0 means asleep.
SLEEP_STATE = "vllm:engine_sleep_state"
#: 0..1; older vLLM versions called it ``vllm:gpu_cache_usage_perc``.
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
#: Finished requests per ``finished_reason`` (stop, length, abort, ...).
REQUEST_SUCCESS = "vllm:request_success_total"

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
    SLEEP_STATE: SLEEP_STATE,
    "vllm_engine_sleep_state": SLEEP_STATE,
    KV_CACHE_USAGE: KV_CACHE_USAGE,
    "vllm_kv_cache_usage_perc": KV_CACHE_USAGE,
    "vllm:gpu_cache_usage_perc": KV_CACHE_USAGE,
    "vllm_gpu_cache_usage_perc": KV_CACHE_USAGE,
    REQUEST_SUCCESS: REQUEST_SUCCESS,
    "vllm_request_success_total": REQUEST_SUCCESS,
    "vllm:request_success": REQUEST_SUCCESS,
    "vllm_request_success": REQUEST_SUCCESS,
}

#: Every spelling that is kept, for the readers that filter in SQL.
KEPT_SPELLINGS = tuple(_ALIASES)

# The pod's name and namespace as the scrape wrote them, the series' own label
# first: with `honorLabels: false` Prometheus renames a scraped `pod` that clashes
# with the target's to `exported_pod` (a federation or an aggregating exporter), and
# older kubernetes_sd relabelings write `kubernetes_pod_name`/`kubernetes_namespace`.
POD_NAME_LABELS = ("exported_pod", "pod", "kubernetes_pod_name", "pod_name")
NAMESPACE_LABELS = ("exported_namespace", "namespace", "kubernetes_namespace")
INSTANCE_LABELS = ("exported_instance", "instance")
JOB_LABELS = ("exported_job", "job")


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


def canonical_name(name: str) -> str | None:
    """The stored name of a metric the wedge rule reads, or None for any other metric."""
    return _ALIASES.get(name)


def _first(labels: dict[str, str], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = labels.get(key)
        if value:
            return value
    return None


def pod_identity(labels: dict[str, str], fallback: str | None = None) -> str | None:
    """The pod a series belongs to, as ``namespace/pod`` when the namespace is known.

    The pod is its ``exported_pod``, ``pod``, ``kubernetes_pod_name`` or ``pod_name``
    label, else ``instance``, else ``job`` (exported spellings first); the namespace
    ``exported_namespace``, ``namespace`` or ``kubernetes_namespace``. Two namespaces
    can hold pods of the same name: they stay two pods. ``up`` and the vLLM series
    of one target carry the same target labels, so the same rule ties them
    together. ``fallback`` is used when none is present (a scrape file of a bare
    vLLM ``/metrics`` names no target).
    """
    name = _first(labels, POD_NAME_LABELS) or _first(labels, INSTANCE_LABELS) or _first(labels, JOB_LABELS) or fallback
    if name is None:
        return None
    namespace = _first(labels, NAMESPACE_LABELS)
    return f"{namespace}/{name}" if namespace else name


def target_of(labels: dict[str, str]) -> tuple[str | None, str | None]:
    """The scrape target of a series, ``(instance, job)`` (exported spellings first).

    A pod can be several targets (vLLM and its sidecars): the target's own ``up``
    is the one with the same instance and job as its vLLM series.
    """
    return _first(labels, INSTANCE_LABELS), _first(labels, JOB_LABELS)


def labels_json(labels: dict[str, str]) -> str:
    """Labels as canonical JSON (sorted keys, no spaces): the identity of a series."""
    return json.dumps({k: labels[k] for k in sorted(labels) if k != "__name__"}, separators=(",", ":"))
