"""The models behind the proxy, and how each one behaves and fails.

A :class:`Profile` per model id (provider, usage shape, reasoning, speed, and the
per-call probability of each failure); the mix of models the sessions pick; the ids
the proxy rejects; the providers it serves and their endpoints (for the banner and
the ``Unknown model`` message).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    """How one model behaves. The ``p_*`` are per-call probabilities, adjusted in
    :meth:`Session._sample` (by transcript length, tool history, hour)."""

    provider: str
    usage: str  # shape of the usage object: "vllm" | "openrouter" | "anthropic"
    reasoning_default: bool  # a reasoning trace when the client does not say (enable_thinking null)
    thinking_key: bool  # the proxy maps enable_thinking for it (else it prints an ℹ️ line and ignores it)
    ms_per_token: float  # decode speed
    ttft_ms: float  # time to first token, before prefill
    prefill_us_per_token: float
    th500: float  # scale of the naked-500-with-tool-history curve (the GLM signature; 0 = never)
    p_5xx: float  # other 5xx (gateway HTML 502, JSON 503, 529 ...), mostly on turns without tool history
    p_timeout: float  # the proxy's 1200 s read timeout
    p_reset: float  # the connection drops mid-answer
    p_429: float  # rate limited (more in busy hours)
    p_4xx: float  # 400/401/403 passed through
    p_empty: float  # empty 200 with finish_reason stop (grows with the transcript on tool turns)
    p_length: float  # reasoning eats the whole max_tokens (thinking on and a cap sent)
    p_slow: float  # a 200-900 s generation (slow warning, or the caller hangs up first)
    p_repair: float  # the proxy repaired leaked tool-call argument markup
    p_mismatch: float  # tool calls with finish_reason "stop" (`tool-call-stop-mismatch`)
    price_in: float = 0.0  # USD per million tokens (OpenRouter reports a cost)
    price_out: float = 0.0
    pod_model: bool = False  # served by a self-hosted vLLM pod that Prometheus scrapes


PROFILES: dict[str, Profile] = {
    "glm-5": Profile(
        provider="nrp", usage="vllm", reasoning_default=True, thinking_key=True, ms_per_token=32,
        ttft_ms=650, prefill_us_per_token=45, th500=1.0, p_5xx=0.015, p_timeout=0.0015, p_reset=0.0008,
        p_429=0.001, p_4xx=0.001, p_empty=0.012, p_length=0.02, p_slow=0.004, p_repair=0.006,
        p_mismatch=0.025, pod_model=True,
    ),
    "glm-4.6": Profile(
        provider="nrp", usage="vllm", reasoning_default=True, thinking_key=False, ms_per_token=27,
        ttft_ms=550, prefill_us_per_token=40, th500=0.6, p_5xx=0.012, p_timeout=0.0012, p_reset=0.0006,
        p_429=0.001, p_4xx=0.001, p_empty=0.008, p_length=0.015, p_slow=0.003, p_repair=0.004,
        p_mismatch=0.01, pod_model=True,
    ),
    "qwen3": Profile(
        provider="nrp", usage="vllm", reasoning_default=True, thinking_key=True, ms_per_token=14,
        ttft_ms=350, prefill_us_per_token=25, th500=0.2, p_5xx=0.002, p_timeout=0.001, p_reset=0.0005,
        p_429=0.001, p_4xx=0.001, p_empty=0.004, p_length=0.05, p_slow=0.002, p_repair=0.003,
        p_mismatch=0.03, pod_model=True,
    ),
    "gpt-oss": Profile(
        provider="nimbus", usage="vllm", reasoning_default=True, thinking_key=False, ms_per_token=9,
        ttft_ms=300, prefill_us_per_token=15, th500=0.0, p_5xx=0.012, p_timeout=0.0, p_reset=0.0008,
        p_429=0.0, p_4xx=0.001, p_empty=0.003, p_length=0.01, p_slow=0.002, p_repair=0.0, p_mismatch=0.005,
    ),
    "anthropic/claude-sonnet-4.5": Profile(
        provider="openrouter", usage="openrouter", reasoning_default=False, thinking_key=False,
        ms_per_token=18, ttft_ms=900, prefill_us_per_token=10, th500=0.0, p_5xx=0.004, p_timeout=0.0,
        p_reset=0.0004, p_429=0.03, p_4xx=0.012, p_empty=0.001, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.0, price_in=3.0, price_out=15.0,
    ),
    "z-ai/glm-4.6": Profile(
        provider="openrouter", usage="openrouter", reasoning_default=True, thinking_key=False,
        ms_per_token=22, ttft_ms=1100, prefill_us_per_token=10, th500=0.3, p_5xx=0.005, p_timeout=0.0,
        p_reset=0.0004, p_429=0.05, p_4xx=0.012, p_empty=0.006, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.005, price_in=0.4, price_out=1.75,
    ),
    "openai/gpt-5-mini": Profile(
        provider="openrouter", usage="openrouter", reasoning_default=False, thinking_key=False,
        ms_per_token=10, ttft_ms=700, prefill_us_per_token=8, th500=0.0, p_5xx=0.003, p_timeout=0.0,
        p_reset=0.0003, p_429=0.02, p_4xx=0.012, p_empty=0.002, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.0, price_in=0.25, price_out=2.0,
    ),
    "qwen/qwen3-235b-a22b-2507": Profile(
        provider="openrouter", usage="openrouter", reasoning_default=True, thinking_key=False,
        ms_per_token=16, ttft_ms=800, prefill_us_per_token=10, th500=0.1, p_5xx=0.004, p_timeout=0.0,
        p_reset=0.0004, p_429=0.04, p_4xx=0.012, p_empty=0.004, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.005, price_in=0.08, price_out=0.55,
    ),
    "claude-sonnet-4-5": Profile(
        provider="anthropic", usage="anthropic", reasoning_default=False, thinking_key=False,
        ms_per_token=19, ttft_ms=950, prefill_us_per_token=10, th500=0.0, p_5xx=0.004, p_timeout=0.0,
        p_reset=0.0003, p_429=0.012, p_4xx=0.006, p_empty=0.001, p_length=0.0, p_slow=0.001, p_repair=0.0,
        p_mismatch=0.0,
    ),
}

# (model, weight) for regular sessions; "unrouted"/"streaming" are rejections.
MODEL_MIX: tuple[tuple[str, float], ...] = (
    ("glm-5", 0.49),
    ("glm-4.6", 0.09),
    ("qwen3", 0.12),
    ("gpt-oss", 0.08),
    ("anthropic/claude-sonnet-4.5", 0.05),
    ("z-ai/glm-4.6", 0.04),
    ("openai/gpt-5-mini", 0.03),
    ("qwen/qwen3-235b-a22b-2507", 0.02),
    ("claude-sonnet-4-5", 0.05),
    ("unrouted", 0.014),
    ("streaming", 0.012),
)
UNROUTED_MODELS = ("gpt-4o", "glm-4.7", "llama-3.3-70b", "mistral-large")

# What the synthetic deployment serves (for the "Unknown model" message): this proxy
# has no default provider, so unknown ids are rejected instead of falling to nrp.
_SERVED = (
    ("nrp", ("glm-5", "glm-4.6", "qwen3", "kimi", "qwen3-small", "gemma", "qwen3-4bit")),
    ("openrouter", ()),
    ("anthropic", ()),
    ("nimbus", ("gpt-oss",)),
)
ENDPOINTS = (
    ("nrp", "https://ellm.nrp-nautilus.io/v1/chat/completions"),
    ("openrouter", "https://openrouter.ai/api/v1/chat/completions"),
    ("anthropic", "https://api.anthropic.com/v1/chat/completions"),
    ("nimbus", "https://vllm-nimbus.carlboettiger.info/v1/chat/completions"),
)
STREAMING_ERROR = (
    "Streaming is not supported by this proxy: it buffers each completion to log the request/response "
    "pair. Omit `stream` or set it to false."
)


def unknown_model_error(model: str) -> str:
    """The proxy's error text for a model id it does not route."""
    served = "; ".join(
        f"{name} ({', '.join(models[:6])}{'…' if len(models) > 6 else ''})" for name, models in _SERVED
    )
    return f"Unknown model '{model}'. This deployment serves: {served}"
