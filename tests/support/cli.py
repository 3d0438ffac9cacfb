"""``analyze`` run in this process for the tests: arguments in, exit code and output out.

A subprocess costs an interpreter start and the imports on every call (most of a
second); most tests check what a command prints and its exit code, which the same
code gives in process: :func:`analyze` calls :func:`analyzer.cli.app.main` with the
arguments, stdout and stderr captured as text (not a terminal: the piped layout),
the working directory and environment as asked, and returns what
``subprocess.run(..., capture_output=True, text=True)`` would. The command line
installs its interrupt handler and restores it on the way out
(:func:`analyzer.cli.exits.guarded`), so nothing of one run is left for the next.

Tests where the process itself is under test (signals, a killed run, import time,
a closed pipe, a terminal) still start one: ``python -m analyzer.cli.app``, or
:func:`tests.support.terminal.analyze_on_pty`; :func:`wait_until_open` times a
signal to such a process by what it does, not by a sleep.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
import typing
from pathlib import Path
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from typing import Iterator


@dataclass
class Ran:
    """What one command did: as a ``subprocess.CompletedProcess`` of it reads."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    env: dict = field(default_factory=dict, repr=False)


class _Text(io.StringIO):
    """Captured output that says its encoding, as a pipe's text stream does."""

    encoding = "utf-8"


def analyze(*args: str | os.PathLike, cwd: str | os.PathLike | None = None, env: dict | None = None,
            input: str | None = None, stdin: typing.IO | None = None, **_ignored) -> Ran:
    """Run ``analyze ARGS`` here; ``env`` replaces the environment for the run (as subprocess's ``env=``),
    ``input`` is stdin's text, or ``stdin`` the file standard input is (:func:`pipe_of`: a real pipe).
    Keyword arguments a ``subprocess.run`` call would take (``timeout``...) are accepted and ignored."""
    from analyzer.cli.app import main

    argv = [str(a) for a in args]
    out, err = _Text(), _Text()
    saved_env, saved_cwd, saved_stdin = dict(os.environ), os.getcwd(), sys.stdin
    code = 0
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update({k: str(v) for k, v in env.items()})
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = stdin if stdin is not None else io.TextIOWrapper(io.BytesIO((input or "").encode()), encoding="utf-8")
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(argv)
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.stdin = saved_stdin
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return Ran(argv, code, out.getvalue(), err.getvalue())


@contextmanager
def pipe_of(data: bytes) -> Iterator[typing.IO]:
    """Standard input as a pipe gives it (a real one: no seeking, read through its descriptor) holding ``data``.

    A thread writes ``data`` and closes the writing end, so the reader sees the end of input; the
    reading end is closed on the way out."""
    read_fd, write_fd = os.pipe()

    def write() -> None:
        with os.fdopen(write_fd, "wb") as w:
            try:
                w.write(data)
            except BrokenPipeError:  # the reader stopped early: what it read is the test's to judge
                pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with os.fdopen(read_fd, "r", encoding="utf-8") as r:
        try:
            yield r
        finally:
            r.close()  # before joining: a writer blocked on a full pipe gets its broken pipe
            writer.join(timeout=30)


def one_error_line(ran: Ran) -> str:
    """The single ``analyze: error: ...`` line of a failed command (asserting it is the only line)."""
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("analyze: error: "), ran.stderr
    return lines[0]




def wait_until_open(proc: subprocess.Popen, path: Path, timeout: float = 60) -> None:
    """Wait until the process holds ``path`` open (a link in /proc/PID/fd): its imports are done and
    its interrupt handler installed. A fixed sleep instead waited longer than needed or, on a loaded
    machine (or a first run that compiles the bytecode), signalled an interpreter still importing."""
    deadline, target = time.monotonic() + timeout, os.path.realpath(path)  # /proc's links are real paths
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the process ended ({proc.returncode}) before it opened {path}"
        for fd in Path(f"/proc/{proc.pid}/fd").iterdir():
            try:
                if os.readlink(fd) == target:
                    return
            except OSError:  # closed meanwhile
                continue
        time.sleep(0.01)
    raise AssertionError(f"the process never opened {path}")
