#!/usr/bin/env python3
"""The fallback ladder inside the real open-llm-proxy, end to end, against a faulty upstream.

A rerunnable trial of ``docs/integrations/open-llm-proxy.patch``: it serves the
patched proxy (its own ``llm_proxy.py``, with uvicorn, on 127.0.0.1) in front of
:class:`tools.faulty_upstream.FaultyUpstream`, sends a few hundred scripted
requests (GLM tool sessions whose naked 500s or empty 200s a given rung fixes,
ones no rung fixes, timeouts, a rung cut off at the caller's deadline, 429s,
gzip answers, non-GLM models, thinking keys and budgets, the proxy's own
refusals), then ingests the proxy's stdout with the analyzer and compares, per
class and per rung, four accounts of the same traffic: what the upstream was
scripted to do and actually received, what the client got, what the proxy
logged, and what the analyzer made of the log. It prints both tables and exits
1 on any disagreement (2 when the trial could not run).

Nothing of the proxy is in this file: it clones the proxy at the pinned commit
and applies the patch (or takes ``--proxy``, a checkout with the patch applied),
copies that checkout to a scratch folder and writes a ``config.json`` there that
routes the models below to the faulty upstream.

Run from the analyzer's checkout, in an environment with the analyzer installed
(``pip install -e .``); the proxy runs under ``--proxy-python`` (default: this
interpreter), which needs the proxy's requirements (fastapi, uvicorn, httpx,
pydantic)::

    python tools/proxy_trial.py --repo PATH_OR_URL_OF_open-llm-proxy
    python tools/proxy_trial.py --proxy ~/src/open-llm-proxy --proxy-python ~/olp-venv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import filecmp
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools.faulty_upstream, run as a script from anywhere

import httpx  # noqa: E402  (an analyzer dependency)

from tools.faulty_upstream import (  # noqa: E402
    DROP_TOOLS,
    FINAL_ANSWER,
    ORIGINAL,
    TOOL_CHOICE_NONE,
    FaultyUpstream,
    Reply,
    answer_in_reasoning,
    completion,
    empty_200_stop,
    hang_up,
    naked_500,
    ok,
    payload_rung,
    rate_limited,
    slow,
    thinking_disabled,
)
from tools.loopback import free_port  # noqa: E402

PINNED_COMMIT = "2494c080a672eabc8ead0532c79df123e9a2007e"
DEFAULT_REPO = os.environ.get("OPEN_LLM_PROXY_REPO", "https://github.com/boettiger-lab/open-llm-proxy")
PATCH = ROOT / "docs" / "integrations" / "open-llm-proxy.patch"

PROXY_KEY = "trial-key"
# The proxy's knobs for the trial: a short upstream read timeout, and a short
# caller deadline (SLOW_COMPLETION_WARN_SECONDS, which the patch also uses as the
# ladder's deadline) so the timeout, deadline and late-200 cases take seconds.
UPSTREAM_TIMEOUT_S = 6
CALLER_DEADLINE_S = 3
ANSWER = "Here is the answer."
MARK = re.compile(r"\[trial:([a-z0-9-]+):(\d+)\]")


# ---------------------------------------------------------------------------
# The cases: what the upstream answers per rung, and what every account should say


def gzipped(reply: Callable[[], Reply]) -> Callable[[], Reply]:
    """``reply`` with a gzip-compressed body and ``content-encoding: gzip``."""
    def make() -> Reply:
        r = reply()
        return Reply(r.status, gzip.compress(r.body), r.headers + (("content-encoding", "gzip"),),
                     r.delay_s, r.disconnect)
    return make


def delayed(reply: Callable[[], Reply], seconds: float) -> Callable[[], Reply]:
    return lambda: slow(reply(), seconds)


def leaked() -> Reply:
    """A GLM-5.3 answer whose scratchpad and dangling </think> reached the content
    (thinking "off" sent as a false key: vllm-project/vllm#54744)."""
    return completion("The user asks for a share; the schema has it.</think>" + ANSWER)


def refused_422() -> Reply:
    body = json.dumps({"object": "error", "message": "tool_choice 'none' is not supported", "code": 422})
    return Reply(422, body.encode(), (("server", "uvicorn"), ("content-type", "application/json")))


@dataclass(frozen=True)
class Case:
    """One class of scripted requests and what each account of them should say."""

    name: str
    replies: dict[str, Callable[[], Reply]]  # rung -> reply; "*" for every other rung
    status: int  # what the client gets
    rungs: tuple[str, ...]  # the calls the upstream receives, in order
    incident: str  # logged incident_class (the original answer's class)
    final: str  # logged final_class (the answer passed on)
    outcome: str | None = None  # ladder.outcome, None when the ladder did not trigger
    recovered_at: str | None = None
    model: str = "glm-5"
    tool_history: bool = True
    body: dict = field(default_factory=dict)  # extra request fields
    kwargs: dict | None = None  # chat_template_kwargs the upstream must receive (None: none sent)
    no_false_key: bool = False  # no call may carry a false enable_thinking/thinking (a GLM-5.3 template)
    budget: int | None = None  # thinking_token_budget the upstream must receive
    detail: str | None = None  # text the client's error detail must contain

    @property
    def trigger(self) -> str | None:
        return self.incident if self.outcome else None

    @property
    def armed(self) -> bool | None:
        """The logged ``ladder_armed``: the model gate's answer, null without an upstream answer."""
        if self.incident in ("timeout", "connection-error"):
            return None  # the original call raised: no ladder result to ask
        return "glm" in self.model.lower()


O, T, D, F = ORIGINAL, TOOL_CHOICE_NONE, DROP_TOOLS, FINAL_ANSWER
TH5, E200, AIR = "tool-history-5xx", "empty-200-stop", "answer-in-reasoning"
CASES: tuple[Case, ...] = (
    Case("glm-ok", {"*": ok}, 200, (O,), "ok", "ok"),
    Case("glm-500-fixed-at-tool-choice-none", {O: naked_500, "*": ok}, 200, (O, T), TH5, "ok",
         "recovered", T),
    Case("glm-500-fixed-at-drop-tools", {O: naked_500, T: naked_500, "*": ok}, 200, (O, T, D), TH5, "ok",
         "recovered", D),
    Case("glm-500-fixed-at-final-answer", {O: naked_500, T: naked_500, D: naked_500, "*": ok}, 200,
         (O, T, D, F), TH5, "ok", "recovered", F),
    Case("glm-empty200-fixed-at-drop-tools", {O: empty_200_stop, T: empty_200_stop, "*": ok}, 200,
         (O, T, D), E200, "ok", "recovered", D),
    Case("glm-500-every-rung", {"*": naked_500}, 502, (O, T, D, F), TH5, TH5, "exhausted"),
    Case("glm-empty200-every-rung", {"*": empty_200_stop}, 200, (O, T, D, F), E200, E200, "exhausted"),
    Case("glm-500-rung-refused-422", {O: naked_500, T: refused_422, "*": ok}, 200, (O, T, D), TH5, "ok",
         "recovered", D),
    Case("glm-gzip-ok", {"*": gzipped(ok)}, 200, (O,), "ok", "ok"),
    Case("glm-500-fixed-by-gzip-answer", {O: naked_500, "*": gzipped(ok)}, 200, (O, T), TH5, "ok",
         "recovered", T),
    Case("glm-429-gzip", {"*": gzipped(rate_limited)}, 429, (O,), "rate-limited", "rate-limited",
         detail="Rate limit exceeded"),
    Case("glm-read-timeout", {"*": delayed(ok, UPSTREAM_TIMEOUT_S + 4)}, 504, (O,), "timeout", "timeout"),
    Case("glm-500-rung-past-deadline", {O: naked_500, "*": delayed(ok, CALLER_DEADLINE_S + 20)}, 502, (O, T),
         TH5, TH5, "deadline"),
    Case("glm-late-200", {"*": delayed(ok, CALLER_DEADLINE_S + 0.6)}, 200, (O,), "late-200", "late-200"),
    Case("glm-hang-up", {"*": hang_up}, 502, (O,), "connection-error", "connection-error"),
    Case("glm-500-no-tool-history", {"*": naked_500}, 502, (O,), "other-5xx", "other-5xx", tool_history=False),
    Case("qwen-500-not-armed", {"*": naked_500}, 502, (O,), TH5, TH5, model="qwen3"),
    Case("qwen-ok", {"*": ok}, 200, (O,), "ok", "ok", model="qwen3",
         body={"enable_thinking": False}, kwargs={"enable_thinking": False}),
    Case("glm-thinking-budget-512", {"*": ok}, 200, (O,), "ok", "ok",
         body={"enable_thinking": True, "thinking_token_budget": 512, "max_tokens": 2048},
         kwargs={"enable_thinking": True, "thinking": True, "clear_thinking": False}, budget=512),
    Case("glm-budget-minus-5", {"*": ok}, 400, (), "client-error", "client-error",
         body={"thinking_token_budget": -5}, detail="thinking_token_budget"),
    Case("glm-streaming", {"*": ok}, 400, (), "client-error", "client-error", body={"stream": True}),
    Case("unrouted-model", {"*": ok}, 400, (), "client-error", "client-error", model="no-such-model"),
    Case("glm-provider-key-missing", {"*": ok}, 500, (), "other-5xx", "other-5xx", model="glm-nokey"),
    # GLM as it fails today. glm-5-next is configured as GLM-5.3 (thinking_templates):
    # thinking off is reasoning_effort low, the injected false key taken out.
    Case("glm53-thinking-off", {"*": ok}, 200, (O,), "ok", "ok", model="glm-5-next",
         body={"enable_thinking": False}, kwargs={"reasoning_effort": "low"}, no_false_key=True),
    Case("glm53-thinking-on", {"*": ok}, 200, (O,), "ok", "ok", model="glm-5-next",
         body={"enable_thinking": True}, kwargs={"enable_thinking": True, "clear_thinking": False},
         no_false_key=True),
    # A GLM of a vLLM provider without its own thinking_models entry still gets the normalizer's keys.
    Case("glm53-unlisted-thinking-off", {"*": ok}, 200, (O,), "ok", "ok", model="glm-53",
         body={"enable_thinking": False}, kwargs={"reasoning_effort": "low"}, no_false_key=True),
    Case("glm53-500-every-rung-no-false-key", {"*": naked_500}, 502, (O, T, D, F), TH5, TH5, "exhausted",
         model="glm-5-next", body={"enable_thinking": False}, kwargs={"reasoning_effort": "low"},
         no_false_key=True),
    # glm-5 without the override: false keys, the scratchpad leaks, the ladder splits it out.
    Case("glm-leak-repaired", {"*": leaked}, 200, (O,), "reasoning-leaked", "ok",
         body={"enable_thinking": False}, kwargs={"enable_thinking": False, "thinking": False}),
    Case("glm-in-reasoning-fixed-tool-choice", {O: answer_in_reasoning, "*": ok}, 200, (O, T),
         AIR, "ok", "recovered", T),
)
BY_NAME = {c.name: c for c in CASES}


def request_body(case: Case, i: int) -> dict:
    """A geo-agent-like chat request; the marker names the case for the upstream."""
    marker = f"[trial:{case.name}:{i}]"
    messages: list[dict] = [
        {"role": "system", "content": "You are a map assistant with SQL tools."},
        {"role": "user", "content": f"{marker} What share of the county is protected?"},
    ]
    if case.tool_history:
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [{
                "id": f"call-{i}", "type": "function",
                "function": {"name": "query", "arguments": '{"sql": "SELECT 1"}'}}]},
            {"role": "tool", "tool_call_id": f"call-{i}", "content": "[[0.42]]"},
        ]
    tools = [{"type": "function", "function": {
        "name": "query", "description": "Run SQL", "parameters": {"type": "object", "properties": {
            "sql": {"type": "string"}}}}}]
    return {"model": case.model, "messages": messages, "tools": tools, "user": session_of(case, i),
            **case.body}


def session_of(case: Case, i: int) -> str:
    return f"trial-{case.name}-{i}"


# ---------------------------------------------------------------------------
# The upstream, the proxy, the client


class Script:
    """The upstream's script: each request answered by its case's reply for its rung."""

    def __init__(self) -> None:
        # session -> [(rung, payload, status answered)]
        self.seen: dict[str, list[tuple[str, dict, int]]] = defaultdict(list)

    def __call__(self, payload: dict) -> Reply:
        text = json.dumps(payload.get("messages"))
        m = MARK.search(text)
        if not m or m.group(1) not in BY_NAME:
            return Reply(599, b"unknown trial marker", ())
        case = BY_NAME[m.group(1)]
        rung = payload_rung(payload)
        reply = (case.replies.get(rung) or case.replies["*"])()
        self.seen[session_of(case, int(m.group(2)))].append((rung, payload, reply.status))  # one writer per session
        return reply


class TrialError(Exception):
    """The trial could not run (exit 2), as opposed to a disagreement (exit 1)."""


def proxy_config(upstream_url: str) -> dict:
    """Route the trial's models to the faulty upstream; one provider without its key."""
    return {
        "providers": {
            "nrp": {"endpoint": upstream_url, "api_key_env": "TRIAL_UPSTREAM_KEY",
                    "models": ["glm-5", "qwen3", "glm-5-next", "glm-53"], "model_prefixes": [],
                    "thinking_models": {"glm-5": "enable_thinking", "qwen3": "enable_thinking",
                                        "glm-5-next": "enable_thinking"},
                    "thinking_templates": {"glm-5-next": "glm-5.3", "glm-53": "GLM-5.3"}},
            "keyless": {"endpoint": upstream_url, "api_key_env": "TRIAL_KEY_THAT_IS_NOT_SET",
                        "models": ["glm-nokey"], "model_prefixes": []},
        },
        "default_provider": None,  # an unknown model is refused (unrouted), not sent upstream
    }


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def prepare_proxy(args: argparse.Namespace, scratch: Path) -> Path:
    """A runnable copy of the patched proxy in ``scratch/proxy``."""
    if args.proxy:
        src = Path(args.proxy).resolve()
    else:
        src = scratch / "checkout"
        run(["git", "clone", "-q", args.repo, str(src)])
        run(["git", "-C", str(src), "checkout", "-q", args.commit])
        run(["git", "-C", str(src), "apply", "--check", str(args.patch)])
        run(["git", "-C", str(src), "apply", str(args.patch)])
        print(f"applied {args.patch.relative_to(ROOT) if args.patch.is_relative_to(ROOT) else args.patch}"
              f" to a clone of {args.commit[:7]}", file=sys.stderr)
    if "arun_ladder" not in (src / "llm_proxy.py").read_text(encoding="utf-8"):
        raise TrialError(f"{src}/llm_proxy.py does not call the ladder: apply the patch first")
    dest = scratch / "proxy"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".git", "headless", "__pycache__"))
    vendored, ours = dest / "analyzer" / "online", ROOT / "analyzer" / "online"
    if args.vendor_current or not vendored.is_dir():
        shutil.rmtree(vendored, ignore_errors=True)
        shutil.copytree(ours, vendored, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
        print("analyzer.online: this checkout's copy, not the one the patch vendors", file=sys.stderr)
    else:
        differ = [p.name for p in sorted(ours.glob("*.py"))
                  if not (vendored / p.name).is_file() or not filecmp.cmp(p, vendored / p.name, shallow=False)]
        if differ:
            print(f"note: the proxy's vendored analyzer/online differs from this checkout's in {differ} "
                  "(--vendor-current runs this checkout's)", file=sys.stderr)
    return dest


def start_proxy(proxy_dir: Path, python: str, upstream_url: str, out: Any) -> tuple[subprocess.Popen, str]:
    """Serve the proxy on a free loopback port, its stdout and stderr into ``out``."""
    (proxy_dir / "config.json").write_text(json.dumps(proxy_config(upstream_url), indent=2))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PROXY_KEY", "LADDER_"))}
    env.update(PROXY_KEY=PROXY_KEY, TRIAL_UPSTREAM_KEY="upstream-key", PYTHONUNBUFFERED="1",
               PYTHONIOENCODING="utf-8", UPSTREAM_TIMEOUT_SECONDS=str(UPSTREAM_TIMEOUT_S),
               SLOW_COMPLETION_WARN_SECONDS=str(CALLER_DEADLINE_S), CACHE_SALT="")
    port = free_port()
    try:
        proc = subprocess.Popen([python, "-m", "uvicorn", "llm_proxy:app", "--host", "127.0.0.1",
                                 "--port", str(port), "--workers", "1"],
                                cwd=proxy_dir, env=env, stdout=out, stderr=subprocess.STDOUT)
    except OSError as exc:
        raise TrialError(f"cannot start the proxy with {python}: {exc}") from exc
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out.flush()
            raise TrialError(f"the proxy exited ({proc.returncode}); its output:\n{Path(out.name).read_text()[-3000:]}")
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.1)
    stop_proxy(proc)
    raise TrialError("the proxy did not answer /health within 30 s")


def stop_proxy(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def send_all(base: str, per_case: int, concurrency: int) -> dict[str, tuple[int | None, Any]]:
    """POST every case's requests, interleaved; session -> (status, JSON body or text)."""
    got: dict[str, tuple[int | None, Any]] = {}
    gate = asyncio.Semaphore(concurrency)
    headers = {"Authorization": f"Bearer {PROXY_KEY}", "X-Client": "proxy-trial/1",
               "Origin": "https://trial.example"}

    async def one(client: httpx.AsyncClient, case: Case, i: int) -> None:
        async with gate:
            try:
                r = await client.post(f"{base}/v1/chat/completions", json=request_body(case, i), headers=headers)
                try:
                    doc: Any = r.json()
                except ValueError:
                    doc = r.text
                got[session_of(case, i)] = (r.status_code, doc)
            except httpx.HTTPError as exc:
                got[session_of(case, i)] = (None, f"{type(exc).__name__}: {exc}")

    async with httpx.AsyncClient(timeout=60) as client:
        await asyncio.gather(*(one(client, c, i) for i in range(per_case) for c in CASES))
    return got


# ---------------------------------------------------------------------------
# The accounts


def read_proxy_log(path: Path) -> dict[str, dict]:
    """session -> the proxy's response record, from its stdout."""
    out = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        for prefix in ("✓ RESPONSE: ", "✗ RESPONSE: "):
            if line.startswith(prefix):
                rec = json.loads(line[len(prefix):])
                out[rec.get("session_id")] = rec
    return out


def analyze(log: Path, db: Path) -> tuple[dict, list[dict], list[dict], list[dict]]:
    """Ingest the proxy's stdout; the summary, the trial's turns, and the two ladder tables."""
    exe = shutil.which("analyze", path=str(Path(sys.executable).parent)) or shutil.which("analyze")
    cmd = [exe] if exe else [sys.executable, "-m", "analyzer"]
    summary = json.loads(run(cmd + [str(log), "--db", str(db), "--json"]).stdout)

    def sql(query: str, *params: str) -> list[dict]:
        extra = [x for p in params for x in ("-p", p)]
        return json.loads(run(cmd + ["sql", query, "--db", str(db), "-f", "json", *extra]).stdout or "[]")

    turns = sql("SELECT session_id, status, incident_class, logged_class, has_log_fields, ladder_outcome, "
                "recovered_at, recovered_class FROM turns WHERE session_id LIKE 'trial-%'")
    return summary, turns, sql("sizing_ladder_rungs"), sql("ladder_summary")


def ladder_rungs(rec: dict) -> tuple[str, ...]:
    ladder = rec.get("ladder") or {}
    return tuple(a.get("rung") for a in ladder.get("attempts") or [])


def check_turn(case: Case, client: tuple[int | None, Any], seen: list[tuple[str, dict, int]],
               rec: dict | None, turn: dict | None) -> dict[str, list[str]]:
    """What disagrees for one request, per account (empty lists: all agree)."""
    bad: dict[str, list[str]] = {"client": [], "upstream": [], "log": [], "analyzer": []}
    status, doc = client
    if status != case.status:
        bad["client"].append(f"status {status}, expected {case.status}")
    if case.status == 200 and isinstance(doc, dict) and case.final == "ok":
        msg = ((doc.get("choices") or [{}])[0] or {}).get("message") or {}
        if msg.get("content") != ANSWER:
            bad["client"].append(f"content {msg.get('content')!r}")
    if case.detail and case.detail not in json.dumps(doc):
        bad["client"].append(f"detail lacks {case.detail!r}: {str(doc)[:120]}")
    rungs = tuple(r for r, _, _ in seen)
    if rungs != case.rungs:
        bad["upstream"].append(f"rungs {rungs}, expected {case.rungs}")
    if seen:
        first = seen[0][1]
        if first.get("chat_template_kwargs") != case.kwargs:
            bad["upstream"].append(f"chat_template_kwargs {first.get('chat_template_kwargs')}, expected {case.kwargs}")
        if first.get("thinking_token_budget") != case.budget:
            bad["upstream"].append(f"thinking_token_budget {first.get('thinking_token_budget')}")
    if case.no_false_key:
        bad["upstream"] += [f"a false thinking key on {rung}: {payload.get('chat_template_kwargs')}"
                            for rung, payload, _ in seen if thinking_disabled(payload)]
    if rec is None:
        bad["log"].append("no response record")
    else:
        want = {"incident_class": case.incident, "final_class": case.final,
                "outcome": case.outcome, "recovered_at": case.recovered_at}
        ladder = rec.get("ladder") or {}
        have = {"incident_class": rec.get("incident_class"), "final_class": rec.get("final_class"),
                "outcome": ladder.get("outcome"), "recovered_at": ladder.get("recovered_at")}
        bad["log"] += [f"{k} {have[k]!r}, expected {v!r}" for k, v in want.items() if have[k] != v]
        if case.outcome and ladder_rungs(rec) != rungs:
            bad["log"].append(f"ladder attempts {ladder_rungs(rec)} but the upstream saw {rungs}")
        if not isinstance(rec.get("log_fields_version"), int) or rec["log_fields_version"] < 3:
            bad["log"].append(f"log_fields_version {rec.get('log_fields_version')!r}")
        if case.rungs and rec.get("ladder_armed") is not case.armed:
            bad["log"].append(f"ladder_armed {rec.get('ladder_armed')!r}, expected {case.armed}")
    if turn is None:
        bad["analyzer"].append("no turn")
    else:
        want = {"incident_class": case.incident, "ladder_outcome": case.outcome,
                "recovered_at": case.recovered_at, "has_log_fields": True}
        bad["analyzer"] += [f"{k} {turn.get(k)!r}, expected {v!r}" for k, v in want.items() if turn.get(k) != v]
    return bad


def injected_rungs(script: Script) -> dict[tuple[str, str], list[int]]:
    """(trigger, rung) -> [ladders started, reached, recovered, refused], from what the
    upstream received and answered (a rung answered 400/422 was refused, not reached)."""
    out: dict[tuple[str, str], list[int]] = {}
    started: Counter = Counter()
    for session, seen in script.seen.items():
        case = BY_NAME[session.rsplit("-", 1)[0][len("trial-"):]]
        if not case.trigger:
            continue
        started[case.trigger] += 1
        for rung, _, status in seen[1:]:
            row = out.setdefault((case.trigger, rung), [0, 0, 0, 0])
            refused = status in (400, 422)
            row[1] += not refused
            row[2] += rung == case.recovered_at
            row[3] += refused
    for (trigger, _), row in out.items():
        row[0] = started[trigger]
    return out


def report(per_case: int, client: dict, script: Script, log: dict, turns: dict, sizing: list[dict],
           summary_rows: list[dict]) -> int:
    """Print the two comparison tables; the number of disagreements."""
    problems = 0
    print(f"\nPer class ({per_case} requests each): requests on which each account agrees with the script")
    head = f"{'class':36} {'client':>7} {'upstr.':>7} {'log':>7} {'analyz.':>7}  expected: status, calls, " \
           "incident -> final, ladder"
    print(head)
    print("-" * len(head))
    examples: list[str] = []
    for case in CASES:
        agree = Counter()
        for i in range(per_case):
            s = session_of(case, i)
            bad = check_turn(case, client.get(s, (None, "no answer")), script.seen.get(s, []), log.get(s),
                             turns.get(s))
            for account, issues in bad.items():
                agree[account] += not issues
                problems += len(issues)
                examples += [f"  {s} [{account}] {x}" for x in issues[:1]]
        ladder = f"{case.outcome}@{case.recovered_at}" if case.recovered_at else (case.outcome or "-")
        cells = " ".join(f"{agree[a]:>3}/{per_case:<3}" for a in ("client", "upstream", "log", "analyzer"))
        print(f"{case.name:36} {cells}  {case.status}, {len(case.rungs)}, {case.incident} -> {case.final}, {ladder}")
    if examples:
        print(f"\nDisagreements ({len(examples)} requests; first 25):")
        print("\n".join(examples[:25]))

    print("\nPer rung: ladders started / rungs reached / recovered there / refused (400, 422). injected = what "
          "the upstream\nreceived and answered; sizing = analyze sql sizing_ladder_rungs; summary = analyze sql "
          "ladder_summary (all models)")
    head = f"{'trigger':20} {'rung':18} {'injected':>14} {'sizing':>14} {'summary':>14}  agree"
    print(head)
    print("-" * len(head))
    injected = injected_rungs(script)
    sized = {(r["trigger"], r["rung"]): [r["ladders"], r["reached"], r["recovered"], r.get("refused", 0)]
             for r in sizing}
    summed: dict[tuple[str, str], list[int]] = {}
    for r in summary_rows:
        row = summed.setdefault((r["trigger"], r["rung"]), [0, 0, 0, 0])
        for i, k in enumerate(("ladders", "reached", "recovered", "refused")):
            row[i] += r.get(k, 0)
    order = {TOOL_CHOICE_NONE: 1, DROP_TOOLS: 2, FINAL_ANSWER: 3}
    for key in sorted(set(injected) | set(sized) | set(summed), key=lambda k: (k[0], order.get(k[1], 9), k[1])):
        a, b, c = injected.get(key), sized.get(key), summed.get(key)
        same = a == b == c
        problems += not same
        fmt = lambda v: "-" if v is None else "/".join(map(str, v))  # noqa: E731
        print(f"{key[0]:20} {key[1]:18} {fmt(a):>14} {fmt(b):>14} {fmt(c):>14}  {'yes' if same else 'NO'}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--proxy", help="a checkout of open-llm-proxy with the patch applied (default: clone --repo "
                                    "at --commit and apply --patch)")
    ap.add_argument("--repo", default=DEFAULT_REPO, help="where to clone the proxy from (path or URL; "
                                                         "default $OPEN_LLM_PROXY_REPO or the GitHub repository)")
    ap.add_argument("--commit", default=PINNED_COMMIT, help="the proxy commit the patch is written against")
    ap.add_argument("--patch", type=Path, default=PATCH, help="the integration patch")
    ap.add_argument("--vendor-current", action="store_true",
                    help="run this checkout's analyzer/online instead of the copy the patch vendors")
    ap.add_argument("--proxy-python", default=sys.executable, help="the interpreter that serves the proxy")
    ap.add_argument("--per-class", type=int, default=14, help="requests per class (default 14)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--keep", type=Path, help="keep the proxy's log and the database in this folder")
    args = ap.parse_args(argv)
    args.patch = args.patch.resolve()

    with tempfile.TemporaryDirectory(prefix="proxy-trial-") as tmp:
        scratch = Path(args.keep.resolve() if args.keep else tmp)
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            proxy_dir = prepare_proxy(args, scratch)
        except subprocess.CalledProcessError as exc:
            print(f"could not prepare the proxy: {' '.join(exc.cmd)}\n{exc.stderr}", file=sys.stderr)
            return 2
        except TrialError as exc:
            print(exc, file=sys.stderr)
            return 2
        log_path, db = scratch / "proxy-stdout.log", scratch / "trial.duckdb"
        db.unlink(missing_ok=True)
        script = Script()
        started = time.monotonic()
        with FaultyUpstream(script) as upstream, open(log_path, "w", encoding="utf-8") as out:
            try:
                proc, base = start_proxy(proxy_dir, args.proxy_python, upstream.chat_url, out)
            except TrialError as exc:
                print(exc, file=sys.stderr)
                return 2
            try:
                client = asyncio.run(send_all(base, args.per_class, args.concurrency))
            finally:
                stop_proxy(proc)
            if upstream.script_errors:
                print(f"upstream script errors: {upstream.script_errors[:3]}", file=sys.stderr)
                return 2
        sent = len(client)
        calls = sum(len(v) for v in script.seen.values())
        print(f"{sent} requests, {calls} upstream calls, {time.monotonic() - started:.1f} s; "
              f"proxy log {log_path if args.keep else '(temporary)'}", file=sys.stderr)
        try:
            summary, turn_rows, sizing, ladder_summary = analyze(log_path, db)
        except subprocess.CalledProcessError as exc:
            print(f"the analyzer failed: {' '.join(map(str, exc.cmd))}\n{exc.stderr[-2000:]}", file=sys.stderr)
            return 2
        turns = {t["session_id"]: t for t in turn_rows}
        problems = report(args.per_class, client, script, read_proxy_log(log_path), turns, sizing, ladder_summary)
        print(f"\nanalyzer: {summary.get('turns', summary.get('scope', {}).get('turns', '?'))} turns ingested; "
              f"{'all accounts agree' if not problems else f'{problems} disagreements'}")
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
