"""Range queries against a live Prometheus, over HTTP with httpx.

The analyzer asks for the series it reads, every spelling of a metric in one
query (``{__name__=~"vllm:x|vllm_x"}``), through ``/api/v1/query_range``.
Prometheus refuses a range query of more than 11,000 points per series, so the
step is raised until the span fits. A query whose answer would exceed
:data:`PAGE_BYTES` is asked again over shorter spans of the range,
each answer handed on (staged) before the next is asked, so memory follows the
page, not the week; one too big for a single instant is refused and the error
says to narrow it with a selector. On a shared Prometheus a *selector* (label
matchers such as ``namespace="llm",job="vllm"``) is added to every query, so an
unqualified ``up`` does not bring every tenant's targets. Each query has a total
deadline, connecting and reading included: a server that trickles bytes cannot
hold a run. Every failure (unreachable, past the deadline, an HTTP error,
``status: error``, an answer that is not the Prometheus API) raises
:class:`~analyzer.core.errors.AnalyzerError` with
:attr:`~analyzer.core.errors.ExitCode.UPSTREAM` and says which URL and query. The
server's own texts (error bodies, warnings) are scrubbed of credentials
(:func:`analyzer.core.scrub.scrub`) before they go into a message.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

import httpx

from analyzer.core.durations import US, to_epoch_us, us_to_datetime
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.scrub import scrub
from analyzer.core.urls import split_credentials
from analyzer.io.promql import PromQLStringError, quote, re2_problem, unquote

#: The metrics asked for, each with the spellings it arrives under (one query each).
QUERY_NAMES = (
    ("up",),
    ("vllm:generation_tokens_total", "vllm_generation_tokens_total"),
    ("vllm:num_requests_running", "vllm_num_requests_running"),
    ("vllm:num_requests_waiting", "vllm_num_requests_waiting"),
    ("vllm:engine_sleep_state", "vllm_engine_sleep_state"),
    ("vllm:kv_cache_usage_perc", "vllm_kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm_gpu_cache_usage_perc"),
    ("vllm:request_success_total", "vllm_request_success_total"),
)

# A matcher: a label, an operator, and a value (a PromQL string in any of its three quotes, or bare).
_MATCHER = re.compile(r"""\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"""
                      r"""("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`|[^,"'`{}\s]+)\s*(?:,|$)""")


def parse_selector(text: str | None) -> str | None:
    """``--prometheus-selector``: label matchers, normalized to ``a="b",c=~"d"`` (braces optional),
    or None when empty.

    Each value keeps its meaning: a double-quoted, single-quoted or backticked
    PromQL string is decoded as Prometheus decodes it (``namespace='llm'`` is the
    namespace ``llm``) and written back double-quoted; a bare value is taken as
    it is. The value of ``=~`` and ``!~`` must be a regex RE2 accepts.

    Raises:
        AnalyzerError: (usage) not a list of ``label OP "value"`` matchers (OP one of
            = != =~ !~), a value Prometheus would refuse (an unknown escape, a quote
            left open), or a regex RE2 would refuse.
    """
    body = (text or "").strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1].strip()
    if not body:
        return None
    out, pos = [], 0
    while pos < len(body):
        m = _MATCHER.match(body, pos)
        if not m or m.end() == pos:
            opened = re.match(r"""\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*(["'`])""", body[pos:])
            if opened:
                raise AnalyzerError(f"a {opened.group(1)}-quoted value left open in {text!r}", ExitCode.USAGE,
                                    param="selector")
            raise AnalyzerError(
                f"want label matchers such as namespace=\"llm\",job=~\"vllm.*\", got {text!r}",
                ExitCode.USAGE, param="selector")
        name, op, raw = m.groups()
        if name == "__name__":
            raise AnalyzerError("the metric names are the analyzer's; select by labels",
                                ExitCode.USAGE, param="selector")
        try:
            value = unquote(raw) if raw[:1] in ('"', "'", "`") else raw
        except PromQLStringError as exc:
            raise AnalyzerError(f"{name}{op}{exc}", ExitCode.USAGE, param="selector") from exc
        if op in ("=~", "!~"):
            problem = re2_problem(value)
            if problem:
                raise AnalyzerError(f"{name}{op}{quote(value)}: not a regex Prometheus reads: {problem}",
                                    ExitCode.USAGE, param="selector")
        out.append(f"{name}{op}{quote(value)}")
        pos = m.end()
    return ",".join(out)


def query_for(names: tuple[str, ...], selector: str | None = None) -> str:
    """The PromQL of one metric: ``up{sel}``, or ``{__name__=~"a|b",sel}`` for several spellings."""
    if len(names) == 1:
        return names[0] + (f"{{{selector}}}" if selector else "")
    alternatives = "|".join(re.escape(n) for n in names)
    return "{" + f'__name__=~"{alternatives}"' + (f",{selector}" if selector else "") + "}"


#: The range queries run without a selector.
QUERIES = tuple(query_for(n) for n in QUERY_NAMES)

#: Prometheus' limit on points per series in one range query.
MAX_POINTS = 11_000

#: The most one answer may hold (bytes as read, decompressed): a range query whose answer
#: would be bigger is asked again over shorter spans of time (pages), each answer staged
#: before the next is asked, so memory follows the page; an answer over this for a single
#: instant is refused.
PAGE_BYTES = 16 * 1024 * 1024


class _TooBig(Exception):
    """An answer that grew past the page budget (its reading stopped there)."""


@dataclass
class RangeFetch:
    """How a set of range queries was asked (the answers went to ``on_answer``)."""

    step_s: float
    queries: tuple[str, ...]
    warnings: list[str] = field(default_factory=list)
    selector: str | None = None
    pages: int = 0  # range queries answered (one per query, more when paged)
    bytes: int = 0  # the answers' bytes in all


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
    timeout: float = 60.0,
    *,
    queries: tuple[str, ...] | None = None,
    selector: str | None = None,
    transport: httpx.BaseTransport | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    on_answer: Callable[[dict], None] | None = None,
    page_bytes: int | None = None,
) -> RangeFetch:
    """Run the range queries against the Prometheus at ``url`` (its base URL).

    Args:
        url: e.g. ``http://prometheus:9090`` (a path prefix is kept).
        since, until: the range (datetime, ISO 8601 or epoch seconds; naive is UTC).
        step: the resolution in seconds, raised when needed (see :func:`bounded_step`).
        timeout: the total seconds one query may take (connecting, waiting, reading).
        queries: the PromQL expressions (default: :data:`QUERY_NAMES` with the
            selector); each must return series with ``__name__``.
        selector: label matchers added to every query (see :func:`parse_selector`).
        transport: an httpx transport (tests).
        progress: called with ``(done, total, query)`` before each query.
        on_answer: given each answer (a parsed API response), which it stages
            (raising ValueError on a malformed one); without it the answers are
            only checked for ``status: success``.
        page_bytes: the most one answer may hold (default :data:`PAGE_BYTES`).

    A query whose answer would be bigger than ``page_bytes`` is asked again over
    shorter spans of the range (a quarter as many points per series each time it
    overflows; then pages sized from the answers so far), each page's answer
    handed on before the next is asked, with the same evaluation times as one
    query. A warning says so. An answer bigger than ``page_bytes`` for a single
    instant (too many series) is refused.

    Raises:
        AnalyzerError: (upstream) unreachable, a timeout, an HTTP or API error;
            (usage) a bad URL, an empty range, an answer too big for one instant.
    """
    since_us, until_us = to_epoch_us(since, "since"), to_epoch_us(until, "until")
    # Credentials in the URL (user:password@, ?token=) go with the requests and
    # are never shown: `url` from here on is the public base.
    raw_url = url
    url, auth, extra_params = split_credentials(raw_url)
    if until_us <= since_us:
        raise AnalyzerError(f"until must be after since for {url}", ExitCode.USAGE, param="until",
                            names={"until": "until", "since": "since"})
    if not (isinstance(step, (int, float)) and step > 0):
        raise AnalyzerError(f"step must be a positive number of seconds, not {step!r}", ExitCode.USAGE)
    if not raw_url.startswith(("http://", "https://")):
        raise AnalyzerError(f"not an http(s) URL: {url!r}", ExitCode.USAGE, param="url")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise AnalyzerError(f"timeout must be a positive number of seconds, not {timeout!r}",
                            ExitCode.USAGE, param="timeout")
    selector = parse_selector(selector)
    if queries is None:
        queries = tuple(query_for(n, selector) for n in QUERY_NAMES)
    step_s = bounded_step(since_us, until_us, float(step))
    endpoint = url.rstrip("/") + "/api/v1/query_range"
    out = RangeFetch(step_s, tuple(queries), selector=selector)
    if step_s != step:
        out.warnings.append(f"step raised from {step:g}s to {step_s:g}s to stay under {MAX_POINTS} points per query")
    cap = page_bytes if page_bytes is not None else PAGE_BYTES
    # The evaluation times are since + k * step, k < points (Prometheus' own grid): a
    # page asks a run of them, so the pages together ask exactly what one query would.
    step_us = round(step_s * US)
    points = (until_us - since_us) // step_us + 1
    page = points  # points per series the next page asks (learned from the answers)
    paged: list[str] = []
    largest = 0
    with httpx.Client(timeout=timeout, transport=transport, auth=auth) as client:
        for i, query in enumerate(queries):
            if progress:
                progress(i, len(queries), f"prometheus {query}")
            k, pages, shrunk = 0, 0, False
            while k < points:
                n = min(page, points - k)
                start_us = since_us + k * step_us
                end_us = until_us if k + n >= points else start_us + (n - 1) * step_us
                params = {**extra_params, "query": query, "start": f"{start_us / US:.6f}",
                          "end": f"{end_us / US:.6f}", "step": f"{step_s:g}"}
                try:
                    doc, size = _get(client, endpoint, params, url, query, float(timeout), cap)
                except _TooBig:
                    if n == 1:
                        raise AnalyzerError(
                            f"Prometheus at {url} answered more than {_mib(cap)} to {query!r} for a single instant "
                            f"({_instant(start_us)}): too many series for the analyzer to read; narrow the query "
                            "with --prometheus-selector (e.g. namespace=\"llm\",job=\"vllm\")",
                            ExitCode.USAGE, param="selector") from None
                    page, shrunk = max(1, n // 4), True
                    continue
                # The server's own words can quote credentials (a remote store's URL or token).
                out.warnings += [f"Prometheus warning for {query}: {scrub(str(w))}" for w in doc.get("warnings") or []]
                try:
                    if on_answer is not None:
                        on_answer(doc)
                except (ValueError, KeyError, TypeError) as exc:
                    raise AnalyzerError(f"Prometheus at {url}: unexpected answer to {query!r}: {scrub(str(exc))}",
                                        ExitCode.UPSTREAM) from exc
                del doc
                pages += 1
                out.bytes += size
                largest = max(largest, n if pages > 1 or shrunk else 0)
                k += n
                # The next page: as many points as fill half the budget at this answer's size.
                page = max(1, min(points, n * (cap // 2) // max(size, 1)))
            out.pages += pages
            if pages > 1 or shrunk:
                paged.append(query)
    if paged:
        out.warnings.append(
            f"Prometheus answers too big to read at once: {len(paged)} of {len(queries)} queries asked over "
            f"shorter spans of time ({out.pages} answers in all, {out.bytes / 1e6:,.0f} MB, up to {largest:,} points "
            f"per series and {_mib(cap)} each); --prometheus-selector asks for fewer series")
    return out


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB"


def _instant(t_us: int) -> str:
    return us_to_datetime(t_us).strftime("%Y-%m-%dT%H:%M:%SZ")


def _get(client: httpx.Client, endpoint: str, params: dict, url: str, query: str, deadline_s: float,
         cap: int) -> tuple[dict, int]:
    """One API call within ``deadline_s`` seconds in all: its JSON document and size, or a clear AnalyzerError.

    An answer that grows past ``cap`` bytes raises :class:`_TooBig` as soon as it does
    (the rest is never read).

    httpx's timeouts bound each network operation, not the whole answer: a server
    that sends a byte every few seconds would never time out. A timer closes the
    response at the deadline, and the reading loop checks the clock per chunk.
    """
    started = time.monotonic()
    late = AnalyzerError(f"Prometheus at {url} did not answer {query!r} within the {deadline_s:g}s deadline",
                         ExitCode.UPSTREAM)
    timer = None
    try:
        with client.stream("GET", endpoint, params=params, timeout=httpx.Timeout(deadline_s)) as resp:
            timer = threading.Timer(max(0.0, deadline_s - (time.monotonic() - started)), resp.close)
            timer.daemon = True
            timer.start()
            chunks, size = [], 0
            for chunk in resp.iter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > cap:
                    raise _TooBig(size)
                if time.monotonic() - started > deadline_s:
                    raise late
            body = b"".join(chunks)
            del chunks
    except httpx.UnsupportedProtocol as exc:
        raise AnalyzerError(f"unsupported URL {url!r}: {exc}", ExitCode.USAGE, param="url") from exc
    except (httpx.HTTPError, httpx.StreamError, OSError, RuntimeError) as exc:
        if isinstance(exc, httpx.TimeoutException) or time.monotonic() - started >= deadline_s:
            raise late from exc
        raise AnalyzerError(f"Prometheus at {url} is unreachable: {scrub(str(exc))}", ExitCode.UPSTREAM) from exc
    finally:
        if timer is not None:
            timer.cancel()
    if time.monotonic() - started > deadline_s:
        raise late
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    del body
    if not isinstance(doc, dict) or "status" not in doc:
        raise AnalyzerError(
            f"Prometheus at {url} answered HTTP {resp.status_code} to {query!r} without a Prometheus API "
            f"response (is {url} the Prometheus base URL?)", ExitCode.UPSTREAM)
    if doc.get("status") != "success":
        raise AnalyzerError(
            f"Prometheus at {url} answered status {doc.get('status')!r} (HTTP {resp.status_code}) to "
            f"{query!r}: {scrub(str(doc.get('errorType')))}: {scrub(str(doc.get('error')))}", ExitCode.UPSTREAM)
    return doc, size
