"""A real, minimal ladder proxy: FastAPI + httpx + pydantic + ``analyzer.online``, on loopback.

The app (:func:`create_app`) is the integration example of the proxy guide,
``analyzer/online/README.md``, verbatim: the code between the ``README
example`` markers below is what the guide shows, and a test checks the two
stay identical. Every end-to-end test therefore runs the documented example.

It has the real proxy's seams (boettiger-lab/open-llm-proxy, ``llm_proxy.py``),
so the tests guard the same places a patch to it touches: a pydantic
``ChatRequest`` that drops unknown fields (the raw body is read for
``thinking_token_budget`` and ``chat_template_kwargs``), a
``log_response(provider, model, response_data, latency_ms, error=None, ...,
**fields)`` called from every branch (success, upstream error status, non-JSON
200, transport error, client disconnect, streaming, unrouted model, a refused
request), the wall clock (``time.time()``) for ``latency_ms`` and
``time.monotonic()`` for the ladder's deadline.

It forwards ``POST /v1/chat/completions`` to one upstream through
:func:`analyzer.online.arun_ladder`, passes the answer on (the upstream status
included: the client of an exhausted ladder sees the original 500; the headers
are ``ladder.headers``, safe with the decoded body), and appends a ``request``
and a ``response`` record per call to a JSONL file, in the real proxy's record
shape (docs/log-format.md) merged with :func:`analyzer.online.log_fields`.

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
import asyncio
import json
import time
import uuid
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from fnmatch import fnmatchcase
from typing import Any, Dict, List, Optional, Union

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from analyzer.online import (
    ClientRequestError,
    LadderSettings,
    arun_ladder,
    log_fields,
    normalize_thinking,
    validate_thinking_budget,
)

UPSTREAM_HEADER_ALLOWLIST = ("retry-after", "x-ratelimit-remaining", "x-request-id", "server", "date",
                             "content-length")
SERVER_OWN_HEADERS = ("date", "server")  # uvicorn writes its own: forwarding them would double them


class ChatRequest(BaseModel):
    """The request as the real proxy parses it. Pydantic ignores unknown fields, so
    ``thinking_token_budget`` and ``chat_template_kwargs`` never reach this model:
    the handler reads them from the raw body."""

    messages: List[Dict[str, Any]]
    tools: Optional[List[Dict[str, Any]]] = None
    tool_choice: Optional[Union[str, Dict[str, Any]]] = "auto"
    model: Optional[str] = "gpt-4"
    temperature: Optional[float] = 0.0
    enable_thinking: Optional[bool] = None  # None: the model's default
    user: Optional[str] = None  # logged as session_id, not forwarded
    stream: Optional[bool] = None  # declared only to refuse it
    max_tokens: Optional[int] = None


class UnknownModelError(Exception):
    """No upstream serves this model: answered 400, logged as client-error."""


def describe(response_data: Any) -> dict:
    """What the real proxy's response record says about a parsed 2xx answer.

    The upstream controls every byte of it, so nothing here may raise.
    """
    choices = response_data.get("choices") if isinstance(response_data, dict) else None
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
    if isinstance(response_data.get("usage"), dict):
        out["tokens"] = response_data["usage"]
    return out


def create_app(upstream_url: str, log_path: str, *, served: tuple = ("*",), flatten: bool = False,
               length_recovery: bool = False, max_attempts: int | None = None, time_budget_s: float = 60.0,
               caller_deadline_s: float = 300.0, answer_reserve: int = 256, clear_thinking: bool = False,
               templates: Optional[Dict[str, str]] = None, timeout_s: float = 600.0,
               connect_timeout_s: float = 30.0) -> FastAPI:
    """A proxy with the real one's seams that runs every chat completion through the ladder.

    ``templates`` says which GLM template generation a served name runs
    (``{"glm-5": "glm-5.3"}``): thinking off then never reaches a GLM-5.3 as a false key.
    """
    # Made once, as a proxy does at its start: a bad setting fails here, not on a request.
    settings = LadderSettings(flatten=flatten, length_recovery=length_recovery, max_attempts=max_attempts,
                              time_budget_s=time_budget_s, answer_reserve=answer_reserve, templates=templates)

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

    def log_request(provider, model, messages, tools_count=0, enable_thinking=None, **ids) -> None:
        write({"type": "request", **ids, "provider": provider, "model": model, "message_count": len(messages),
               "tools_count": tools_count, "enable_thinking": enable_thinking})

    def log_response(provider: str, model: Optional[str], response_data: Any, latency_ms: int,
                     error: Optional[str] = None, origin=None, request_id=None, session_id=None, client=None,
                     upstream_headers: Optional[dict] = None, **fields) -> None:
        """The real proxy's response record; ``fields`` are ``log_fields(...)``, merged in."""
        record = {"type": "response", "request_id": request_id, "session_id": session_id, "client": client,
                  "provider": provider, "model": model, "origin": origin, "latency_ms": latency_ms}
        if error:
            record["error"] = error
            if upstream_headers:
                record["upstream_headers"] = upstream_headers
        else:
            record.update(describe(response_data))
        write({**record, **fields})

    def caller(http_request: Request, user: Optional[str]) -> dict:
        return {"origin": http_request.headers.get("origin") or http_request.headers.get("referer"),
                "request_id": uuid.uuid4().hex[:8], "session_id": user or http_request.headers.get("x-session-id"),
                "client": http_request.headers.get("x-client")}

    def refuse(exc: ClientRequestError) -> JSONResponse:
        return JSONResponse({"error": {"message": str(exc), "param": exc.field}}, status_code=400)

    @app.exception_handler(RequestValidationError)
    async def invalid_body(http_request: Request, exc: RequestValidationError):
        """A body ChatRequest refuses: a 400 and a client-error record (FastAPI's
        default is a 422 that leaves no record)."""
        first = (exc.errors() or [{}])[0]
        field = ".".join(str(x) for x in first.get("loc", ())[1:]) or "body"
        bad = ClientRequestError(field, first.get("input"), first.get("msg", "invalid request"))
        log_response("rejected", None, {}, 0, error=f"{type(bad).__name__}: {bad}", **caller(http_request, None),
                     **log_fields({}, None, None, error=bad, latency_ms=0, caller_deadline_s=caller_deadline_s))
        return refuse(bad)

    @app.post("/v1/chat/completions")
    async def proxy_chat(request: ChatRequest, http_request: Request):
        start_time = time.time()  # the wall clock, for latency_ms (as the real proxy)
        deadline = time.monotonic() + caller_deadline_s  # the ladder's clock: never time.time()
        ids = caller(http_request, request.user)
        provider, model = "nrp", request.model

        def fields(payload: dict, status=None, body=None, ladder=None, error=None, latency_ms=0) -> dict:
            return log_fields(payload, status, body, ladder, error=error, latency_ms=latency_ms,
                              caller_deadline_s=caller_deadline_s)

        # Refused before any upstream call: streaming, a model no upstream serves.
        if request.stream:
            exc = ClientRequestError("stream", True, "Streaming is not supported by this proxy")
            log_response("streaming-unsupported", model, {}, 0, error=str(exc), **ids,
                         **fields({"model": model, "messages": request.messages}, error=exc))
            return refuse(exc)
        if not any(fnmatchcase((model or "").lower(), p.lower()) for p in served):
            exc = UnknownModelError(f"Unknown model '{model}'. This deployment serves: {', '.join(served)}")
            log_response("unrouted", model, {}, 0, error=str(exc), **ids,
                         **fields({"model": model, "messages": request.messages}, error=exc))
            return JSONResponse({"error": {"message": str(exc), "param": "model"}}, status_code=400)
        log_request(provider, model, request.messages, len(request.tools or []), request.enable_thinking, **ids)

        payload: dict = {"model": model, "messages": request.messages, "temperature": request.temperature}
        if request.tools:
            payload["tools"] = request.tools
            payload["tool_choice"] = request.tool_choice
        if request.max_tokens is not None:
            payload["max_tokens"] = request.max_tokens
        # What ChatRequest dropped: read from the raw body, or a budget of -5 passes unseen.
        raw = await http_request.json()
        payload.update({k: raw[k] for k in ("thinking_token_budget", "chat_template_kwargs") if k in raw})

        # 1. Normalize and validate before any model call.
        try:
            payload = normalize_thinking(payload, model or "", request.enable_thinking,
                                         clear_thinking=clear_thinking, templates=templates)
            validate_thinking_budget(payload.get("thinking_token_budget"), payload.get("max_tokens"),
                                     answer_reserve)
        except ClientRequestError as exc:  # refused here: no upstream status, class client-error
            ms = int((time.time() - start_time) * 1000)
            log_response(provider, model, {}, ms, error=f"{type(exc).__name__}: {exc}", **ids,
                         **fields(payload, error=exc, latency_ms=ms))
            return refuse(exc)

        # 2. The ladder: `send` is the only transport code, and it does not raise_for_status:
        #    the ladder reads the upstream's statuses itself.
        async def send(p: dict):
            r = await app.state.http.post(upstream_url, json=p)
            return r.status_code, r.headers, r.content

        try:
            ladder = await arun_ladder(payload, send, settings, deadline=deadline)
        except asyncio.CancelledError as exc:  # the client hung up: uvicorn cancelled this handler
            ms = int((time.time() - start_time) * 1000)
            log_response(provider, model, {}, ms, error=f"Client disconnected/cancelled after {ms}ms", **ids,
                         **fields(payload, error=exc, latency_ms=ms))
            raise
        except httpx.HTTPError as exc:  # the original call failed in transport
            ms = int((time.time() - start_time) * 1000)
            timed_out = isinstance(exc, httpx.TimeoutException)
            text = f"Request timed out after {ms}ms" if timed_out else f"{type(exc).__name__}: {exc}"
            log_response(provider, model, {}, ms, error=text, **ids, **fields(payload, error=exc, latency_ms=ms))
            return JSONResponse({"error": {"message": text}}, status_code=504 if timed_out else 502)

        # 3. Log the answer the ladder passes on, with its fields, and forward it.
        ms = int((time.time() - start_time) * 1000)
        extra = fields(payload, ladder.status, ladder.body, ladder, latency_ms=ms)
        headers = {k: v for k, v in ladder.headers.items() if k not in SERVER_OWN_HEADERS}
        if not 200 <= ladder.status < 300:  # the upstream's error status (every rung failed, or none ran)
            wire = ladder.upstream_headers
            kept = {k: wire[k] for k in UPSTREAM_HEADER_ALLOWLIST if k in wire}
            log_response(provider, model, {}, ms, error=f"Provider returned {ladder.status}: "
                         f"{ladder.body.decode(errors='replace')[:1000]}", upstream_headers=kept, **ids, **extra)
            return Response(ladder.body, status_code=ladder.status, headers=headers)
        try:
            result = json.loads(ladder.body)
        except (ValueError, RecursionError) as exc:  # an empty or non-JSON 200, as response.json() fails
            text = f"{type(exc).__name__}: {exc}"[:1000]
            log_response(provider, model, {}, ms, error=text, **ids, **extra)
            return JSONResponse({"error": {"message": text}}, status_code=502)
        log_response(provider, model, result, ms, **ids, **extra)
        return Response(ladder.body, status_code=ladder.status, headers=headers)

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
