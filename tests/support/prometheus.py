"""Prometheus for the tests: Debian's binaries (skip without them, fail under CI), a real server, fake HTTP endpoints.

:func:`prometheus_binary` and :func:`tool` find the ``prometheus`` package's binaries;
:func:`promtool` runs ``promtool``; :func:`prometheus_running` serves a real Prometheus
on 127.0.0.1 with scrape configs (:func:`tools.prometheus_process.prometheus_process`);
:func:`http_server` is a loopback HTTP server answering every GET with a function (a fake
exporter, or a fake Prometheus API).
"""

from __future__ import annotations

import shutil
import subprocess
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.support.services import under_ci
from tools.loopback import serving
from tools.prometheus_process import prometheus_process

Handler = Callable[[BaseHTTPRequestHandler], tuple[int, str, str]]  # -> (status, content type, body)


@contextmanager
def http_server(handle: Handler) -> Iterator[str]:
    """A threaded HTTP server on 127.0.0.1 answering every GET with ``handle``; yields its URL."""

    class _Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            status, ctype, body = handle(self)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:  # keep test output clean
            pass

    class _Server(ThreadingHTTPServer):
        def handle_error(self, request, client_address) -> None:
            pass  # a client that gave up (the timeout tests) closes the socket mid-answer: not news

    with serving(_Server(("127.0.0.1", 0), _Handler)) as url:
        yield url


def prometheus_binary() -> str:
    """The prometheus binary; skip without it, unless under CI, where that is a failure."""
    return tool("prometheus")


@contextmanager
def prometheus_running(binary: str, workdir: Path, scrape_configs: str) -> Iterator[str]:
    """Run Prometheus on 127.0.0.1 with these ``scrape_configs`` (YAML list items), 1 s interval; yield its URL."""
    config = "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n" + scrape_configs
    with prometheus_process(binary, config, workdir) as url:
        yield url


def tool(name: str) -> str:
    """A binary of Debian's prometheus package; skip without it, unless under CI, where that is a failure."""
    path = shutil.which(name)
    if path:
        return path
    if under_ci():
        pytest.fail(f"{name} is missing under CI: .ci/run must `apt-get install prometheus`")
    pytest.skip(f"{name} is not installed (apt-get install prometheus)")


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``promtool ARGS`` run in ``cwd``, its output captured as text."""
    return subprocess.run([tool("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120)
