"""The fallback ladder and the request normalizer inside LiteLLM: a custom provider.

LiteLLM loads this module from its config (never the analyzer: this is the only
module of the package that imports litellm)::

    model_list:
      - model_name: glm-5
        litellm_params:
          model: ladder/glm-5                 # ladder/<the name vLLM serves>
          api_base: http://vllm-glm:8000/v1
          api_key: os.environ/VLLM_API_KEY    # optional
    litellm_settings:
      num_retries: 0                          # the ladder retries; LiteLLM would resend the same payload
      custom_provider_map:
        - {"provider": "ladder", "custom_handler": analyzer.integrations.litellm_ladder.ladder}

Each call is what the reference proxy does with :mod:`analyzer.online`
(analyzer/online/README.md): the client's thinking switch turned into the GLM
template's keys (:func:`~analyzer.online.normalize_thinking`), the thinking
budget checked, then :func:`~analyzer.online.arun_ladder` against the upstream,
sending raw chat-completions payloads with httpx, so every rung is what the
upstream sees. The answer passed on is the ladder's (a leaked think block split
out); :func:`~analyzer.online.log_fields` goes into LiteLLM's logging payload as
``metadata.spend_logs_metadata.analyzer_log_fields``, which the analyzer reads
back from LiteLLM's logs like a proxy's log fields (analyzer.io.litellm_records).

Operators who need other settings (a served name's GLM generation, the length
rungs, a tighter deadline) make their own instance in a module of theirs and
name it in ``custom_handler``:
``ladder = LadderLLM(LadderSettings(templates={"glm-5": "glm-5.3"}))``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx
from litellm.llms.custom_llm import CustomLLM, CustomLLMError
from litellm.types.utils import GenericStreamingChunk, ModelResponse

from analyzer.online import (
    DEFAULT_CALLER_DEADLINE_S,
    LOG_FIELDS_KEY,
    ClientRequestError,
    LadderResult,
    LadderSettings,
    arun_ladder,
    client_switch,
    log_fields,
    normalize_thinking,
    run_ladder,
    validate_thinking_budget,
)
from analyzer.online.ladder import DEFAULT_SETTINGS

# LiteLLM's own keys among a call's optional params: not the upstream's business.
_NOT_FORWARDED = frozenset({"stream", "stream_options", "extra_body", "enable_thinking", "max_retries"})
_DEFAULT_TIMEOUT_S = 600.0


class LadderLLM(CustomLLM):
    """LiteLLM's custom provider that sends each call through :mod:`analyzer.online`'s ladder.

    Args:
        settings: how the ladder runs (:class:`analyzer.online.LadderSettings`, made
            and checked once, as a proxy makes it at its start); its ``templates``
            (which GLM generation a served name runs) and ``answer_reserve`` serve
            the normalizer too.
        clear_thinking: the normalizer's option for shorter prompts.
        caller_deadline_s: the callers' deadline: no rung starts with less than a
            second of it left, and an answer after it is ``late-200``.
    """

    def __init__(self, settings: LadderSettings = DEFAULT_SETTINGS, *, clear_thinking: bool = False,
                 caller_deadline_s: float = DEFAULT_CALLER_DEADLINE_S) -> None:
        super().__init__()
        if not isinstance(settings, LadderSettings):
            raise TypeError(f"settings must be an analyzer.online.LadderSettings, got {type(settings).__name__}")
        self.settings = settings
        self.clear_thinking = clear_thinking
        self.caller_deadline_s = caller_deadline_s

    # -- LiteLLM's entry points ----------------------------------------------

    async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                          encoding, api_key, logging_obj, optional_params, acompletion=None, litellm_params=None,
                          logger_fn=None, headers={}, timeout=None, client=None) -> ModelResponse:  # noqa: B006
        """One chat completion through the ladder (LiteLLM's async call)."""
        body = await self._aladder(model, messages, api_base, api_key, logging_obj, optional_params, timeout)
        return _model_response(body)

    def completion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding,
                   api_key, logging_obj, optional_params, acompletion=None, litellm_params=None, logger_fn=None,
                   headers={}, timeout=None, client=None) -> ModelResponse:  # noqa: B006
        """One chat completion through the ladder (LiteLLM's sync call: ``run_ladder``)."""
        start, payload, url, auth = self._begin(model, messages, api_base, api_key, logging_obj, optional_params)
        with httpx.Client(timeout=_timeout_s(timeout)) as http:
            def send(p: dict):
                r = http.post(url, json=p, headers=auth)
                return r.status_code, r.headers, r.content

            try:
                ladder = run_ladder(payload, send, self.settings,
                                    deadline=self.settings.clock() + self.caller_deadline_s)
            except httpx.HTTPError as exc:
                raise self._transport_failed(payload, exc, logging_obj, start) from exc
        return _model_response(self._passed_on(payload, ladder, logging_obj, start))

    async def astreaming(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                         encoding, api_key, logging_obj, optional_params, acompletion=None, litellm_params=None,
                         logger_fn=None, headers={}, timeout=None,  # noqa: B006
                         client=None) -> AsyncIterator[GenericStreamingChunk]:
        """A streamed call: the ladder needs whole answers, so the answer it passes on is sent as chunks at once."""
        body = await self._aladder(model, messages, api_base, api_key, logging_obj, optional_params, timeout)
        for chunk in _chunks(body):
            yield chunk

    def streaming(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose, encoding,
                  api_key, logging_obj, optional_params, acompletion=None, litellm_params=None, logger_fn=None,
                  headers={}, timeout=None, client=None) -> Iterator[GenericStreamingChunk]:  # noqa: B006
        """The sync :meth:`astreaming`."""
        response = self.completion(model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                                   encoding, api_key, logging_obj, optional_params, timeout=timeout)
        yield from _chunks(response.model_dump())

    # -- the three calls of analyzer/online/README.md -------------------------

    def _begin(self, model, messages, api_base, api_key, logging_obj, optional_params) -> tuple[float, dict, str, dict]:
        """A call's start (the wall clock, for latency_ms; the ladder's deadline is on settings.clock), its
        payload with the thinking keys normalized (a 400 if refused), the upstream's URL and authorization."""
        start = time.time()
        payload, enabled = _prepared(model, messages, optional_params)
        payload = self._normalized(payload, model, enabled, logging_obj, start)
        url, auth = _endpoint(api_base, api_key)
        return start, payload, url, auth

    async def _aladder(self, model, messages, api_base, api_key, logging_obj, optional_params, timeout) -> dict:
        start, payload, url, auth = self._begin(model, messages, api_base, api_key, logging_obj, optional_params)
        async with httpx.AsyncClient(timeout=_timeout_s(timeout)) as http:
            async def send(p: dict):
                r = await http.post(url, json=p, headers=auth)
                return r.status_code, r.headers, r.content

            try:
                ladder = await arun_ladder(payload, send, self.settings,
                                           deadline=self.settings.clock() + self.caller_deadline_s)
            except asyncio.CancelledError as exc:  # the client hung up: logged, then LiteLLM's to handle
                self._log(logging_obj, start, payload, error=exc)
                raise
            except httpx.HTTPError as exc:
                raise self._transport_failed(payload, exc, logging_obj, start) from exc
        return self._passed_on(payload, ladder, logging_obj, start)

    def _normalized(self, payload: dict, model: str, enabled: bool | None, logging_obj, start: float) -> dict:
        """The payload with the thinking keys of the model's template, its budget checked; a 400 if refused."""
        try:
            payload = normalize_thinking(payload, model, enabled, clear_thinking=self.clear_thinking,
                                         templates=self.settings.templates)
            validate_thinking_budget(payload.get("thinking_token_budget"), payload.get("max_tokens"),
                                     self.settings.answer_reserve)
        except ClientRequestError as exc:  # the client's junk: refused before any upstream call
            self._log(logging_obj, start, payload, error=exc)
            raise CustomLLMError(status_code=400, message=f"{type(exc).__name__}: {exc}") from exc
        return payload

    def _log(self, logging_obj, start: float, payload: dict, status: int | None = None, body: Any = None,
             ladder: LadderResult | None = None, *, error: BaseException | None = None) -> None:
        """The call's :func:`~analyzer.online.log_fields` (its latency since ``start``), attached for LiteLLM."""
        ms = int((time.time() - start) * 1000)
        _attach(logging_obj, log_fields(payload, status, body, ladder, error=error, latency_ms=ms,
                                        caller_deadline_s=self.caller_deadline_s))

    def _transport_failed(self, payload: dict, exc: httpx.HTTPError, logging_obj, start: float) -> CustomLLMError:
        """The original call raised (no ladder ran): logged as the proxy logs it, a 504 or 502 for LiteLLM."""
        self._log(logging_obj, start, payload, error=exc)
        timed_out = isinstance(exc, httpx.TimeoutException)
        return CustomLLMError(status_code=504 if timed_out else 502, message=f"{type(exc).__name__}: {exc}")

    def _passed_on(self, payload: dict, ladder: LadderResult, logging_obj, start: float) -> dict:
        """The ladder's answer as a chat-completions object, its log fields attached; an upstream error raised."""
        self._log(logging_obj, start, payload, ladder.status, ladder.body, ladder)
        text = ladder.body.decode("utf-8", errors="replace") if isinstance(ladder.body, bytes) else str(ladder.body)
        if not 200 <= ladder.status < 300:  # every rung failed, or none ran: the upstream's status passed on
            raise CustomLLMError(status_code=ladder.status, message=text[:1000])
        try:
            body = json.loads(text)
        except (ValueError, RecursionError) as exc:  # an empty or non-JSON 200, relayed as the proxy does: a 502
            raise CustomLLMError(status_code=502, message=f"{type(exc).__name__}: {exc}"[:1000]) from exc
        if not isinstance(body, dict):
            raise CustomLLMError(status_code=502, message="the upstream's 200 is JSON but not an object")
        return body


def _prepared(model: str, messages: Any, optional_params: Mapping[str, Any] | None) -> tuple[dict, bool | None]:
    """The chat-completions payload LiteLLM was asked for, and the client's thinking switch (None: not asked)."""
    params = dict(optional_params or {})
    extra = params.get("extra_body")
    payload: dict[str, Any] = {"model": model, "messages": _plain(messages)}
    payload.update({k: _plain(v) for k, v in params.items() if k not in _NOT_FORWARDED})
    if isinstance(extra, Mapping):  # what the client sent beside the OpenAI parameters
        payload.update({k: _plain(v) for k, v in extra.items() if k not in _NOT_FORWARDED})
    top = params.get("enable_thinking", extra.get("enable_thinking") if isinstance(extra, Mapping) else None)
    return payload, client_switch({"enable_thinking": top, "chat_template_kwargs": payload.get("chat_template_kwargs")})


def _plain(value: Any) -> Any:
    """``value`` as plain JSON types (LiteLLM may hand over its pydantic message objects)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _endpoint(api_base: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    """The upstream's chat-completions URL and its authorization header."""
    if not api_base:
        raise CustomLLMError(status_code=500, message="ladder/ models need an api_base (the vLLM server's /v1)")
    base = api_base.rstrip("/")
    url = base if base.endswith("/chat/completions") else base + "/chat/completions"
    auth = {"authorization": f"Bearer {api_key}"} if api_key and api_key.lower() != "none" else {}
    return url, auth


def _timeout_s(timeout: Any) -> float | httpx.Timeout:
    """LiteLLM's timeout for one upstream call (a number or httpx's), else 600 s as the proxy's read timeout."""
    if isinstance(timeout, httpx.Timeout) or (isinstance(timeout, (int, float)) and timeout > 0):
        return timeout
    return _DEFAULT_TIMEOUT_S


def _attach(logging_obj: Any, fields: dict) -> None:
    """Put the log fields where LiteLLM copies them into its logging payload (metadata.spend_logs_metadata)."""
    details = getattr(logging_obj, "model_call_details", None)
    if not isinstance(details, dict):
        return
    params = details.setdefault("litellm_params", {})
    if not isinstance(params, dict):
        return
    metadata = params.get("metadata")
    if not isinstance(metadata, dict):
        metadata = params["metadata"] = {}
    spend = metadata.get("spend_logs_metadata")
    spend = dict(spend) if isinstance(spend, dict) else {}
    spend[LOG_FIELDS_KEY] = fields
    metadata["spend_logs_metadata"] = spend


def _model_response(body: dict) -> ModelResponse:
    """The upstream's chat-completions object as LiteLLM's ModelResponse (reasoning and tool calls kept).

    The upstream controls every byte: a body LiteLLM cannot take as a chat
    completion (choices of the wrong shape) is a 502, as the proxy relays a body
    it cannot read, not an error of LiteLLM's own.
    """
    try:
        return ModelResponse(**body)
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise CustomLLMError(status_code=502, message=f"the upstream's 200 is not a chat completion: {exc}"[:1000]) \
            from exc


def _chunks(body: Mapping[str, Any]) -> Iterator[GenericStreamingChunk]:
    """A whole answer as LiteLLM's streaming chunks: the text, each tool call, then the finish and usage."""
    choices = body.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], Mapping) else {}
    message = choice.get("message") or {}
    usage = body.get("usage") or None
    reasoning = message.get("reasoning_content")
    calls = [c for c in (message.get("tool_calls") or []) if isinstance(c, Mapping)]
    first: GenericStreamingChunk = {"text": message.get("content") or "", "tool_use": None, "is_finished": False,
                                    "finish_reason": "", "usage": None, "index": 0}
    if reasoning:
        first["provider_specific_fields"] = {"reasoning_content": reasoning}
    yield first
    for i, call in enumerate(calls):
        function = call.get("function") or {}
        yield {"text": "", "is_finished": False, "finish_reason": "", "usage": None, "index": 0,
               "tool_use": {"id": call.get("id"), "type": "function", "index": i,
                            "function": {"name": function.get("name"), "arguments": function.get("arguments") or ""}}}
    yield {"text": "", "tool_use": None, "is_finished": True, "finish_reason": choice.get("finish_reason") or "stop",
           "usage": usage, "index": 0}


#: The handler ``custom_provider_map`` names: the ladder with the defaults of analyzer.online.
ladder = LadderLLM()
