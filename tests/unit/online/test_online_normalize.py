"""The request normalizer: the GLM thinking-budget contract (``thinking_token_budget``
values and the answer reserve), thinking keys per model family, and OpenAI ->
Anthropic stop reasons (a mixed text + tool-call stream ends in ``tool_use``)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.online import (
    THINKING_KEYS,
    ClientRequestError,
    ThinkingBudgetError,
    anthropic_stop_reason,
    answer_capacity,
    client_switch,
    glm_template,
    glm_version,
    normalize_thinking,
    switch_sent,
    thinking_sent,
    validate_thinking_budget,
)

# ---------------------------------------------------------------------------
# thinking_token_budget: accepted and rejected values (GLM-5.2 on vLLM: null or -1
# for no limit, 0 and positive integers, nothing else)


@pytest.mark.parametrize("value", [None, -1], ids=["null-or-omitted", "minus-one"])
def test_no_budget_values_normalize_to_none(value):
    assert validate_thinking_budget(value) is None
    # -1 means "no explicit limit": never 0 (which forces the end of thinking at once).
    assert validate_thinking_budget(value, 192, 64) is None


def test_omitted_budget_from_a_payload_is_none():
    payload = {"model": "glm-5", "max_tokens": 192}
    assert validate_thinking_budget(payload.get("thinking_token_budget"), payload["max_tokens"], 64) is None


@pytest.mark.parametrize("value", [0, 16, 32])
def test_non_negative_integers_are_budgets(value):
    result = validate_thinking_budget(value)
    assert result == value and type(result) is int
    assert validate_thinking_budget(value, 192, 64) == value


def test_zero_is_a_valid_budget_not_no_budget():
    assert validate_thinking_budget(0) == 0
    assert validate_thinking_budget(0) is not None


def test_minus_one_never_becomes_zero():
    for max_tokens, reserve in [(None, 0), (192, 64), (4096, 1024)]:
        assert validate_thinking_budget(-1, max_tokens, reserve) is None


@pytest.mark.parametrize("value, fragment", [
    (-2, "-2"),
    (-100, "-100"),
    (1.5, "1.5"),
    (16.0, "16.0"),
    (-1.0, "-1.0"),
    (True, "True"),
    (False, "False"),
    ("16", "'16'"),
    ("-1", "'-1'"),
    ([16], "[16]"),
], ids=["-2", "-100", "1.5", "16.0", "-1.0", "True", "False", "str-16", "str-minus-1", "list"])
def test_rejected_values_name_the_field_and_the_value(value, fragment):
    with pytest.raises(ThinkingBudgetError) as info:
        validate_thinking_budget(value)
    err = info.value
    assert isinstance(err, ValueError)  # callers catching ValueError still see it
    assert err.field == "thinking_token_budget"
    assert err.value == value and type(err.value) is type(value)
    assert "thinking_token_budget" in str(err)
    assert fragment in str(err)


def test_service_maximum():
    assert validate_thinking_budget(2048, max_budget=2048) == 2048
    with pytest.raises(ThinkingBudgetError) as info:
        validate_thinking_budget(2049, max_budget=2048)
    assert info.value.field == "thinking_token_budget" and "2048" in str(info.value)


def test_budget_above_max_tokens_is_rejected():
    with pytest.raises(ThinkingBudgetError) as info:
        validate_thinking_budget(300, 192)
    assert info.value.field == "thinking_token_budget" and "192" in str(info.value)


@pytest.mark.parametrize("max_tokens", [0, -5, 1.5, "192", True])
def test_invalid_max_tokens_is_named(max_tokens):
    with pytest.raises(ThinkingBudgetError) as info:
        validate_thinking_budget(16, max_tokens)
    assert info.value.field == "max_tokens"
    assert info.value.value == max_tokens


# The seven cells of the GLM-5.2 answer-reserve table (max_tokens, budget, reserve,
# capacity, accepted): capacity = max_tokens - budget - 1 end marker - 1 stop token.
RESERVE_ROWS = [
    (192, 16, 64, 174, True),
    (192, 32, 64, 158, True),
    (192, 126, 64, 64, True),  # exact boundary: passes
    (192, 127, 64, 63, False),
    (4096, 512, 1024, 3582, True),
    (4096, 3070, 1024, 1024, True),  # exact boundary: passes
    (4096, 3071, 1024, 1023, False),
]


@pytest.mark.parametrize("max_tokens, budget, reserve, capacity, passes", RESERVE_ROWS,
                         ids=[f"{m}/{b}/{r}" for m, b, r, _, _ in RESERVE_ROWS])
def test_answer_reserve_rows(max_tokens, budget, reserve, capacity, passes):
    assert answer_capacity(max_tokens, budget) == capacity
    if passes:
        assert validate_thinking_budget(budget, max_tokens, reserve) == budget
    else:
        with pytest.raises(ThinkingBudgetError) as info:
            validate_thinking_budget(budget, max_tokens, reserve)
        err = info.value
        assert err.field == "thinking_token_budget" and err.value == budget
        # The message says what is left and what was required.
        assert str(capacity) in str(err) and str(reserve) in str(err)


def test_reserve_boundary_is_exact_across_sizes():
    for max_tokens in (64, 192, 1000, 4096, 32768):
        for reserve in (0, 1, 64, max_tokens // 2):
            last_ok = max_tokens - reserve - 2
            if last_ok < 0:
                continue
            assert validate_thinking_budget(last_ok, max_tokens, reserve) == last_ok
            with pytest.raises(ThinkingBudgetError):
                validate_thinking_budget(last_ok + 1, max_tokens, reserve)


def test_answer_capacity_never_negative():
    assert answer_capacity(192, 192) == 0
    assert answer_capacity(10, 50) == 0


# ---------------------------------------------------------------------------
# normalize_thinking


def _kwargs(payload):
    return payload.get("chat_template_kwargs")


@pytest.mark.parametrize("model", ["glm-5", "glm-5.2-fp8", "GLM-4.6", "z-ai/glm-5.2", "zai-org/GLM-5.2-FP8"])
def test_glm_gets_both_keys_and_keeps_earlier_reasoning_when_enabled(model):
    # The proposal's default (seed 000): clear_thinking false, earlier turns'
    # reasoning kept, as GLM's docs recommend for agentic tool use.
    out = normalize_thinking({"model": model, "messages": []}, model, True)
    assert _kwargs(out) == {"enable_thinking": True, "thinking": True, "clear_thinking": False}


@pytest.mark.parametrize("model", ["glm-5", "z-ai/glm-5.2"])
def test_clear_thinking_is_the_operators_option_for_shorter_prompts(model):
    out = normalize_thinking({"model": model}, model, True, clear_thinking=True)
    assert _kwargs(out) == {"enable_thinking": True, "thinking": True, "clear_thinking": True}
    # Thinking off: the option adds nothing.
    assert _kwargs(normalize_thinking({"model": model}, model, False, clear_thinking=True)) == {
        "enable_thinking": False, "thinking": False}
    # Other families have no clear_thinking switch.
    assert _kwargs(normalize_thinking({}, "qwen3", True, clear_thinking=True)) == {"enable_thinking": True}


@pytest.mark.parametrize("value", [None, 0, 1, "true"])
def test_clear_thinking_must_be_a_boolean(value):
    with pytest.raises(ValueError, match="clear_thinking"):
        normalize_thinking({"model": "glm-5"}, "glm-5", True, clear_thinking=value)


@pytest.mark.parametrize("model", ["glm-5", "z-ai/glm-5.2"])
def test_glm_disabled_sets_both_keys_false_and_adds_no_clear_thinking(model):
    out = normalize_thinking({"model": model}, model, False)
    assert _kwargs(out) == {"enable_thinking": False, "thinking": False}
    # A clear_thinking already there is the sender's: kept, never dropped.
    prior = {"model": model, "chat_template_kwargs": {"clear_thinking": False, "enable_thinking": True}}
    assert _kwargs(normalize_thinking(prior, model, False)) == {"enable_thinking": False, "thinking": False,
                                                                "clear_thinking": False}


def test_glm_disagreeing_keys_are_made_to_agree():
    payload = {"chat_template_kwargs": {"enable_thinking": False, "thinking": True}}
    assert _kwargs(normalize_thinking(payload, "glm-5", True)) == {
        "enable_thinking": True, "thinking": True, "clear_thinking": False}
    assert _kwargs(normalize_thinking(payload, "glm-5", False)) == {"enable_thinking": False, "thinking": False}


def test_other_template_kwargs_are_kept():
    payload = {"chat_template_kwargs": {"reasoning_effort": "high", "custom": [1, 2]}}
    out = normalize_thinking(payload, "glm-5", True)
    assert _kwargs(out) == {"reasoning_effort": "high", "custom": [1, 2], "enable_thinking": True,
                            "thinking": True, "clear_thinking": False}


@pytest.mark.parametrize("enabled", [True, False])
def test_a_key_the_proxy_injected_from_its_config_is_merged_into(enabled):
    # The real proxy sets chat_template_kwargs = {thinking_models[model]: enabled}
    # from its config.json; normalizing after it keeps that key and adds GLM's other.
    injected = {"model": "glm-5", "chat_template_kwargs": {"enable_thinking": enabled, "x_proxy": 1}}
    out = normalize_thinking(injected, "glm-5", enabled)
    expected = {"enable_thinking": enabled, "thinking": enabled, "x_proxy": 1}
    if enabled:
        expected["clear_thinking"] = False
    assert _kwargs(out) == expected
    assert injected["chat_template_kwargs"] == {"enable_thinking": enabled, "x_proxy": 1}  # not mutated


@pytest.mark.parametrize("model", ["qwen3", "Qwen/Qwen3-235B-A22B", "qwen3-small"])
@pytest.mark.parametrize("enabled", [True, False])
def test_qwen_gets_only_its_own_key(model, enabled):
    out = normalize_thinking({"model": model}, model, enabled)
    assert _kwargs(out) == {"enable_thinking": enabled}


@pytest.mark.parametrize("model, key", [("deepseek-v3.1", "thinking"), ("kimi-k2", "thinking")])
def test_other_known_families(model, key):
    assert _kwargs(normalize_thinking({}, model, True)) == {key: True}


@pytest.mark.parametrize("model", ["llama-3.1-70b", "gpt-4o", "claude-sonnet", "", "mistralai/mixtral"])
@pytest.mark.parametrize("enabled", [True, False])
def test_unknown_family_is_left_alone(model, enabled):
    payload = {"model": model, "chat_template_kwargs": {"enable_thinking": not enabled}, "temperature": 0}
    out = normalize_thinking(payload, model, enabled)
    assert out == payload and out is not payload


@pytest.mark.parametrize("model", ["glm-5", "qwen3", "llama"])
def test_enabled_none_leaves_thinking_as_the_client_sent_it(model):
    payload = {"model": model, "chat_template_kwargs": {"thinking": True}}
    out = normalize_thinking(payload, model, None)
    assert out == payload and out is not payload
    assert normalize_thinking({"model": model}, model, None) == {"model": model}


def test_extended_family_table():
    table = {**THINKING_KEYS, "gemma": ("enable_thinking", "thinking_mode")}
    assert _kwargs(normalize_thinking({}, "gemma4-27b", True, families=table)) == {
        "enable_thinking": True, "thinking_mode": True}
    # The defaults still apply inside an extended table; glm keeps clear_thinking.
    assert _kwargs(normalize_thinking({}, "glm-5", True, families=table)) == {
        "enable_thinking": True, "thinking": True, "clear_thinking": False}
    # The default table does not know gemma.
    assert "chat_template_kwargs" not in normalize_thinking({}, "gemma4-27b", True)


def test_replacement_family_table():
    # A table that only knows qwen, spelling its key differently; glm is unknown to it.
    table = {"qwen": ("thinking",)}
    assert _kwargs(normalize_thinking({}, "qwen3", False, families=table)) == {"thinking": False}
    assert "chat_template_kwargs" not in normalize_thinking({}, "glm-5", True, families=table)


def test_normalize_never_mutates_the_payload():
    kwargs = {"enable_thinking": False, "clear_thinking": True}
    payload = {"model": "glm-5", "messages": [{"role": "user", "content": "q"}], "chat_template_kwargs": kwargs}
    before = copy.deepcopy(payload)
    for model in ("glm-5", "qwen3", "llama"):
        for enabled in (True, False, None):
            normalize_thinking(payload, model, enabled)
    assert payload == before
    assert payload["chat_template_kwargs"] is kwargs and kwargs == before["chat_template_kwargs"]


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                 max_size=3),
                     max_leaves=8)


@settings(deadline=None)  # a shared machine must not fail on timing
@given(
    payload=st.dictionaries(st.sampled_from(["model", "messages", "temperature", "tools", "max_tokens"]), _json,
                            max_size=5),
    kwargs=st.none() | st.dictionaries(st.sampled_from(["enable_thinking", "thinking", "clear_thinking", "x"]),
                                       _json, max_size=4) | _json,
    model=st.sampled_from(["glm-5", "z-ai/glm-5.2", "qwen3", "deepseek-r1", "kimi-k2", "llama-3", ""]),  # switches
    enabled=st.sampled_from([True, False, None]),
    clear=st.booleans(),
)
def test_normalize_property(payload, kwargs, model, enabled, clear):
    if kwargs is not None:
        payload["chat_template_kwargs"] = kwargs
    before = copy.deepcopy(payload)
    known = enabled is not None and any(f in model for f in ("glm", "qwen", "deepseek", "kimi"))
    if known and kwargs is not None and not isinstance(kwargs, dict):
        # Client junk where an object belongs: the documented client error, nothing else.
        with pytest.raises(ClientRequestError) as info:
            normalize_thinking(payload, model, enabled, clear_thinking=clear)
        assert info.value.field == "chat_template_kwargs" and payload == before
        return
    out = normalize_thinking(payload, model, enabled, clear_thinking=clear)
    assert payload == before
    # Only chat_template_kwargs may change.
    assert {k: v for k, v in out.items() if k != "chat_template_kwargs"} == \
        {k: v for k, v in payload.items() if k != "chat_template_kwargs"}
    new = out.get("chat_template_kwargs") or {}
    if enabled is not None and any(f in model for f in ("glm", "qwen", "deepseek", "kimi")):
        family = next(f for f in THINKING_KEYS if f in model)
        for key in THINKING_KEYS[family]:
            assert new[key] is enabled
        glm_on = family == "glm" and enabled
        if glm_on:
            assert new["clear_thinking"] is clear
        # Keys the normalizer does not set are kept as sent (never dropped).
        for key, value in (kwargs or {}).items():
            if key not in THINKING_KEYS[family] and not (glm_on and key == "clear_thinking"):
                assert new[key] == value
        assert set(kwargs or {}) <= set(new)
    else:
        assert out == payload


# ---------------------------------------------------------------------------
# GLM template generations: no false key for a template without an off switch


@pytest.mark.parametrize("name, version, generation", [
    ("glm-5", (5, 0), "glm-4.7"),                 # GLM-5.0 by name: an off switch
    ("glm-5.2", (5, 2), "glm-4.7"),
    ("zai-org/GLM-5.2-FP8", (5, 2), "glm-4.7"),
    ("GLM-4.7", (4, 7), "glm-4.7"),
    ("glm-4.6", (4, 6), "glm-4.5"),
    ("z-ai/glm-4.6", (4, 6), "glm-4.5"),
    ("glm45", (4, 5), "glm-4.5"),
    ("glm-4.5-air", (4, 5), "glm-4.5"),
    ("glm-5.3", (5, 3), "glm-5.3"),
    ("GLM-5.3-Flash", (5, 3), "glm-5.3"),
    ("zai-org/GLM-5.3-FP8", (5, 3), "glm-5.3"),
    ("glm-6", (6, 0), "glm-5.3"),                 # "GLM-5.3 and later"
    ("glm", None, "glm-4.7"),
])
def test_the_generation_a_name_says(name, version, generation):
    assert glm_version(name) == version
    assert glm_template(name).name == generation


def test_the_operator_says_what_a_generic_name_runs():
    # glm-5 may serve GLM-5.2 or GLM-5.3 weights: the override decides, patterns and GLM names allowed.
    assert glm_template("glm-5", {"glm-5": "glm-5.3"}).name == "glm-5.3"
    assert glm_template("GLM-5", {"glm-5*": "GLM-5.3-FP8"}).name == "glm-5.3"
    assert glm_template("glm-5.3-flash", {"glm-5.3*": "glm-5.2"}).name == "glm-4.7"
    assert glm_template("glm-4.6", {"glm-5": "glm-5.3"}).name == "glm-4.5"  # another name: its own
    for bad in ({"glm-5": "qwen3"}, {"glm-5": 5.3}, {5: "glm-5.3"}, ["glm-5"]):
        with pytest.raises(ValueError):
            glm_template("glm-5", bad)


@pytest.mark.parametrize("model, templates", [
    ("glm-5.3", None), ("GLM-5.3-Flash", None), ("zai-org/GLM-5.3-FP8", None),
    ("glm-5", {"glm-5": "glm-5.3"}), ("z-ai/glm-5.2", {"*": "glm-5.3"}),
])
def test_thinking_off_on_a_template_without_a_switch_is_the_lowest_effort(model, templates):
    out = normalize_thinking({"model": model}, model, False, templates=templates)
    # Never a false enable_thinking/thinking: vLLM's parser would stop extracting
    # while the model thinks on (vllm-project/vllm#54744).
    assert out["chat_template_kwargs"] == {"reasoning_effort": "low"}
    assert normalize_thinking({"model": model}, model, True, templates=templates)["chat_template_kwargs"] == {
        "clear_thinking": False}
    # A false key the proxy injected from its config (or the client sent) is taken out, whatever is asked.
    injected = {"model": model, "chat_template_kwargs": {"enable_thinking": False, "thinking": False, "x": 1}}
    for enabled, expected in ((False, {"x": 1, "reasoning_effort": "low"}), (True, {"x": 1, "clear_thinking": False}),
                              (None, {"x": 1})):
        assert normalize_thinking(injected, model, enabled, templates=templates)["chat_template_kwargs"] == expected
    # A true key arms the parser: harmless, kept.
    on = {"chat_template_kwargs": {"enable_thinking": True}}
    assert normalize_thinking(on, model, None, templates=templates) == on


@pytest.mark.parametrize("model", ["glm-4.5", "glm-4.6", "GLM-4.7", "glm-5", "glm-5.1", "glm-5.2"])
def test_thinking_off_still_sends_false_keys_to_glm_4_5_through_5_2(model):
    assert normalize_thinking({}, model, False)["chat_template_kwargs"] == {"enable_thinking": False,
                                                                         "thinking": False}


@settings(deadline=None)
@given(
    kwargs=st.none() | st.dictionaries(st.sampled_from(["enable_thinking", "thinking", "clear_thinking",
                                                        "reasoning_effort", "x"]),
                                       st.none() | st.booleans() | st.integers(-1, 1) | st.text(max_size=3),
                                       max_size=4),
    model=st.sampled_from(["glm-5.3", "GLM-5.3-Flash", "zai-org/GLM-5.3-FP8", "glm-6", "glm-5", "z-ai/glm-4.6"]),
    override=st.sampled_from([None, {"glm-5": "glm-5.3"}, {"*": "GLM-5.3"}]),
    enabled=st.sampled_from([True, False, None]),
    clear=st.booleans(),
)
def test_no_false_switch_ever_reaches_a_generation_without_one(kwargs, model, override, enabled, clear):
    payload = {"model": model} if kwargs is None else {"model": model, "chat_template_kwargs": kwargs}
    out = normalize_thinking(payload, model, enabled, clear_thinking=clear, templates=override)
    sent = out.get("chat_template_kwargs") or {}
    if not glm_template(model, override).off_switch:
        assert all(sent[k] for k in ("enable_thinking", "thinking") if k in sent)
        if enabled is False:
            assert sent["reasoning_effort"] == "low"
    elif enabled is not None:
        assert sent["enable_thinking"] is enabled and sent["thinking"] is enabled


def test_the_log_says_what_was_sent():
    out = normalize_thinking({"model": "glm-5"}, "glm-5", False, templates={"glm-5": "glm-5.3"})
    assert thinking_sent(out) == {"reasoning_effort": "low"}
    assert thinking_sent(normalize_thinking({}, "glm-5", True)) == {
        "enable_thinking": True, "thinking": True, "clear_thinking": False}
    for junk in ({}, {"chat_template_kwargs": "x"}, {"chat_template_kwargs": {"custom": [1]}}, None, 5):
        assert thinking_sent(junk) is None


@pytest.mark.parametrize("model", ["glm-4.5", "glm-5", "glm-5.2", "glm-5.3", "GLM-5.3-FP8", "glm-6", "qwen3"])
@pytest.mark.parametrize("override", [None, {"glm-5": "glm-5.3"}])
@pytest.mark.parametrize("enabled", [True, False, None])
def test_the_switch_asked_for_reads_back_from_what_was_sent(model, override, enabled):
    """What a gateway logs (thinking_sent) says the switch the client asked for: a GLM-5.3's "low"
    effort is off, its clear_thinking on; nothing asked, nothing said."""
    sent = thinking_sent(normalize_thinking({"model": model}, model, enabled, templates=override))
    assert switch_sent(sent) is enabled


def test_the_clients_switch_in_its_parameters():
    assert client_switch({"enable_thinking": False, "chat_template_kwargs": {"thinking": True}}) is False
    assert client_switch({"enable_thinking": "no", "chat_template_kwargs": {"thinking": True}}) is True
    assert client_switch({"chat_template_kwargs": {"enable_thinking": False}}) is False
    for junk in ({}, None, 5, {"chat_template_kwargs": "on"}, {"chat_template_kwargs": {"clear_thinking": True}}):
        assert client_switch(junk) is None
    assert switch_sent({"reasoning_effort": "high"}) is None and switch_sent("low") is None


# ---------------------------------------------------------------------------
# anthropic_stop_reason


@pytest.mark.parametrize("finish_reason, saw_tool_calls, expected", [
    ("stop", False, "end_turn"),
    ("length", False, "max_tokens"),
    ("tool_calls", False, "tool_use"),
    ("function_call", False, "tool_use"),
    ("content_filter", False, "refusal"),
    ("STOP", False, "end_turn"),
    ("Length", False, "max_tokens"),
    (None, False, None),
    ("", False, None),
    ("something_new", False, None),
    # A turn that emitted tool calls ends in tool_use, whatever the upstream said.
    ("tool_calls", True, "tool_use"),
    ("stop", True, "tool_use"),
    ("length", True, "tool_use"),
    (None, True, "tool_use"),
])
def test_anthropic_stop_reason_table(finish_reason, saw_tool_calls, expected):
    assert anthropic_stop_reason(finish_reason, saw_tool_calls) == expected


def _stop_reason_of_stream(chunks):
    """Fold an OpenAI chat stream the way a translator does, then map the stop reason."""
    saw_text = saw_tool = False
    finish = None
    for chunk in chunks:
        choice = chunk["choices"][0]
        delta = choice.get("delta") or {}
        saw_text = saw_text or bool(delta.get("content"))
        saw_tool = saw_tool or bool(delta.get("tool_calls"))
        finish = choice.get("finish_reason") or finish
    return saw_text, anthropic_stop_reason(finish, saw_tool)


def test_vllm_mixed_text_then_tool_call_stream_ends_in_tool_use():
    # The exact upstream shape of the mock vLLM in the Anthropic stop-reason bug
    # report (end_turn after a mixed stream): text, then a tool call in
    # the same turn, then finish_reason tool_calls.
    chunks = [
        {"choices": [{"delta": {"content": "\n\nNow let me fetch the source branch:"}, "index": 0,
                      "finish_reason": None}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "chatcmpl-tool-123", "type": "function",
                                                "function": {"name": "Bash", "arguments": "{\"command\":\"git fetch "
                                                             "origin feat-IGPS-15746-controller-health-endpoint\"}"}}]},
                      "index": 0, "finish_reason": None}]},
        {"choices": [{"delta": {}, "index": 0, "finish_reason": "tool_calls"}]},
    ]
    saw_text, stop_reason = _stop_reason_of_stream(chunks)
    assert saw_text and stop_reason == "tool_use"
    # The buggy variant of the same turn: an upstream that ends the mixed stream
    # with "stop" must still produce tool_use, or the client never runs the tool.
    chunks[-1]["choices"][0]["finish_reason"] = "stop"
    assert _stop_reason_of_stream(chunks) == (True, "tool_use")
    # Text only, same ending: end_turn.
    assert _stop_reason_of_stream([chunks[0], chunks[-1]]) == (True, "end_turn")


def test_a_rejected_budget_is_logged_as_a_client_error():
    from analyzer.online import log_fields

    payload = {"model": "glm-5", "messages": [{"role": "user", "content": "q"}], "thinking_token_budget": -2}
    with pytest.raises(ThinkingBudgetError) as info:
        validate_thinking_budget(payload["thinking_token_budget"], 192, 64)
    fields = log_fields(payload, None, None, error=info.value)
    # Refused before any model call: no upstream status, not an upstream failure.
    assert fields["upstream_status"] is None
    assert fields["incident_class"] == fields["final_class"] == "client-error"
    assert fields["thinking_token_budget"] == -2  # logged as the client sent it
