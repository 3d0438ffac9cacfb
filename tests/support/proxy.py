"""A real, minimal ladder proxy: FastAPI + httpx + ``analyzer.online``, on loopback.

The app (:func:`create_app`) is the integration example of the proxy guide,
``analyzer/online/README.md``, verbatim: the code between the ``README
example`` markers below is what the guide shows, and a test checks the two
stay identical. Every end-to-end test therefore runs the documented example.

It forwards ``POST /v1/chat/completions`` to one upstream through
:func:`analyzer.online.arun_ladder`, passes the answer on (the upstream status
included: the client of an exhausted ladder sees the original 500), and appends
a ``request`` and a ``response`` record per call to a JSONL file, in the real
proxy's record shape (docs/log-format.md) merged with
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
    ClientRequestError,
    arun_ladder,
    log_fields,
    normalize_thinking,
    validate_thinking_budget,
)

KEPT_HEADERS = ("retry-after", "x-ratelimit-remaining", "x-request-id", "server", "date", "content-length")


def answer_fields(status: int, headers: Any, body: bytes) -> dict:
    """What the proxy's response record already says about an upstream answer.

    The upstream controls every byte of it, so nothing here may raise.
    """
    if not 200 <= status < 300:
        kept = {k: headers[k] for k in KEPT_HEADERS if k in headers}
        return {"error": f"Provider returned {status}: {body.decode(errors='replace')[:1000]}",
                **({"upstream_headers": kept} if kept else {})}
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # an empty or non-JSON 200: the client gets a 502
        return {"error": f"{type(exc).__name__}: {exc}"[:1000]}
    choices = doc.get("choices") if isinstance(doc, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return {}  # a 200 with no usable answer (choices: [], an error object): nothing to describe
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        return {}
    text = lambda v: v if isinstance(v, str) else ""  # noqa: E731 - content can be anything
    content, reasoning = text(msg.get("content")), text(msg.get("reasoning_content") or msg.get("reasoning"))
    calls = [c for c in msg.get("tool_calls") or [] if isinstance(c, dict)] \
        if isinstance(msg.get("tool_calls"), list) else []
    out = {"has_content": bool(content), "has_tool_calls": bool(calls),
           "has_reasoning_content": bool(reasoning), "content": content, "content_preview": content[:200],
           "reasoning_content": reasoning[:4000], "reasoning_content_preview": reasoning[:200]}
    if calls:
        fns = [c["function"] if isinstance(c.get("function"), dict) else {} for c in calls]
        out["tool_calls"] = [{"name": text(f.get("name")), "arguments": text(f.get("arguments"))} for f in fns]
    if isinstance(doc.get("usage"), dict):
        out["tokens"] = doc["usage"]
    return out


def create_app(upstream_url: str, log_path: str, *, flatten: bool = False, length_recovery: bool = False,
               max_attempts: int | None = None, time_budget_s: float = 60.0, caller_deadline_s: float = 300.0,
               answer_reserve: int = 256, timeout_s: float = 600.0, connect_timeout_s: float = 30.0) -> FastAPI:
    """A proxy that runs every chat completion through the fallback ladder."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s)) as client:
            app.state.http = client
            yield

    app = FastAPI(lifespan=lifespan)

    def write(record: dict) -> None:
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"timestamp": now, **record}) + "\n")

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        started = time.monotonic()
        try:
            body = await request.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):  # request validation: like the real proxy, no record
            return JSONResponse({"error": {"message": "the request must be a JSON object"}}, status_code=400)
        enabled = body.pop("enable_thinking", None)  # the client's switch, not an upstream field
        ids = {"type": "request", "request_id": uuid.uuid4().hex[:8], "session_id": body.pop("user", None),
               "client": request.headers.get("x-client"), "provider": "nrp", "model": body.get("model"),
               "origin": request.headers.get("origin")}
        count = lambda v: len(v) if isinstance(v, list) else 0  # noqa: E731
        write({**ids, "message_count": count(body.get("messages")), "tools_count": count(body.get("tools")),
               "enable_thinking": enabled})
        ids["type"] = "response"

        def log_response(fields: dict, payload: dict, status, answer, ladder=None, error=None) -> None:
            ms = int((time.monotonic() - started) * 1000)
            extra = log_fields(payload, status, answer, ladder, error=error, latency_ms=ms,
                               caller_deadline_s=caller_deadline_s)
            write({**ids, "latency_ms": ms, **fields, **extra})

        # 1. Normalize before any model call: thinking keys, then the budget contract.
        try:
            payload = normalize_thinking(body, body.get("model") or "", enabled)
            validate_thinking_budget(payload.get("thinking_token_budget"), payload.get("max_tokens"),
                                     answer_reserve)
        except ClientRequestError as exc:  # refused here: no upstream status, class client-error
            log_response({"error": f"{type(exc).__name__}: {exc}"}, body, None, None, error=exc)
            return JSONResponse({"error": {"message": str(exc), "param": exc.field}}, status_code=400)

        # 2. The ladder: `send` is the only transport code.
        async def send(p: dict):
            r = await app.state.http.post(upstream_url, json=p)
            return r.status_code, r.headers, r.content

        try:
            ladder = await arun_ladder(payload, send, flatten=flatten, length_recovery=length_recovery,
                                       max_attempts=max_attempts, time_budget_s=time_budget_s,
                                       answer_reserve=answer_reserve, deadline=started + caller_deadline_s)
        except httpx.HTTPError as exc:  # the original call failed in transport
            ms = int((time.monotonic() - started) * 1000)
            timed_out = isinstance(exc, httpx.TimeoutException)
            text = f"Request timed out after {ms}ms" if timed_out else f"{type(exc).__name__}: {exc}"
            log_response({"error": text}, payload, None, None, error=exc)
            return JSONResponse({"error": {"message": text}}, status_code=504 if timed_out else 502)

        # 3. Pass the answer on; log it with the ladder's fields merged in.
        fields = answer_fields(ladder.status, ladder.headers, ladder.body)
        log_response(fields, payload, ladder.status, ladder.body, ladder)
        if 200 <= ladder.status < 300 and "error" in fields:  # a 200 that is not JSON
            return JSONResponse({"error": {"message": fields["error"]}}, status_code=502)
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
