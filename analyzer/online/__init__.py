"""The part of analyzer that runs inside the proxy: standard library only.

The proxy imports this module to classify each answer, run the fallback ladder and
normalize requests; the analyzer imports the very same functions, so offline
numbers describe exactly what production does. Nothing here may import duckdb,
polars, plotly, jinja2, typer, pydantic or httpx (a test checks ``sys.modules``).

Entry points:

- :func:`classify` / :func:`decide` — the one classification rule over :class:`TurnFeatures`
- :func:`features_from_exchange` — features from a live payload and upstream answer
- :func:`run_ladder` / :func:`arun_ladder` — the fallback ladder, sync and async, armed
  for the models in :data:`LADDER_MODELS` (GLM: :func:`is_glm`)
- :func:`normalize_thinking`, :func:`validate_thinking_budget`, :func:`anthropic_stop_reason`
  (client input they refuse raises :class:`ClientRequestError`, a ``ValueError``);
  :func:`glm_template` says which GLM chat-template generation a served name runs;
  :func:`client_switch` and :func:`switch_sent` read the thinking switch a request asked for
- :func:`repair_leaked_answer` — a think block leaked into ``content`` split out
  (the ladder does it for the models it is armed for)
- :func:`log_fields` — the extra fields a proxy adds to its response record (a gateway's
  adapter puts them under :data:`LOG_FIELDS_KEY` in its own log)
"""

from .classify import (
    ANSWER_IN_REASONING,
    BLANK_CHARS,
    CLASSES,
    CONNECT_TIMEOUT,
    CONNECT_TIMEOUT_MAX_MS,
    CONNECTION_ERROR,
    DEFAULT_CALLER_DEADLINE_S,
    EMPTY_200_STOP,
    ERROR_KINDS,
    INFERRED,
    LATE_200,
    LENGTH_WITH_NO_CONTENT,
    LOGGED,
    NO_ANSWER_200,
    OK,
    POD_DOWN,
    REASONING_LEAKED,
    TOOL_HISTORY_5XX,
    UNANSWERED,
    UPSTREAM_FAILURE_CLASSES,
    WEDGED_POD,
    Decision,
    TurnFeatures,
    classify,
    decide,
    is_blank,
    parse_error,
)
from .features import answer_summary, features_from_exchange, has_tool_history, is_late
from .ladder import (
    ALL_RUNGS,
    DEADLINE,
    DEFAULT_RUNGS,
    LENGTH_RUNGS,
    ORIGINAL,
    OUTCOMES,
    REFUSED_STATUSES,
    Attempt,
    LadderResult,
    LadderSettings,
    RungUnavailable,
    arun_ladder,
    build_rung,
    forwardable_headers,
    ladder_trigger,
    refusal_reason,
    rung_payloads,
    run_ladder,
)
from .models import LADDER_MODELS, is_glm, model_matches
from .logfields import LOG_FIELDS_KEY, LOG_FIELDS_VERSION, log_fields
from .normalize import (
    THINKING_KEYS,
    ClientRequestError,
    ThinkingBudgetError,
    anthropic_stop_reason,
    answer_capacity,
    client_switch,
    normalize_thinking,
    switch_sent,
    thinking_sent,
    validate_thinking_budget,
)
from .reasoning import THINK_CLOSE, THINK_OPEN, has_leaked_think_block, repair_leaked_answer, split_leaked_reasoning
from .templates import GLM_TEMPLATES, ThinkingTemplate, glm_template, glm_version

__all__ = [
    "ALL_RUNGS",
    "ANSWER_IN_REASONING",
    "BLANK_CHARS",
    "CLASSES",
    "CONNECTION_ERROR",
    "CONNECT_TIMEOUT",
    "CONNECT_TIMEOUT_MAX_MS",
    "DEADLINE",
    "DEFAULT_CALLER_DEADLINE_S",
    "DEFAULT_RUNGS",
    "GLM_TEMPLATES",
    "EMPTY_200_STOP",
    "ERROR_KINDS",
    "INFERRED",
    "LADDER_MODELS",
    "LATE_200",
    "LENGTH_RUNGS",
    "LENGTH_WITH_NO_CONTENT",
    "LOGGED",
    "LOG_FIELDS_KEY",
    "LOG_FIELDS_VERSION",
    "NO_ANSWER_200",
    "OK",
    "ORIGINAL",
    "OUTCOMES",
    "POD_DOWN",
    "REASONING_LEAKED",
    "REFUSED_STATUSES",
    "THINKING_KEYS",
    "THINK_CLOSE",
    "THINK_OPEN",
    "TOOL_HISTORY_5XX",
    "UNANSWERED",
    "UPSTREAM_FAILURE_CLASSES",
    "WEDGED_POD",
    "Attempt",
    "ClientRequestError",
    "Decision",
    "LadderResult",
    "LadderSettings",
    "RungUnavailable",
    "ThinkingBudgetError",
    "ThinkingTemplate",
    "TurnFeatures",
    "answer_capacity",
    "answer_summary",
    "anthropic_stop_reason",
    "arun_ladder",
    "build_rung",
    "classify",
    "client_switch",
    "decide",
    "features_from_exchange",
    "forwardable_headers",
    "glm_template",
    "glm_version",
    "has_leaked_think_block",
    "has_tool_history",
    "is_blank",
    "is_glm",
    "is_late",
    "ladder_trigger",
    "log_fields",
    "model_matches",
    "normalize_thinking",
    "parse_error",
    "refusal_reason",
    "repair_leaked_answer",
    "rung_payloads",
    "run_ladder",
    "split_leaked_reasoning",
    "switch_sent",
    "thinking_sent",
    "validate_thinking_budget",
]
