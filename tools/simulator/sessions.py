"""Client sessions: multi-turn, tool-calling agent conversations through the proxy.

A :class:`Session` draws who it is (app, client build, model, thinking flag, caps,
how many questions), then plays its turns: each call goes through the proxy (through
:func:`analyzer.online.run_ladder` on ladder days), the client runs the tools the
model asked for, asks follow-ups, retries failures or gives up, and every exchange
becomes the proxy's log records (``request``, ``response``, a rejection's lone
``response``) with its ground truth. What the upstream answers comes from
:class:`~tools.simulator.answers.Answers` (successes) and
:class:`~tools.simulator.faults.Faults` (failures), the two halves of the session's
upstream.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Iterator
from typing import Any

from tools.simulator.answers import Answers
from tools.simulator.apps import AFTER_FAILURE, APP_BY_KEY, APPS, FOLLOW_UPS
from tools.simulator.clock import US, iso
from tools.simulator.draws import mix32, pick, ri, uuid4
from tools.simulator.faults import Faults, LadderUpstream, Outcome, TransportError, copy_outcome
from tools.simulator.models import PROFILES, STREAMING_ERROR, UNROUTED_MODELS, unknown_model_error
from tools.simulator.truth import Truth, intended_class, ladder_truth
from tools.simulator.world import Run, World

# The proxy's LOG_REASONING_MAX: reasoning_content is cut to this many characters.
_REASONING_MAX = 4000


class Session(Answers, Faults):
    """One client session: state plus the generator of its events."""

    def __init__(self, world: World, idx: int, t0_us: int, run: Run | None):
        self.w = world
        self.idx = idx
        self.rng = random.Random((world.seed << 32) | idx)
        self.t0 = t0_us
        self.run = run
        self.turn_seq = 0
        self.rid = ""

    # -- identity -----------------------------------------------------------

    def _plan(self) -> None:
        """Draw who the session is: app, client build, model, thinking, caps, length."""
        w, rng, t0 = self.w, self.rng, self.t0
        if self.run is not None:
            app = APP_BY_KEY[self.run.app]
        else:
            app = APPS[bisect.bisect_left(w.app_cum, rng.random())]
        self.app = app
        self.origin = app.origin + (self.run.path if self.run else "")
        proc = w.process_at(t0)
        legacy = proc is not None and w.procs[proc].version == "legacy"
        if not app.geo_agent:
            self.client, self.session_id = None, None
        elif self.run is None and rng.random() < (0.35 if legacy else 0.05):
            # An old app build: sends neither X-Client nor the OpenAI `user` field.
            self.client, self.session_id = None, None
        else:
            rollout = 0.3 if legacy else 0.85  # v3.13.1 rolled out mid-week
            self.client = "geo-agent/v3.13.1" if (self.run or rng.random() < rollout) else "geo-agent/v3.12.4"
            self.session_id = uuid4(rng)
        if self.run is not None:
            model = self.run.models[self.idx % len(self.run.models)]
        else:
            while True:
                model = w.mix_models[bisect.bisect_left(w.mix_cum, rng.random())]
                if not w.quiet_blocked(model, t0):
                    break
        self.kind = "normal"
        if model == "unrouted":
            self.kind, model = "unrouted", pick(rng, UNROUTED_MODELS)
        elif model == "streaming":
            self.kind, model = "streaming", pick(rng, ("glm-5", "qwen3", "anthropic/claude-sonnet-4.5"))
        self.model = model
        self.prof = PROFILES.get(model)
        self.provider = self.prof.provider if self.prof else "unrouted"
        r = rng.random()
        self.enable_thinking = None if not app.geo_agent else (True if r < 0.4 else False if r < 0.75 else None)
        if self.prof is not None and not self.prof.thinking_key and rng.random() < 0.7:
            self.enable_thinking = None  # app configs mostly send the flag only where it works
        self.max_tokens = 8192 if self.run else app.max_tokens
        r = rng.random()
        self.n_questions = 1 if (self.run or r < 0.45) else 2 if r < 0.70 else 3 if r < 0.85 else ri(rng, 4, 6)
        self.cap = 30 + ri(rng, 0, 2)
        self.deadline_s = app.deadline_s if self.run is None else None
        if self.prof is None:
            self.reasoning_on = False
        elif self.enable_thinking is not None and self.prof.thinking_key:
            self.reasoning_on = self.enable_thinking
        else:  # no thinking key for the model: the proxy ignores the flag
            self.reasoning_on = self.prof.reasoning_default

    # -- the session's events ----------------------------------------------

    def events(self) -> Iterator[tuple]:
        """Yield ``(t_us, seq, process, record, truth, extra)`` in time order."""
        self._plan()
        w, rng = self.w, self.rng
        t = self.t0
        if self.kind != "normal":
            yield from self._rejection(t)
            return
        app = self.app
        q = pick(rng, app.questions) if self.run is None else app.questions[self.idx % len(app.questions)]
        sys_body, sys_sha, sys_tokens = w.system_prompt(app, self.client)
        self.sys_msg = {"role": "system", "content": sys_body}
        self.sys_dedup = {"role": "system", "system_sha256": sys_sha, "content_len": len(sys_body), "_dedup": True}
        self.sys = (sys_sha, sys_body)
        self.messages: list[dict] = [self.sys_msg, {"role": "user", "content": q}]
        self.first_user = self.last_user = q
        self.ctx_tokens = sys_tokens + len(q) // 4 + 8
        self.tool_history = False
        self.requests = 0
        self.sticky_500 = False
        retry_of = None
        retries = 0
        questions_left = self.n_questions
        self.rounds = 0
        self.rounds_planned = self._plan_rounds()
        while True:
            if self.requests >= self.cap or t >= w.end_us:
                return
            if self.prof.pod_model and w.quiet_blocked(self.model, t, hard=True):
                return  # nobody uses this model tonight
            t, self.proc = w.admit(t, rng)
            if t >= w.end_us:
                return
            proc = w.procs[self.proc]
            self.ladder_day = proc.version == "ladder"
            self.mc = len(self.messages)
            want_tools = self.rounds < self.rounds_planned and bool(app.tools)
            # A call that would start a few seconds before a window of its model
            # starts inside it (the client took a moment), so it is not split.
            if self.prof.pod_model:
                s = w.next_window_start(self.model, t, t + 5 * US)
                if s is not None:
                    t = s + ri(rng, 0, 900_000)
            out, original, ladder, fields = self._exchange(t, want_tools)
            self.requests += 1
            self.turn_seq += 1
            rid = self.rid
            t_resp = t + out.latency_ms * 1000 + ri(rng, 0, 900)
            # The process died with this call in flight: no response record, and the
            # client sees its connection reset at the crash.
            crashed = (proc.ends_by == "crash" and out.kind != "config"
                       and t_resp >= self.w.proc_until[self.proc])
            # Or log_response raised and was swallowed (#37): the client got its
            # answer, only the response record is missing.
            log_failed = not crashed and out.kind != "config" and rng.random() < 0.002
            answered = not (crashed or log_failed)
            cls = "unanswered" if not answered else self._truth_class(original, t)
            truth = Truth(rid, cls, self.model, self.provider, iso(t), self.session_id, self.tool_history,
                          retry_of, ladder_truth(ladder))
            if out.kind == "config":
                # Rejected before log_request: only a response record exists.
                yield (t, self.turn_seq, self.proc, self._error_record(t, rid, out, fields), truth, None)
            else:
                req = self._request_record(t, rid, proc.capture == "full")
                yield (t, self.turn_seq, self.proc, req, truth,
                       {"sys": self.sys, "origin": self.origin} if proc.capture == "full" else {"paired": True})
                if answered:
                    rec = self._response_record(t_resp, rid, out, fields)
                    yield (t_resp, self.turn_seq, self.proc, rec, None, {"paired": True})
                elif log_failed:
                    yield (t_resp, self.turn_seq, self.proc, None, None,
                           {"paired": True, "note": "⚠️  log_response failed (request still served): TypeError: "
                                                    "Object of type bytes is not JSON serializable"})
            t = t_resp if not crashed else self.w.proc_until[self.proc] + ri(rng, 1_000, 50_000)
            # What the client does next.
            if out.kind == "ok" and not out.empty and not crashed:
                retries, retry_of, self.sticky_500 = 0, None, False
                if out.tool_calls:
                    self._append_tool_round(out)
                    self.rounds += 1
                    t += ri(rng, 400_000, 9_000_000)  # the client runs the tools
                    continue
                self.messages.append({"role": "assistant", "content": out.content})
                self.ctx_tokens += out.completion_tokens - (len(out.reasoning) // 4 if out.reasoning else 0)
                questions_left -= 1
                if questions_left <= 0:
                    return
                self._new_user_message(pick(rng, FOLLOW_UPS))
                t += int(rng.lognormvariate(math.log(60), 0.7) * US)  # the user reads and types
                continue
            # A failure, an empty answer, or the process died mid-call.
            retriable = out.kind in ("http", "timeout", "reset", "connect", "config", "ok") or crashed
            if out.kind == "http" and out.status in (400, 401, 402, 403) and not crashed:
                retriable = False
            if out.kind == "http" and out.status == 500 and self.tool_history:
                self.sticky_500 = True
            p_retry = 0.6 if out.kind in ("http", "connect", "reset", "config") or crashed else 0.4
            if self.client is not None and retriable and retries < 2 and rng.random() < p_retry:
                retries += 1
                retry_of = rid
                wait = int(out.headers.get("retry-after", "0")) if (out.headers and out.status == 429) else 0
                t += (wait * US) + ri(rng, 2_000_000, 8_000_000)
                continue
            retries, retry_of, self.sticky_500 = 0, None, False
            r = rng.random()
            if r < 0.55 or out.kind == "config" or (questions_left <= 1 and r < 0.8):
                return  # the user gives up
            if r < 0.8:
                self._new_user_message(pick(rng, AFTER_FAILURE), same_question=True)
            else:
                questions_left -= 1
                self._new_user_message(pick(rng, app.questions))
            t += int(rng.lognormvariate(math.log(25), 0.6) * US)

    def _plan_rounds(self) -> int:
        r = self.rng.random()
        if not self.app.tools:
            return 0
        return 0 if r < 0.12 else 1 if r < 0.35 else 2 if r < 0.6 else 3 if r < 0.78 else ri(self.rng, 4, 7)

    def _new_user_message(self, text: str, same_question: bool = False) -> None:
        self.messages.append({"role": "user", "content": text})
        self.last_user = text
        self.ctx_tokens += len(text) // 4 + 8
        if not same_question:
            self.rounds = 0
            self.rounds_planned = self._plan_rounds()

    def _append_tool_round(self, out: Outcome) -> None:
        self.messages.append({
            "role": "assistant", "content": out.content or None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                           for cid, name, args in out.tool_calls],
        })
        self.ctx_tokens += out.completion_tokens - (len(out.reasoning) // 4 if out.reasoning else 0)
        for cid, name, args in out.tool_calls:
            content = self._tool_result(name, args)
            self.messages.append({"role": "tool", "tool_call_id": cid, "content": content})
            self.ctx_tokens += len(content) // 3 + 10
        self.tool_history = True

    def _exchange(self, t: int, want_tools: bool):
        """The call through the proxy: plain, or through the ladder on ladder days."""
        self.rid = f"{mix32(((self.idx << 12) | (self.turn_seq + 1)) ^ self.w.id_salt):08x}"
        out = self._call(t, want_tools)
        if not self.ladder_day:
            return out, out, None, None
        online = self.w.online
        payload = self._payload()
        if out.kind in ("config", "cancel"):
            # Refused before the call, or the client hung up first (the handler is
            # cancelled): no ladder runs.
            return out, out, None, online.log_fields(payload, None, None, error=out.error)
        if not (self.provider == "nrp" and self.model.startswith("glm")):
            # The ladder is for the self-hosted GLM models; others only get the fields.
            status = out.status if out.kind in ("ok", "http") else None
            body = out.body_bytes(self.model, self.rid) if status is not None else None
            # The proxy's model gate: the ladder was not armed for this request.
            fields = online.log_fields(payload, status, body, error=None if status else out.error)
            return out, out, None, {**fields, "ladder_armed": False}
        upstream = LadderUpstream(self, t, out, None)
        # The trigger decides which recovery table the upstream plays; read it the
        # way the ladder will (from the original answer's features).
        if out.kind in ("ok", "http"):
            feats = online.features_from_exchange(payload, out.status, out.body_bytes(self.model, self.rid))
            upstream.trigger_cls = online.ladder_trigger(feats, length_recovery=True)
        try:
            settings = online.LadderSettings(flatten=True, length_recovery=True, max_attempts=5, time_budget_s=120.0,
                                             clock=upstream.clock)
            result = online.run_ladder(payload, upstream, settings)
        except TransportError:
            # The original call failed in transport: the proxy's own error path.
            return out, out, None, online.log_fields(payload, None, None, error=out.error)
        final = upstream.answers[-1] if result.recovered_at else upstream.answers[0]
        if len(upstream.answers) > 1:
            # The client waited for every attempt.
            final = copy_outcome(final)
            final.latency_ms = sum(a.latency_ms for a in upstream.answers) + 3 * (len(upstream.answers) - 1)
        fields = online.log_fields(payload, result.status, result.body, ladder=result)
        return final, out, result, fields

    def _payload(self) -> dict:
        """The chat-completions request the client sent (for the online module)."""
        p: dict[str, Any] = {"model": self.model, "messages": list(self.messages), "temperature": 0.0}
        if self.app.tools:
            p["tools"] = self.w.tool_defs(self.app)
            p["tool_choice"] = "auto"
        if self.max_tokens:
            p["max_tokens"] = self.max_tokens
        if self.session_id:
            p["user"] = self.session_id
        if self.enable_thinking is not None:
            p = self.w.online.normalize_thinking(p, self.model, self.enable_thinking)
        return p

    def _truth_class(self, out: Outcome, t_us: int) -> str:
        """The intended class of the call that started at ``t_us`` (see :func:`intended_class`)."""
        window = self.w.window(self.model, t_us) if self.prof and self.prof.pod_model else None
        return intended_class(out, window=window, tool_history=self.tool_history, finish_logged=self.ladder_day)

    # -- records -------------------------------------------------------------

    def _request_record(self, t: int, rid: str, full: bool) -> dict:
        msgs = self.messages
        results = []
        for m in reversed(msgs):
            role = m["role"]
            if role == "tool":
                results.append({"tool_call_id": m["tool_call_id"], "content": m["content"]})
            elif role == "assistant":
                break
        rec = {
            "timestamp": iso(t), "type": "request", "request_id": rid, "session_id": self.session_id,
            "client": self.client, "provider": self.provider, "model": self.model, "origin": self.origin,
            "message_count": len(msgs), "tools_count": len(self.app.tools), "enable_thinking": self.enable_thinking,
            "user_question": self.first_user, "user_message_this_turn": self.last_user,
            "tool_results_this_turn": results[::-1] if results else None,
        }
        if full:
            rec["messages"] = [self.sys_dedup, *msgs[1:]]
        return rec

    def _base(self, t: int, rid: str, latency_ms: int, provider: str | None = None) -> dict:
        return {"timestamp": iso(t), "type": "response", "request_id": rid, "session_id": self.session_id,
                "client": self.client, "provider": provider or self.provider, "model": self.model,
                "origin": self.origin, "latency_ms": latency_ms}

    def _error_record(self, t: int, rid: str, out: Outcome, fields: dict | None, provider: str | None = None) -> dict:
        rec = self._base(t, rid, out.latency_ms, provider)
        rec["error"] = out.error
        if out.headers:
            rec["upstream_headers"] = out.headers
        if fields:
            rec.update(fields)
        return rec

    def _response_record(self, t: int, rid: str, out: Outcome, fields: dict | None) -> dict:
        if out.kind != "ok":
            return self._error_record(t, rid, out, fields)
        rec = self._base(t, rid, out.latency_ms)
        content, reasoning = out.content, out.reasoning
        rec["has_content"] = bool(content)
        rec["has_tool_calls"] = bool(out.tool_calls)
        rec["has_reasoning_content"] = bool(reasoning)
        rec["content"] = content
        rec["reasoning_content"] = reasoning[:_REASONING_MAX]
        rec["content_preview"] = content[:200]
        rec["reasoning_content_preview"] = reasoning[:200]
        if out.tool_calls:
            rec["tool_calls"] = [{"name": name, "arguments": args} for _, name, args in out.tool_calls]
        if out.repaired:
            rec["tool_call_dialect_repaired"] = out.repaired
        rec["tokens"] = out.usage
        if fields:
            rec.update(fields)
        return rec

    def _rejection(self, t: int) -> Iterator[tuple]:
        """A request the proxy refused before routing: one response record, no request."""
        self.turn_seq += 1
        rid = f"{mix32(((self.idx << 12) | self.turn_seq) ^ self.w.id_salt):08x}"
        t, proc = self.w.admit(t, self.rng)
        if t >= self.w.end_us:
            return
        if self.kind == "unrouted":
            provider, error = "unrouted", unknown_model_error(self.model)
        else:
            provider, error = "streaming-unsupported", STREAMING_ERROR
        out = Outcome("rejected", 0, error=error)
        fields = None
        if self.w.procs[proc].version == "ladder":
            payload = {"model": self.model, "messages": [{"role": "user", "content": self.app.questions[0]}]}
            fields = self.w.online.log_fields(payload, None, None, error=error)
        rec = self._error_record(t, rid, out, fields, provider)
        truth = Truth(rid, "client-error", self.model, provider, iso(t), self.session_id, False, None, None)
        yield (t, 1, proc, rec, truth, None)
