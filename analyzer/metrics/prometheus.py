"""Range queries against a live Prometheus, over HTTP with httpx.

The analyzer asks for the series the wedge rule reads, under every spelling they
arrive with, through ``/api/v1/query_range``. Prometheus refuses a range query of
more than 11,000 points per series, so the step is raised until the span fits.
Every failure (unreachable, timeout, an HTTP error, ``status: error``, an answer
that is not the Prometheus API) raises :class:`~analyzer.errors.AnalyzerError`
with :attr:`~analyzer.errors.ExitCode.UPSTREAM` and says which URL and query.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

import httpx

from ..urls import split_credentials

from ..errors import AnalyzerError, ExitCode
from .formats import parse_prometheus_json
from .samples import Sample
from .times import US, to_epoch_us

#: The range queries run, one per metric spelling.
QUERIES = (
    "up",
    "vllm:generation_tokens_total",
    "vllm_generation_tokens_total",
    "vllm:num_requests_running",
    "vllm_num_requests_running",
    "vllm:num_requests_waiting",
    "vllm_num_requests_waiting",
)

#: Prometheus' limit on points per series in one range query.
MAX_POINTS = 11_000


@dataclass
class RangeFetch:
    """The samples a set of range queries returned, and how they were asked."""

    samples: list[Sample]
    step_s: float
    queries: tuple[str, ...]
    warnings: list[str] = field(default_factory=list)


def bounded_step(since_us: int, until_us: int, step_s: float) -> float:
    """``step_s`` raised (to whole milliseconds) until ``[since, until]`` holds at most
    :data:`MAX_POINTS` evaluation points."""
    span_s = (until_us - since_us) / US
    least = span_s / (MAX_POINTS - 1)
    if step_s >= least:
        return step_s
    return math.ceil(least * 1000) / 1000


def fetch_range(
    url: str,
    since: datetime | str | float,
    until: datetime | str | float,
    step: float,
    timeout: float = 30.0,
    *,
    queries: tuple[str, ...] = QUERIES,
    transport: httpx.BaseTransport | None = None,
) -> RangeFetch:
    """Run the range queries against the Prometheus at ``url`` (its base URL).

    Args:
        url: e.g. ``http://prometheus:9090`` (a path prefix is kept).
        since, until: the range (datetime, ISO 8601 or epoch seconds; naive is UTC).
        step: the resolution in seconds, raised when needed (see :func:`bounded_step`).
        timeout: seconds for connecting and for each answer.
        queries: the PromQL expressions; each must return series with ``__name__``.
        transport: an httpx transport (tests).

    Raises:
        AnalyzerError: (upstream) unreachable, a timeout, an HTTP or API error;
            (usage) a bad URL or an empty range.
    """
    since_us, until_us = to_epoch_us(since, "--since"), to_epoch_us(until, "--until")
    # Credentials in the URL (user:password@, ?token=) go with the requests and
    # are never shown: `url` from here on is the public base.
    raw_url = url
    url, auth, extra_params = split_credentials(raw_url)
    if until_us <= since_us:
        raise AnalyzerError(f"--until must be after --since for {url}", ExitCode.USAGE)
    if not (isinstance(step, (int, float)) and step > 0):
        raise AnalyzerError(f"step must be a positive number of seconds, not {step!r}", ExitCode.USAGE)
    if not raw_url.startswith(("http://", "https://")):
        raise AnalyzerError(f"--prometheus: not an http(s) URL: {url!r}", ExitCode.USAGE)
    step_s = bounded_step(since_us, until_us, float(step))
    endpoint = url.rstrip("/") + "/api/v1/query_range"
    out = RangeFetch([], step_s, tuple(queries))
    if step_s != step:
        out.warnings.append(f"step raised from {step:g}s to {step_s:g}s to stay under {MAX_POINTS} points per query")
    with httpx.Client(timeout=timeout, transport=transport, auth=auth) as client:
        for query in queries:
            params = {**extra_params, "query": query, "start": f"{since_us / US:.6f}", "end": f"{until_us / US:.6f}",
                      "step": f"{step_s:g}"}
            doc = _get(client, endpoint, params, url, query)
            out.warnings += [f"Prometheus warning for {query}: {w}" for w in doc.get("warnings") or []]
            try:
                out.samples += list(parse_prometheus_json(doc))
            except (ValueError, KeyError, TypeError) as exc:
                raise AnalyzerError(f"Prometheus at {url}: unexpected answer to {query!r}: {exc}",
                                    ExitCode.UPSTREAM) from exc
    return out


def _get(client: httpx.Client, endpoint: str, params: dict, url: str, query: str) -> dict:
    """One API call, its JSON document, or a clear AnalyzerError."""
    try:
        resp = client.get(endpoint, params=params)
    except httpx.TimeoutException as exc:
        raise AnalyzerError(f"Prometheus at {url} did not answer {query!r} in time: {exc}",
                            ExitCode.UPSTREAM) from exc
    except httpx.UnsupportedProtocol as exc:
        raise AnalyzerError(f"--prometheus: unsupported URL {url!r}: {exc}", ExitCode.USAGE) from exc
    except httpx.HTTPError as exc:  # connection refused, DNS, reset ...
        raise AnalyzerError(f"Prometheus at {url} is unreachable: {exc}", ExitCode.UPSTREAM) from exc
    try:
        doc = resp.json()
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or "status" not in doc:
        raise AnalyzerError(
            f"Prometheus at {url} answered HTTP {resp.status_code} to {query!r} without a Prometheus API "
            f"response (is {url} the Prometheus base URL?)", ExitCode.UPSTREAM)
    if doc.get("status") != "success":
        raise AnalyzerError(
            f"Prometheus at {url} answered status {doc.get('status')!r} (HTTP {resp.status_code}) to "
            f"{query!r}: {doc.get('errorType')}: {doc.get('error')}", ExitCode.UPSTREAM)
    return doc
