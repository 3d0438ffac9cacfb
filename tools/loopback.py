"""Loopback servers of the tests and tools: a free TCP port on 127.0.0.1, and an HTTP server served on a thread."""

from __future__ import annotations

import socket
import threading
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Iterator


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(server: ThreadingHTTPServer, *, poll_interval: float = 0.01) -> Iterator[str]:
    """Serve ``server`` (bound on 127.0.0.1) on a daemon thread; yield its URL; shut it down and close it after.

    Its handler threads are daemons too, so a client that hangs does not hold the
    process. ``shutdown()`` waits up to one ``poll_interval``.
    """
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
