"""The request normalizer: thinking keys, the thinking-budget contract, stop reasons."""

from __future__ import annotations

from typing import Any, Mapping

from .templates import GLM_TEMPLATES, SWITCH_KEYS, glm_template

# Chat-template keys that switch thinking on/off, per model family. GLM gets both
# keys because GLM/vLLM template revisions disagree about which one they read
# (the fallback-ladder proposal's dual-key normalization): sending both is a
# no-op when the current key is the right one. Which GLM keys are sent at all
# follows the template generation (analyzer.online.templates): GLM-5.3 on has no
# off switch, and gets no false key.
THINKING_KEYS: dict[str, tuple[str, ...]] = {
    "glm": SWITCH_KEYS,
    "qwen": ("enable_thinking",),
    "deepseek": ("thinking",),
    "kimi": ("thinking",),
}
# Families whose chat template has a ``clear_thinking`` switch for the reasoning
# of earlier turns. GLM-5's template (zai-org/GLM-5 chat_template.jinja) re-renders
# a past assistant turn's reasoning when
#     ((clear_thinking is defined and not clear_thinking)
#       or loop.index0 > ns.last_user_index) and reasoning_content is defined
# so ``clear_thinking: false`` keeps every earlier turn's <think> block in the
# prompt: what GLM's docs recommend for agentic tool use (the model sees why it
# called each tool), and what the fallback-ladder proposal asks for ("clear_thinking:
# false when thinking is enabled"). It is the default here. The prompt then grows
# with the session's reasoning; operators who want shorter prompts pass
# ``clear_thinking=True`` (the current tool cycle's reasoning stays, earlier
# turns' is dropped). GLM-5.3's template defaults to keeping it, so the key is
# always sent explicitly when thinking is on, never left to the template.
CLEAR_THINKING_FAMILIES = frozenset({"glm"})

# Tokens a budgeted answer spends beyond the thinking span: the forced </think>
# marker and the terminal stop token (GLM-5.2 on vLLM's token layout, as the
# thinking_token_budget contract counts it).
BUDGET_OVERHEAD_TOKENS = 2


class ClientRequestError(ValueError):
    """A client request field this module refuses (answer the client with a 400).

    Raised before any model call by :func:`normalize_thinking` and
    :func:`validate_thinking_budget`; the only exception either raises on client
    input. ``field`` names the offending request field and ``value`` holds what
    was sent.
    """

    def __init__(self, field: str, value: Any, reason: str):
        self.field = field
        self.value = value
        self.reason = reason
        super().__init__(f"{field}={_short(value)} rejected: {reason}")


def _short(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a client value with a broken repr
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 120 else text[:117] + "..."


class ThinkingBudgetError(ClientRequestError):
    """A ``thinking_token_budget`` (or its ``max_tokens``) the contract rejects."""


def thinking_family(model: str, families: Mapping[str, tuple[str, ...]] | None = None) -> str | None:
    """The thinking-key family of a model name (``glm-5`` -> ``glm``), or None."""
    table = THINKING_KEYS if families is None else families
    if not isinstance(model, str):
        return None
    name = model.lower().rsplit("/", 1)[-1]
    # A name that starts with a family wins over one that merely contains another
    # (``deepseek-r1-distill-qwen`` is deepseek, not qwen).
    for family in table:
        if name.startswith(family):
            return family
    for family in table:
        if f"-{family}" in name or f"_{family}" in name:
            return family
    return None


def normalize_thinking(
    payload: Mapping[str, Any],
    model: str,
    enabled: bool | None,
    *,
    families: Mapping[str, tuple[str, ...]] | None = None,
    clear_thinking: bool = False,
    templates: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Return a payload whose ``chat_template_kwargs`` switch thinking as asked.

    For GLM the keys follow the model's template generation
    (:func:`analyzer.online.templates.glm_template`; ``templates`` is the
    operator's override of what a served name runs, e.g. ``{"glm-5": "glm-5.3"}``):

    - GLM-4.5 to GLM-5.2 (an off switch): thinking on gets ``enable_thinking`` and
      ``thinking`` both true plus ``clear_thinking: false`` (earlier turns'
      reasoning kept, as GLM's docs recommend for agentic tool use; the
      fallback-ladder proposal's default; ``clear_thinking=True`` sends ``true``
      instead, for operators who want shorter prompts, see
      :data:`CLEAR_THINKING_FAMILIES`). Thinking off gets both keys false and no
      ``clear_thinking``.
    - GLM-5.3 and later (no off switch): a false ``enable_thinking``/``thinking`` is
      never sent (vLLM's parser would stop extracting reasoning while the model
      thinks on, and the scratchpad would leak into ``content``,
      vllm-project/vllm#54744): any such key already in the kwargs is removed,
      whatever ``enabled`` says. Thinking off sends ``reasoning_effort: "low"``,
      the lowest the template takes; thinking on sends ``clear_thinking``.

    Other families get their own key from ``families`` (default
    :data:`THINKING_KEYS`; pass a dict to extend it). With ``enabled=None`` (the
    client did not ask: the model's default), an unknown family, or a ``model``
    that is not a string, the payload's thinking settings are left as they are
    (but for the false switch keys a GLM-5.3 generation never gets).

    Keys already in ``chat_template_kwargs`` (the client's, or one the proxy
    injected from its own per-model config) are kept and merged into: only the
    thinking keys of the family are set. The input is never mutated. What was
    sent is what :func:`thinking_sent` reads from the result.

    Raises:
        ClientRequestError: ``payload`` is not an object, ``enabled`` is not a
            boolean or None, or ``chat_template_kwargs`` must be written into but
            is not an object (a string, list or number from the client).
        ValueError: ``clear_thinking`` or ``templates`` (the operator's settings)
            is malformed.
    """
    if not isinstance(clear_thinking, bool):
        raise ValueError(f"clear_thinking must be true or false, got {clear_thinking!r}")
    if not isinstance(payload, Mapping):
        raise ClientRequestError("payload", payload, "a chat-completions request must be a JSON object")
    if enabled is not None and not isinstance(enabled, bool):
        raise ClientRequestError("enable_thinking", enabled, "must be true, false or null")
    table = THINKING_KEYS if families is None else families
    family = thinking_family(model, table)
    out = dict(payload)
    template = glm_template(model, templates) if family == "glm" else None
    if template is not None and not template.off_switch:
        return _no_switch(out, payload, enabled, clear_thinking, template.effort_off)
    if enabled is None or family is None:
        return out
    kwargs = _kwargs_of(payload)
    keys = template.switch_keys if template is not None else table[family]
    for key in keys:
        kwargs[key] = enabled
    if enabled and family in CLEAR_THINKING_FAMILIES:
        kwargs["clear_thinking"] = clear_thinking
    out["chat_template_kwargs"] = kwargs
    return out


def _kwargs_of(payload: Mapping[str, Any]) -> dict[str, Any]:
    current = payload.get("chat_template_kwargs")
    if current is not None and not isinstance(current, Mapping):
        raise ClientRequestError("chat_template_kwargs", current, "must be an object")
    return dict(current or {})


def _no_switch(out: dict[str, Any], payload: Mapping[str, Any], enabled: bool | None,
               clear_thinking: bool, effort_off: str | None) -> dict[str, Any]:
    """The payload for a GLM generation without an off switch (GLM-5.3 on)."""
    current = payload.get("chat_template_kwargs")
    if enabled is None and not isinstance(current, Mapping):
        return out  # nothing asked, nothing false to take out (junk kwargs are the client's)
    kwargs = _kwargs_of(payload)
    for key in SWITCH_KEYS:
        if key in kwargs and not kwargs[key]:
            del kwargs[key]  # a false switch only disarms the parser: the model thinks on
    if enabled is True:
        kwargs["clear_thinking"] = clear_thinking
    elif enabled is False and effort_off is not None:
        kwargs["reasoning_effort"] = effort_off
    if current is not None or kwargs:
        out["chat_template_kwargs"] = kwargs
    return out


#: The ``chat_template_kwargs`` keys :func:`thinking_sent` reports.
THINKING_SENT_KEYS = (*SWITCH_KEYS, "clear_thinking", "reasoning_effort")


def thinking_sent(payload: Any) -> dict[str, Any] | None:
    """The thinking keys a payload carries in ``chat_template_kwargs`` (for the log), or None.

    Only :data:`THINKING_SENT_KEYS` with a JSON scalar value; None when there are
    none (or the payload or its kwargs are not objects). Never raises.
    """
    kwargs = payload.get("chat_template_kwargs") if isinstance(payload, Mapping) else None
    if not isinstance(kwargs, Mapping):
        return None
    found = {k: kwargs[k] for k in THINKING_SENT_KEYS
             if k in kwargs and (kwargs[k] is None or isinstance(kwargs[k], (bool, int, float, str)))}
    return found or None


def client_switch(params: Any) -> bool | None:
    """The thinking switch a client asked for in a request's parameters, or None (not asked).

    A boolean top-level ``enable_thinking`` (an OpenAI client's ``extra_body``), else
    a boolean switch key (``enable_thinking``, ``thinking``) in
    ``chat_template_kwargs``. Never raises.
    """
    if not isinstance(params, Mapping):
        return None
    kwargs = params.get("chat_template_kwargs")
    keys = (params.get("enable_thinking"), *(kwargs.get(k) for k in SWITCH_KEYS if isinstance(kwargs, Mapping)))
    return next((v for v in keys if isinstance(v, bool)), None)


#: The ``reasoning_effort`` values :func:`normalize_thinking` sends for "thinking off".
_EFFORTS_OFF = frozenset(t.effort_off for t in GLM_TEMPLATES if t.effort_off is not None)


def switch_sent(sent: Any) -> bool | None:
    """The switch :func:`normalize_thinking` was asked for, read back from what it sent (:func:`thinking_sent`).

    A false or true switch key says it; so does a generation without an off switch:
    its "off" effort (GLM-5.3's ``reasoning_effort: "low"``) is off, and
    ``clear_thinking``, sent only with thinking on, is on. None when the keys say
    nothing (the client did not ask). Never raises.
    """
    if not isinstance(sent, Mapping):
        return None
    switch = next((sent[k] for k in SWITCH_KEYS if isinstance(sent.get(k), bool)), None)
    if switch is not None:
        return switch
    if sent.get("reasoning_effort") in _EFFORTS_OFF:
        return False
    return True if "clear_thinking" in sent else None


def _is_int(v: Any) -> bool:
    # bool is an int subclass in Python, but true/false are not token counts.
    return isinstance(v, int) and not isinstance(v, bool)


def validate_thinking_budget(
    budget: Any,
    max_tokens: Any = None,
    answer_reserve: int = 0,
    *,
    max_budget: int | None = None,
) -> int | None:
    """Check a ``thinking_token_budget`` against the GLM thinking-budget contract.

    Returns the normalized budget: None for "no budget" (absent, null or -1),
    otherwise the integer itself (0 is a valid budget; -1 never becomes 0).

    Raises:
        ThinkingBudgetError: for other negatives, floats, booleans, strings, a
            budget above ``max_budget`` or ``max_tokens``, or a budget that leaves
            fewer than ``answer_reserve`` tokens for the visible answer
            (``max_tokens - budget - 2``: the end marker and the stop token).
            Any client value gets this error or a result, never another exception.
        ValueError: ``answer_reserve`` or ``max_budget`` (the operator's settings)
            is not a non-negative integer.
    """
    if not _is_int(answer_reserve) or answer_reserve < 0:
        raise ValueError(f"answer_reserve must be a non-negative integer, got {answer_reserve!r}")
    if max_budget is not None and (not _is_int(max_budget) or max_budget < 0):
        raise ValueError(f"max_budget must be a non-negative integer or None, got {max_budget!r}")
    if budget is None or (_is_int(budget) and budget == -1):
        return None
    if not _is_int(budget):
        kind = type(budget).__name__
        raise ThinkingBudgetError("thinking_token_budget", budget, f"must be an integer, -1 or null, not {kind}")
    if budget < 0:
        raise ThinkingBudgetError("thinking_token_budget", budget, "negative values other than -1 are invalid")
    if max_budget is not None and budget > max_budget:
        raise ThinkingBudgetError("thinking_token_budget", budget, f"exceeds this service's limit of {max_budget}")
    if max_tokens is None:
        return budget
    if not _is_int(max_tokens) or max_tokens <= 0:
        raise ThinkingBudgetError("max_tokens", max_tokens, "must be a positive integer")
    if budget > max_tokens:
        raise ThinkingBudgetError(
            "thinking_token_budget", budget, f"is larger than max_tokens={max_tokens}"
        )
    capacity = max_tokens - budget - BUDGET_OVERHEAD_TOKENS
    if capacity < answer_reserve:
        raise ThinkingBudgetError(
            "thinking_token_budget",
            budget,
            f"leaves {max(capacity, 0)} tokens for the answer with max_tokens={max_tokens} "
            f"(minus {BUDGET_OVERHEAD_TOKENS} for the end marker and stop token), "
            f"below the required answer reserve of {answer_reserve}",
        )
    return budget


def answer_capacity(max_tokens: int, budget: int) -> int:
    """Visible-answer tokens left by a budget: ``max(0, max_tokens - budget - 2)``."""
    return max(0, max_tokens - budget - BUDGET_OVERHEAD_TOKENS)


# OpenAI finish_reason -> Anthropic stop_reason.
_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def anthropic_stop_reason(finish_reason: str | None, saw_tool_calls: bool) -> str | None:
    """Map an OpenAI ``finish_reason`` to an Anthropic ``stop_reason``.

    A turn that emitted tool calls ends in ``tool_use`` whatever the upstream said
    (a mixed text + tool-call stream from vLLM must not end in ``end_turn``, or
    the client never runs the tool). Unknown or empty reasons give None, so the
    caller keeps its own default.
    """
    if saw_tool_calls:
        return "tool_use"
    if not finish_reason or not isinstance(finish_reason, str):
        return None
    return _STOP_REASONS.get(finish_reason.lower())
