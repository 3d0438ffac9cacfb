"""A real Prometheus server on 127.0.0.1 for as long as a block runs (tests and tools).

    with prometheus_process("/usr/bin/prometheus", config_yaml, workdir) as url:
        ...  # url answers /-/ready

The server writes its log beside the config in ``workdir``; a server that exits or is
not ready within 30 s raises RuntimeError with the log's tail. Stopped (terminated,
then killed) when the block ends.
"""

from __future__ import annotations

import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import httpx

from tools.loopback import free_port


@contextmanager
def prometheus_process(binary: str, config: str, workdir: Path, *, data: Path | None = None,
                       args: Iterable[str] = ()) -> Iterator[str]:
    """Run ``binary`` with the YAML ``config`` (TSDB in ``data``, default ``workdir/data``) and
    the extra command-line ``args``; yield its URL once it is ready."""
    port = free_port()
    config_path = workdir / f"prometheus-{port}.yml"
    config_path.write_text(config)
    log_path = workdir / f"prometheus-{port}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [binary, f"--config.file={config_path}", f"--storage.tsdb.path={data or workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn", *args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"prometheus exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
                try:
                    if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"prometheus did not become ready in 30 s: {log_path.read_text()[-2000:]}")
                time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
