"""Answers that are not plain answers get the same class online and offline: blank
content, a 200 with no usable choice, an empty or non-JSON 200 body, connect and
pool timeouts, a 200 after the caller's deadline.

Each case is one exchange twice: as the proxy has it in hand (payload, status,
body, exception, latency -> ``analyzer.online`` features) and as the real proxy
logs it (records in its shape, ingested through the real DuckDB path and
classified by the views). Both must give the same label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from analyzer.ingestion.logs import ingest
from analyzer.online import BLANK_CHARS, decide, features_from_exchange, ladder_trigger, log_fields
from analyzer.classification.turns import refresh_turns
from tests.support.records import (
    TOOL_RESULT,
    _common,
    _defaults,
    at,
    request,
    response_error,
    response_ok,
    write_jsonl,
)
from tests.support.fresh_db import fresh_connection  # an empty database, copied: 0.02 s, not 0.27 s

# The request as sent upstream: tool history in the transcript, tools offered.
TOOL_HISTORY = [
    {"role": "user", "content": "Protected land in Texas?"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "query", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "| Texas | 61,883 |"},
]
PAYLOAD = {"model": "glm-5", "messages": TOOL_HISTORY, "max_tokens": 4096,
           "tools": [{"type": "function", "function": {"name": "query"}}]}


def answer(content: Any = "", finish: Any = "stop", *, reasoning: str | None = None, tokens: int = 40,
           reasoning_tokens: int | None = None) -> bytes:
    msg: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": []}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    usage: dict[str, Any] = {"prompt_tokens": 900, "completion_tokens": tokens, "total_tokens": 900 + tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return json.dumps({"choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage}).encode()


def no_answer_record(rid, ts, *, latency_ms=700, extra=None):
    """A 200 with no usable choices, as the real proxy logs it: no has_* fields, no error."""
    rec = _common("response", rid, ts, **_defaults({}))
    rec["latency_ms"] = latency_ms
    rec.update(extra or {})
    return rec


@dataclass
class Case:
    """One exchange, online and offline, and the class both must give."""

    name: str
    expected: str
    status: int | None
    body: Any
    response: Any  # (rid, ts) -> the response record the real proxy writes
    error: Any = None
    latency_ms: int = 800
    trigger: str | None = None
    online: dict = field(default_factory=dict)  # extra features_from_exchange options


CASES = [
    Case("whitespace-only-content", "empty-200-stop", 200, answer("\n\n"),
         lambda rid, ts: response_ok(rid, ts, content="\n\n", completion_tokens=2), trigger="empty-200-stop"),
    Case("unicode-whitespace-content", "empty-200-stop", 200, answer("\u3000\u00a0 \t"),
         lambda rid, ts: response_ok(rid, ts, content="\u3000\u00a0 \t", completion_tokens=2),
         trigger="empty-200-stop"),
    Case("zero-width-space-is-content", "ok", 200, answer("\u200b"),
         lambda rid, ts: response_ok(rid, ts, content="\u200b")),
    Case("leading-whitespace-then-text", "ok", 200, answer("\n\n  Texas has 61,883 acres."),
         lambda rid, ts: response_ok(rid, ts, content="\n\n  Texas has 61,883 acres.")),
    Case("choices-empty", "no-answer-200", 200, b'{"choices": [], "usage": {"completion_tokens": 0}}',
         lambda rid, ts: no_answer_record(rid, ts)),
    Case("error-object-200", "no-answer-200", 200, b'{"error": {"message": "upstream overloaded", "code": 503}}',
         lambda rid, ts: no_answer_record(rid, ts)),
    # finish_reason "error" with partial content: only decidable from a log_fields record.
    Case("finish-error-partial", "no-answer-200", 200, answer("Texas has", "error"),
         lambda rid, ts: response_ok(rid, ts, content="Texas has",
                                     extra=log_fields(PAYLOAD, 200, answer("Texas has", "error"), latency_ms=800))),
    Case("empty-body-200", "empty-200-stop", 200, b"",
         lambda rid, ts: response_error(rid, ts, "JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
                                        latency_ms=800), trigger="empty-200-stop"),
    Case("html-body-200", "empty-200-stop", 200, b"<html><body>Bad gateway</body></html>",
         lambda rid, ts: response_error(rid, ts, "JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
                                        latency_ms=800), trigger="empty-200-stop"),
    Case("connect-timeout", "connect-timeout", None, None,
         lambda rid, ts: response_error(rid, ts, "Request timed out after 30004ms", latency_ms=30004),
         error=httpx.ConnectTimeout("timed out"), latency_ms=30004),
    Case("pool-timeout", "connect-timeout", None, None,
         lambda rid, ts: response_error(rid, ts, "Request timed out after 30001ms", latency_ms=30001),
         error=httpx.PoolTimeout("no connection"), latency_ms=30001),
    Case("read-timeout", "timeout", None, None,
         lambda rid, ts: response_error(rid, ts, "Request timed out after 600012ms", latency_ms=600012),
         error=httpx.ReadTimeout("timed out"), latency_ms=600012),
    Case("late-200", "late-200", 200, answer("Texas has 61,883 acres."),
         lambda rid, ts: response_ok(rid, ts, content="Texas has 61,883 acres.", latency_ms=301_000),
         latency_ms=301_000),
    Case("late-tool-call", "late-200", 200,
         json.dumps({"choices": [{"message": {"content": "", "tool_calls": [
             {"id": "c2", "type": "function", "function": {"name": "query", "arguments": "{}"}}]},
             "finish_reason": "tool_calls"}]}).encode(),
         lambda rid, ts: response_ok(rid, ts, tool_calls=[{"name": "query", "arguments": "{}"}], latency_ms=450_000),
         latency_ms=450_000),
    Case("on-time-200", "ok", 200, answer("Texas has 61,883 acres."),
         lambda rid, ts: response_ok(rid, ts, content="Texas has 61,883 acres.", latency_ms=299_000),
         latency_ms=299_000),
    # A failure that also came late keeps its failure class (and stays a ladder trigger).
    Case("late-empty-keeps-its-class", "empty-200-stop", 200, answer(""),
         lambda rid, ts: response_ok(rid, ts, content="", completion_tokens=3, latency_ms=400_000),
         latency_ms=400_000, trigger="empty-200-stop"),
    # Reasoning evidence from usage details only: the empty answer at a round cap ran out while thinking.
    Case("reasoning-tokens-evidence", "length-with-no-content", 200,
         answer("", None, tokens=2048, reasoning_tokens=2048),
         lambda rid, ts: response_ok(rid, ts, content="", completion_tokens=2048, extra={"tokens": {
             "prompt_tokens": 900, "completion_tokens": 2048, "total_tokens": 2948,
             "completion_tokens_details": {"reasoning_tokens": 2048}}}),
         online={"payload": {**PAYLOAD, "max_tokens": None}}),
    # GLM as it fails today. The glm45 parser filed the answer as reasoning
    # (sgl-project/sglang#37645): a ladder trigger with tool history, like an empty 200.
    Case("answer-in-reasoning", "answer-in-reasoning", 200, answer("", reasoning="Texas holds 61,883 acres.", tokens=9),
         lambda rid, ts: response_ok(rid, ts, reasoning="Texas holds 61,883 acres.", completion_tokens=9),
         trigger="answer-in-reasoning"),
    # Usage that lies (mistral-vibe#1116): 0 completion tokens beside a long reasoning text.
    Case("answer-in-reasoning-zero-tokens", "answer-in-reasoning", 200,
         answer("", reasoning="Weighing the GAP codes. " * 80, tokens=0),
         lambda rid, ts: response_ok(rid, ts, reasoning="Weighing the GAP codes. " * 80, completion_tokens=0),
         trigger="answer-in-reasoning"),
    # Whitespace is no reasoning text: an empty 200.
    Case("blank-reasoning-is-empty", "empty-200-stop", 200, answer("", reasoning="\n\n", tokens=2),
         lambda rid, ts: response_ok(rid, ts, reasoning="\n\n", completion_tokens=2), trigger="empty-200-stop"),
    # Thinking "off" sent to GLM-5.3 (vllm-project/vllm#54744): the scratchpad in content.
    Case("dangling-close-tag", "reasoning-leaked", 200, answer("Simple question.</think>2 + 2 = **4**"),
         lambda rid, ts: response_ok(rid, ts, content="Simple question.</think>2 + 2 = **4**")),
    Case("opens-with-think", "reasoning-leaked", 200, answer("\n<think>Plan it.</think>Texas."),
         lambda rid, ts: response_ok(rid, ts, content="\n<think>Plan it.</think>Texas.")),
    Case("quoted-tags-are-an-answer", "ok", 200, answer("Use <think>...</think> in your prompt."),
         lambda rid, ts: response_ok(rid, ts, content="Use <think>...</think> in your prompt.")),
]


def _online(case: Case) -> tuple[str, str | None]:
    payload = case.online.get("payload", PAYLOAD)
    f = features_from_exchange(payload, case.status, case.body, case.error, latency_ms=case.latency_ms)
    return decide(f).incident_class, ladder_trigger(f)


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("online-offline")
    records = []
    for i, case in enumerate(CASES):
        rid = f"{i + 1:08x}"
        records.append(request(rid, at(i), tool_results=TOOL_RESULT, session=f"s-{i}"))
        rec = case.response(rid, at(i + 0.5))
        rec["session_id"] = f"s-{i}"
        records.append(rec)
    con = fresh_connection(tmp / "a.duckdb")
    ingest(con, [str(write_jsonl(tmp / "week.jsonl", records))])
    refresh_turns(con)
    rows = {r[0]: r[1:] for r in con.execute(
        "SELECT request_id, incident_class, ladder_trigger FROM turns").fetchall()}
    yield con, rows
    con.close()


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name for c in CASES])
def test_same_class_online_and_offline(offline, index):
    case = CASES[index]
    online_class, online_trigger = _online(case)
    _, rows = offline
    offline_class, offline_trigger = rows[f"{index + 1:08x}"]
    assert online_class == case.expected
    assert offline_class == case.expected
    assert online_trigger == offline_trigger == case.trigger


def test_the_caller_deadline_is_configurable_online_and_offline(tmp_path):
    body = answer("Texas has 61,883 acres.")
    f = features_from_exchange(PAYLOAD, 200, body, latency_ms=301_000, caller_deadline_s=400)
    assert decide(f).incident_class == "ok"
    assert decide(features_from_exchange(PAYLOAD, 200, body, latency_ms=401_000,
                                         caller_deadline_s=400)).incident_class == "late-200"
    recs = [request("0000aaa1", at(0)), response_ok("0000aaa1", at(5.1), content="x", latency_ms=301_000),
            request("0000aaa2", at(10)), response_ok("0000aaa2", at(16.7), content="x", latency_ms=401_000)]
    con = fresh_connection(tmp_path / "a.duckdb")
    ingest(con, [str(write_jsonl(tmp_path / "w.jsonl", recs))])

    def classes():
        return dict(con.execute("SELECT request_id, incident_class FROM turns ORDER BY 1").fetchall())

    refresh_turns(con)  # the default: 300 s
    assert classes() == {"0000aaa1": "late-200", "0000aaa2": "late-200"}
    refresh_turns(con, caller_deadline_s=400)
    assert classes() == {"0000aaa1": "ok", "0000aaa2": "late-200"}
    refresh_turns(con)  # stored: a later run without the option keeps it
    assert classes() == {"0000aaa1": "ok", "0000aaa2": "late-200"}
    with pytest.raises(ValueError):
        refresh_turns(con, caller_deadline_s=float("nan"))
    con.close()


def test_sql_blank_rule_is_the_python_rule(tmp_path, ingested):
    """Every character of BLANK_CHARS alone is blank in SQL too; a visible one is not."""
    texts = [c * 3 for c in BLANK_CHARS] + ["\u200b", "a", " a ", "\n\nx", "\u3000\u3000", "\\n"]
    recs = []
    for i, text in enumerate(texts):
        rid = f"b{i:07x}"
        recs += [request(rid, at(i)), response_ok(rid, at(i + 0.5), content=text, completion_tokens=5)]
    con = ingested(recs)
    got = dict(con.execute("SELECT request_id, has_content FROM turns").fetchall())
    for i, text in enumerate(texts):
        online = features_from_exchange(PAYLOAD, 200, answer(text)).has_content
        assert got[f"b{i:07x}"] is online is (text.strip() != ""), repr(text)
    con.close()


def test_sql_leak_rule_is_the_python_rule(ingested):
    """analyzer.online.has_leaked_think_block and record_sql.leak_sql agree, blank characters included."""
    from analyzer.online import has_leaked_think_block

    texts = ["x</think>y", "<think>a", "\u3000<think>a", "\u200b<think>a", "a<think>b</think>", "a</think>b<think>",
             "</think>", "<think></think>", "no tags", "think> only", "</THINK>", "<think", "a </think"]
    texts += [c + "<think>x" for c in BLANK_CHARS]
    recs = []
    for i, text in enumerate(texts):
        rid = f"d{i:07x}"
        recs += [request(rid, at(i)), response_ok(rid, at(i + 0.5), content=text)]
    con = ingested(recs)
    got = dict(con.execute("SELECT request_id, reasoning_leaked FROM turns").fetchall())
    for i, text in enumerate(texts):
        assert got[f"d{i:07x}"] is has_leaked_think_block(text), repr(text)
    con.close()


def test_reasoning_at_the_log_cap_is_cut_not_its_length(tmp_path, ingested):
    recs = [request("0000cc01", at(0)), response_ok("0000cc01", at(0.5), content="a", reasoning="r" * 4000),
            request("0000cc02", at(1)), response_ok("0000cc02", at(1.5), content="a", reasoning="r" * 3999),
            request("0000cc03", at(2)), response_ok("0000cc03", at(2.5), content="a", extra={"tokens": {
                "prompt_tokens": 9, "completion_tokens": 700,
                "completion_tokens_details": {"reasoning_tokens": 650}}})]
    con = ingested(recs)
    got = {r[0]: r[1:] for r in con.execute(
        "SELECT request_id, reasoning_chars, reasoning_cut, reasoning_tokens, has_reasoning FROM turns").fetchall()}
    assert got["0000cc01"] == (None, True, None, True)  # at least 4,000: the true length is unknown
    assert got["0000cc02"] == (3999, False, None, True)
    assert got["0000cc03"] == (0, False, 650, True)  # reasoning shown by usage details alone
    con.close()


def test_the_sizing_counts_late_and_no_answer_200s(offline):
    from analyzer.outputs.sizing import build_sizing

    con, rows = offline
    sizing = build_sizing(con, {"models": None, "since": None, "until": None})
    classes = [c for c, _ in rows.values()]
    assert sizing["late_answers"] == classes.count("late-200") == 2
    assert sizing["no_answer_200"] == classes.count("no-answer-200") == 3
    assert sizing["caller_deadline_s"] == 300.0
    # The empty and non-JSON 200 bodies with tool history are ladder-eligible.
    assert sizing["eligible_by_trigger"]["empty-200-stop"] == sum(1 for c in CASES if c.trigger == "empty-200-stop")
