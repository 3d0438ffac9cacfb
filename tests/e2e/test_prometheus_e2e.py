"""The analyzer against a real Prometheus server scraping a fake vLLM exporter.

The end-to-end test starts Debian's ``prometheus`` binary on 127.0.0.1 (temp config
and storage, 1 s scrape interval) in front of a stdlib HTTP exporter that plays a
vLLM pod through four phases, counted in scrapes so a slow machine stretches them
rather than mixing them up:

    normal (tokens rise, requests running) -> idle (flat, nothing running)
    -> wedged (flat, requests running and waiting) -> restarted (counter reset, rising)

The analyzer then runs its range queries over HTTP and must find the wedged
phase, and not the idle one. Without the binary the test is skipped, except under
``CI`` (``.ci/run`` installs it), where it fails.

The other tests drive the Prometheus client against small fake HTTP servers: the
errors an operator sees, and the bounded step.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlparse

import httpx
import pytest

from analyzer.store.db import connect
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.jobs.metrics import load_prometheus
from analyzer.classification.windows import wedged_episodes
from analyzer.io.prometheus import MAX_POINTS, QUERIES, fetch_range
from analyzer.classification.turns import refresh_turns
from tests.support.prometheus import http_server, prometheus_binary, prometheus_running
from tools.loopback import free_port, serving

WEDGE_WINDOW = "4s"
PHASES = (("normal", 6), ("idle", 6), ("wedged", 10), ("restarted", 6))


# ---------------------------------------------------------------------------
# The fake vLLM exporter


class FakeVllm:
    """A vLLM ``/metrics`` endpoint whose phase advances with each scrape served."""

    def __init__(self, phases=PHASES):
        self.phases = phases
        self.lock = threading.Lock()
        self.scrapes: list[tuple[float, str]] = []  # (wall time served, phase)
        self.tokens = 1000.0

    @property
    def done(self) -> bool:
        """Every phase has been scraped through, plus a few scrapes of the last one."""
        with self.lock:
            return len(self.scrapes) >= sum(n for _, n in self.phases) + 3

    def span(self, phase: str) -> tuple[float, float]:
        """Wall times of the first and last scrape served in ``phase``."""
        with self.lock:
            times = [t for t, p in self.scrapes if p == phase]
        return times[0], times[-1]

    def _phase(self, n: int) -> tuple[str, int]:
        """The phase of scrape number ``n`` (0-based) and its index within the phase."""
        for name, length in self.phases:
            if n < length:
                return name, n
            n -= length
        return self.phases[-1][0], n + self.phases[-1][1]  # the last phase goes on

    def scrape(self) -> str:
        """Advance one scrape and render the exposition text."""
        with self.lock:
            phase, k = self._phase(len(self.scrapes))
            if phase == "normal":
                self.tokens += 180
                running, waiting = 2, 0
            elif phase == "idle":
                running, waiting = 0, 0
            elif phase == "wedged":
                running, waiting = 3, 2
            else:  # restarted: the process is new, its counter starts again
                self.tokens = 25.0 if k == 0 else self.tokens + 180
                running, waiting = 1, 0
            self.scrapes.append((time.time(), phase))
            tokens = self.tokens
        labels = 'engine="0",model_name="glm-5"'
        return (
            "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{{{labels}}} {running:.1f}\n"
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            f"vllm:num_requests_waiting{{{labels}}} {waiting:.1f}\n"
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
            "# TYPE vllm:generation_tokens_total counter\n"
            f"vllm:generation_tokens_total{{{labels}}} {tokens:.1f}\n"
        )

    def handle(self, req: BaseHTTPRequestHandler) -> tuple[int, str, str]:
        if req.path.split("?")[0] != "/metrics":
            return 404, "text/plain", "not found\n"
        return 200, "text/plain; version=0.0.4; charset=utf-8", self.scrape()


# ---------------------------------------------------------------------------
# A real Prometheus


@contextmanager
def prometheus_server(binary: str, workdir: Path, target: str) -> Iterator[str]:
    """Run Prometheus on 127.0.0.1 scraping ``target`` every second; yield its URL."""
    scrape_configs = (
        "  - job_name: vllm\n"
        "    static_configs:\n"
        f"      - targets: ['{target}']\n"
        "        labels: {pod: glm-5-0}\n"  # as Kubernetes relabeling would add it
    )
    with prometheus_running(binary, workdir, scrape_configs) as url:
        yield url


@pytest.mark.prometheus
def test_real_prometheus_finds_the_wedged_phase_and_not_the_idle_one(tmp_path):
    binary = prometheus_binary()
    exporter = FakeVllm()
    with http_server(exporter.handle) as exporter_url, \
            prometheus_server(binary, tmp_path, exporter_url.removeprefix("http://")) as prom_url:
        deadline = time.monotonic() + 90
        while not exporter.done:
            assert time.monotonic() < deadline, f"only {len(exporter.scrapes)} scrapes in 90 s"
            time.sleep(0.2)
        since = exporter.span("normal")[0] - 5
        con = connect(tmp_path / "analyzer.duckdb")
        try:
            report = load_prometheus(con, prom_url, since, time.time() + 1, step=1, wedge_window=WEDGE_WINDOW)
            refresh_turns(con)
            rows = con.execute(
                "SELECT pod, model_name, kind, epoch(start_ts), epoch(end_ts) FROM pod_windows").fetchall()
            metrics = {m for (m,) in con.execute("SELECT DISTINCT metric FROM metric_samples").fetchall()}
            episodes = wedged_episodes(con)
        finally:
            con.close()

    assert metrics == {"up", "vllm:generation_tokens_total", "vllm:num_requests_running",
                       "vllm:num_requests_waiting"}
    assert report.windows == {"wedged": 1, "down": 0, "sleeping": 0}, (rows, report.warnings)
    [(pod, model, kind, start, end)] = rows
    assert (pod, model, kind) == ("glm-5-0", "glm-5", "wedged")
    mid = {p: sum(exporter.span(p)) / 2 for p, _ in PHASES}
    # The idle phase (flat counter, nothing running) is outside the window ...
    assert start > mid["idle"], (start, exporter.span("idle"), exporter.span("wedged"))
    # ... the wedged phase is inside it, and the restart (counter reset) ends it.
    assert start < mid["wedged"] < end
    assert end < mid["restarted"], (end, exporter.span("restarted"))
    assert [(e["pod"], e["kind"], e["failed_turns"]) for e in episodes] == [("glm-5-0", "wedged", 0)]


# ---------------------------------------------------------------------------
# The client's errors and bounds, against fake HTTP servers


def _api(result, status=200):
    return status, "application/json", json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def test_unreachable_prometheus_is_a_clear_upstream_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(AnalyzerError) as err:
        fetch_range(url, "2026-11-16T14:00:00Z", "2026-11-16T15:00:00Z", 15, timeout=2)
    assert err.value.exit_code == ExitCode.UPSTREAM
    assert f"Prometheus at {url} is unreachable" in str(err.value)


def test_status_error_is_a_clear_upstream_error():
    body = json.dumps({"status": "error", "errorType": "bad_data", "error": "invalid parameter \"query\""})
    with http_server(lambda req: (400, "application/json", body)) as url:
        with pytest.raises(AnalyzerError) as err:
            fetch_range(url, "2026-11-16T14:00:00Z", "2026-11-16T15:00:00Z", 15, timeout=5)
    assert err.value.exit_code == ExitCode.UPSTREAM
    assert "status 'error' (HTTP 400)" in str(err.value) and "bad_data" in str(err.value)
    assert "'up'" in str(err.value)  # which query


def test_something_that_is_not_prometheus_is_a_clear_upstream_error():
    with http_server(lambda req: (200, "text/html", "<html>Grafana</html>")) as url:
        with pytest.raises(AnalyzerError) as err:
            fetch_range(url, "2026-11-16T14:00:00Z", "2026-11-16T15:00:00Z", 15, timeout=5)
    assert err.value.exit_code == ExitCode.UPSTREAM
    assert "without a Prometheus API response" in str(err.value)


def test_a_silent_prometheus_times_out_with_a_clear_error():
    release = threading.Event()

    def hang(req):
        release.wait(10)  # bounded; released as soon as the client gave up
        return _api([])

    with http_server(hang) as url:
        try:
            with pytest.raises(AnalyzerError) as err:
                fetch_range(url, "2026-11-16T14:00:00Z", "2026-11-16T15:00:00Z", 15, timeout=0.5)
        finally:
            release.set()
    assert err.value.exit_code == ExitCode.UPSTREAM and "did not answer" in str(err.value)


def test_bad_arguments_are_usage_errors():
    for args in (("ftp://x", 1, 2, 15), ("http://x", 2, 1, 15), ("http://x", 1, 2, 0)):
        with pytest.raises(AnalyzerError) as err:
            fetch_range(*args)
        assert err.value.exit_code == ExitCode.USAGE


def test_no_query_exceeds_prometheus_point_limit():
    seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        q = request.url.params
        seen.append((q["query"], float(q["start"]), float(q["end"]), float(q["step"])))
        return httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": []}})

    fetched = fetch_range("http://prom:9090/prefix", "2026-11-09T00:00:00Z", "2026-11-16T00:00:00Z", 1,
                          transport=httpx.MockTransport(answer))
    assert [q for q, *_ in seen] == list(QUERIES)
    # Both spellings of the counter in one query.
    assert any("vllm_generation_tokens_total" in q and "vllm:generation_tokens_total" in q for q in QUERIES)
    for _, start, end, step in seen:
        assert int((end - start) // step) + 1 <= MAX_POINTS
    assert fetched.step_s > 1 and any("step raised" in w for w in fetched.warnings)


def _names_asked(query: str) -> list[str]:
    """The metric names a query of the analyzer asks for: ``up{...}`` or ``{__name__=~"a|b",...}``."""
    import re

    m = re.match(r'\{__name__=~"([^"]+)"', query)
    return m.group(1).split("|") if m else [query.split("{")[0]]


def test_load_prometheus_stores_and_classifies_like_a_file(tmp_path):
    t0 = 1_800_000_000
    labels = {"pod": "p1", "model_name": "glm-5", "job": "vllm"}
    series = {
        "up": [(t0 + i, 1) for i in range(40)],
        "vllm_generation_tokens_total": [(t0 + i, 100 * min(i, 10)) for i in range(40)],  # flat from 10
        "vllm:num_requests_running": [(t0 + i, 0 if i < 20 else 2) for i in range(40)],  # demand from 20
    }
    queries = []

    def handle(req):
        q = parse_qs(urlparse(req.path).query)
        queries.append(q)
        names = _names_asked(q["query"][0])
        result = [{"metric": {"__name__": name, **({} if name == "up" else labels), "pod": "p1"},
                   "values": [[t, str(v)] for t, v in series[name]]} for name in names if name in series]
        return _api(result)

    con = connect(tmp_path / "analyzer.duckdb")
    try:
        with http_server(handle) as url:
            report = load_prometheus(con, url + "/", t0, t0 + 39, wedge_window="5s")
            again = load_prometheus(con, url, t0, t0 + 39, wedge_window="5s")
        rows = con.execute("SELECT kind, epoch(start_ts), epoch(end_ts) FROM pod_windows").fetchall()
    finally:
        con.close()
    assert report.step_s == 1.0 and report.samples_new == 120
    assert again.samples_new == 0 and again.duplicates == 120
    # Wedged from the first demand (t0+20) to the end of the data; the idle 10..19 is not.
    assert rows == [("wedged", t0 + 20, t0 + 39)]
    assert {q["step"][0] for q in queries} == {"1"}


def test_the_default_range_is_the_logged_records_widened_by_the_window(tmp_path):
    from analyzer.ingestion.logs import ingest
    from tests.support.records import T0, request, write_jsonl

    asked = []

    def handle(req):
        asked.append(parse_qs(urlparse(req.path).query))
        return _api([])

    con = connect(tmp_path / "analyzer.duckdb")
    try:
        ingest(con, [str(write_jsonl(tmp_path / "logs.jsonl", [
            request("00000001", T0), request("00000002", T0 + timedelta(hours=2))]))])
        with http_server(handle) as url:
            report = load_prometheus(con, url, None, None, wedge_window="5m")
    finally:
        con.close()
    start, end = float(asked[0]["start"][0]), float(asked[0]["end"][0])
    assert (start, end) == (T0.timestamp() - 300, T0.timestamp() + 7200 + 300)
    assert report.step_s == 15 and report.windows == {"wedged": 0, "down": 0, "sleeping": 0}


def test_credentials_in_the_prometheus_url_are_sent_but_never_shown(tmp_path):
    """user:password@ and ?token= go with the request (basic auth, query); only the base is printed or stored."""
    import base64
    import json as _json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            seen.append((self.path, self.headers.get("Authorization")))
            body = _json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as url:
        from analyzer.store.db import connect
        from analyzer.jobs.metrics import load_prometheus

        port = url.rsplit(":", 1)[1]
        con = connect(tmp_path / "a.duckdb")
        report = load_prometheus(con, f"http://alice:s3cretpw@127.0.0.1:{port}/?token=t0ken",
                                 "2026-11-16T00:00:00Z", "2026-11-16T01:00:00Z")
        stored = con.execute("SELECT string_agg(DISTINCT source, ',') FROM metric_samples").fetchall()[0][0] or ""
        con.close()
    assert seen and all(a == "Basic " + base64.b64encode(b"alice:s3cretpw").decode() for _, a in seen)
    assert all("token=t0ken" in path for path, _ in seen)
    shown = _json.dumps(report.to_dict()) + stored
    assert "s3cretpw" not in shown and "t0ken" not in shown and "alice" not in shown
