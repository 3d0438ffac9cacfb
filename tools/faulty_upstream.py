"""A fault-injecting, vLLM-like OpenAI-compatible upstream served on loopback.

A real HTTP server (the standard library's ``ThreadingHTTPServer`` in a background
thread, bound to 127.0.0.1 on a free port) that answers ``POST
/v1/chat/completions`` from a *script*: a function ``payload -> Reply`` chosen per
test. It records every payload it received, so a test can count attempts and
see what each ladder rung actually sent. The tests (the ``upstream`` fixture of
tests/conftest.py), tools/proxy_trial.py and tools/litellm_week.py serve it.

Typical use (``from tools.faulty_upstream import ...``)::

    with FaultyUpstream(fail_until(DROP_TOOLS)) as upstream:
        ...  # point a client or proxy at upstream.chat_url
        assert upstream.rungs_seen() == ["original", "tool_choice_none", "drop_tools"]

The GLM failure that matters most is the *naked* 500: an empty body,
``content-length: 0`` and no ``server`` header (see docs/log-format.md, "How a
failure reads"). The script helpers produce it, the empty ``200`` with
``finish_reason: stop``, the ``length`` answer with no content, a 429, and
ordinary answers.

The upstream recognises ladder rungs from what a payload looks like, not from
any ladder constant, so it is an independent oracle for the ladder under test.

Two answers a real deployment gives that a proxy must survive: a gzip-encoded
body (:func:`gzipped`: ``content-encoding: gzip`` and the compressed
``content-length``, which httpx decodes while ``r.headers`` still describes the
wire), and a newer GLM that refuses a payload shape with a 400
(:func:`refusing`, :func:`glm53_refuses_thinking_off`).
"""

from __future__ import annotations

import email.utils
import gzip
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable

# Rung names as the upstream infers them from a payload's shape, in ladder order.
ORIGINAL = "original"
TOOL_CHOICE_NONE = "tool_choice_none"
DROP_TOOLS = "drop_tools"
FINAL_ANSWER = "final_answer"
FLATTEN_TRANSCRIPT = "flatten_transcript"
RUNG_ORDER: tuple[str, ...] = (ORIGINAL, TOOL_CHOICE_NONE, DROP_TOOLS, FINAL_ANSWER, FLATTEN_TRANSCRIPT)

_TOOL_KEYS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")
_MODEL = "glm-5"


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP answer: status, raw body and the exact headers to send.

    Only the headers listed are sent (no automatic ``server`` header), plus
    ``content-length``. ``delay_s`` holds the answer back (the wait ends early
    when the server stops). ``disconnect`` closes the connection instead of
    answering (the client sees the server hang up: a transport error).
    """

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    disconnect: bool = False  # close the connection without answering


Script = Callable[[dict], Reply]


# ---------------------------------------------------------------------------
# Replies


def _date() -> str:
    return email.utils.formatdate(usegmt=True)


def naked_500() -> Reply:
    """The GLM/vLLM failure signature: 500, empty body, no ``server`` header."""
    return Reply(500, b"", (("date", _date()),))


def completion(
    content: str | None = "Here is the answer.",
    *,
    finish_reason: str | None = "stop",
    tool_calls: list[dict] | None = None,
    reasoning: str | None = None,
    prompt_tokens: int = 1200,
    completion_tokens: int = 42,
    model: str = _MODEL,
    status: int = 200,
) -> Reply:
    """A vLLM chat-completions answer (``server: uvicorn``, as vLLM sends)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": tool_calls or []}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    doc = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    body = json.dumps(doc).encode()
    return Reply(status, body, (("date", _date()), ("server", "uvicorn"), ("content-type", "application/json")))


def ok(content: str = "Here is the answer.") -> Reply:
    """A healthy answer with visible content."""
    return completion(content)


def tool_call_answer(name: str = "query", arguments: str = '{"sql": "SELECT 1"}') -> Reply:
    """A healthy answer that calls one tool (``finish_reason: tool_calls``)."""
    call = {"id": f"chatcmpl-tool-{uuid.uuid4().hex}", "type": "function",
            "function": {"name": name, "arguments": arguments}}
    return completion("", finish_reason="tool_calls", tool_calls=[call])


def empty_200_stop() -> Reply:
    """200 with no content, no tool calls and ``finish_reason: stop``."""
    return completion("", finish_reason="stop", completion_tokens=1)


def length_no_content(max_tokens: int = 1024) -> Reply:
    """200, no visible content: the reasoning ate the whole completion budget."""
    return completion(None, finish_reason="length", reasoning="Let me think. " * 40,
                      completion_tokens=max_tokens)


def hang_up() -> Reply:
    """Close the connection without an answer (httpx: ``RemoteProtocolError``)."""
    return Reply(disconnect=True)


def slow(reply: Reply, delay_s: float) -> Reply:
    """``reply``, held back ``delay_s`` seconds (ends early when the server stops)."""
    return Reply(reply.status, reply.body, reply.headers, delay_s, reply.disconnect)


def gzipped(reply: Reply) -> Reply:
    """``reply`` with its body gzip-compressed and ``content-encoding: gzip`` (as a
    gateway with compression on sends it); ``content-length`` is the compressed size."""
    headers = tuple(h for h in reply.headers if h[0].lower() != "content-encoding")
    return Reply(reply.status, gzip.compress(reply.body), headers + (("content-encoding", "gzip"),),
                 reply.delay_s, reply.disconnect)


def refused_shape(message: str = "this request shape is not supported") -> Reply:
    """400 with an OpenAI-style error body: the upstream does not accept the payload's shape."""
    body = json.dumps({"error": {"message": message, "type": "BadRequestError", "code": 400}}).encode()
    return Reply(400, body, (("date", _date()), ("server", "uvicorn"), ("content-type", "application/json")))


def rate_limited() -> Reply:
    """429 with the rate-limit headers a hosted gateway sends."""
    body = json.dumps({"error": {"message": "Rate limit exceeded", "type": "rate_limit_exceeded", "code": 429}})
    return Reply(429, body.encode(), (("date", _date()), ("server", "envoy"), ("retry-after", "45"),
                                      ("x-ratelimit-remaining", "0"), ("content-type", "application/json")))


# ---------------------------------------------------------------------------
# What a payload looks like


def has_tool_structure(messages: Any) -> bool:
    """True when any message is a tool result or carries tool-call keys."""
    if not isinstance(messages, list):
        return False
    for m in messages:
        if not isinstance(m, dict):
            continue
        if m.get("role") in ("tool", "function"):
            return True
        if any(k in m for k in ("tool_calls", "function_call", "tool_call_id")):
            return True
    return False


def offers_tools(payload: dict) -> bool:
    """True when the request offers tools to the model."""
    return bool(payload.get("tools") or payload.get("functions"))


def asks_for_final_answer(payload: dict) -> bool:
    """True when the last message is a user message asking for a final answer."""
    messages = payload.get("messages") or []
    if not messages or not isinstance(messages[-1], dict):
        return False
    last = messages[-1]
    return last.get("role") == "user" and "final answer" in str(last.get("content", "")).lower()


def payload_rung(payload: dict) -> str:
    """Which ladder rung a payload looks like (for a client payload offering tools
    with tool history in its transcript)."""
    if asks_for_final_answer(payload):
        if has_tool_structure(payload.get("messages")):
            return FINAL_ANSWER
        return FLATTEN_TRANSCRIPT
    if not any(k in payload for k in _TOOL_KEYS):
        return DROP_TOOLS
    if payload.get("tool_choice") == "none":
        return TOOL_CHOICE_NONE
    return ORIGINAL


# ---------------------------------------------------------------------------
# Scripts


def always(reply: Reply | Callable[[], Reply]) -> Script:
    """Answer every request the same way."""
    return lambda payload: reply() if callable(reply) else reply


def fail_until(rung: str, failure: Callable[[], Reply] = naked_500,
               success: Callable[[], Reply] = ok) -> Script:
    """Fail every payload that looks like a rung before ``rung``; answer the rest."""
    if rung not in RUNG_ORDER:
        raise ValueError(f"unknown rung {rung!r}")
    threshold = RUNG_ORDER.index(rung)

    def script(payload: dict) -> Reply:
        return success() if RUNG_ORDER.index(payload_rung(payload)) >= threshold else failure()

    return script


def fail_on_tool_history_with_tools(failure: Callable[[], Reply] = naked_500,
                                    success: Callable[[], Reply] = ok) -> Script:
    """The observed GLM failure: fail whenever the prompt carries tool history AND
    ``tools`` are offered (``tool_choice`` does not matter)."""
    def script(payload: dict) -> Reply:
        if has_tool_structure(payload.get("messages")) and offers_tools(payload):
            return failure()
        return success()

    return script


def thinking_disabled(payload: Any) -> bool:
    """True when a payload switches thinking off: a false ``enable_thinking`` or
    ``thinking`` in ``chat_template_kwargs``, or ``thinking: {"type": "disabled"}``."""
    if not isinstance(payload, dict):
        return False
    kwargs = payload.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and (kwargs.get("enable_thinking") is False or kwargs.get("thinking") is False):
        return True
    thinking = payload.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") == "disabled"


def refusing(refuse: Callable[[dict], bool], script: Script,
             message: str = "this request shape is not supported") -> Script:
    """Answer 400 (:func:`refused_shape`) to every payload ``refuse`` picks; ``script`` answers the rest."""
    def wrapped(payload: dict) -> Reply:
        return refused_shape(message) if refuse(payload) else script(payload)

    return wrapped


def glm53_refuses_thinking_off(script: Script) -> Script:
    """A GLM-5.3-like upstream: 400 to any payload that switches thinking off
    (reported: GLM-5.3 rejects ``thinking.type: disabled``); ``script`` answers the rest."""
    return refusing(thinking_disabled, script, "thinking.type disabled is not supported by this model")


# vLLM's 400 for a thinking_token_budget on a server without a reasoning config.
NO_REASONING_CONFIG = ("thinking_token_budget is set but reasoning_config is not configured. Please set "
                       "--reasoning-parser and/or --reasoning-config to use thinking_token_budget.")


def answer_in_reasoning(answer: str = "Texas holds 61,883 protected acres.", completion_tokens: int = 12) -> Reply:
    """The glm45 parser's answer filed as reasoning (sgl-project/sglang#37645): 200, content "", stop."""
    return completion("", finish_reason="stop", reasoning=answer, completion_tokens=completion_tokens)


def glm53(script: Script) -> Script:
    """A GLM-5.3 behind vLLM's glm47 parser: the template has no off switch, so a payload that
    switches thinking off (a false ``enable_thinking``/``thinking``) only stops the parser's
    extraction; the scratchpad and a dangling ``</think>`` land in the content
    (vllm-project/vllm#54744). ``script`` answers otherwise."""
    def wrapped(payload: dict) -> Reply:
        reply = script(payload)
        if reply.status != 200 or not thinking_disabled(payload):
            return reply
        doc = json.loads(reply.body)
        message = doc["choices"][0]["message"]
        message["content"] = "The user wants the total; check the schema first.</think>" + (message.get("content") or "")
        message.pop("reasoning_content", None)
        return Reply(200, json.dumps(doc).encode(), reply.headers, reply.delay_s, reply.disconnect)

    return wrapped


def no_reasoning_config(script: Script) -> Script:
    """A vLLM started without a reasoning parser/config: 400 to any payload with a thinking budget."""
    return refusing(lambda p: "thinking_token_budget" in p, script, NO_REASONING_CONFIG)


def sequence(replies: Iterable[Reply | Callable[[], Reply]]) -> Script:
    """Answer with each reply in turn; the last one repeats."""
    items = list(replies)
    if not items:
        raise ValueError("sequence() needs at least one reply")
    state = {"i": 0}
    lock = threading.Lock()

    def script(payload: dict) -> Reply:
        with lock:
            item = items[min(state["i"], len(items) - 1)]
            state["i"] += 1
        return item() if callable(item) else item

    return script


# ---------------------------------------------------------------------------
# The server


@dataclass
class Received:
    """One request the upstream received."""

    path: str
    headers: dict[str, str]
    payload: Any
    rung: str | None = None


@dataclass
class _State:
    script: Script
    received: list[Received] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like vLLM behind uvicorn
    # The headers and the body go out in two writes; with Nagle's algorithm on, the body
    # waits for the client's delayed ACK of the headers (~40 ms a call on a kept-alive
    # connection). uvicorn (asyncio) sets TCP_NODELAY as well: the bytes are the same.
    disable_nagle_algorithm = True
    server: "_Server"

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet test output
        pass

    def _send(self, reply: Reply) -> None:
        # send_response_only: no automatic Server/Date headers, so a naked 500
        # really is naked.
        self.send_response_only(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(reply.body)))
        self.end_headers()
        if reply.body:
            self.wfile.write(reply.body)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(Reply(200, b"", ()))
        elif self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": _MODEL, "object": "model"}]}).encode()
            self._send(Reply(200, body, (("content-type", "application/json"),)))
        else:
            self._send(Reply(404, b"", ()))

    def do_POST(self) -> None:
        state = self.server.state
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path != "/v1/chat/completions":
            self._send(Reply(404, b"", ()))
            return
        try:
            payload = json.loads(raw)
        except ValueError:
            self._send(Reply(400, b'{"error": "invalid JSON"}', (("content-type", "application/json"),)))
            return
        rec = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, payload,
                       payload_rung(payload) if isinstance(payload, dict) else None)
        with state.lock:
            state.received.append(rec)
            script = state.script
        try:
            reply = script(payload)
        except Exception as exc:  # a broken script must fail the test, not hang it
            with state.lock:
                state.errors.append(exc)
            reply = Reply(599, f"script error: {exc!r}".encode(), ())
        if reply.delay_s:
            state.stopping.wait(reply.delay_s)
        if reply.disconnect:
            self.close_connection = True
            return
        try:
            self._send(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (a timeout test)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: _State):
        self.state = state
        super().__init__(("127.0.0.1", 0), _Handler)


class FaultyUpstream:
    """A scriptable vLLM-like upstream on 127.0.0.1 (context manager).

    Attributes:
        script: ``payload -> Reply``; may be replaced between requests.
    """

    def __init__(self, script: Script | None = None):
        self._state = _State(script or always(ok))
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> "FaultyUpstream":
        """Bind a free loopback port and serve in a daemon thread.

        The socket listens as soon as the server object exists, so the upstream
        accepts connections when this returns (no readiness wait needed).
        """
        if self._server is not None:
            return self
        self._state.stopping.clear()
        self._server = _Server(self._state)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01},  # stop() waits a poll
                                        name="faulty-upstream", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is None:
            return
        self._state.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        assert self._thread is not None
        self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> "FaultyUpstream":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- scripting and inspection -----------------------------------------

    @property
    def script(self) -> Script:
        return self._state.script

    @script.setter
    def script(self, script: Script) -> None:
        with self._state.lock:
            self._state.script = script

    def reset(self, script: Script | None = None) -> None:
        """Forget what was received (and optionally set a new script)."""
        with self._state.lock:
            self._state.received.clear()
            self._state.errors.clear()
            if script is not None:
                self._state.script = script

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("upstream is not running")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def chat_url(self) -> str:
        """The chat-completions endpoint."""
        return f"{self.url}/v1/chat/completions"

    @property
    def received(self) -> list[Received]:
        """Every chat-completions request received, in order (a copy)."""
        with self._state.lock:
            return list(self._state.received)

    @property
    def payloads(self) -> list[Any]:
        """The JSON payloads received, in order."""
        return [r.payload for r in self.received]

    @property
    def count(self) -> int:
        """How many chat-completions requests arrived."""
        with self._state.lock:
            return len(self._state.received)

    def rungs_seen(self) -> list[str | None]:
        """The rung each received payload looks like, in order."""
        return [r.rung for r in self.received]

    @property
    def script_errors(self) -> list[BaseException]:
        """Exceptions a script raised (each answered with a 599)."""
        with self._state.lock:
            return list(self._state.errors)
