"""LiteLLM's logging payloads read as the proxy's records: one call, a request and a response.

LiteLLM hands every call to its logging callbacks as one ``StandardLoggingPayload``
JSON object (its S3 callback writes each as an object ``<prefix>/YYYY-MM-DD/
time-HH-MM-SS-ffffff_<id>.json``, or a flush of them as ``.jsonl``). Each payload
is mapped here to the two records the proxy would have written for the same call,
so ingestion, classification, the views and the questions read a LiteLLM week as
they read the proxy's (docs/integrations/litellm.md says what is read and what
cannot be seen):

- **request** (at ``startTime``): ``request_id`` LiteLLM's call id (shared by its
  retries and fallbacks of one call: ``turn_features`` folds them into one turn),
  ``session_id`` LiteLLM's session id or the client's ``user``, ``model`` the model
  group clients ask for, ``provider``, ``client`` (the user agent), the
  ``messages`` when LiteLLM logged them (tool history from the transcript), the
  tools offered, the client's thinking switch;
- **response** (at ``endTime``): the answer's content, reasoning, tool calls,
  ``finish_reason`` and usage, read from the response LiteLLM logged, whatever its
  ``status`` says (a failed stream can log ``success``, BerriAI/litellm#36768, and
  a failed row can have an empty ``call_type``, PR #34862): the class comes from
  the content. A failure's ``error_information`` becomes the error text the
  proxy writes for the same failure (``Provider returned 500: <body>``, a
  connection error, a read timeout, an empty or non-JSON 200). The log fields of
  the ladder running inside LiteLLM (analyzer.integrations.litellm_ladder:
  ``metadata.spend_logs_metadata.analyzer_log_fields``) are merged in as the
  proxy merges ``log_fields``.

Both records carry ``gateway: "litellm"`` and the deployment's ``api_base`` host as
``proxy_pod`` (the replica hint). A line that is not a payload, or a payload that
holds no chat completion to classify, is set aside with its reason (quarantined).
Standard library only beside Arrow, which the readers hand the lines in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator
from urllib.parse import urlsplit

from analyzer.io.linereader import MALFORMED, SNIPPET_CHARS, LineBlock, arrow, mend_surrogates
from analyzer.online import LOG_FIELDS_KEY, answer_summary, client_switch, switch_sent

GATEWAY = "litellm"
#: What LiteLLM writes in place of a text when message logging is off.
REDACTED = "redacted-by-litellm"
#: The keys that say a JSON object is a StandardLoggingPayload (any one, with startTime).
PAYLOAD_KEYS = ("litellm_call_id", "trace_id", "call_type", "model_group", "hidden_params")
# Calls that are chat completions (an empty call_type: a failed row, PR #34862).
_CHAT_CALLS = frozenset({"", "completion", "acompletion"})


@dataclass
class SetAside:
    """A line of a LiteLLM file that holds no record to store: quarantined with its reason."""

    line_no: int
    reason: str
    head: str


class NotAPayload(ValueError):
    """The object is not a LiteLLM chat-completion payload the analyzer can read (the reason)."""


def is_payload(obj: Any) -> bool:
    """Whether a parsed JSON value is a LiteLLM StandardLoggingPayload (not a proxy record)."""
    return (isinstance(obj, dict) and "startTime" in obj and any(k in obj for k in PAYLOAD_KEYS)
            and obj.get("type") not in ("request", "response", "system_prompt"))


def records_of(payload: dict) -> tuple[dict, dict]:
    """The proxy's request and response records for one LiteLLM payload.

    Raises:
        NotAPayload: ``payload`` is no StandardLoggingPayload, not a chat
            completion, has no usable start time, or holds neither an answer nor
            an error (``s3_log_prompts_only`` drops the response).
    """
    if not is_payload(payload):
        raise NotAPayload("not a LiteLLM StandardLoggingPayload (no startTime beside litellm_call_id, "
                          "trace_id or call_type)")
    call_type = payload.get("call_type") or ""
    if call_type not in _CHAT_CALLS:
        raise NotAPayload(f"LiteLLM call_type {str(call_type)[:40]!r} is not a chat completion: not read")
    start = _time(payload.get("startTime"), "startTime")
    # an end before the start (clocks of another host, a hand-edited copy) is the start:
    # the response must not precede its request, or the two would not pair
    end = max(_time(payload.get("endTime"), "endTime", required=False) or start, start)
    metadata = _dict(payload.get("metadata"))
    ids = {
        "request_id": _text(payload.get("litellm_call_id")) or _text(payload.get("id")),
        "session_id": (_text(payload.get("session_id")) or _text(payload.get("end_user"))
                       or _text(metadata.get("user_api_key_end_user_id"))),
        "client": _text(payload.get("user_agent")) or _text(metadata.get("user_agent")),
        "provider": _text(payload.get("custom_llm_provider")),
        "model": _text(payload.get("model_group")) or _text(payload.get("model")),
        "origin": None,
    }
    hidden = _dict(payload.get("hidden_params"))
    source = {
        "id": payload.get("id"), "trace_id": payload.get("trace_id"), "call_type": call_type,
        "status": payload.get("status"), "model": payload.get("model"), "model_id": payload.get("model_id"),
        "api_base": _text(hidden.get("api_base")) or _text(payload.get("api_base")),
        "stream": payload.get("stream"), "cache_hit": payload.get("cache_hit"),
    }
    common = {**ids, "gateway": GATEWAY, "proxy_pod": _replica(source["api_base"], payload.get("model_id"))}
    params = _dict(payload.get("model_parameters"))
    fields = _dict(_dict(metadata.get("spend_logs_metadata")).get(LOG_FIELDS_KEY))
    request = {"timestamp": _iso(start), "type": "request", **common, **_prompt(payload.get("messages"), params),
               "litellm": source}
    if request["enable_thinking"] is None:  # LiteLLM logs no chat_template_kwargs; the ladder says what it sent
        request["enable_thinking"] = switch_sent(fields.get("thinking_sent"))
    response = {"timestamp": _iso(end), "type": "response", **common,
                "latency_ms": max(0, round((end - start).total_seconds() * 1000)),
                **_answer(payload), "max_tokens": _int(params.get("max_completion_tokens", params.get("max_tokens"))),
                "thinking_token_budget": _int(params.get("thinking_token_budget")),
                "litellm": {**source, **_attempts(hidden)}}
    response.update(fields)  # the ladder's own account of the call, as the proxy merges log_fields
    return request, response


def _prompt(messages: Any, params: dict) -> dict:
    """A request record's prompt fields: counts, the tool results of this turn, the transcript when logged."""
    tools = params.get("tools") if isinstance(params.get("tools"), list) else None
    out: dict[str, Any] = {"tools_count": len(tools) if tools is not None else 0,
                           "enable_thinking": client_switch(params)}
    if not isinstance(messages, list) or _redacted_messages(messages):
        return out  # message logging off (or a prompt that is not a list): tool history is inferred
    out["message_count"] = len(messages)
    last_assistant = max((i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"),
                         default=-1)
    out["tool_results_this_turn"] = [m.get("tool_call_id") for m in messages[last_assistant + 1:]
                                     if isinstance(m, dict) and m.get("role") in ("tool", "function")]
    user = next((m.get("content") for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"),
                None)
    if user is not None:
        out["user_message_this_turn"] = user if isinstance(user, str) else json.dumps(user, sort_keys=True)
    out["messages"] = messages
    return out


def _redacted_messages(messages: list) -> bool:
    """LiteLLM's stand-in for a prompt it did not log (``turn_off_message_logging``)."""
    return (len(messages) == 1 and isinstance(messages[0], dict)
            and messages[0].get("content") == REDACTED)


def _answer(payload: dict) -> dict:
    """A response record's answer fields: the content LiteLLM logged, or the error the proxy would write.

    The content decides, never ``status``: a response with choices is an answer
    however the call was marked, and a payload with neither choices nor an error
    is a 200 with no usable answer.
    """
    response = payload.get("response")
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        return _choice(response)
    error = _error(payload)
    if error is not None:
        return error
    if isinstance(response, dict) and response:
        return {}  # a 200 without choices: no has_* field, as the proxy logs it
    raise NotAPayload("no response logged (s3_log_prompts_only, or a call cut off before it ended): "
                      "nothing to classify")


def _choice(response: dict) -> dict:
    """The fields of the first choice of a chat-completions answer (none: a 200 with no usable answer)."""
    out: dict[str, Any] = {}
    usage = _dict(response.get("usage"))
    if usage:
        out["tokens"] = usage
    choices = response["choices"]
    if not choices or not isinstance(choices[0], dict):
        return out
    choice = choices[0]
    message = _dict(choice.get("message")) or _dict(choice.get("delta"))
    content = message.get("content")
    specific = _dict(message.get("provider_specific_fields"))
    reasoning = message.get("reasoning_content")
    if reasoning is None:
        reasoning = specific.get("reasoning_content", message.get("reasoning"))
    calls = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
    if message.get("function_call"):
        calls = [*calls, {"type": "function", "function": message["function_call"]}]
    # analyzer.online's reading of the answer says which tool calls are usable (objects, not junk)
    # and whether content given as parts has a visible text: the rule lives there, not here.
    said = answer_summary({"choices": [{**choice, "message": message}]})
    out.update({
        "finish_reason": choice.get("finish_reason"),
        "has_content": bool(content),
        "has_tool_calls": said["has_tool_calls"],
        "has_reasoning_content": bool(reasoning),
        "tool_calls": calls,
    })
    # A redacted text is known to be there, not what it was: no text to judge blank or leaked.
    if isinstance(content, str) and content != REDACTED:
        out["content"] = content
    elif content is not None and not isinstance(content, str):
        # Parts (or another shape) as JSON text when they show a text; else blank, so the rule
        # (records.content_blank) reads them as no content, as analyzer.online does.
        out["content"] = json.dumps(content) if said["has_content"] else ""
    if isinstance(reasoning, str) and reasoning != REDACTED:
        out["reasoning_content"] = reasoning
    return out


# The transport failures LiteLLM words in its own message, as the proxy names them
# (analyzer.online.parse_error reads the names).
_TRANSPORT = (
    (re.compile(r"cannot connect to host|connection refused|connect call failed|name or service not known|"
                r"nodename nor servname|connecterror|connection error", re.I), "ClientConnectorError"),
    (re.compile(r"server disconnected|connection reset|remoteprotocolerror|peer closed connection|"
                r"incomplete chunked read", re.I), "ServerDisconnectedError"),
)
_OWN_NAMES = re.compile(r"^(?:JSONDecodeError|ConnectError|ConnectTimeout|ReadTimeout|PoolTimeout|WriteTimeout|"
                        r"RemoteProtocolError|ReadError|ClientRequestError|ThinkingBudgetError|CancelledError)\b")
_DETAIL = re.compile(r"Exception - (.*)\Z", re.S)


def _error(payload: dict) -> dict | None:
    """The proxy's error text for a failed call (and the upstream's headers), or None when none is logged."""
    info = _dict(payload.get("error_information"))
    message = _text(info.get("error_message")) or _text(payload.get("error_str"))
    code = _text(info.get("error_code"))
    if not message and not code:
        return None
    message = message or ""
    m = _DETAIL.search(message)
    detail = (m.group(1) if m else message).strip()
    status = int(code) if code and code.isdigit() and 100 <= int(code) <= 599 else None
    if _OWN_NAMES.match(detail):  # the ladder's own wording (analyzer.integrations.litellm_ladder)
        text = detail
    elif info.get("error_class") == "Timeout" or status == 408:
        text = f"{'ConnectTimeout' if 'connect' in detail.lower() else 'ReadTimeout'}: {detail}"
    elif status is not None and 200 <= status < 300:  # LiteLLM's "Unable to get json response" of a 200
        text = f"JSONDecodeError: {detail}"
    else:
        text = next((f"{name}: {detail}" for pattern, name in _TRANSPORT if pattern.search(detail)), None)
        if text is None:
            text = f"Provider returned {status}: {detail}" if status is not None else \
                f"{_text(info.get('error_class')) or 'Error'}: {detail}"
    out: dict[str, Any] = {"error": text[:2000]}
    headers = _upstream_headers(_dict(_dict(payload.get("hidden_params")).get("additional_headers")))
    if headers:
        out["upstream_headers"] = headers
    return out


def _upstream_headers(headers: dict) -> dict:
    """The upstream's own response headers among LiteLLM's (its ``llm_provider-`` prefix taken off)."""
    out = {}
    for k, v in headers.items():
        name = str(k).lower()
        if name.startswith("x-litellm-"):
            continue
        out[name.removeprefix("llm_provider-")] = v
    return out


def _attempts(hidden: dict) -> dict:
    """LiteLLM's own retries and fallbacks before the attempt this payload logs."""
    headers = _dict(hidden.get("additional_headers"))
    return {"attempted_retries": _int(headers.get("x-litellm-attempted-retries")),
            "attempted_fallbacks": _int(headers.get("x-litellm-attempted-fallbacks"))}


def _replica(api_base: str | None, model_id: Any) -> str | None:
    """The deployment a call went to, as a replica hint: the api_base's host and port, else LiteLLM's model id."""
    if api_base:
        try:
            parts = urlsplit(api_base)
            if parts.hostname:
                return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname
        except ValueError:
            pass
    return _text(model_id)


def _time(value: Any, name: str, required: bool = True) -> datetime | None:
    """A payload time (epoch seconds, or ISO 8601) as a UTC datetime."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, timezone.utc)
        if isinstance(value, str) and value.strip():
            dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    except (ValueError, OverflowError, OSError):
        pass
    if required:
        raise NotAPayload(f"{name} {str(value)[:40]!r} is not a time")
    return None


def _iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else (str(value) if isinstance(value, int)
                                                                     and not isinstance(value, bool) else None)


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False, default=str)


def map_block(block: LineBlock) -> tuple[LineBlock, list[SetAside]]:
    """A block of LiteLLM payload lines as a block of proxy record lines, and the lines set aside.

    Each payload's two records carry its line's number (``line_nos``); the block
    covers the same input lines and bytes as the one read, so ingestion's progress
    through the file is unchanged. Blank lines hold nothing.
    """
    pa, _ = arrow()
    out: list[str] = []
    numbers: list[int] = []
    aside: list[SetAside] = []
    for i, line in enumerate(block.lines.to_pylist()):
        no = block.first_line + i
        if line is None or not line.strip():
            continue
        try:
            # A lone surrogate escape read would be written raw and refused by DuckDB: mended first, as
            # the ingest mends the proxy's lines.
            obj = json.loads(mend_surrogates(line))
        except (ValueError, RecursionError):
            aside.append(SetAside(no, MALFORMED, line[:SNIPPET_CHARS]))
            continue
        try:
            request, response = records_of(obj)
        except NotAPayload as exc:
            aside.append(SetAside(no, str(exc), line[:SNIPPET_CHARS]))
            continue
        out.extend((_dumps(request), _dumps(response)))
        numbers.extend((no, no))
    lines = pa.array(out, pa.large_string())
    mapped = LineBlock(block.first_line, lines, block.end_offset, block.nbytes, exact=False,
                       terminated=block.terminated, line_nos=pa.array(numbers, pa.int64()), last=block.last_line)
    return mapped, aside


def mapped_pieces(pieces: Iterator) -> Iterator:
    """The pieces of a LiteLLM file as proxy record lines: each block mapped, then the lines it set aside."""
    for piece in pieces:
        if isinstance(piece, LineBlock):
            mapped, aside = map_block(piece)
            yield mapped
            yield from aside
        else:
            yield piece
