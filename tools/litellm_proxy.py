"""A real LiteLLM proxy on 127.0.0.1: the ``litellm`` command of this environment, with a config.

:class:`LiteLLMProxy` starts it on a free loopback port with a master key of its
own and stops it; tests/e2e/test_litellm.py and tools/litellm_week.py drive it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tools.loopback import free_port


def litellm_command() -> list[str]:
    """The ``litellm`` command of this environment (the test extra's pin)."""
    exe = shutil.which("litellm") or str(Path(sys.executable).with_name("litellm"))
    return [exe]


class LiteLLMProxy:
    """``litellm --config CONFIG`` on a free loopback port, with a master key of its own (context manager).

    ``env`` is added to the process's environment (S3 credentials, the flush
    interval). Its output goes to ``log`` (shown by :meth:`tail` when a test fails).
    """

    def __init__(self, config: Path, env: dict[str, str] | None = None, log: Path | None = None,
                 start_timeout_s: float = 120.0):
        self.config = config
        self.port = free_port()
        self.key = "sk-" + secrets.token_hex(24)
        self.log = log or config.with_suffix(".log")
        self.start_timeout_s = start_timeout_s
        self.env = {**os.environ, "LITELLM_MASTER_KEY": self.key,
                    # the model cost map from the wheel: no download at start-up
                    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                    # analyzer.integrations from this checkout, wherever the test runs
                    "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                   os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                    **(env or {})}
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "LiteLLMProxy":
        out = open(self.log, "wb")
        self.process = subprocess.Popen(
            [*litellm_command(), "--config", str(self.config), "--port", str(self.port), "--host", "127.0.0.1"],
            env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=str(self.config.parent))
        out.close()
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"litellm exited with {self.process.returncode}:\n{self.tail()}")
            try:
                if httpx.get(f"{self.url}/health/liveliness", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"litellm did not start in {self.start_timeout_s:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self.process = None

    def tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def chat(self, body: dict, timeout: float = 60.0) -> httpx.Response:
        """POST /v1/chat/completions with the master key."""
        return httpx.post(f"{self.url}/v1/chat/completions", json=body, timeout=timeout,
                          headers={"Authorization": f"Bearer {self.key}"})

    def __enter__(self) -> "LiteLLMProxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
