"""The fallback ladder driven by plain functions: a tool session's request, scripted replies, both runners.

``send(payload) -> (status, headers, body)`` is the runners' transport; :class:`ScriptedSend`
answers from a script (and counts the calls), :class:`FakeClock` stands in for the clock,
:func:`run_both` runs the sync and the async runner on the same script. Shared by
tests/unit/online/test_online_ladder.py and test_online_gate.py.
"""

from __future__ import annotations

import asyncio
import json

from analyzer.online import LadderSettings, arun_ladder, run_ladder

HISTORY = [
    {"role": "system", "content": "You are a map assistant."},
    {"role": "user", "content": "How much of Texas is protected?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "query", "arguments": '{"sql": "SELECT 1"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "| total |\n|---|\n| 61,883.4 |"},
]
TOOLS = [{"type": "function", "function": {"name": "query", "parameters": {"type": "object"}}}]


def tool_payload(**extra):
    """A GLM tool session's request: :data:`HISTORY` with :data:`TOOLS` offered, ``extra`` keys added."""
    return {"model": "glm-5", "messages": HISTORY, "tools": TOOLS, "tool_choice": "auto", **extra}


def answer(content="Here it is.", finish="stop", tool_calls=None, reasoning=None, tokens=10):
    """A chat-completions answer body, as bytes."""
    msg = {"role": "assistant", "content": content, "tool_calls": tool_calls or []}
    if reasoning:
        msg["reasoning_content"] = reasoning
    return json.dumps({"choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": tokens}}).encode()


NAKED_500 = (500, {"content-length": "0"}, b"")
EMPTY_STOP = (200, {}, answer(content="", tokens=1))
OK = (200, {"content-type": "application/json"}, answer())


class ScriptedSend:
    """A plain-function transport: replies (or exceptions) in order, last repeats."""

    def __init__(self, *replies, clock=None, cost=0.0):
        self.replies = list(replies)
        self.payloads = []
        self.clock = clock
        self.cost = cost

    def _next(self, payload):
        self.payloads.append(payload)
        if self.clock is not None:
            self.clock.now += self.cost
        reply = self.replies[min(len(self.payloads) - 1, len(self.replies) - 1)]
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def __call__(self, payload):
        return self._next(payload)

    async def coroutine(self, payload):
        await asyncio.sleep(0)
        return self._next(payload)

    @property
    def calls(self):
        return len(self.payloads)


class FakeClock:
    """A clock that moves only when told (``clock.now``), for the ladder's time budget."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def ladder(runner, payload, send, **kwargs):
    """``runner`` (run_ladder or arun_ladder) with ``kwargs`` as the settings and the call's deadline."""
    per_call = {k: kwargs.pop(k) for k in ("deadline", "time_left_s") if k in kwargs}
    return runner(payload, send, LadderSettings(**kwargs), **per_call)


def run_both(payload, make_send, **kwargs):
    """Run the sync and the async runner on identical scripts; return both results."""
    sync_send = make_send()
    sync = ladder(run_ladder, payload, sync_send, **kwargs)
    async_send = make_send()
    asyn = asyncio.run(ladder(arun_ladder, payload, async_send.coroutine, **kwargs))
    return (sync, sync_send), (asyn, async_send)
