#!/usr/bin/env python3
"""Scripted GLM sessions through a real LiteLLM proxy, and the sample LiteLLM week they write.

LiteLLM (the pinned ``litellm`` of the test extra) runs on 127.0.0.1 with the
config of :func:`config_yaml`: ``glm-5`` routed to :class:`tools.faulty_upstream.
FaultyUpstream` as a ``hosted_vllm/`` model, a fallback pair, a model with a short
timeout, and ``glm-5-ladder`` running analyzer.online's ladder inside LiteLLM
(``ladder/glm-5``, analyzer.integrations.litellm_ladder); its S3 logging callback
writes every call's StandardLoggingPayload to an S3 server. Each of :data:`CALLS`
is one client request whose upstream answers are scripted, with the class the
analyzer must give its turn (and, for the ladder, where it must recover).
tests/e2e/test_litellm.py drives them against a moto server and analyzes what
LiteLLM wrote; this script does the same and keeps the objects as the sample::

    python tools/litellm_week.py                    # rewrite sample_logs/litellm/{s3/,truth.json}
    python tools/litellm_week.py --out DIR

The sample is what LiteLLM wrote, with two changes said in its README: each
call's times are moved, by one offset per call, onto the sample week (Monday
2026-11-16 on; LiteLLM stamps the clock's time), and a day's objects are kept as
one gzip-compressed JSON-lines flush (LiteLLM's ``s3_batch_file_upload`` layout)
instead of one object per call, under ``s3/``. ``truth.json`` beside it holds each call's
expected class and ladder, and what the upstream received per rung.
tests/unit/tools/test_litellm_week.py checks the sample against it and this
script's calls.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import secrets
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools, run as a script from anywhere

from tools.faulty_upstream import (  # noqa: E402
    DROP_TOOLS,
    TOOL_CHOICE_NONE,
    FaultyUpstream,
    Reply,
    Script,
    always,
    answer_in_reasoning,
    completion,
    empty_200_stop,
    fail_until,
    glm53,
    hang_up,
    length_no_content,
    naked_500,
    ok,
    rate_limited,
    refused_shape,
    refusing,
    slow,
    tool_call_answer,
)
from tools.litellm_payloads import TOOL_HISTORY, TOOLS  # noqa: E402
from tools.litellm_proxy import LiteLLMProxy  # noqa: E402
from tools.loopback import free_port  # noqa: E402

BUCKET = "llm-logs"
PREFIX = "litellm"
SAMPLE = ROOT / "sample_logs" / "litellm"
WEEK_START = datetime(2026, 11, 16, tzinfo=timezone.utc).timestamp()  # Monday of ISO week 2026-W47


def _mismatch() -> Reply:
    """Tool calls with ``finish_reason: stop``: the client may never run the tool."""
    call = {"id": "call-1", "type": "function", "function": {"name": "query", "arguments": '{"sql": "SELECT 1"}'}}
    return completion("", finish_reason="stop", tool_calls=[call])


def _by_model(failing: str, failure: Callable[[], Reply], success: Callable[[], Reply]) -> Script:
    """``failure`` for payloads to the upstream model ``failing``, ``success`` for the rest (a fallback pair)."""
    return lambda payload: failure() if payload.get("model") == failing else success()


def _no_choices() -> Reply:
    return Reply(200, b'{"id": "x", "object": "chat.completion", "model": "glm-5", "choices": []}',
                 (("content-type", "application/json"), ("server", "uvicorn")))


def _empty_body() -> Reply:
    return Reply(200, b"", (("content-type", "application/json"), ("server", "uvicorn")))


def _refuses_tool_choice_none(script: Script) -> Script:
    return refusing(lambda p: p.get("tool_choice") == "none", script)


@dataclass(frozen=True)
class Call:
    """One client request through LiteLLM: its upstream's script and what the analyzer must say of it."""

    name: str
    session: str
    model: str  # the model group the client asks LiteLLM for
    script: Callable[[], Script]  # a fresh upstream script for this call
    expected: str  # the turn's class
    tool_history: bool = True  # the prompt carries an earlier tool call and its result
    body: dict = field(default_factory=dict)  # more of the client's request (stream, chat_template_kwargs)
    outcome: str | None = None  # the ladder's outcome (glm-5-ladder only; None: it did not run)
    recovered_at: str | None = None
    day: int = 0  # the sample week's day (0: Monday)


# Every class LiteLLM's logs can show (the pod windows need metrics; late-200 a
# 300 s answer; tool-call-stop-mismatch LiteLLM itself repairs), each through
# LiteLLM's own hosted_vllm provider, then the ladder.
CALLS: tuple[Call, ...] = (
    Call("ok", "agent-1", "glm-5", lambda: always(ok), "ok", tool_history=False, day=0),
    Call("tool-call", "agent-1", "glm-5", lambda: always(tool_call_answer), "ok", tool_history=False, day=0),
    Call("naked-500-tools", "agent-1", "glm-5", lambda: always(naked_500), "tool-history-5xx", day=0),
    Call("naked-500-first-turn", "agent-2", "glm-5", lambda: always(naked_500), "other-5xx", tool_history=False,
         day=0),
    Call("empty-200", "agent-2", "glm-5", lambda: always(empty_200_stop), "empty-200-stop", day=1),
    Call("answer-in-reasoning", "agent-2", "glm-5", lambda: always(answer_in_reasoning), "answer-in-reasoning",
         day=1),
    Call("length", "agent-3", "glm-5", lambda: always(length_no_content), "length-with-no-content", day=1),
    Call("leaked-think", "agent-3", "glm-5",
         lambda: always(lambda: completion("The user wants the total; check the schema.</think>Texas.")),
         "reasoning-leaked", day=2),
    # LiteLLM's hosted_vllm provider splits a content that opens with a think block into
    # reasoning_content itself: the client never sees that block, and the turn is ok
    Call("think-split-by-litellm", "agent-3", "glm-5",
         lambda: always(lambda: completion("<think>Sum the rows.</think>Texas.")), "ok", day=2),
    Call("rate-limited", "agent-3", "glm-5", lambda: always(rate_limited), "rate-limited", day=2),
    Call("bad-request", "agent-4", "glm-5", lambda: always(refused_shape), "client-error", day=2),
    Call("hang-up", "agent-4", "glm-5", lambda: always(hang_up), "connection-error", day=3),
    Call("read-timeout", "agent-4", "glm-5-short", lambda: always(slow(ok(), 3.0)), "timeout", day=3),
    Call("empty-body", "agent-5", "glm-5", lambda: always(_empty_body), "empty-200-stop", day=3),
    Call("no-choices", "agent-5", "glm-5", lambda: always(_no_choices), "no-answer-200", day=4),
    # LiteLLM rewrites finish_reason stop to tool_calls when the answer calls tools: the client
    # runs the tool, and the turn is ok (tool-call-stop-mismatch is never in LiteLLM's logs)
    Call("tool-call-stop", "agent-5", "glm-5", lambda: always(_mismatch), "ok", day=4),
    # LiteLLM's own fallback: glm-5-fb fails, glm-5-bk answers; one turn, the answer the client got
    Call("fallback", "agent-6", "glm-5-fb", lambda: _by_model("glm-5-fb", naked_500, ok), "ok", day=4),
    Call("fallback-both-fail", "agent-6", "glm-5-fb", lambda: always(naked_500), "tool-history-5xx", day=4),
    # the ladder inside LiteLLM
    Call("ladder-drop-tools", "ladder-1", "glm-5-ladder", lambda: fail_until(DROP_TOOLS), "tool-history-5xx",
         outcome="recovered", recovered_at="drop_tools", day=5),
    Call("ladder-exhausted", "ladder-1", "glm-5-ladder", lambda: always(naked_500), "tool-history-5xx",
         outcome="exhausted", day=5),
    Call("ladder-empty-200", "ladder-2", "glm-5-ladder", lambda: fail_until(TOOL_CHOICE_NONE, empty_200_stop),
         "empty-200-stop", outcome="recovered", recovered_at="tool_choice_none", day=5),
    Call("ladder-answer-in-reasoning", "ladder-2", "glm-5-ladder",
         lambda: fail_until(DROP_TOOLS, answer_in_reasoning), "answer-in-reasoning", outcome="recovered",
         recovered_at="drop_tools", day=6),
    Call("ladder-refused-rung", "ladder-3", "glm-5-ladder", lambda: _refuses_tool_choice_none(fail_until(DROP_TOOLS)),
         "tool-history-5xx", outcome="recovered", recovered_at="drop_tools", day=6),
    Call("ladder-leak-repaired", "ladder-3", "glm-5-ladder", lambda: glm53(always(ok)), "reasoning-leaked",
         body={"chat_template_kwargs": {"enable_thinking": False}}, day=6),
    Call("ladder-streamed", "ladder-3", "glm-5-ladder", lambda: fail_until(DROP_TOOLS), "tool-history-5xx",
         body={"stream": True}, outcome="recovered", recovered_at="drop_tools", day=6),
    Call("ladder-ok", "ladder-4", "glm-5-ladder", lambda: always(ok), "ok", tool_history=False, day=6),
    Call("ladder-hang-up", "ladder-4", "glm-5-ladder", lambda: always(hang_up), "connection-error", day=6),
)


def config_yaml(upstream: str, s3_endpoint: str, access_key: str, secret_key: str) -> str:
    """LiteLLM's config: the routes of :data:`CALLS`, cooldowns and retries off, S3 logging to ``s3_endpoint``."""
    def route(name: str, model: str, **extra: Any) -> str:
        lines = [f"  - model_name: {name}", "    litellm_params:", f"      model: {model}",
                 f"      api_base: {upstream}/v1", "      api_key: none"]
        lines += [f"      {k}: {v}" for k, v in extra.items()]
        return "\n".join(lines)

    return "\n".join([
        "model_list:",
        route("glm-5", "hosted_vllm/glm-5", timeout=30),
        route("glm-5-short", "hosted_vllm/glm-5", timeout=1),
        route("glm-5-fb", "hosted_vllm/glm-5-fb", timeout=30),
        route("glm-5-bk", "hosted_vllm/glm-5-bk", timeout=30),
        route("glm-5-ladder", "ladder/glm-5", timeout=30),
        "router_settings:",
        "  disable_cooldowns: true      # one deployment per group: a cooldown would refuse the next call",
        "  fallbacks: [{\"glm-5-fb\": [\"glm-5-bk\"]}]",
        "litellm_settings:",
        "  num_retries: 0",
        "  success_callback: [\"s3_v2\"]",
        "  failure_callback: [\"s3_v2\"]",
        "  custom_provider_map:",
        "    - {\"provider\": \"ladder\", \"custom_handler\": analyzer.integrations.litellm_ladder.ladder}",
        "  s3_callback_params:",
        f"    s3_bucket_name: {BUCKET}",
        f"    s3_path: {PREFIX}",
        "    s3_region_name: us-east-1",
        f"    s3_endpoint_url: {s3_endpoint}",
        f"    s3_aws_access_key_id: {access_key}",
        f"    s3_aws_secret_access_key: {secret_key}",
        "",
    ])


#: LiteLLM's environment for the calls: its S3 callback flushes every second (its default is 10 s).
LITELLM_ENV = {"DEFAULT_S3_FLUSH_INTERVAL_SECONDS": "1"}


def request_body(call: Call) -> dict:
    """What the client sends for ``call``: an agent's turn (after a tool call and its result, or a first turn)."""
    messages = TOOL_HISTORY if call.tool_history else [{"role": "user", "content": "How much land is protected?"}]
    body = {"model": call.model, "messages": messages, "tools": TOOLS, "user": call.session, "max_tokens": 1024}
    body.update(call.body)
    return body


@dataclass
class Driven:
    """One call as it went: LiteLLM's call id (the turn's request id), the client's status, the upstream's rungs."""

    call: Call
    call_id: str
    status: int
    rungs: list[str | None]


def drive(proxy: LiteLLMProxy, upstream: FaultyUpstream, calls: tuple[Call, ...] = CALLS) -> list[Driven]:
    """Send each call through LiteLLM, its upstream scripted, one after the other."""
    out = []
    for call in calls:
        upstream.script = call.script()
        before = upstream.count
        r = proxy.chat(request_body(call))
        call_id = r.headers.get("x-litellm-call-id")
        if not call_id:
            raise RuntimeError(f"{call.name}: LiteLLM answered {r.status_code} without x-litellm-call-id: "
                               f"{r.text[:300]}")
        out.append(Driven(call, call_id, r.status_code, upstream.rungs_seen()[before:]))
    return out


def rungs_received(driven: list[Driven]) -> dict[str, int]:
    """How many requests the upstream received per rung, over the calls whose ladder ran."""
    counts: Counter = Counter()
    for d in driven:
        if d.call.outcome is not None:
            counts.update(d.rungs)
    return dict(sorted(counts.items()))


def wait_for_objects(s3, expected: int, timeout_s: float = 60.0) -> list[str]:
    """The keys LiteLLM's S3 callback wrote, once there are at least ``expected`` (it flushes every second)."""
    deadline = time.monotonic() + timeout_s
    keys: list[str] = []
    while time.monotonic() < deadline:
        keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX)
                for o in page.get("Contents", [])]
        if len(keys) >= expected:
            time.sleep(1.5)  # a last flush in flight
            return [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=PREFIX)
                    for o in page.get("Contents", [])]
        time.sleep(0.25)
    raise RuntimeError(f"LiteLLM wrote {len(keys)} objects in {timeout_s:.0f} s, expected {expected}")


def truth_of(driven: list[Driven]) -> dict:
    """What the calls were scripted to be: per call id its name, class, session and ladder; the rungs received."""
    calls = {d.call_id: {"name": d.call.name, "class": d.call.expected, "session": d.call.session,
                         "model": d.call.model, "ladder_outcome": d.call.outcome,
                         "recovered_at": d.call.recovered_at, "client_status": d.status}
             for d in driven}
    return {"calls": calls, "class_counts": dict(sorted(Counter(d.call.expected for d in driven).items())),
            "rungs_received": rungs_received(driven)}


# ---------------------------------------------------------------------------
# The sample week


def _shift(payload: dict, delta: float) -> dict:
    """``payload`` with its times moved by ``delta`` seconds (nothing else changed)."""
    out = dict(payload)
    for key in ("startTime", "endTime", "completionStartTime"):
        if isinstance(out.get(key), (int, float)):
            out[key] = out[key] + delta
    response = out.get("response")
    if isinstance(response, dict) and isinstance(response.get("created"), int):
        out["response"] = {**response, "created": int(response["created"] + delta)}
    return out


def sample_files(payloads: list[dict], driven: list[Driven]) -> dict[str, bytes]:
    """The sample's files: each call moved onto its day of the week, a day's payloads as one gzip JSON-lines flush."""
    day_of = {d.call_id: d.call.day for d in driven}
    order = {d.call_id: i for i, d in enumerate(driven)}
    first: dict[str, float] = {}
    for p in payloads:
        cid = p["litellm_call_id"]
        first[cid] = min(first.get(cid, p["startTime"]), p["startTime"])
    days: dict[int, list[dict]] = {}
    for p in sorted(payloads, key=lambda p: (order[p["litellm_call_id"]], p["startTime"])):
        cid = p["litellm_call_id"]
        # each call at 15:00 of its day, seven minutes after the one before it that day
        slot = sum(1 for c in order if day_of[c] == day_of[cid] and order[c] < order[cid])
        target = WEEK_START + day_of[cid] * 86400 + 15 * 3600 + slot * 420
        days.setdefault(day_of[cid], []).append(_shift(p, target - first[cid]))
    files = {}
    for day, items in sorted(days.items()):
        start = datetime.fromtimestamp(items[0]["startTime"], timezone.utc)
        name = f"{start:%Y-%m-%d}/batch_{start:%H-%M-%S}_{day:02d}.jsonl.gz"
        text = "".join(json.dumps(p, sort_keys=False) + "\n" for p in items).encode()
        files[name] = gzip.compress(text, mtime=0)
    return files


def run(out: Path) -> dict:
    """Drive :data:`CALLS` through a real LiteLLM into a moto S3 server; write the sample under ``out``."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    access, secret = "AKIALITELLMWEEK0001", secrets.token_hex(16)
    port = free_port()
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                          aws_access_key_id=access, aws_secret_access_key=secret)
        s3.create_bucket(Bucket=BUCKET)
        with tempfile.TemporaryDirectory(prefix="litellm-week-") as tmp, FaultyUpstream() as upstream:
            config = Path(tmp) / "config.yaml"
            config.write_text(config_yaml(upstream.url, endpoint, access, secret), encoding="utf-8")
            with LiteLLMProxy(config, env=LITELLM_ENV) as proxy:
                driven = drive(proxy, upstream)
                keys = wait_for_objects(s3, expected=len(driven))
            payloads = [json.loads(s3.get_object(Bucket=BUCKET, Key=k)["Body"].read()) for k in keys]
    finally:
        moto.stop()
    for part in ("s3", "truth.json"):  # (README.md is written by hand)
        if (out / part).is_dir():
            shutil.rmtree(out / part)
        elif (out / part).exists():
            (out / part).unlink()
    for name, data in sample_files(payloads, driven).items():
        (out / "s3" / name).parent.mkdir(parents=True, exist_ok=True)
        (out / "s3" / name).write_bytes(data)
    truth = truth_of(driven)
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n", encoding="utf-8")
    return truth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=SAMPLE, help="output folder (default: sample_logs/litellm/)")
    args = parser.parse_args(argv)
    truth = run(args.out)
    print(f"{len(truth['calls'])} calls written to {args.out}: {truth['class_counts']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
