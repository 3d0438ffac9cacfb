"""Failure injection: what the upstream does with a call, and how the ladder's rungs fare.

:class:`Outcome` is one upstream exchange as the proxy saw it (an answer, an HTTP
error with its body and headers, a timeout, a cancel, a dropped or refused
connection, a missing key). :class:`Faults` is the part of a session that decides the
outcome of its calls: the failure model outside any window (naked 500s rising with
the transcript when it carries tool history, other 5xx per provider, timeouts,
resets, rate limits clustered in busy hours, 4xx, empty and length-capped 200s, slow
generations), the failures inside a wedged or down window of the model's pod, and the
answer to each ladder rung. :class:`LadderUpstream` plays the upstream for
:func:`analyzer.online.run_ladder` on ladder days, raising transport errors named like
httpx's.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from tools.simulator.apps import LOOP_REASONING
from tools.simulator.clock import US, http_date
from tools.simulator.draws import mix32, pick, ri, uuid4
from tools.simulator.world import demand


class _Session(Protocol):
    """What the ladder's upstream reads of its session (a :class:`tools.simulator.sessions.Session`;
    named by what it offers, so this module needs no import of the module that imports it)."""

    model: str

    def rid(self, *args: Any) -> Any: ...

    def rung_outcome(self, *args: Any) -> Any: ...

# Proxy constants, as in llm_proxy.py: its read timeout, and the upstream headers it
# logs on an HTTP error, in the order it logs them.
_UPSTREAM_TIMEOUT_MS = 1_200_000
_UPSTREAM_HEADER_ALLOWLIST = ("retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
                              "x-request-id", "server", "date", "content-length")

# Ladder rung recovery probabilities by trigger (before the long-transcript penalty).
_RUNG_RECOVERY = {
    "tool-history-5xx": {"tool_choice_none": 0.30, "drop_tools": 0.50, "final_answer": 0.70,
                         "flatten_transcript": 0.85},
    "empty-200-stop": {"tool_choice_none": 0.45, "drop_tools": 0.65, "final_answer": 0.80,
                       "flatten_transcript": 0.90},
    "answer-in-reasoning": {"tool_choice_none": 0.45, "drop_tools": 0.65, "final_answer": 0.80,
                            "flatten_transcript": 0.90},
    "length-with-no-content": {"thinking_budget": 0.75, "disable_thinking": 0.90},
}

# GLM as it fails today (the chat templates and vLLM parsers of late 2026), per call,
# decided by a hash of the request id (no draw of the session's generator, so the rest
# of the week is what it was):
# - GLM-5.2 (and 4.6, the same template) under the glm45 parser answers without
#   thinking now and then, and the parser files the answer as reasoning
#   (sgl-project/sglang#37645: 0.6% of all completions; here of final answers);
P_ANSWER_IN_REASONING = 0.04
# - GLM-5.3 after a tool result sometimes thinks, stops, and reports 0 completion
#   tokens (mistral-vibe#1116).
P_ZERO_USAGE = 0.012
# vLLM's 400 for a thinking_token_budget on a server without a reasoning config (the
# GLM-5.3 pod runs a vLLM from before the config was made from the parser).
NO_REASONING_CONFIG = ("thinking_token_budget is set but reasoning_config is not configured. "
                       "Please set --reasoning-config to use thinking_token_budget.")


class Outcome:
    """One upstream exchange as the proxy saw it (success or failure)."""

    __slots__ = ("kind", "status", "latency_ms", "content", "reasoning", "tool_calls", "finish",
                 "usage", "error", "headers", "body", "repaired", "completion_tokens", "shape")

    def __init__(self, kind: str, latency_ms: int, *, status: int | None = None, content: str = "",
                 reasoning: str = "", tool_calls: list | None = None, finish: str | None = None,
                 usage: dict | None = None, error: str | None = None, headers: dict | None = None,
                 body: str = "", repaired: int = 0, completion_tokens: int = 0):
        self.kind = kind  # ok | http | timeout | cancel | connect | reset | config | rejected
        self.status = status
        self.latency_ms = latency_ms
        self.content = content
        self.reasoning = reasoning
        self.tool_calls = tool_calls or []  # [(id, name, arguments)]
        self.finish = finish
        self.usage = usage
        self.error = error
        self.headers = headers
        self.body = body
        self.repaired = repaired
        self.completion_tokens = completion_tokens
        # how a GLM parser bent the answer: "" | "in-reasoning" (the answer filed as
        # reasoning) | "leaked" (the scratchpad and a dangling </think> in the content)
        self.shape = ""

    @property
    def failed(self) -> bool:
        """Whether the exchange was anything but a 200 answer."""
        return self.kind != "ok"

    @property
    def empty(self) -> bool:
        """Whether it was a 200 with neither content nor tool calls."""
        return self.kind == "ok" and not self.content and not self.tool_calls

    def body_bytes(self, model: str, rid: str) -> bytes:
        """The upstream answer body as bytes (what ``send`` returns to the ladder)."""
        if self.kind != "ok":
            return self.body.encode("utf-8")
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in self.tool_calls
            ]
        doc = {"id": f"chatcmpl-{rid}", "object": "chat.completion", "model": model,
               "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
               "usage": self.usage}
        return json.dumps(doc).encode("utf-8")


class TransportError(Exception):
    """Base of the simulated transport exceptions (named like httpx's)."""


class ConnectError(TransportError):
    """Raised by the simulated upstream when nothing accepts the connection."""


class ReadTimeout(TransportError):
    """Raised by the simulated upstream when the read timeout expires."""


class RemoteProtocolError(TransportError):
    """Raised by the simulated upstream when the server drops the connection."""


class LadderUpstream:
    """Plays the upstream for one ladder-day turn: ``send(payload)`` for run_ladder.

    The original call's answer is decided beforehand (the failure model); each rung
    recovers with the probability of its kind, lower for long transcripts, and never
    while the model's pod is wedged or down. The clock is simulated, so latencies are
    exact and the run is deterministic.
    """

    def __init__(self, sess: _Session, t_us: int, first: Outcome, trigger_cls: str | None):
        self.sess = sess
        self.t0_us = t_us
        self.now_s = 0.0
        self.first = first
        self.trigger_cls = trigger_cls
        self.answers: list[Outcome] = []

    def clock(self) -> float:
        """The simulated clock run_ladder reads (seconds since the turn started)."""
        return self.now_s

    def __call__(self, payload: dict) -> tuple[int, dict, bytes]:
        """Answer one call of the ladder: ``(status, headers, body)``, or raise a transport error."""
        if not self.answers:
            out = self.first
        else:
            out = self.sess.rung_outcome(payload, self.t0_us + int(self.now_s * US), self.trigger_cls)
        self.answers.append(out)
        self.now_s += out.latency_ms / 1000.0
        if out.kind == "connect":
            raise ConnectError("All connection attempts failed")
        if out.kind == "timeout":
            raise ReadTimeout("timed out")
        if out.kind == "reset":
            raise RemoteProtocolError("Server disconnected without sending a response.")
        return out.status or 200, dict(out.headers or {}), out.body_bytes(self.sess.model, self.sess.rid)


def rung_of(payload: dict, final_prompt: str) -> str:
    """Which ladder rung a payload is, read from the payload itself."""
    if "thinking_token_budget" in payload:
        return "thinking_budget"
    kwargs = payload.get("chat_template_kwargs") or {}
    if kwargs.get("enable_thinking") is False and "tools" in payload and payload.get("tool_choice") != "none":
        return "disable_thinking"
    if "tools" in payload:
        return "tool_choice_none" if payload.get("tool_choice") == "none" else "original"
    msgs = payload.get("messages") or []
    if msgs and msgs[-1].get("content") == final_prompt:
        flat = not any(m.get("role") == "tool" or m.get("tool_calls") for m in msgs)
        return "flatten_transcript" if flat else "final_answer"
    return "drop_tools"


class Faults:
    """The failure model of a session's upstream: which calls fail, and how.

    A part of :class:`~tools.simulator.sessions.Session`, like
    :class:`~tools.simulator.answers.Answers` (whose ``_ok``, ``_usage`` and
    ``_gen_latency`` it uses): the methods read the session's state (``rng``, ``w``,
    ``prof``, ``provider``, ``model``, ``proc``, ``mc``, ``tool_history``,
    ``sticky_500``, ``ctx_tokens``, ``deadline_s``, ``max_tokens``, ``ladder_day``)
    and draw from its generator.
    """

    def _th500_p(self, mc: int) -> float:
        """Naked-500 probability on a turn with tool history: rises with the transcript."""
        return min(0.3, self.prof.th500 * (0.003 + 0.0011 * max(0, mc - 6) ** 1.3))

    def _empty(self) -> Outcome:
        n = ri(self.rng, 1, 3)
        return Outcome("ok", self._gen_latency(self.ctx_tokens, n), status=200, finish="stop",
                       usage=self._usage(self.ctx_tokens, n), completion_tokens=n)

    def _length(self) -> Outcome:
        """Reasoning ran into the output cap: no content, completion tokens == cap."""
        cap = self.max_tokens or 4096
        loops = LOOP_REASONING * (cap // 60 + 1)
        return Outcome("ok", self._gen_latency(self.ctx_tokens, cap), status=200, reasoning=loops,
                       finish="length", usage=self._usage(self.ctx_tokens, cap, cap), completion_tokens=cap)

    def _http(self, status: int, body: str, headers: dict | None, latency_ms: int) -> Outcome:
        # The proxy logs the allow-listed headers in allow-list order.
        logged = {k: headers[k] for k in _UPSTREAM_HEADER_ALLOWLIST if k in headers} if headers else None
        return Outcome("http", latency_ms, status=status, error=f"Provider returned {status}: {body[:1000]}",
                       headers=logged or None, body=body)

    def _naked_500(self, t_us: int, latency_ms: int | None = None) -> Outcome:
        lat = latency_ms if latency_ms is not None else ri(self.rng, 180, 2600)
        return self._http(500, "", {"date": http_date(t_us + lat * 1000), "content-length": "0"}, lat)

    def _other_5xx(self, t_us: int) -> Outcome:
        rng, prov = self.rng, self.provider
        lat = ri(rng, 40, 30_000)
        date = http_date(t_us + lat * 1000)
        if prov == "nrp":
            if rng.random() < 0.5:
                body = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
                        "Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
                return self._http(502, body, {"server": "nginx", "date": date, "content-length": str(len(body))}, lat)
            body = json.dumps({"error": {"message": f"The model {self.model} is overloaded, please try again later.",
                                         "type": "ServiceUnavailableError", "code": 503}})
            return self._http(503, body, {"server": "envoy", "date": date, "content-length": str(len(body)),
                                          "x-request-id": uuid4(rng)}, lat)
        if prov == "nimbus":
            if rng.random() < 0.4:
                lat = 600_000 + ri(rng, 2, 400)  # Traefik's responseHeaderTimeout
                return self._http(504, "Gateway Timeout", {"date": http_date(t_us + lat * 1000),
                                                           "content-length": "15"}, lat)
            return self._http(502, "Bad Gateway", {"date": date, "content-length": "11"}, lat)
        if prov == "anthropic":
            body = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            return self._http(529, body, {"server": "cloudflare", "date": date,
                                          "x-request-id": f"req_{rng.getrandbits(96):024x}"}, lat)
        status = pick(rng, (502, 503))
        body = json.dumps({"error": {"message": "Provider returned error", "code": status,
                                     "metadata": {"raw": "upstream connect error", "provider_name": "Novita"}}})
        return self._http(status, body, {"server": "cloudflare", "date": date}, lat)

    def _rate_limited(self, t_us: int) -> Outcome:
        rng = self.rng
        lat = ri(rng, 60, 900)
        date = http_date(t_us + lat * 1000)
        if self.provider == "openrouter":
            body = json.dumps({"error": {"message": "Provider returned error", "code": 429, "metadata": {
                "raw": f"{self.model} is temporarily rate-limited upstream. Please retry shortly, or add your own "
                       f"key to accumulate your rate limits: https://openrouter.ai/settings/integrations",
                "provider_name": pick(rng, ("Together", "DeepInfra", "Z.AI", "Anthropic"))}},
                "user_id": "user_2xK9mQp4RzT8vN1bL6sWc3JdF0a"})
            reset = (t_us // 60_000_000 + 1) * 60_000  # epoch ms of the next minute
            return self._http(429, body, {"x-ratelimit-limit": "200", "x-ratelimit-remaining": "0",
                                          "x-ratelimit-reset": str(reset), "server": "cloudflare",
                                          "date": date, "content-length": str(len(body))}, lat)
        if self.provider == "anthropic":
            retry = ri(rng, 5, 40)
            body = json.dumps({"type": "error", "error": {"type": "rate_limit_error", "message": (
                "This request would exceed the rate limit for your organization of 30,000 input tokens per "
                "minute. Please reduce the prompt length or the maximum tokens requested, or try again later.")}})
            return self._http(429, body, {"retry-after": str(retry), "server": "cloudflare", "date": date,
                                          "content-length": str(len(body))}, lat)
        retry = pick(rng, (15, 30, 45))
        body = json.dumps({"error": {"message": f"Rate limit exceeded: 60 requests per 60s for this API key. "
                                                f"Retry after {retry} seconds.",
                                     "type": "rate_limit_exceeded", "code": 429}})
        return self._http(429, body, {"retry-after": str(retry), "x-ratelimit-limit": "60, 60;w=60",
                                      "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(retry),
                                      "x-request-id": uuid4(rng), "server": "envoy", "date": date,
                                      "content-length": str(len(body))}, lat)

    def _client_4xx(self, t_us: int) -> Outcome:
        rng = self.rng
        lat = ri(rng, 50, 1200)
        date = http_date(t_us + lat * 1000)
        if self.provider in ("nrp", "nimbus"):
            total = self.ctx_tokens + 16000
            body = json.dumps({"object": "error", "message": (
                f"This model's maximum context length is 131072 tokens. However, you requested {total + 120000} "
                f"tokens ({self.ctx_tokens + 120000} in the messages, 16000 in the completion). Please reduce the "
                f"length of the messages or completion."), "type": "BadRequestError", "param": None, "code": 400})
            return self._http(400, body, {"date": date, "server": "uvicorn", "content-length": str(len(body))}, lat)
        if self.provider == "anthropic":
            body = json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                          "message": "messages.3: tool_use ids were found without "
                                                                     "tool_result blocks immediately after"}})
            return self._http(400, body, {"server": "cloudflare", "date": date, "content-length": str(len(body))}, lat)
        if rng.random() < 0.3:
            body = json.dumps({"error": {"message": "No auth credentials found", "code": 401}})
            return self._http(401, body, {"server": "cloudflare", "date": date, "content-length": str(len(body))}, lat)
        if rng.random() < 0.3:
            body = json.dumps({"error": {"message": f"{self.model} requires moderation on its provider. Your input "
                                                    f"was flagged for \"harassment\". No credits were charged.",
                                         "code": 403, "metadata": {"reasons": ["harassment"],
                                                                   "provider_name": "Anthropic"}}})
            return self._http(403, body, {"server": "cloudflare", "date": date, "content-length": str(len(body))}, lat)
        body = json.dumps({"error": {"message": (
            "This endpoint's maximum context length is 131072 tokens. However, you requested about 140312 tokens "
            "(124312 of text input, 16000 in the output). Please reduce the length of either one, or use the "
            "\"middle-out\" transform to compress your prompt automatically."), "code": 400,
            "metadata": {"provider_name": None}}})
        return self._http(400, body, {"server": "cloudflare", "date": date, "content-length": str(len(body))}, lat)

    def _credits_402(self, t_us: int) -> Outcome:
        lat = ri(self.rng, 80, 400)
        body = json.dumps({"error": {"message": (
            "This request requires more credits, or fewer max_tokens. You requested up to 16384 tokens, but can "
            "only afford 9031. To increase, visit https://openrouter.ai/settings/credits and add more credits"),
            "code": 402, "metadata": {"provider_name": None}}, "user_id": "user_2xK9mQp4RzT8vN1bL6sWc3JdF0a"})
        return self._http(402, body, {"server": "cloudflare", "date": http_date(t_us + lat * 1000),
                                      "content-length": str(len(body))}, lat)

    def _timeout(self) -> Outcome:
        lat = _UPSTREAM_TIMEOUT_MS + ri(self.rng, 3, 60)
        return Outcome("timeout", lat, error=f"Request timed out after {lat}ms")

    def _cancel(self, deadline_s: int) -> Outcome:
        lat = deadline_s * 1000 + ri(self.rng, 1, 40)
        return Outcome("cancel", lat, error=f"Client disconnected/cancelled after {lat}ms (upstream still pending)")

    def _reset(self) -> Outcome:
        lat = ri(self.rng, 2_000, 90_000)
        return Outcome("reset", lat, error="RemoteProtocolError: Server disconnected without sending a response.")

    def _connect(self) -> Outcome:
        return Outcome("connect", ri(self.rng, 3, 45), error="ConnectError: All connection attempts failed")

    def _window_failure(self, kind: str, t_us: int) -> Outcome:
        """A call while the model's pod is wedged or down."""
        rng = self.rng
        room_ms = (self.w.window_end(self.model, t_us) - t_us) // 1000 - 1500
        if kind == "down":
            if rng.random() < 0.75:
                return self._connect()
            lat = ri(rng, 3, 40)
            return self._http(503, "no healthy upstream", {"server": "envoy", "date": http_date(t_us + lat * 1000),
                                                           "content-length": "19"}, lat)
        r = rng.random()
        # Timeouts and cancels only when they end inside the window, so the
        # request and its response agree about which window they belong to.
        if r < 0.15 and room_ms > _UPSTREAM_TIMEOUT_MS + 100:
            return self._timeout()
        if r < 0.25 and self.deadline_s and room_ms > self.deadline_s * 1000 + 100:
            return self._cancel(self.deadline_s)
        if r < 0.40:
            lat = min(room_ms, ri(rng, 5_000, 15_000))
            body = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
            return self._http(503, body, {"server": "envoy", "date": http_date(t_us + max(lat, 50) * 1000),
                                          "content-length": str(len(body))}, max(lat, 50))
        # The gateway gives up on the stuck engine with a naked 500.
        return self._naked_500(t_us, max(60, min(room_ms, ri(rng, 30_000, 120_000))))

    def _call(self, t_us: int, want_tools: bool) -> Outcome:
        """Decide what the upstream does with this call (the original call)."""
        rng, p, w = self.rng, self.prof, self.w
        if self.provider in w.procs[self.proc].missing_keys:
            return Outcome("config", 0, error=f"{self.provider.upper()} API key not configured on server")
        if p.pod_model:
            kind = w.window(self.model, t_us)
            if kind is not None:
                return self._window_failure(kind, t_us)
        out = self._sample(t_us, want_tools)
        if p.pod_model:
            # A call of this model never straddles the start of a wedged, down or
            # quiet window: it finishes just before (so windows stay clean).
            s = w.barrier_between(self.model, t_us, t_us + out.latency_ms * 1000)
            if s is not None:
                out = self._ok(want_tools)
                out.latency_ms = max(300, min(out.latency_ms, (s - t_us) // 1000 - ri(rng, 200, 2000)))
        # What the proxy sent upstream switches the GLM parser off when the client asked
        # for thinking off (config.json maps glm-5's flag; the ladder days' normalizer
        # sends both keys false, knowing no better without a template override).
        disarmed = self.enable_thinking is False and p.thinking_key
        return self._glm_answer(out, t_us, want_tools, disarmed)

    def _chance(self, salt: int) -> float:
        """A per-request draw in [0, 1) from the request id: no draw of the session's generator."""
        return mix32(int(self.rid, 16) ^ salt) / 2**32

    def _glm_answer(self, out: Outcome, t_us: int, want_tools: bool, disarmed: bool) -> Outcome:
        """A 200 as the GLM deployment's template and parser bend it (see P_* above)."""
        weights = self.w.glm_weights(self.model, t_us)
        if out.kind != "ok" or weights is None:
            return out
        if weights == "5.3":
            if disarmed:  # no off switch: the model thinks on, the parser stopped extracting
                return self._leaked(out)
            if self.tool_history and self._chance(0x5A3C_0001) < P_ZERO_USAGE:
                return self._thinking_only(out)
            return out
        if (self.reasoning_on and not want_tools and not out.tool_calls and out.content
                and self._chance(0x5A3C_0002) < P_ANSWER_IN_REASONING):
            # Answered without thinking and stopped on EOS: the glm45 parser files it all as reasoning.
            out.reasoning, out.content, out.finish, out.shape = out.content, "", "stop", "in-reasoning"
        return out

    def _leaked(self, out: Outcome) -> Outcome:
        """The scratchpad and a dangling </think> before the answer, in the content."""
        scratch = self._reasoning_text(ri(self.rng, 1, 2))
        out.content = scratch + "</think>" + ("\n\n" + out.content if out.content else "")
        out.reasoning, out.shape = "", "leaked"
        return out

    def _thinking_only(self, out: Outcome) -> Outcome:
        """Thousands of reasoning characters, no content, a clean stop, and 0 completion tokens."""
        out.reasoning = " ".join(LOOP_REASONING for _ in range(ri(self.rng, 6, 12)))
        out.content, out.tool_calls, out.finish, out.shape = "", [], "stop", "in-reasoning"
        out.usage = {**(out.usage or {}), "completion_tokens": 0,
                     "total_tokens": (out.usage or {}).get("prompt_tokens", 0)}
        out.completion_tokens = 0
        return out

    def _sample(self, t_us: int, want_tools: bool) -> Outcome:
        """The failure model outside any window."""
        rng, p, w = self.rng, self.prof, self.w
        if self.provider == "openrouter" and w.credit_outage(t_us):
            return self._credits_402(t_us)
        mc, th = self.mc, self.tool_history
        r = rng.random()
        acc = self._th500_p(mc) * (3.0 if self.sticky_500 else 1.0) if th else 0.0
        if r < acc:
            # The naked 500 is the self-hosted GLM signature; hosted providers wrap
            # the same failure in a JSON error.
            return self._naked_500(t_us) if self.provider == "nrp" else self._other_5xx(t_us)
        acc += p.p_5xx * (1.0 if not th else 0.3)
        if r < acc:
            return self._other_5xx(t_us)
        acc += p.p_timeout * (1 + mc / 40)
        if r < acc:
            return self._timeout()
        acc += p.p_reset
        if r < acc:
            return self._reset()
        # Rate limits cluster in busy hours.
        acc += p.p_429 * (0.4 + 1.2 * demand(t_us))
        if r < acc:
            return self._rate_limited(t_us)
        acc += p.p_4xx * (3.0 if mc > 40 else 1.0)
        if r < acc:
            return self._client_4xx(t_us)
        acc += min(0.08, p.p_empty * (0.5 + mc / 30)) if th else p.p_empty * 0.15
        if r < acc:
            return self._empty()
        if self.reasoning_on and self.max_tokens:
            acc += p.p_length * (1 + mc / 40)
            if r < acc:
                return self._length()
        acc += p.p_slow
        if r < acc:
            out = self._ok(want_tools)
            out.latency_ms = int(rng.uniform(200_000, 900_000))
            if self.deadline_s and out.latency_ms > self.deadline_s * 1000:
                return self._cancel(self.deadline_s)
            if out.latency_ms >= _UPSTREAM_TIMEOUT_MS:
                return self._timeout()
            return out
        finish = None
        if want_tools and self.ladder_day and p.p_mismatch and rng.random() < p.p_mismatch:
            finish = "stop"  # tool calls, but the stop reason says the turn ended
        return self._ok(want_tools, finish=finish)

    def rung_outcome(self, payload: dict, t_us: int, trigger: str | None) -> Outcome:
        """The upstream's answer to one ladder rung."""
        rng, w = self.rng, self.w
        rung = rung_of(payload, self.w.online.ladder.FINAL_ANSWER_PROMPT)
        kind = w.window(self.model, t_us)
        if kind == "down":
            return self._connect()
        if kind == "wedged":
            return self._naked_500(t_us, ri(rng, 20_000, 60_000))
        weights = w.glm_weights(self.model, t_us)
        if rung == "thinking_budget" and weights == "5.3":
            # The GLM-5.3 pod runs an older vLLM image: its reasoning parser is set, the
            # reasoning config a budget needs is not (newer vLLM makes it from the parser).
            body = json.dumps({"object": "error", "message": NO_REASONING_CONFIG, "type": "BadRequestError",
                               "param": None, "code": 400})
            return self._http(400, body, {"date": http_date(t_us), "server": "uvicorn",
                                          "content-length": str(len(body))}, ri(rng, 3, 40))
        if rung == "thinking_budget" and self.model == "glm-4.6":
            return self._length()  # MTP speculative decoding on this pod ignores the budget
        p = _RUNG_RECOVERY.get(trigger or "", {}).get(rung, 0.0) * (1 - min(0.5, self.mc / 120))
        if rng.random() < p:
            out = self._ok(False, no_tools=True, thinking=False if rung == "disable_thinking" else None)
            if weights == "5.3" and _thinking_off(payload):
                return self._leaked(out)  # a false key on GLM-5.3: the parser stops, the model thinks on
            return out
        if trigger == "length-with-no-content":
            return self._length()
        if trigger == "empty-200-stop" and rng.random() < 0.6:
            return self._empty()
        if trigger == "answer-in-reasoning" and rng.random() < 0.6:
            out = self._ok(False, no_tools=True)
            out.reasoning, out.content, out.finish, out.shape = out.content, "", "stop", "in-reasoning"
            return out
        return self._naked_500(t_us)


def _thinking_off(payload: dict) -> bool:
    """A payload whose chat_template_kwargs switch thinking off (which vLLM's GLM parser reads)."""
    kwargs = payload.get("chat_template_kwargs") if isinstance(payload, dict) else None
    return isinstance(kwargs, dict) and (kwargs.get("enable_thinking") is False or kwargs.get("thinking") is False)


def copy_outcome(o: Outcome) -> Outcome:
    """A shallow copy of an outcome (to change its latency without touching the original)."""
    c = Outcome.__new__(Outcome)
    for s in Outcome.__slots__:
        setattr(c, s, getattr(o, s))
    return c
