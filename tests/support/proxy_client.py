"""A client of the reference proxy (tests/support/proxy.py): what geo-agent sends, and what the proxy logged.

:func:`client_payload` is geo-agent's request (tool history, tools, the thinking switch,
a session id), :func:`post` sends it, :func:`only_response` checks the proxy logged one
request and one response record and returns the response; :data:`LOG_FIELD_KEYS` are
the fields every response record carries (analyzer.online's log fields).
"""

from __future__ import annotations

import re

import httpx

HISTORY = [
    {"role": "system", "content": "You are a geospatial assistant. " * 20},
    {"role": "user", "content": "Show me protected lands near socially vulnerable communities in Texas."},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "chatcmpl-tool-1", "type": "function",
         "function": {"name": "query", "arguments": '{"sql": "SELECT State_Nm, SUM(GIS_Acres) FROM padus"}'}}]},
    {"role": "tool", "tool_call_id": "chatcmpl-tool-1", "content": "| name | total |\n|---|---|\n| Texas 6 | 61,883.4 |"},
    {"role": "assistant", "content": "Texas has 61,883 acres in that view.", "tool_calls": []},
    {"role": "user", "content": "How has that changed since 2015?"},
]
TOOLS = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object"}}}
         for n in ("query", "show_layer", "fly_to")]
LOG_FIELD_KEYS = {"log_fields_version", "upstream_status", "finish_reason", "max_tokens", "thinking_token_budget",
                  "tool_history", "incident_class", "final_class", "caller_deadline_s", "ladder_armed", "ladder",
                  "reasoning_repaired", "thinking_sent"}


def client_payload(**extra):
    """What geo-agent sends: tool history, tools, the thinking switch, a session id."""
    return {"model": "glm-5", "messages": HISTORY, "tools": TOOLS, "tool_choice": "auto", "temperature": 0.0,
            "enable_thinking": True, "user": "4a57eaa9-ea0d-44ad-b3d5-a51f3bacced6", **extra}


def post(proxy, payload):
    """POST ``payload`` to the proxy's chat completions as geo-agent does (its ``x-client`` header)."""
    return httpx.post(proxy.chat_url, json=payload, timeout=30, headers={"x-client": "geo-agent/v3.13.1"})


def only_response(proxy):
    """The one response record the proxy logged, after the one request record of the same id."""
    records = proxy.records()
    assert [r["type"] for r in records] == ["request", "response"]
    request, response = records
    assert request["request_id"] == response["request_id"]
    assert re.fullmatch(r"[0-9a-f]{8}", response["request_id"])
    return response
