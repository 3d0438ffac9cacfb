"""LiteLLM's logging payloads, built: a ``StandardLoggingPayload`` as LiteLLM's S3 callback writes it.

:func:`payload` builds one in the shape LiteLLM 1.110.2's S3 callback writes (key
order and fields as a real proxy in front of :mod:`tools.faulty_upstream` wrote
them; the long ``model_map_information`` and cost blocks left out, as the analyzer
reads none of them); :func:`answer` and :func:`error` its ``response`` and
``error_information``, :func:`write_objects` the objects where the callback puts
them. The tests of the LiteLLM reader build their logs with these;
:data:`TOOL_HISTORY` and :data:`TOOLS` are also what tools/litellm_week.py's
sessions send (:class:`tools.litellm_proxy.LiteLLMProxy` runs the real proxy).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

T0 = 1794837600.0  # 2026-11-16T14:00:00Z


def _usage(prompt: int, completion: int) -> dict:
    return {"completion_tokens": completion, "prompt_tokens": prompt, "total_tokens": prompt + completion,
            "completion_tokens_details": None, "prompt_tokens_details": None}


def answer(content: str | None = "Here is the answer.", *, finish_reason: str | None = "stop",
           reasoning: str | None = None, tool_calls: list | None = None, prompt_tokens: int = 1200,
           completion_tokens: int = 42) -> dict:
    """A ``response`` as LiteLLM logs a chat completion."""
    message: dict[str, Any] = {"content": content, "role": "assistant", "tool_calls": tool_calls,
                               "function_call": None}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(T0), "model": "glm-5",
            "object": "chat.completion",
            "choices": [{"finish_reason": finish_reason, "index": 0, "message": message,
                         "provider_specific_fields": {}, "logprobs": None}],
            "usage": _usage(prompt_tokens, completion_tokens)}


def error(code: int | str, error_class: str, message: str) -> dict:
    """An ``error_information`` as LiteLLM logs a failed call."""
    return {"error_code": str(code), "error_class": error_class, "llm_provider": "hosted_vllm",
            "traceback": "Traceback (most recent call last): ...", "error_message": message,
            "error_provider_request_id": None, "normalized_error": None}


TOOL_HISTORY = [
    {"role": "user", "content": "How much land is protected?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "query", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "61883"},
]
TOOLS = [{"type": "function", "function": {"name": "query", "parameters": {"type": "object", "properties": {}}}}]


def payload(*, call_id: str | None = None, start: float = T0, seconds: float = 0.5, status: str = "success",
            response: dict | None = None, error_information: dict | None = None,
            messages: Any = TOOL_HISTORY, tools: list | None = TOOLS, user: str | None = "sess-1",
            model_group: str = "glm-5", api_base: str = "http://vllm-glm-0:8000/v1", call_type: str = "acompletion",
            retries: int = 0, fallbacks: int = 0, headers: dict | None = None, spend_logs_metadata: dict | None = None,
            max_tokens: int | None = 1024, stream: bool | None = None) -> dict:
    """A StandardLoggingPayload as LiteLLM 1.110.2's S3 callback writes it."""
    call_id = call_id or str(uuid.uuid4())
    failed = error_information is not None
    params: dict[str, Any] = {"stream": bool(stream)}
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    if user:
        params["user"] = user
    if tools:
        params["tools"] = tools
    extra = dict(headers or {})
    if not failed:
        extra = {"llm_provider-date": "Mon, 16 Nov 2026 14:00:00 GMT", "llm_provider-server": "uvicorn",
                 "llm_provider-content-type": "application/json", **extra,
                 "x-litellm-model-group": model_group, "x-litellm-attempted-retries": retries,
                 "x-litellm-attempted-fallbacks": fallbacks}
    resp = response if response is not None else ({} if failed else answer())
    return {
        "id": resp.get("id") or call_id if not failed else call_id,
        "litellm_call_id": call_id, "trace_id": str(uuid.uuid4()), "session_id": "", "call_type": call_type,
        "cache_hit": None, "stream": stream, "status": status,
        "status_fields": {"llm_api_status": status, "guardrail_status": "not_run"},
        "custom_llm_provider": "hosted_vllm", "saved_cache_cost": 0.0,
        "startTime": start, "endTime": start + seconds, "completionStartTime": start + seconds,
        "response_time": seconds, "model": f"hosted_vllm/{model_group}",
        "metadata": {"user_api_key_hash": "litellm_proxy_master_key", "user_api_key_end_user_id": user,
                     "user_api_key_request_route": "/v1/chat/completions",
                     "spend_logs_metadata": spend_logs_metadata, "requester_ip_address": "127.0.0.1",
                     "user_agent": "geo-agent/v3.13.1"},
        "total_tokens": 0, "prompt_tokens": 0, "completion_tokens": 0, "request_tags": [],
        "end_user": user, "api_base": api_base + "/chat/completions", "model_group": model_group,
        "model_id": "9d952eeac46c4d46", "requester_ip_address": "127.0.0.1", "user_agent": "geo-agent/v3.13.1",
        "messages": messages, "response": resp, "model_parameters": params,
        "hidden_params": {"model_id": "9d952eeac46c4d46", "cache_key": None, "api_base": api_base,
                          "response_cost": 0.0, "additional_headers": extra, "litellm_model_name": None},
        "error_str": error_information.get("error_message") if failed else None,
        "error_information": error_information or {"error_code": "", "error_class": "", "llm_provider": "",
                                                   "traceback": "", "error_message": ""},
        "guardrail_information": None,
    }


def write_objects(folder: Path, payloads: list[dict]) -> list[Path]:
    """Each payload as its own object, where LiteLLM's S3 callback puts it (``YYYY-MM-DD/time-..._<id>.json``)."""
    from datetime import datetime, timezone

    out = []
    for p in payloads:
        start = datetime.fromtimestamp(p["startTime"], timezone.utc)
        path = folder / start.strftime("%Y-%m-%d") / f"time-{start.strftime('%H-%M-%S-%f')}_{p['id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(p), encoding="utf-8")
        out.append(path)
    return out
