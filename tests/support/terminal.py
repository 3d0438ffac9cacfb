"""Running the real ``analyze`` command on a real pseudo-terminal (python's pty module)."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def analyze_on_pty(*args: str, cols: int = 80, rows: int = 60, env: dict | None = None,
                   timeout: float = 120) -> tuple[int, str]:
    """Run ``python -m analyzer.cli.app ARGS`` with stdin/stdout/stderr on a pty of ``cols`` columns.

    Returns the exit code and everything the terminal received (escapes included).
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    full_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    full_env.update({"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", **(env or {})})
    proc = subprocess.Popen([sys.executable, "-m", "analyzer.cli.app", *args], stdin=slave, stdout=slave,
                            stderr=slave, env=full_env, close_fds=True, cwd=ROOT)
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")
