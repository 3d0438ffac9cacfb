"""A shared cluster behind a real Prometheus: what a kube-prometheus scrape of vLLM really holds.

One Debian ``prometheus`` (1 s scrapes) in front of six loopback exporters, each a
target with Kubernetes-style ``namespace``/``pod`` labels, driven through phases
counted in scrapes (normal 6, trouble 10, after 6):

- ``llm/glm-5-0`` (glm-5): wedged in the trouble phase — counter flat, 3 requests
  running stuck, waiting growing, KV cache full, success counter flat;
- ``llm/glm-5-1`` (glm-5): its idle sibling — counter flat, gauges at 0 (the router
  sent every request to glm-5-0);
- ``llm-b/glm-5-0`` (glm-5-air): the same pod name in another namespace, busy; its
  target fails three scrapes mid-run (its own ``up`` 0: down);
- ``llm/glm-5-0`` job ``sidecar``: a second target of the wedged pod that fails
  scrapes while vLLM answers — not a down pod;
- ``llm/qwen3-0`` (qwen3): asleep in the trouble phase (``engine_sleep_state``),
  exporting no running/waiting gauges, with logged requests to it: not a wedge;
- ``other/glm-5-0`` (glm-5): another tenant's pod, flat under demand all along,
  which only the selector keeps out.

The logs hold tool-history 500s of glm-5 inside the wedge and 503s of qwen3 while
it sleeps. The analyzer must flag only ``llm/glm-5-0`` (each failure counted once),
keep the sleep apart, tell the namespaces apart, ignore the sidecar, and with the
selector never see the other tenant. A trickling server tests the deadline.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from analyzer.store.db import connect
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.ingestion.logs import ingest
from analyzer.jobs.metrics import load_prometheus
from analyzer.classification.windows import wedged_episodes
from analyzer.io.prometheus import fetch_range, parse_selector, query_for
from analyzer.classification.turns import refresh_turns
from tests.support.records import NAKED_500, NAKED_500_HEADERS, TOOL_RESULT, request, response_error, write_jsonl
from tests.support.prometheus import http_server, prometheus_binary, prometheus_running
from tools.loopback import free_port, serving

pytestmark = pytest.mark.prometheus

PHASES = (("normal", 6), ("trouble", 10), ("after", 6))
WEDGE_WINDOW = "4s"
SELECTOR = 'namespace=~"llm|llm-b"'


class Exporter:
    """A ``/metrics`` endpoint rendering ``render(phase, k, n)`` per scrape (n: scrapes so far)."""

    def __init__(self, render):
        self.render = render
        self.lock = threading.Lock()
        self.scrapes: list[tuple[float, str]] = []

    def phase(self, n: int) -> tuple[str, int]:
        for name, length in PHASES:
            if n < length:
                return name, n
            n -= length
        return PHASES[-1][0], n + PHASES[-1][1]

    @property
    def done(self) -> bool:
        with self.lock:
            return len(self.scrapes) >= sum(n for _, n in PHASES) + 2

    def span(self, phase: str) -> tuple[float, float]:
        with self.lock:
            times = [t for t, p in self.scrapes if p == phase]
        return times[0], times[-1]

    def handle(self, req: BaseHTTPRequestHandler):
        if req.path.split("?")[0] != "/metrics":
            return 404, "text/plain", "not found\n"
        with self.lock:
            n = len(self.scrapes)
            phase, k = self.phase(n)
            self.scrapes.append((time.time(), phase))
        out = self.render(phase, k, n)
        if isinstance(out, int):  # a failed scrape: Prometheus records up == 0
            return out, "text/plain", "unavailable\n"
        return 200, "text/plain; version=0.0.4; charset=utf-8", out


def vllm_text(model: str, *, tokens: float, running: float | None, waiting: float | None, kv: float | None = None,
              success: float | None = None, asleep: bool | None = None) -> str:
    """A vLLM v1 scrape (names, labels and types as vllm/v1/metrics/loggers.py declares them)."""
    lab = f'engine="0",model_name="{model}"'
    out = []
    if running is not None:
        out += ["# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} {running}"]
    if waiting is not None:
        out += ["# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{lab}}} {waiting}"]
    if kv is not None:
        out += ["# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{{{lab}}} {kv}"]
    out += ["# TYPE vllm:generation_tokens_total counter", f"vllm:generation_tokens_total{{{lab}}} {tokens}"]
    if success is not None:
        out += ["# TYPE vllm:request_success_total counter",
                f'vllm:request_success_total{{{lab},finished_reason="stop"}} {success}',
                f'vllm:request_success_total{{{lab},finished_reason="length"}} 1.0']
    if asleep is not None:
        out += ["# TYPE vllm:engine_sleep_state gauge",
                f'vllm:engine_sleep_state{{{lab},sleep_state="awake"}} {0 if asleep else 1}',
                f'vllm:engine_sleep_state{{{lab},sleep_state="weights_offloaded"}} {1 if asleep else 0}',
                f'vllm:engine_sleep_state{{{lab},sleep_state="discard_all"}} 0']
    return "\n".join(out) + "\n"


def wedged_pod(phase, k, n):
    tokens = 1000 + 150 * min(n, 6) + (150 * (n - 15) if phase == "after" else 0)
    if phase == "trouble":
        return vllm_text("glm-5", tokens=tokens, running=3, waiting=1 + k, kv=1.0, success=40)
    return vllm_text("glm-5", tokens=tokens, running=2, waiting=0, kv=0.4, success=20 + n * 2 if phase == "normal"
                     else 40 + 2 * k)


def idle_sibling(phase, k, n):
    tokens = 500 + 100 * min(n, 5) + (100 * (k + 1) if phase == "after" else 0)
    busy = phase == "normal" and k < 5 or phase == "after"
    return vllm_text("glm-5", tokens=tokens, running=1 if busy else 0, waiting=0, kv=0.1, success=10 + n)


def other_namespace(phase, k, n):
    if phase == "trouble" and 3 <= k < 6:
        return 503  # its own target fails: this pod (and only this one) is down
    return vllm_text("glm-5-air", tokens=100.0 + 80 * n, running=1, waiting=0)


def sidecar(phase, k, n):
    if 2 <= n < 14:
        return 500  # the exporter sidecar of llm/glm-5-0 fails; vLLM itself answers
    return "# TYPE sidecar_ok gauge\nsidecar_ok 1\n"


def sleeping_engine(phase, k, n):
    tokens = 2000 + 60 * min(n, 6) + (60 * (k + 1) if phase == "after" else 0)
    return vllm_text("qwen3", tokens=tokens, running=None, waiting=None, asleep=phase == "trouble")


def other_tenant(phase, k, n):
    return vllm_text("glm-5", tokens=7.0, running=3, waiting=2)  # flat under demand, all along


def _at(t: float, dt: float = 0.0) -> datetime:
    return datetime.fromtimestamp(t + dt, tz=timezone.utc)


def _logs(tmp_path, wedge: tuple[float, float], sleep: tuple[float, float]):
    """glm-5 tool-history 500s inside the wedge, qwen3 503s during the sleep (requests every second)."""
    recs = []
    for i in range(3):
        t = wedge[0] + 2 + 2 * i
        rid = f"0000a{i:03d}"
        recs += [request(rid, _at(t), session=f"w-{i}", tool_results=TOOL_RESULT),
                 response_error(rid, _at(t, 0.5), NAKED_500, headers=NAKED_500_HEADERS)]
    t, i = sleep[0] + 0.5, 0
    while t < sleep[1] - 0.5:
        rid = f"0000b{i:03d}"
        recs += [request(rid, _at(t), model="qwen3", session=f"q-{i}"),
                 response_error(rid, _at(t, 0.1), "Provider returned 503: model is sleeping", model="qwen3")]
        t, i = t + 1.0, i + 1
    return write_jsonl(tmp_path / "logs.jsonl", recs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Run the cluster's phases once; yield (prometheus URL, exporters by name, workdir)."""
    binary = prometheus_binary()
    workdir = tmp_path_factory.mktemp("cluster")
    exporters = {name: Exporter(render) for name, render in (
        ("wedged", wedged_pod), ("sibling", idle_sibling), ("llm-b", other_namespace), ("sidecar", sidecar),
        ("sleeping", sleeping_engine), ("tenant", other_tenant))}
    with http_server(exporters["wedged"].handle) as a, http_server(exporters["sibling"].handle) as b, \
            http_server(exporters["llm-b"].handle) as c, http_server(exporters["sidecar"].handle) as s, \
            http_server(exporters["sleeping"].handle) as e, http_server(exporters["tenant"].handle) as t:
        host = lambda url: url.removeprefix("http://")  # noqa: E731
        targets = [(a, "llm", "glm-5-0"), (b, "llm", "glm-5-1"), (c, "llm-b", "glm-5-0"), (e, "llm", "qwen3-0"),
                   (t, "other", "glm-5-0")]
        config = "  - job_name: vllm\n    static_configs:\n" + "".join(
            f"      - targets: ['{host(u)}']\n        labels: {{namespace: {ns}, pod: {pod}}}\n"
            for u, ns, pod in targets)
        config += ("  - job_name: sidecar\n    static_configs:\n"
                   f"      - targets: ['{host(s)}']\n        labels: {{namespace: llm, pod: glm-5-0}}\n")
        with prometheus_running(binary, workdir, config) as url:
            deadline = time.monotonic() + 120
            while not all(x.done for x in exporters.values()):
                assert time.monotonic() < deadline, {k: len(x.scrapes) for k, x in exporters.items()}
                time.sleep(0.2)
            time.sleep(1.5)  # the last scrapes are in the TSDB
            yield url, exporters, workdir


def _load(url, exporters, db, logs, selector):
    since = min(x.span("normal")[0] for x in exporters.values()) - 3
    con = connect(db)
    ingest(con, [str(logs)])
    report = load_prometheus(con, url, since, time.time() + 1, step=1, wedge_window=WEDGE_WINDOW, selector=selector)
    refresh_turns(con)
    return con, report


def test_the_wedged_pod_and_only_it_beside_its_idle_sibling_a_sleeper_two_namespaces_and_a_sidecar(cluster):
    url, exporters, workdir = cluster
    logs = _logs(workdir, exporters["wedged"].span("trouble"), exporters["sleeping"].span("trouble"))
    con, report = _load(url, exporters, workdir / "selected.duckdb", logs, SELECTOR)
    try:
        windows = con.execute(
            "SELECT pod, model_name, kind, epoch(start_ts), epoch(end_ts) FROM pod_windows ORDER BY kind, pod").fetchall()
        pods = {p for (p,) in con.execute("SELECT DISTINCT pod FROM metric_samples").fetchall()}
        classes = dict(con.execute(
            "SELECT incident_class, count(*) FROM turns WHERE model = 'glm-5' GROUP BY ALL").fetchall())
        qwen3 = dict(con.execute(
            "SELECT incident_class, count(*) FROM turns WHERE model = 'qwen3' GROUP BY ALL").fetchall())
        episodes = wedged_episodes(con)
    finally:
        con.close()
    kinds = [(p, m, k) for p, m, k, _s, _e in windows]
    # Only the wedged pod is wedged: not its idle sibling, not the sleeping engine.
    assert [w for w in kinds if w[2] == "wedged"] == [("llm/glm-5-0", "glm-5", "wedged")], (windows, report.warnings)
    # The other namespace's pod of the same name is down on its own `up`; the sidecar's failures are not a down pod.
    assert [w for w in kinds if w[2] == "down"] == [("llm-b/glm-5-0", "glm-5-air", "down")], windows
    assert any("sidecar" in w for w in report.warnings), report.warnings
    # The sleep is a window of its own, shown apart.
    assert [w for w in kinds if w[2] == "sleeping"] == [("llm/qwen3-0", "qwen3", "sleeping")], windows
    # The selector kept the other tenant out of every query.
    assert not any(p.startswith("other/") for p in pods) and "llm/glm-5-1" in pods, pods
    assert report.selector == SELECTOR

    wedge = next(w for w in windows if w[2] == "wedged")
    trouble = exporters["wedged"].span("trouble")
    assert trouble[0] - 1.5 <= wedge[3] <= trouble[0] + 4 and trouble[1] - 1 <= wedge[4] <= trouble[1] + 2.5, \
        (wedge, trouble)
    # Each failure is counted once, and the episodes add up to the classes.
    assert classes.get("wedged-pod") == 3 and "pod-down" not in classes, classes
    assert sum(e["failed_turns"] for e in episodes) == classes["wedged-pod"] + classes.get("pod-down", 0)
    [wedged] = [e for e in episodes if e["kind"] == "wedged"]
    assert wedged["failed_turns"] == 3
    # Every signal agrees with the wedge.
    signals = {s["signal"]: s["agrees"] for s in wedged["corroboration"]["signals"]}
    assert signals == {"running stuck": True, "waiting growing": True, "KV cache full": True,
                       "success counter flat": True}, wedged["corroboration"]
    # The qwen3 503s during the sleep keep their class: a sleeping engine is not a wedged pod.
    assert sum(qwen3.values()) >= 5 and "wedged-pod" not in qwen3 and "pod-down" not in qwen3, qwen3


def test_without_the_selector_another_tenants_pod_is_in_the_analysis(cluster):
    url, exporters, workdir = cluster
    logs = _logs(workdir, exporters["wedged"].span("trouble"), exporters["sleeping"].span("trouble"))
    con, report = _load(url, exporters, workdir / "unselected.duckdb", logs, None)
    try:
        wedged = {p for (p,) in con.execute("SELECT pod FROM pod_windows WHERE kind = 'wedged'").fetchall()}
    finally:
        con.close()
    assert wedged == {"llm/glm-5-0", "other/glm-5-0"} and report.selector is None


def test_a_trickling_prometheus_cannot_hold_a_run():
    """Headers at once, then a byte every 0.3 s: httpx's per-read timeout never fires; the deadline does."""
    stop = threading.Event()

    class Trickle(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            try:
                self.wfile.write(b'{"status":"success","data":{"resultType":"matrix","result":[')
                self.wfile.flush()
                while not stop.wait(0.3):
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except OSError:
                pass

        def log_message(self, *args):
            pass

    started = time.monotonic()
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Trickle)) as url:
        try:
            with pytest.raises(AnalyzerError) as err:
                fetch_range(url, "2026-11-16T14:00:00Z", "2026-11-16T15:00:00Z", 15, timeout=1.5)
        finally:
            stop.set()  # the trickling handler ends before the server is shut down
    took = time.monotonic() - started
    assert err.value.exit_code == ExitCode.UPSTREAM and "1.5s deadline" in str(err.value)
    assert took < 4, took


def test_selectors_are_label_matchers_added_to_every_query():
    assert parse_selector('{namespace="llm", job=~"vllm.*"}') == 'namespace="llm",job=~"vllm.*"'
    assert parse_selector("namespace=llm") == 'namespace="llm"'
    assert parse_selector("  ") is None
    assert query_for(("up",), 'namespace="llm"') == 'up{namespace="llm"}'
    assert query_for(("vllm:x_total", "vllm_x_total"), 'job!="a"') == '{__name__=~"vllm:x_total|vllm_x_total",job!="a"}'
    for bad in ("namespace", 'namespace=="x"', '__name__="up"', 'a="b" or 1'):
        with pytest.raises(AnalyzerError) as err:
            parse_selector(bad)
        assert err.value.exit_code == ExitCode.USAGE


def test_an_unreachable_port_is_still_a_clear_error():
    with pytest.raises(AnalyzerError) as err:
        fetch_range(f"http://127.0.0.1:{free_port()}", 1, 2, 1, timeout=2)
    assert "unreachable" in str(err.value)


def test_a_week_at_one_second_is_asked_within_prometheus_point_limit(cluster):
    """The real server refuses more than 11,000 points per series; a week at step 1 s must be raised to fit."""
    url, _exporters, _workdir = cluster
    now = time.time()
    fetched = fetch_range(url, now - 7 * 86400, now, 1, timeout=30, selector=SELECTOR)
    assert fetched.step_s > 1 and any("step raised" in w for w in fetched.warnings)
    # The server answered every query with success (an "exceeded maximum resolution"
    # error would have raised): the step fits its limit.
    assert int(7 * 86400 // fetched.step_s) + 1 <= 11_000
