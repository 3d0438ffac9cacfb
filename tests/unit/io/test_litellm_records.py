"""LiteLLM's StandardLoggingPayload read as the proxy's records (analyzer.io.litellm_records).

The payloads are shaped as LiteLLM 1.110.2's S3 callback writes them
(tools/litellm_payloads.py; tests/e2e/test_litellm.py reads the ones a real
LiteLLM wrote). What is asserted is what the classification reads: the error
text a failure becomes, the content and its emptiness, the transcript, and what
happens when LiteLLM did not log the prompt or the answer.
"""

from __future__ import annotations

import json

import pytest

from analyzer.io.linereader import LineBlock, arrow
from analyzer.io.litellm_records import (
    GATEWAY,
    NotAPayload,
    SetAside,
    is_payload,
    map_block,
    records_of,
)
from analyzer.io.sources import LITELLM, detect_text_form, is_litellm_head
from analyzer.online import parse_error
from tools import litellm_payloads as L

NAKED_500 = L.error(500, "InternalServerError", "litellm.InternalServerError: InternalServerError: "
                                                "Hosted_vllmException - ")


def test_a_success_is_a_request_at_its_start_and_a_response_at_its_end():
    p = L.payload(call_id="5f0c1c3e-call", start=L.T0, seconds=1.25,
                  response=L.answer("Texas holds 61,883 acres.", reasoning="Sum the rows."))
    req, resp = records_of(p)
    assert req["type"] == "request" and resp["type"] == "response"
    assert req["timestamp"] == "2026-11-16T14:00:00.000000Z" and resp["timestamp"] == "2026-11-16T14:00:01.250000Z"
    assert req["request_id"] == resp["request_id"] == "5f0c1c3e-call"  # the call id: its retries share it
    assert req["session_id"] == "sess-1" and req["model"] == "glm-5" and req["provider"] == "hosted_vllm"
    assert req["client"] == "geo-agent/v3.13.1" and req["gateway"] == resp["gateway"] == GATEWAY
    assert req["proxy_pod"] == "vllm-glm-0:8000"  # the deployment's api_base: the replica hint
    assert req["message_count"] == 3 and req["tools_count"] == 1 and req["messages"] == L.TOOL_HISTORY
    assert req["tool_results_this_turn"] == ["c1"] and req["user_message_this_turn"] == "How much land is protected?"
    assert resp["latency_ms"] == 1250 and resp["finish_reason"] == "stop" and resp["max_tokens"] == 1024
    assert resp["has_content"] and resp["content"] == "Texas holds 61,883 acres."
    assert resp["has_reasoning_content"] and resp["reasoning_content"] == "Sum the rows."
    assert not resp["has_tool_calls"] and resp["tokens"]["completion_tokens"] == 42
    assert "error" not in resp


@pytest.mark.parametrize("info, headers, text, kind, status", [
    # vLLM's naked 500: LiteLLM's message ends where the (empty) body would be
    (L.error(500, "InternalServerError", "litellm.InternalServerError: InternalServerError: Hosted_vllmException - "),
     {"date": "Mon, 16 Nov 2026 14:00:00 GMT"}, "Provider returned 500: ", "http", 500),
    (L.error(429, "RateLimitError", 'litellm.RateLimitError: RateLimitError: Hosted_vllmException - {"error": '
                                    '{"message": "Rate limit exceeded"}}'),
     {"retry-after": "45"}, 'Provider returned 429: {"error": {"message": "Rate limit exceeded"}}', "http", 429),
    # an empty 200 body: LiteLLM cannot parse it (the proxy's JSONDecodeError)
    (L.error(200, "APIError", "litellm.APIError: APIError: Hosted_vllmException - Unable to get json response - "
                              "Expecting value: line 1 column 1 (char 0), Original Response: "),
     {}, "JSONDecodeError: Unable to get json response - Expecting value: line 1 column 1 (char 0), "
         "Original Response:", "bad-body", 200),
    (L.error(500, "InternalServerError", "litellm.InternalServerError: InternalServerError: Hosted_vllmException - "
                                         "Cannot connect to host 10.0.0.7:8000 ssl:default [Connect call failed]"),
     {}, "ClientConnectorError: Cannot connect to host 10.0.0.7:8000 ssl:default [Connect call failed]", "connect",
     None),
    (L.error(500, "InternalServerError", "litellm.InternalServerError: InternalServerError: Hosted_vllmException - "
                                         "Server disconnected"),
     {}, "ServerDisconnectedError: Server disconnected", "reset", None),
    (L.error(408, "Timeout", "litellm.Timeout: Timeout Error: Hosted_vllmException - litellm.Timeout: Read timed "
                             "out. Timeout passed=600.0, time taken=600.0 seconds"),
     {}, "ReadTimeout: litellm.Timeout: Read timed out. Timeout passed=600.0, time taken=600.0 seconds", "timeout",
     None),
    # LiteLLM's own refusal (a deployment in cooldown): read by the status the client got
    ({"error_code": "429", "error_class": "RouterRateLimitError", "llm_provider": "",
      "error_message": "No deployments available for selected model, Try again in 5 seconds."},
     {}, "Provider returned 429: No deployments available for selected model, Try again in 5 seconds.", "http", 429),
])
def test_a_failure_becomes_the_error_text_the_proxy_writes_for_it(info, headers, text, kind, status):
    resp = records_of(L.payload(status="failure", error_information=info, headers=headers))[1]
    assert resp["error"] == text
    assert parse_error(resp["error"], resp["provider"]) == (kind, status)
    assert not any(k in resp for k in ("has_content", "has_tool_calls", "has_reasoning_content"))
    if headers:  # the upstream's own headers (a naked 500 has no server header)
        assert resp["upstream_headers"] == headers


def test_the_content_decides_never_the_status():
    # a failed stream can log success (BerriAI/litellm#36768): an empty answer is read as one
    resp = records_of(L.payload(status="success", response=L.answer("")))[1]
    assert resp["has_content"] is False and resp["content"] == "" and "error" not in resp
    # and a row marked failure that holds an answer is read by its answer
    marked = L.payload(status="failure", response=L.answer("It worked."))
    assert records_of(marked)[1]["content"] == "It worked."
    # failed rows can have an empty call_type (PR #34862): still a chat completion
    empty_type = L.payload(status="failure", call_type="",
                           error_information=L.error(500, "InternalServerError", "Hosted_vllmException - "))
    assert records_of(empty_type)[1]["error"] == "Provider returned 500: "


def test_whitespace_content_and_leaked_think_blocks_stay_as_logged_for_the_rule():
    resp = records_of(L.payload(response=L.answer("\n\n")))[1]
    assert resp["has_content"] is True and resp["content"] == "\n\n"  # the rule's is_blank says it is none
    parts = L.answer(None)
    parts["choices"][0]["message"]["content"] = [{"type": "text", "text": "  \n"}]
    resp = records_of(L.payload(response=parts))[1]
    assert resp["content"] == ""  # parts with no visible text: blank for the rule, as analyzer.online reads them
    parts["choices"][0]["message"]["content"] = [{"type": "text", "text": "Texas."}]
    assert "Texas." in records_of(L.payload(response=parts))[1]["content"]
    leaked = records_of(L.payload(response=L.answer("check the schema.</think>Texas.")))[1]
    assert leaked["content"] == "check the schema.</think>Texas."


def test_tool_calls_and_a_200_without_choices():
    call = {"id": "t1", "type": "function", "function": {"name": "query", "arguments": "{}"}}
    resp = records_of(L.payload(response=L.answer("", finish_reason="tool_calls", tool_calls=[call])))[1]
    assert resp["has_tool_calls"] and resp["tool_calls"] == [call] and resp["finish_reason"] == "tool_calls"
    junk = records_of(L.payload(response=L.answer("", finish_reason="tool_calls", tool_calls=["junk", 7])))[1]
    assert junk["has_tool_calls"] is False  # as analyzer.online reads an answer: a call is an object
    empty = {"id": "x", "object": "chat.completion", "choices": [], "model": "glm-5"}
    resp = records_of(L.payload(response=empty))[1]
    assert not any(k in resp for k in ("has_content", "has_tool_calls", "has_reasoning_content", "error"))


def test_with_message_logging_off_emptiness_and_the_transcript_are_unknown():
    # turn_off_message_logging: LiteLLM writes its marker for every prompt and every non-null text
    p = L.payload(messages=[{"role": "user", "content": "redacted-by-litellm"}],
                  response=L.answer("redacted-by-litellm", reasoning="redacted-by-litellm"))
    req, resp = records_of(p)
    assert "messages" not in req and "message_count" not in req and "tool_results_this_turn" not in req
    assert resp["has_content"] is True and "content" not in resp  # there was a text; blank or not, unknown
    assert resp["has_reasoning_content"] is True and "reasoning_content" not in resp
    # a content of null stays null (length with no content is still seen)
    resp = records_of(L.payload(messages=[{"role": "user", "content": "redacted-by-litellm"}],
                                response=L.answer(None, finish_reason="length")))[1]
    assert resp["has_content"] is False and resp["finish_reason"] == "length"
    # a failure's response is LiteLLM's marker in a text: the error still reads
    failed = L.payload(status="failure", error_information=NAKED_500, response={"text": "redacted-by-litellm"})
    assert records_of(failed)[1]["error"] == "Provider returned 500: "


def test_the_ladders_log_fields_are_merged_as_the_proxy_merges_them():
    fields = {"log_fields_version": 4, "upstream_status": 200, "incident_class": "tool-history-5xx",
              "final_class": "ok", "tool_history": True, "ladder_armed": True,
              "ladder": {"trigger": "tool-history-5xx", "outcome": "recovered", "recovered_at": "drop_tools",
                         "attempts": [], "skipped": []}}
    resp = records_of(L.payload(spend_logs_metadata={"analyzer_log_fields": fields, "team": "geo"}))[1]
    assert {k: resp[k] for k in fields} == fields


@pytest.mark.parametrize("sent, switch", [({"enable_thinking": False, "thinking": False}, False),
                                          ({"enable_thinking": True, "clear_thinking": False}, True),
                                          ({"reasoning_effort": "low"}, False), ({"clear_thinking": False}, True),
                                          (None, None)])
def test_the_thinking_switch_is_read_back_from_what_the_ladder_sent(sent, switch):
    # LiteLLM logs no chat_template_kwargs: only a ladder call says what the client asked for
    fields = {"log_fields_version": 4, "thinking_sent": sent}
    req = records_of(L.payload(spend_logs_metadata={"analyzer_log_fields": fields}))[0]
    assert req["enable_thinking"] is switch


def test_an_end_before_the_start_is_the_start():
    p = {**L.payload(start=L.T0), "endTime": L.T0 - 5}
    req, resp = records_of(p)
    assert resp["timestamp"] == req["timestamp"] and resp["latency_ms"] == 0


def test_retries_and_fallbacks_are_said_in_the_record():
    resp = records_of(L.payload(retries=1, fallbacks=1))[1]
    assert resp["litellm"]["attempted_retries"] == 1 and resp["litellm"]["attempted_fallbacks"] == 1


@pytest.mark.parametrize("doc, reason", [
    ({"foo": 1}, "not a LiteLLM StandardLoggingPayload"),
    ({"timestamp": "2026-11-16T14:00:00Z", "type": "request", "startTime": 1, "trace_id": "x"},
     "not a LiteLLM StandardLoggingPayload"),
    ({**L.payload(), "call_type": "aembedding"}, "call_type 'aembedding' is not a chat completion"),
    ({**L.payload(), "startTime": "soon"}, "startTime 'soon' is not a time"),
    ({**L.payload(), "response": None}, "no response logged"),  # s3_log_prompts_only
])
def test_what_cannot_be_read_says_why(doc, reason):
    with pytest.raises(NotAPayload, match=reason):
        records_of(doc)


def test_a_block_maps_each_payload_to_two_records_on_its_line_and_sets_the_rest_aside():
    pa, _ = arrow()
    lines = [json.dumps(L.payload(call_id="a")), "", "{not json", json.dumps({"hello": "world"}),
             json.dumps(L.payload(call_id="b"))]
    block = LineBlock(7, pa.array(lines, pa.large_string()), 999, 998)
    mapped, aside = map_block(block)
    assert mapped.line_nos.to_pylist() == [7, 7, 11, 11] and mapped.last_line == 11
    assert mapped.end_offset == 999 and not mapped.exact
    recs = [json.loads(x) for x in mapped.lines.to_pylist()]
    assert [(r["type"], r["request_id"]) for r in recs] == [("request", "a"), ("response", "a"),
                                                            ("request", "b"), ("response", "b")]
    assert aside == [SetAside(9, "malformed JSON (invalid or cut-off line)", "{not json"),
                     SetAside(10, "not a LiteLLM StandardLoggingPayload (no startTime beside litellm_call_id, "
                                  "trace_id or call_type)", '{"hello": "world"}')]


def test_a_lone_surrogate_is_written_as_the_replacement_character():
    """As the ingest mends the proxy's lines (io.linereader.mend_surrogates): a lone escape becomes U+FFFD;
    a whole emoji and an escaped backslash before `ud83d` stay what they were."""
    pa, _ = arrow()
    said = "half an emoji \ud83d, a whole one \U0001f600, a path C:\\ud83d"
    text = json.dumps(L.payload(response=L.answer(said)))
    assert "\\ud83d," in text and "\\ud83d\\ude00" in text and "\\\\ud83d" in text
    mapped, _ = map_block(LineBlock(1, pa.array([text], pa.large_string()), len(text), len(text)))
    content = json.loads(mapped.lines.to_pylist()[1])["content"]
    assert content == "half an emoji \ufffd, a whole one \U0001f600, a path C:\\ud83d"


def test_the_form_is_told_by_content_not_by_name():
    one = json.dumps(L.payload()).encode()
    assert is_litellm_head(one) and detect_text_form("x/2026-11-16/time-14_abc.json", one)[0] == LITELLM
    assert detect_text_form("renamed.log", one + b"\n" + one + b"\n")[0] == LITELLM
    # a payload longer than the head is judged from its start
    assert is_litellm_head(one[:one.index(b"\"endTime\"")])
    # a proxy record that merely mentions the words is the proxy's (quotes inside strings are escaped)
    record = json.dumps({"timestamp": "2026-11-16T14:00:00Z", "type": "request", "request_id": "ab12cd34",
                         "user_message_this_turn": 'why is "startTime": 1 with "trace_id": in my logs?'}).encode()
    assert not is_litellm_head(record) and detect_text_form("chunk.jsonl", record)[0] == "jsonl"
    assert is_payload(L.payload()) and not is_payload(json.loads(record))
