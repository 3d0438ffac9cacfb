"""The part of analyzer that runs inside the proxy: standard library only.

The proxy imports this module to classify each answer, run the fallback ladder and
normalize requests; the analyzer imports the very same functions, so offline
numbers describe exactly what production does. Nothing here may import duckdb,
polars, plotly, jinja2, typer, pydantic or httpx (a test checks ``sys.modules``).

Entry points:

- :func:`classify` / :func:`decide` — the one classification rule over :class:`TurnFeatures`
- :func:`features_from_exchange` — features from a live payload and upstream answer
- :func:`run_ladder` / :func:`arun_ladder` — the fallback ladder, sync and async
- :func:`normalize_thinking`, :func:`validate_thinking_budget`, :func:`anthropic_stop_reason`
- :func:`log_fields` — the extra fields a proxy adds to its response record
"""

from .classify import (
    CLASSES,
    CONNECTION_ERROR,
    EMPTY_200_STOP,
    ERROR_KINDS,
    INFERRED,
    LENGTH_WITH_NO_CONTENT,
    LOGGED,
    OK,
    POD_DOWN,
    TOOL_HISTORY_5XX,
    UNANSWERED,
    UPSTREAM_FAILURE_CLASSES,
    WEDGED_POD,
    Decision,
    TurnFeatures,
    classify,
    decide,
    parse_error,
)
from .features import answer_summary, features_from_exchange, has_tool_history
from .ladder import (
    ALL_RUNGS,
    DEFAULT_RUNGS,
    LENGTH_RUNGS,
    ORIGINAL,
    Attempt,
    LadderResult,
    arun_ladder,
    build_rung,
    ladder_trigger,
    rung_payloads,
    run_ladder,
)
from .logfields import LOG_FIELDS_VERSION, log_fields
from .normalize import (
    THINKING_KEYS,
    ThinkingBudgetError,
    anthropic_stop_reason,
    answer_capacity,
    normalize_thinking,
    validate_thinking_budget,
)

__all__ = [
    "ALL_RUNGS",
    "CLASSES",
    "CONNECTION_ERROR",
    "DEFAULT_RUNGS",
    "EMPTY_200_STOP",
    "ERROR_KINDS",
    "INFERRED",
    "LENGTH_RUNGS",
    "LENGTH_WITH_NO_CONTENT",
    "LOGGED",
    "LOG_FIELDS_VERSION",
    "OK",
    "ORIGINAL",
    "POD_DOWN",
    "THINKING_KEYS",
    "TOOL_HISTORY_5XX",
    "UNANSWERED",
    "UPSTREAM_FAILURE_CLASSES",
    "WEDGED_POD",
    "Attempt",
    "Decision",
    "LadderResult",
    "ThinkingBudgetError",
    "TurnFeatures",
    "answer_capacity",
    "answer_summary",
    "anthropic_stop_reason",
    "arun_ladder",
    "build_rung",
    "classify",
    "decide",
    "features_from_exchange",
    "has_tool_history",
    "ladder_trigger",
    "log_fields",
    "normalize_thinking",
    "parse_error",
    "rung_payloads",
    "run_ladder",
    "validate_thinking_budget",
]
