"""A command's own peak RSS, however big the test process that starts it.

Linux counts a forked child's resident pages from before its ``exec`` in the
child's ``ru_maxrss``: a child of a pytest process that has grown to 800 MB
reports at least 800 MB whatever it does itself. So the command is started by a
small launcher (a fresh interpreter, a few MB), which forks and execs it, waits
for it with ``wait4`` and writes its peak RSS in bytes to a file.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

_LAUNCHER = """
import os, sys
out, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
with open(out, "w") as f:
    f.write(str(usage.ru_maxrss * 1024))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_with_peak_rss(argv: list[str], **popen) -> tuple[subprocess.CompletedProcess, int]:
    """Run ``argv`` (an executable path first) to the end: its completed process and its own peak RSS in bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rss"
        done = subprocess.run([sys.executable, "-c", _LAUNCHER, str(out), *argv],
                              capture_output=True, **popen)
        return done, int(out.read_text()) if out.exists() else 0
