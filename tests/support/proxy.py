"""A real, minimal ladder proxy: FastAPI + httpx + ``analyzer.online``, on loopback.

The app (:func:`create_app`) is the integration example of the README section
"Using the ladder in your proxy", verbatim: the code between the ``README
example`` markers below is what the README shows, and a test checks the two
stay identical. Every end-to-end test therefore runs the documented example.

It forwards ``POST /v1/chat/completions`` to one upstream through
:func:`analyzer.online.arun_ladder`, passes the answer on (the upstream status
included: the client of an exhausted ladder sees the original 500), and appends
a ``request`` and a ``response`` record per call to a JSONL file, in the real
proxy's record shape (proxy-log-format.md) merged with
:func:`analyzer.online.log_fields`.

:class:`LadderProxy` serves the app with uvicorn in a background thread on a free
127.0.0.1 port (context manager)::

    with FaultyUpstream(script) as upstream, \
            LadderProxy(upstream.chat_url, tmp_path / "log.jsonl") as proxy:
        httpx.post(proxy.chat_url, json=payload)
        proxy.responses()  # the response records written so far
"""

from __future__ import annotations

import json as _json
import threading
import time as _time
from pathlib import Path
from typing import Callable

import uvicorn

# --- README example: begin ---
import json
import time
import uuid
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from analyzer.online import (
    ThinkingBudgetError,
    arun_ladder,
    log_fields,
    normalize_thinking,
    validate_thinking_budget,
)

KEPT_HEADERS = ("retry-after", "x-ratelimit-remaining", "x-request-id", "server", "date", "content-length")


def answer_fields(status: int, headers: Any, body: bytes) -> dict:
    """What the proxy's response record already says about an upstream answer."""
    if not 200 <= status < 300:
        kept = {k: headers[k] for k in KEPT_HEADERS if k in headers}
        return {"error": f"Provider returned {status}: {body.decode(errors='replace')[:1000]}",
                **({"upstream_headers": kept} if kept else {})}
    doc = json.loads(body)
    msg = (doc.get("choices") or [{}])[0].get("message") or {}
    reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
    content = msg.get("content") or ""
    out = {"has_content": bool(content), "has_tool_calls": bool(msg.get("tool_calls")),
           "has_reasoning_content": bool(reasoning), "content": content, "content_preview": content[:200],
           "reasoning_content_preview": reasoning[:200]}
    if msg.get("tool_calls"):
        out["tool_calls"] = [{"name": c["function"]["name"], "arguments": c["function"].get("arguments", "")}
                             for c in msg["tool_calls"]]
    if "usage" in doc:
        out["tokens"] = doc["usage"]
    return out


def create_app(upstream_url: str, log_path: str, *, flatten: bool = False, length_recovery: bool = False,
               max_attempts: int = 4, time_budget_s: float = 60.0, answer_reserve: int = 256,
               timeout_s: float = 600.0) -> FastAPI:
    """A proxy that runs every chat completion through the fallback ladder."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            app.state.http = client
            yield

    app = FastAPI(lifespan=lifespan)

    def write(record: dict) -> None:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"timestamp": now, **record}) + "\n")

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        started = time.monotonic()
        enabled = body.pop("enable_thinking", None)  # the client's switch, not an upstream field
        ids = {"type": "request", "request_id": uuid.uuid4().hex[:8], "session_id": body.pop("user", None),
               "client": request.headers.get("x-client"), "provider": "nrp", "model": body.get("model"),
               "origin": request.headers.get("origin")}
        messages = body.get("messages") or []
        write({**ids, "message_count": len(messages), "tools_count": len(body.get("tools") or []),
               "enable_thinking": enabled})
        ids["type"] = "response"

        def log_response(fields: dict, extra: dict) -> None:
            write({**ids, "latency_ms": int((time.monotonic() - started) * 1000), **fields, **extra})

        # 1. Normalize before any model call: thinking keys, then the budget contract.
        payload = normalize_thinking(body, body.get("model") or "", enabled)
        try:
            validate_thinking_budget(payload.get("thinking_token_budget"), payload.get("max_tokens"),
                                     answer_reserve)
        except ThinkingBudgetError as exc:  # refused here: no upstream status, class client-error
            log_response({"error": f"{type(exc).__name__}: {exc}"}, log_fields(payload, None, None, error=exc))
            return JSONResponse({"error": {"message": str(exc), "param": exc.field}}, status_code=400)

        # 2. The ladder: `send` is the only transport code.
        async def send(p: dict):
            r = await app.state.http.post(upstream_url, json=p)
            return r.status_code, r.headers, r.content

        try:
            ladder = await arun_ladder(payload, send, flatten=flatten, length_recovery=length_recovery,
                                       max_attempts=max_attempts, time_budget_s=time_budget_s,
                                       answer_reserve=answer_reserve)
        except httpx.HTTPError as exc:  # the original call failed in transport
            ms = int((time.monotonic() - started) * 1000)
            timed_out = isinstance(exc, httpx.TimeoutException)
            text = f"Request timed out after {ms}ms" if timed_out else f"{type(exc).__name__}: {exc}"
            log_response({"error": text}, log_fields(payload, None, None, error=exc))
            return JSONResponse({"error": {"message": text}}, status_code=504 if timed_out else 502)

        # 3. Pass the answer on; log it with the ladder's fields merged in.
        log_response(answer_fields(ladder.status, ladder.headers, ladder.body),
                     log_fields(payload, ladder.status, ladder.body, ladder))
        return Response(ladder.body, status_code=ladder.status, media_type=ladder.headers.get("content-type"))

    return app
# --- README example: end ---


class LadderProxy:
    """Serve :func:`create_app` with uvicorn on 127.0.0.1 in a background thread.

    ``options`` go to the app factory (``flatten``, ``max_attempts``, ...);
    ``app_factory`` defaults to :func:`create_app`.
    """

    def __init__(self, upstream_url: str, log_path: str | Path, *,
                 app_factory: Callable[..., FastAPI] | None = None, **options: Any):
        self.upstream_url = upstream_url
        self.log_path = Path(log_path)
        self.app = (app_factory or create_app)(upstream_url, str(self.log_path), **options)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    def start(self, timeout_s: float = 20.0) -> "LadderProxy":
        """Start serving; return once uvicorn has bound its socket and run startup."""
        if self._server is not None:
            return self
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning",
                                access_log=False, lifespan="on")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="ladder-proxy", daemon=True)
        thread.start()
        deadline = _time.monotonic() + timeout_s
        while not server.started:  # readiness: uvicorn sets this after binding
            if not thread.is_alive():
                raise RuntimeError("the proxy failed to start")
            if _time.monotonic() > deadline:
                server.should_exit = True
                raise TimeoutError("the proxy did not start in time")
            _time.sleep(0.005)
        self._port = server.servers[0].sockets[0].getsockname()[1]
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Ask uvicorn to exit (runs the app's shutdown) and wait for the thread."""
        if self._server is None:
            return
        self._server.should_exit = True
        assert self._thread is not None
        self._thread.join(timeout=10)
        alive = self._thread.is_alive()
        self._server = self._thread = None
        if alive:
            raise RuntimeError("the proxy did not stop within 10 s")

    def __enter__(self) -> "LadderProxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        if self._port is None:
            raise RuntimeError("proxy is not running")
        return f"http://127.0.0.1:{self._port}"

    @property
    def chat_url(self) -> str:
        """The chat-completions endpoint."""
        return f"{self.url}/v1/chat/completions"

    def records(self) -> list[dict]:
        """Every JSONL record written so far, in order."""
        if not self.log_path.exists():
            return []
        with self.log_path.open(encoding="utf-8") as f:
            return [_json.loads(line) for line in f if line.strip()]

    def responses(self) -> list[dict]:
        """The ``response`` records written so far."""
        return [r for r in self.records() if r.get("type") == "response"]


def readme_example_source() -> str:
    """The README example: this module's text between the markers."""
    text = Path(__file__).read_text(encoding="utf-8")
    begin = text.index("# --- README example: begin ---\n") + len("# --- README example: begin ---\n")
    end = text.index("# --- README example: end ---")
    return text[begin:end]
