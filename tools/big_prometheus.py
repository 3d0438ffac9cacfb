"""A Prometheus ``query_range`` answer of a chosen size, as a file and from a loopback server.

The hostile input of the metrics loader: a matrix of many series x many points,
with the labels a kube-prometheus scrape of vLLM pods carries and the metric
names the analyzer reads (``up``, ``vllm:generation_tokens_total``,
``vllm:num_requests_running``/``_waiting``, ``vllm:kv_cache_usage_perc``,
``vllm:request_success_total``, ``vllm:engine_sleep_state``).

- :func:`spec_for_bytes`: how many pods make an answer of about N bytes
  (11,000 points per series at a 15 s step: Prometheus' limit per series, so an
  ``analyze --prometheus`` run over the span keeps the step);
- :func:`write_answer`: the whole answer (every series) as one JSON file, written
  in pieces;
- :func:`serve`: a threaded HTTP server on 127.0.0.1 answering
  ``/api/v1/query_range`` as Prometheus would: the series of the metric names
  asked (``up{...}`` or ``{__name__=~"a|b",...}``), evaluated at
  ``start + k*step`` up to ``end`` within the data's span, so a client that pages
  by time gets each point once. ``ignore_range=True`` plays a server that sends
  everything whatever the range.

The values are deterministic functions of (pod, metric, time): the counters
rise, ``up`` is 1, no pod wedges. The point count of every form is
:attr:`Spec.samples`.

    python -m tools.big_prometheus --bytes 100MB --out big.json     # a file
    python -m tools.big_prometheus --bytes 100MB --serve 9091       # a server
"""

from __future__ import annotations

import argparse
import json
import math
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlparse

from tools.loopback import serving

#: The metrics of each pod, as vLLM's v1 engine spells them.
METRICS = (
    "up",
    "vllm:generation_tokens_total",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:request_success_total",
    "vllm:engine_sleep_state",
)

T0 = 1_800_000_000  # 2027-01-15T08:00:00Z


@dataclass(frozen=True)
class Spec:
    """The data: ``pods`` pods x :data:`METRICS` series, ``points`` points each, ``step`` seconds apart from ``t0``."""

    pods: int
    points: int = 11_000
    step: int = 15
    t0: int = T0

    @property
    def series(self) -> int:
        return self.pods * len(METRICS)

    @property
    def samples(self) -> int:
        return self.series * self.points

    @property
    def end(self) -> int:
        """The time of the last point."""
        return self.t0 + (self.points - 1) * self.step


def labels(spec: Spec, pod: int, metric: str) -> dict[str, str]:
    """The labels of one series, as kube-prometheus writes them for a vLLM pod."""
    model = ("glm-5", "glm-4.6", "qwen3-235b")[pod % 3]
    name = f"{model.replace('.', '')}-{pod:04d}-7f9c{pod % 97:02d}"
    out = {"__name__": metric, "container": "vllm", "endpoint": "metrics",
           "instance": f"10.{pod // 250 % 256}.{pod % 250}.{17 + pod % 3}:8000", "job": "vllm",
           "namespace": "llm", "pod": name, "service": f"{model.replace('.', '')}-engine"}
    if metric != "up":
        out.update({"engine": "0", "model_name": model})
    if metric == "vllm:engine_sleep_state":
        out["sleep_state"] = "awake"
    return out


def value(pod: int, metric: str, k: int) -> str:
    """The value of a series at its ``k``-th point, as Prometheus writes it (a string)."""
    if metric == "up" or metric == "vllm:engine_sleep_state":
        return "1"
    if metric == "vllm:generation_tokens_total":
        return str(1_000_000 + pod * 7919 + k * (400 + pod % 50))
    if metric == "vllm:request_success_total":
        return str(20_000 + pod * 13 + k * (2 + pod % 3))
    if metric == "vllm:num_requests_running":
        return str((k * 7 + pod) % 17)
    if metric == "vllm:num_requests_waiting":
        return str((k * 5 + pod) % 3)
    return f"{((k * 37 + pod * 11) % 1000) / 1000:.3f}"  # kv cache usage


def _bytes_per_pod(points: int, step: int) -> int:
    one = Spec(pods=1, points=points, step=step)
    return sum(len(c) for c in _result_chunks(one, METRICS, None, None, None)) + 2


def spec_for_bytes(size: int, *, points: int = 11_000, step: int = 15) -> Spec:
    """A :class:`Spec` whose whole answer is about ``size`` bytes (at least one pod)."""
    return Spec(pods=max(1, round(size / _bytes_per_pod(points, step))), points=points, step=step)


def _grid(spec: Spec, start: float | None, end: float | None, step: float | None) -> list[tuple[str, int]]:
    """The evaluation times ``start + k*step`` within ``[start, end]`` and the data's span, each
    with the data point it reads (the latest at or before it), as Prometheus would answer."""
    if start is None:
        return [(str(spec.t0 + k * spec.step), k) for k in range(spec.points)]
    step = step or spec.step
    first = max(0, math.ceil((spec.t0 - start) / step))
    out = []
    k = first
    while True:
        t = start + k * step
        if t > end or t > spec.end:
            break
        out.append((f"{t:.3f}".rstrip("0").rstrip("."), int((t - spec.t0) // spec.step)))
        k += 1
    return out


def _result_chunks(spec: Spec, names, start, end, step) -> Iterator[str]:
    """The ``result`` array's text in pieces (one series each, with a leading comma after the first)."""
    grid = _grid(spec, start, end, step)
    first = True
    for metric in METRICS:
        if metric not in names:
            continue
        for pod in range(spec.pods):
            if not grid:
                continue
            pts = ",".join(f'[{t},"{value(pod, metric, k)}"]' for t, k in grid)
            yield ("" if first else ",") + '{"metric":' + json.dumps(labels(spec, pod, metric), separators=(",", ":")) \
                + ',"values":[' + pts + "]}"
            first = False


def answer_chunks(spec: Spec, names=METRICS, start: float | None = None, end: float | None = None,
                  step: float | None = None) -> Iterator[bytes]:
    """A query_range answer (success, matrix) for the series of ``names`` in pieces of about a series each."""
    yield b'{"status":"success","data":{"resultType":"matrix","result":['
    for chunk in _result_chunks(spec, names, start, end, step):
        yield chunk.encode()
    yield b"]}}"


def write_answer(path: str | Path, spec: Spec) -> int:
    """The whole answer (every series, every point) as one JSON file; returns its size."""
    size = 0
    with open(path, "wb") as f:
        for chunk in answer_chunks(spec):
            f.write(chunk)
            size += len(chunk)
    return size


def write_logs(path: str | Path, spec: Spec, requests: int = 4) -> Path:
    """A few proxy log records (request and served response, glm-5) inside the span:
    ``analyze`` wants a log file before ``--metrics``."""
    from datetime import datetime, timezone

    def stamp(t: float) -> str:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    lines = []
    for i in range(requests):
        t = spec.t0 + (i + 1) * (spec.end - spec.t0) / (requests + 1)
        common = {"request_id": f"big-{i:04d}", "session_id": f"s-{i}", "client": "geo-agent/v3.13.1",
                  "provider": "nrp", "model": "glm-5", "origin": None}
        lines.append({"timestamp": stamp(t), "type": "request", **common, "message_count": 2, "tools_count": 5,
                      "enable_thinking": False, "user_question": "How much land is protected?",
                      "user_message_this_turn": "How much land is protected?", "tool_results_this_turn": None})
        lines.append({"timestamp": stamp(t + 1), "type": "response", **common, "latency_ms": 900,
                      "has_content": True, "has_tool_calls": False, "has_reasoning_content": False,
                      "content": "About 30%.", "reasoning_content": "", "content_preview": "About 30%.",
                      "reasoning_content_preview": "",
                      "tokens": {"prompt_tokens": 9000, "total_tokens": 9050, "completion_tokens": 50,
                                 "prompt_tokens_details": None}})
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in lines))
    return Path(path)


def names_asked(query: str) -> list[str]:
    """The metric names a PromQL selector asks for: ``up{...}`` or ``{__name__=~"a|b",...}``."""
    m = re.match(r'\{__name__=~"([^"]+)"', query)
    if m:
        return [re.sub(r"\\(.)", r"\1", n) for n in m.group(1).split("|")]
    return [query.split("{")[0]]


@contextmanager
def serve(spec: Spec, *, ignore_range: bool = False, port: int = 0) -> Iterator[str]:
    """A loopback Prometheus answering ``query_range`` from ``spec`` (chunked, never held whole); yields its URL.

    ``stats["queries"]`` of the server counts the queries and ``stats["bytes"]`` what was sent.
    """
    stats = {"queries": 0, "bytes": 0}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802
            url = urlparse(self.path)
            if not url.path.endswith("/api/v1/query_range"):
                self.send_error(404)
                return
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            names = set(names_asked(q.get("query", "")))
            rng = (None, None, None) if ignore_range else (float(q["start"]), float(q["end"]), float(q["step"]))
            stats["queries"] += 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                buf, held = [], 0
                for chunk in answer_chunks(spec, names, *rng):
                    buf.append(chunk)
                    held += len(chunk)
                    if held >= 1 << 20:
                        self._send(b"".join(buf))
                        buf, held = [], 0
                if buf:
                    self._send(b"".join(buf))
                self.wfile.write(b"0\r\n\r\n")
            except OSError:  # the client hung up (a refused answer)
                self.close_connection = True

        def _send(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            stats["bytes"] += len(data)

        def log_message(self, *args) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address) -> None:  # a client that hung up: not news
            import sys

            if not isinstance(sys.exc_info()[1], OSError):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", port), Handler)
    server.stats = stats  # type: ignore[attr-defined]
    with serving(server) as url:
        yield url


def parse_size(text: str) -> int:
    """``100MB``, ``20M``, ``1.5GB``, ``4096`` as bytes (powers of 1024)."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmg]?)i?b?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return round(float(m.group(1)) * 1024 ** " kmg".index(m.group(2) or " "))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bytes", type=parse_size, default=parse_size("100MB"))
    ap.add_argument("--out", help="write the answer to this file")
    ap.add_argument("--logs", help="write a few proxy log records inside the span to this file")
    ap.add_argument("--serve", type=int, metavar="PORT", help="serve it on 127.0.0.1:PORT until interrupted")
    args = ap.parse_args()
    spec = spec_for_bytes(args.bytes)
    print(f"{spec.pods} pods, {spec.series} series x {spec.points} points = {spec.samples:,} samples, "
          f"{spec.t0}..{spec.end} step {spec.step}s")
    if args.out:
        print(f"{args.out}: {write_answer(args.out, spec):,} bytes")
    if args.logs:
        print(f"{write_logs(args.logs, spec)}: a few log records inside the span")
    if args.serve is not None:
        with serve(spec, port=args.serve) as url:
            print(f"serving {url}/api/v1/query_range (Ctrl-C to stop)")
            threading.Event().wait()


if __name__ == "__main__":
    main()
