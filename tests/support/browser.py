"""A real headless Chromium for the report's tests, offline, and the checks every rendered report must pass.

Chromium (Debian's ``chromium`` package) is driven with the Chrome DevTools
Protocol over ``--remote-debugging-pipe``: the same protocol as
``--remote-debugging-port``, spoken over two inherited file descriptors, so no
websocket package is needed and no debugging port listens on a shared machine.
Networking is off (a dead proxy and a resolver that resolves nothing): the page
must draw everything from the one file. :func:`require_chromium` finds the browser
(skip without it, fail under CI), :func:`open_report` opens a report in it, and
:func:`check_page` checks what every report must satisfy in the browser.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.services import under_ci

BASH = shutil.which("bash") or "/bin/bash"
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
#: Generous: a shared 2-core machine; this bounds a hang, it is not a timing assertion.
CDP_TIMEOUT_S = 120


def find_chromium() -> str | None:
    """The Chromium binary: $CHROMIUM, Debian's /usr/bin/chromium, or one on PATH."""
    env = os.environ.get("CHROMIUM")
    if env and Path(env).exists():
        return env
    for path in CHROMIUM_CANDIDATES:
        if Path(path).exists():
            return path
    return shutil.which("chromium") or shutil.which("chromium-browser")


def require_chromium() -> str:
    """The Chromium binary; skip without it, but fail under CI (a missing browser is a broken CI)."""
    path = find_chromium()
    if path is None:
        if under_ci():
            pytest.fail("chromium is not installed (apt-get install chromium); required under CI")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


class Chrome:
    """A headless Chromium and a minimal CDP client over --remote-debugging-pipe.

    Chromium reads commands from fd 3 and writes answers and events to fd 4, each
    message a JSON object followed by a NUL byte.
    """

    def __init__(self, binary: str, profile: Path):
        cmd_read, self._cmd_write = os.pipe()
        self._res_read, res_write = os.pipe()
        # The child's ends move above fd 9 first, so that placing them on 3 and 4 cannot clobber them.
        cmd_read, res_write = (self._above_nine(cmd_read), self._above_nine(res_write))
        args = [
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--disable-background-networking", "--no-first-run", "--disable-component-update", "--disable-sync",
            "--disable-extensions", "--no-default-browser-check", "--mute-audio", "--hide-scrollbars",
            f"--user-data-dir={profile}",
            # networking off: every proxied request goes to a closed port, no name resolves
            "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--remote-debugging-pipe", "about:blank",
        ]
        # bash puts the pipe ends on fds 3 and 4 and execs chromium (not preexec_fn: it is
        # unsafe while threads run, and an earlier browser's reader threads may; not dash:
        # it cannot redirect from fds above 9).
        wire = f'exec "$0" "$@" 3<&{cmd_read} 4>&{res_write} {cmd_read}<&- {res_write}>&-'
        self.proc = subprocess.Popen([BASH, "-c", wire, *args], pass_fds=(cmd_read, res_write),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(cmd_read)
        os.close(res_write)
        self._next_id = 0
        self._answers: dict[int, queue.Queue] = {}
        self._lock = threading.Lock()
        self.events: list[dict[str, Any]] = []
        self._event_queue: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        self._stderr: list[bytes] = []
        threading.Thread(target=lambda: self._stderr.extend(self.proc.stderr), daemon=True).start()

    @staticmethod
    def _above_nine(fd: int) -> int:
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return moved

    def _read_loop(self) -> None:
        buf = b""
        while True:
            chunk = os.read(self._res_read, 1 << 16)
            if not chunk:
                os.close(self._res_read)
                break
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        q = self._answers.setdefault(msg["id"], queue.Queue())
                    q.put(msg)
                else:
                    self.events.append(msg)
                    self._event_queue.put(msg)
                    if msg["method"] == "Page.javascriptDialogOpening":
                        # A dialog blocks the page: record it (the checks fail on it), then dismiss it.
                        self._post("Page.handleJavaScriptDialog", {"accept": False}, msg.get("sessionId"))

    def _post(self, method: str, params: dict | None = None, session: str | None = None) -> queue.Queue:
        """Send one command without waiting; the answer arrives on the returned queue."""
        with self._lock:
            self._next_id += 1
            mid = self._next_id
            q = self._answers.setdefault(mid, queue.Queue())
            msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
            if session:
                msg["sessionId"] = session
            os.write(self._cmd_write, json.dumps(msg).encode() + b"\0")
        return q

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        """Send one command and wait for its answer; raise on a protocol error."""
        q = self._post(method, params, session)
        try:
            answer = q.get(timeout=CDP_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"no answer to {method}; chromium stderr: {b''.join(self._stderr)[-2000:]!r}")
        if "error" in answer:
            raise AssertionError(f"{method} failed: {answer['error']}")
        return answer.get("result", {})

    def wait_event(self, method: str, session: str | None = None) -> dict:
        """Wait for the next event named ``method`` (earlier ones included)."""
        for event in list(self.events):
            if event["method"] == method and (session is None or event.get("sessionId") == session):
                event["_seen"] = True
                return event
        while True:
            try:
                event = self._event_queue.get(timeout=CDP_TIMEOUT_S)
            except queue.Empty:
                raise AssertionError(f"no {method} event")
            if event["method"] == method and (session is None or event.get("sessionId") == session):
                return event

    def open_page(self, url: str, width: int = 1280, height: int = 900) -> "Page":
        """A new tab with console, log, network and dialog events on, showing ``url``."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        page.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        page.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", session)
        return page

    def close(self) -> None:
        """Ask the browser to quit, then make sure it did."""
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_write)


class Page:
    """One attached tab."""

    def __init__(self, chrome: Chrome, session: str):
        self.chrome = chrome
        self.session = session

    def send(self, method: str, params: dict | None = None) -> dict:
        return self.chrome.send(method, params, self.session)

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page; return its JSON value."""
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise AssertionError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def events(self, method: str) -> list[dict]:
        return [e for e in self.chrome.events if e["method"] == method and e.get("sessionId") == self.session]

    def screenshot(self, path: Path, *, full_page: bool = True, max_height: int | None = None,
                   scale: float = 1.0) -> Path:
        """A PNG of the page (the whole page, or its top ``max_height`` CSS pixels)."""
        metrics = self.send("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        height = size["height"] if full_page else 900
        if max_height:
            height = min(height, max_height)
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": size["width"], "height": height, "scale": scale}})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


def console_errors(page: Page) -> list[str]:
    """Console errors, uncaught exceptions and browser log errors of a page."""
    errors = []
    for e in page.events("Runtime.consoleAPICalled"):
        if e["params"]["type"] in ("error", "assert"):
            errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in e["params"]["args"]))
    for e in page.events("Runtime.exceptionThrown"):
        errors.append("exception: " + json.dumps(e["params"]["exceptionDetails"])[:500])
    for e in page.events("Log.entryAdded"):
        if e["params"]["entry"]["level"] == "error":
            errors.append("log: " + e["params"]["entry"]["text"])
    return errors


# ---------------------------------------------------------------------------
# The checks, shared by the fixture week and the sample week

DRAWN_CHARTS_JS = """
Array.from(document.querySelectorAll('figure.chart .plot')).map(el => ({
    id: el.id,
    drawn: el.classList.contains('js-plotly-plot') && el.querySelectorAll('.main-svg').length > 0,
    traces: el.querySelectorAll('.main-svg .trace, .main-svg .bars, .main-svg .scatter').length,
    width: el.getBoundingClientRect().width,
}))
"""

TABLE_JS = """
(function (sel) {
    const t = document.querySelector(sel);
    if (!t) return null;
    return Array.from(t.querySelectorAll('tr')).map(tr =>
        Array.from(tr.querySelectorAll('th, td')).map(c => c.innerText.trim()));
})(%s)
"""


def table(page: Page, selector: str) -> list[list[str]] | None:
    """A table's cells as text, row by row (None when there is no such table)."""
    return page.evaluate(TABLE_JS % json.dumps(selector))


def open_report(chromium_path: str, html: Path, tmp_path: Path) -> tuple[Chrome, Page]:
    """A headless Chromium (its profile under ``tmp_path``) showing the report ``html``, and its page."""
    chrome = Chrome(chromium_path, tmp_path / "profile")
    try:
        page = chrome.open_page(html.resolve().as_uri())
    except BaseException:
        chrome.close()
        raise
    return chrome, page


def check_page(page: Page, html: Path) -> list[dict]:
    """What every rendered report must satisfy in the browser; returns the charts."""
    # plotly draws synchronously inside newPlot, but wait for a frame to be safe.
    page.evaluate("new Promise(r => requestAnimationFrame(() => r(true)))")
    assert console_errors(page) == []
    assert page.events("Page.javascriptDialogOpening") == [], "a script from the log content ran"
    charts = page.evaluate(DRAWN_CHARTS_JS)
    assert charts, "no charts in the page"
    assert [c["id"] for c in charts if not c["drawn"]] == [], "charts not drawn"
    assert all(c["width"] > 100 for c in charts)
    # Offline and self-contained: nothing but the file itself (and data: URLs) was requested.
    urls = {e["params"]["request"]["url"] for e in page.events("Network.requestWillBeSent")}
    assert {u for u in urls if not (u.startswith("file://") or u.startswith("data:"))} == set()
    assert page.events("Network.loadingFailed") == []
    # Only our scripts exist: plotly.js, the drawChart helper and one call per chart.
    scripts = page.evaluate("Array.from(document.scripts).map(s => s.src || s.text.slice(0, 40))")
    assert all(s.startswith(("drawChart(", "\nfunction drawChart", "/**")) or "plotly" in s.lower() for s in scripts), scripts
    assert len(scripts) == 2 + len(charts)
    assert page.evaluate("document.querySelectorAll('[onerror], [onload], [onclick], img, iframe').length") == 0
    ids = page.evaluate("Array.from(document.querySelectorAll('[id]')).map(e => e.id)")
    assert len(ids) == len(set(ids)), "duplicate element ids"
    # Every in-page link leads somewhere.
    assert page.evaluate("Array.from(document.querySelectorAll('a[href^=\"#\"]'))"
                         ".every(a => document.getElementById(a.getAttribute('href').slice(1)))")
    return charts
