"""The report's template contract: one documented context object per section.

Every template in ``dashboards/`` reads only these objects. Each field says what
it holds, so a user can restyle or extend the report without reading the
analyzer: the top-level template variables are the fields of
:class:`ReportContext` (``headline``, ``timeline``, ...), and every section
object below is documented field by field. A test renders the templates and
checks that what they read is exactly what is documented here.

Conventions: times are UTC (naive ``datetime``); rates are fractions in [0, 1];
``*_low``/``*_high`` are 95% Wilson score bounds (the ``wilson_low``/
``wilson_high`` SQL macros); every piece of log text (questions, errors, tool
arguments, keys taken from log fields) has been through
:func:`analyzer.core.scrub.scrub` and is plain text: the templates escape it (and show
control characters as ``\\xNN``, :func:`analyzer.core.safetext.page_text`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------------------
# Shared pieces


class ChartSpec(_Model):
    """One plotly chart: the template draws it into ``<div id=...>`` with plotly.js."""

    id: str = Field(description="DOM id of the chart's element (unique in the page).")
    title: str = Field(description="What the chart shows, one line (also its accessible label).")
    figure: dict[str, Any] = Field(
        description="The plotly figure as JSON (`data` and `layout`); untrusted text in it is HTML-escaped."
    )
    height: int = Field(description="Height of the chart in CSS pixels.")


class ClassCount(_Model):
    """How many turns got one incident class."""

    incident_class: str = Field(description="The class (see the class table in docs/design.md).")
    count: int = Field(description="Turns with this class.")
    rate: float = Field(description="Share of the turns in scope.")


class PodWindow(_Model):
    """A wedged or down interval of one pod (table `pod_windows`)."""

    pod: str = Field(description="The pod (metric label `pod`, or `instance`).")
    model_name: str = Field(description="The metric `model_name` the pod serves.")
    kind: Literal["wedged", "down"] = Field(description="`wedged` (up, counter flat, demand) or `down` (up == 0).")
    start: datetime = Field(description="Window start (UTC).")
    end: datetime = Field(description="Window end (UTC).")
    minutes: float = Field(description="Length of the window in minutes.")
    failures: int = Field(
        description="Turns of that model classed `wedged-pod` (wedged window) or `pod-down` (down window) inside it, "
                    "each turn counted in one window only (the earliest containing it)."
    )
    corroboration: str | None = Field(
        default=None,
        description="Wedged windows: what the other signals said (running stuck, waiting growing, KV cache full, "
                    "success counter flat), e.g. `3/4 agree: ...`; None for down windows.",
    )
    alert_at: datetime | None = Field(
        default=None,
        description="When the live alert (`analyze alerts`: VLLMPodWedged / VLLMPodDown) would have fired: the start "
                    "plus the wedge window (its `for:`); None when the window was shorter (no page), or inferred.",
    )
    inferred: bool = Field(
        default=False,
        description="A wedge inferred from failing requests while the pod's running/waiting gauges read 0 (frozen "
                    "gauges): the metrics alone do not show it, and the live alert cannot see it.",
    )


# ---------------------------------------------------------------------------
# Headline


class HeadlineNumbers(_Model):
    """The headline figures for one period (from :func:`analyzer.outputs.summary.build_summary`)."""

    label: str = Field(description="The period, e.g. `2026-W47` or `2026-11-16 – 2026-11-23`.")
    turns: int = Field(description="Turns of the focus models in the period.")
    sessions: int = Field(description="Distinct sessions of those turns.")
    failed_turns: int = Field(description="Turns whose class is not `ok`.")
    failure_rate: float = Field(description="failed_turns / turns (0 when there are no turns).")
    tool_sessions: int = Field(description="GLM tool sessions (any turn with tool history or tool calls).")
    sessions_lost: int = Field(description="GLM tool sessions whose last turn failed for the client.")
    sessions_lost_to_eligible: int = Field(description="Of those, lost to a ladder-eligible failure.")
    ladder_eligible: int = Field(description="Ladder-eligible GLM failures (tool-history-5xx, empty-200-stop with tool history).")
    recovery_rate: float | None = Field(description="Measured ladder recovery rate, or None without ladder data.")


class Recovery(_Model):
    """What the ladder measurably recovered (outside wedged windows)."""

    ladders: int = Field(description="Ladder runs started outside wedged windows.")
    recovered: int = Field(description="Of which recovered at some rung.")
    rate: float = Field(description="recovered / ladders.")
    low: float = Field(description="95% Wilson lower bound of the rate.")
    high: float = Field(description="95% Wilson upper bound of the rate.")
    inside_wedged_ladders: int = Field(description="Ladder runs inside wedged windows (not counted above).")
    inside_wedged_recovered: int = Field(description="Of which recovered.")


class Baseline(_Model):
    """Without a ladder: what the client did after each ladder-eligible failure (`ladder_baseline`)."""

    failures: int = Field(description="Ladder-eligible failures no ladder handled.")
    retried_ok: int = Field(description="The client retried the same turn and it worked.")
    retried_failed: int = Field(description="The client retried and it failed again.")
    moved_on: int = Field(description="The next turn was a different question.")
    session_ended: int = Field(description="Nothing followed: the session ended on the failure.")
    rescued_rate: float | None = Field(description="retried_ok / failures, or None without failures.")


class Headline(_Model):
    """Top of the page: the focus models' week in a few numbers."""

    focus: str = Field(description="Which models the headline covers: `GLM` or `all models` (no GLM traffic).")
    models: list[str] = Field(description="The focus models seen in the period.")
    current: HeadlineNumbers = Field(description="This period's numbers.")
    previous: HeadlineNumbers | None = Field(
        description="The same numbers for the period just before, when the data has turns there; else None."
    )
    failure_classes: list[ClassCount] = Field(description="Failure classes of the focus turns, largest first (no `ok`).")
    recovery: Recovery | None = Field(description="Measured ladder recovery, or None when no ladder ran.")
    baseline: Baseline = Field(description="The legacy baseline (always computed; the story when `recovery` is None).")
    conclusion: str = Field(description="One sentence: what the ladder saves (from the sizing).")


# ---------------------------------------------------------------------------
# Timeline and throughput


class TimelineBucket(_Model):
    """One day (or hour) of the timeline."""

    start: datetime = Field(description="Bucket start (UTC).")
    label: str = Field(description="The bucket as shown, e.g. `Mon 11-16` or `11-16 14:00`.")
    turns: int = Field(description="Turns of the focus models in the bucket.")
    failed: int = Field(description="Of which not `ok`.")
    failure_rate: float = Field(description="failed / turns (0 for an empty bucket).")
    counts: dict[str, int] = Field(description="Turns per class, one key per entry of `TimelineSection.classes`.")


class TimelineSection(_Model):
    """Turns per day (hour for ranges up to two days), stacked by class."""

    granularity: Literal["day", "hour"] = Field(description="Bucket size.")
    classes: list[str] = Field(description="Classes present in the period, in the order of `analyzer.online.CLASSES` (unknown ones last, sorted).")
    buckets: list[TimelineBucket] = Field(description="Every bucket of the period, empty ones included.")
    windows: list[PodWindow] = Field(description="Wedged/down windows of the focus models' pods overlapping the period (shaded).")
    metrics_note: str | None = Field(description="Why no windows can be shown (no metrics given), or None.")
    chart: ChartSpec = Field(description="Stacked bars per class, wedged/down windows shaded.")


class PodThroughput(_Model):
    """Generation throughput of one pod over the period."""

    pod: str = Field(description="The pod.")
    model_name: str = Field(description="Its metric `model_name` (empty when unlabelled).")
    mean_tokens_per_s: float = Field(description="Mean generation rate over the buckets with samples.")
    peak_tokens_per_s: float = Field(description="Highest bucket rate.")
    idle_buckets: int = Field(description="Buckets with samples but no generated tokens.")
    wedged_minutes: float = Field(description="Minutes inside wedged windows (clipped to the period).")
    down_minutes: float = Field(description="Minutes inside down windows (clipped to the period).")


class ThroughputSection(_Model):
    """Per-pod `vllm:generation_tokens_total` rate with wedged/down windows marked."""

    available: bool = Field(description="True when the period has generation-counter samples.")
    note: str | None = Field(description="What is missing when not available (e.g. no metrics given), else None.")
    bucket_minutes: int = Field(description="Width of a rate bucket in minutes.")
    pods: list[PodThroughput] = Field(description="One row per pod.")
    windows: list[PodWindow] = Field(description="Wedged/down windows overlapping the period, by start time.")
    chart: ChartSpec | None = Field(description="Tokens/s per pod over time with windows shaded; None when not available.")


# ---------------------------------------------------------------------------
# Ladder


class RungRow(_Model):
    """One rung of the measured ladder (outside wedged windows), from the sizing."""

    trigger: str = Field(description="The class that started these ladders.")
    rung: str = Field(description="The rung (`tool_choice_none`, `drop_tools`, `final_answer`, ...).")
    ladders: int = Field(description="Ladders started for this trigger.")
    reached: int = Field(description="Ladders that tried this rung (a rung the upstream refused is not counted).")
    recovered: int = Field(description="Of which recovered at this rung.")
    refused: int = Field(default=0, description="Ladders whose call at this rung the upstream refused (400/422): "
                                                "the shape was not accepted; the ladder went on.")
    conditional_rate: float | None = Field(description="recovered / reached.")
    conditional_low: float | None = Field(description="Its 95% Wilson lower bound.")
    conditional_high: float | None = Field(description="Its 95% Wilson upper bound.")
    cumulative_rate: float | None = Field(description="Recovered at this rung or earlier / ladders.")
    cumulative_low: float | None = Field(description="Its 95% Wilson lower bound.")
    cumulative_high: float | None = Field(description="Its 95% Wilson upper bound.")


class BeforeAfterRow(_Model):
    """Tool sessions lost per 100 for one class of the last turn, without and with the ladder."""

    lost_class: str = Field(description="The class of the lost sessions' last turn, or `all`.")
    lost_without: int = Field(description="Sessions lost without the ladder.")
    per_100_without: float | None = Field(description="Lost per 100 tool sessions without the ladder.")
    per_100_without_low: float | None = Field(description="Its 95% Wilson lower bound.")
    per_100_without_high: float | None = Field(description="Its 95% Wilson upper bound.")
    lost_with: int = Field(description="Sessions lost with the ladder.")
    per_100_with: float | None = Field(description="Lost per 100 tool sessions with the ladder.")
    per_100_with_low: float | None = Field(description="Its 95% Wilson lower bound.")
    per_100_with_high: float | None = Field(description="Its 95% Wilson upper bound.")
    change_per_100: float | None = Field(description="with - without, per 100 tool sessions.")
    change_low: float | None = Field(description="95% lower bound of the change (Newcombe).")
    change_high: float | None = Field(description="95% upper bound of the change (Newcombe).")


class BeforeAfter(_Model):
    """Did the ladder work? GLM tool sessions split by what their records say (question `ladder_before_after`)."""

    tool_sessions_without: int = Field(description="Tool sessions whose records carry no log fields (before the ladder).")
    tool_sessions_with: int = Field(description="Tool sessions logged by a proxy that ran the ladder for them.")
    classes: list[BeforeAfterRow] = Field(description="`all` first, then each class lost in either era.")


class LadderSection(_Model):
    """The ladder funnel: per rung, reached vs recovered; or the legacy baseline."""

    measured: bool = Field(description="True when ladder attempts were logged in the period.")
    rungs: list[RungRow] = Field(description="Per trigger and rung, in rung order (empty without ladder data).")
    recovery: Recovery | None = Field(description="Overall measured recovery, or None.")
    baseline: Baseline = Field(description="What clients did after eligible failures no ladder handled.")
    eligible_by_trigger: dict[str, int] = Field(description="Ladder-eligible GLM failures per trigger class.")
    wedged_or_down_failures: int = Field(description="GLM failures inside wedged/down windows (never counted as recoverable).")
    conclusion: str = Field(description="The sizing's one-sentence conclusion.")
    chart: ChartSpec = Field(description="Funnel (reached vs recovered per rung) or the baseline's next steps.")
    sessions_lost_without_ladder: int = Field(
        description="GLM tool sessions lost to a ladder-eligible failure no ladder ran on (the only ones a projection applies to).")
    sessions_lost_after_ladder: int = Field(
        description="GLM tool sessions lost after the ladder ran on the last turn and every rung it tried failed (measured).")
    sessions_saved_by_ladder: int = Field(
        description="GLM tool sessions with a turn the ladder recovered that did not end on a failure (measured).")
    before_after: BeforeAfter | None = Field(
        default=None, description="Lost per 100 tool sessions without and with the ladder, or None unless both are in the period.")


# ---------------------------------------------------------------------------
# Breakdowns, position in the session


class BreakdownRow(_Model):
    """One value of a breakdown dimension."""

    key: str = Field(description="The value (model, origin, client version, thinking on/off).")
    turns: int = Field(description="Turns with this value.")
    sessions: int = Field(description="Distinct sessions.")
    failed: int = Field(description="Turns not `ok`.")
    failure_rate: float = Field(description="failed / turns.")
    failure_low: float = Field(description="95% Wilson lower bound of the failure rate.")
    failure_high: float = Field(description="95% Wilson upper bound of the failure rate.")
    ladder_eligible: int = Field(description="Ladder-eligible failures.")
    top_failure: str | None = Field(description="The most frequent failure class, or None when nothing failed.")


class Breakdown(_Model):
    """Failure rates by one dimension."""

    dimension: Literal["model", "origin", "client", "thinking"] = Field(description="What the rows are keyed by.")
    title: str = Field(description="Heading, e.g. `By origin (app)`.")
    scope: str = Field(description="Which turns: `all models` for the model breakdown, else the focus models.")
    rows: list[BreakdownRow] = Field(description="Values by turns, largest first (at most `limit`).")
    omitted: int = Field(description="Values left out beyond the first `limit`.")
    limit: int = Field(description="Most rows shown.")
    chart: ChartSpec = Field(description="Class shares per value, stacked horizontal bars.")


class PromptGrowth(_Model):
    """How fast a tool session's prompt grows per turn in one thinking mode (question `prompt_growth`)."""

    thinking: str = Field(description="`on`, `off` (the client's enable_thinking) or `default` (not sent).")
    tokens_per_turn: float | None = Field(description="Least-squares slope of prompt tokens over the turn index.")
    turns: int = Field(description="Turns of tool sessions with logged prompt tokens it rests on.")


class BreakdownsSection(_Model):
    """Breakdowns by model, origin (app), client version and thinking on/off."""

    items: list[Breakdown] = Field(description="One breakdown per dimension, in that order.")
    prompt_growth: list[PromptGrowth] = Field(
        default_factory=list, description="Prompt growth per turn in tool sessions, per thinking mode (focus models).")


class PositionRow(_Model):
    """Failure rate in one bucket of session position or tool-history depth."""

    bucket: str = Field(description="The bucket, e.g. `1`, `3–4`, `33+`.")
    turns: int = Field(description="Turns in the bucket.")
    failed: int = Field(description="Of which not `ok`.")
    failure_rate: float = Field(description="failed / turns.")
    failure_low: float = Field(description="95% Wilson lower bound.")
    failure_high: float = Field(description="95% Wilson upper bound.")
    ladder_eligible: int = Field(description="Ladder-eligible failures in the bucket.")


class PositionSection(_Model):
    """Where in a session failures happen (focus models, turns with a session id)."""

    by_turn_index: list[PositionRow] = Field(description="By `turn_index` (1-based position in the session).")
    by_tool_depth: list[PositionRow] = Field(
        description="By tool-history depth: earlier turns of the session that answered with tool calls."
    )
    turn_index_chart: ChartSpec = Field(description="Failure rate by turn index, with intervals.")
    tool_depth_chart: ChartSpec = Field(description="Failure rate by tool-history depth, with intervals.")


# ---------------------------------------------------------------------------
# Length vs budget: the thinking_token_budget that would have kept an answer


class CapRow(_Model):
    """`length-with-no-content` turns at one completion cap."""

    cap: int = Field(description="The cap hit: logged `max_tokens`, else the completion tokens (legacy).")
    turns: int = Field(description="Turns that ran out at this cap.")
    logged: int = Field(description="Of which with `max_tokens` logged (the rest are inferred from tokens).")
    median_reasoning_chars: int | None = Field(description="Median reasoning characters produced before the cut.")
    suggested_thinking_budget: int = Field(
        description="thinking_token_budget that keeps `LengthBudgetSection.answer_reserve` tokens for the answer at this cap."
    )


class LengthBudgetSection(_Model):
    """What thinking_token_budget would have kept an answer (with its reserve) at each cap."""

    turns: int = Field(description="`length-with-no-content` turns of the focus models.")
    thinking_turns: int = Field(description="Focus turns with thinking asked for or a reasoning trace.")
    share_of_thinking: float = Field(description="turns / thinking_turns (0 without thinking turns).")
    inferred: int = Field(description="Of the turns, how many were told from stop by token evidence (no finish reason).")
    median_reasoning_chars: int | None = Field(description="Median reasoning characters of those turns.")
    answered_turns: int = Field(description="Answered thinking turns (`ok`, content and reasoning) used as the reference.")
    answered_completion_p50: int | None = Field(description="Median completion tokens of the answered thinking turns.")
    answered_completion_p95: int | None = Field(
        description="95th percentile: a max_tokens at least this large covered 95% of answered thinking turns."
    )
    answer_tokens_p95: int | None = Field(
        description="95th percentile of visible-answer tokens of answered turns (completion tokens × content share of characters)."
    )
    answer_reserve: int = Field(
        description="Answer tokens to keep free: answer_tokens_p95 rounded up to 64 (256, the ladder's default, without data)."
    )
    caps: list[CapRow] = Field(description="Per cap hit, most turns first.")
    conclusion: str = Field(description="The answer in one sentence.")
    chart: ChartSpec = Field(description="Completion tokens vs reasoning characters: failures at the cap vs answered turns.")


# ---------------------------------------------------------------------------
# Top failing sessions


class TurnRow(_Model):
    """One turn of a failing session, as an operator needs it to go look."""

    turn_index: int | None = Field(description="Position in the session (1-based).")
    request_id: str = Field(description="The proxy's request id (unique together with `ts`).")
    ts: datetime = Field(description="Request time (UTC).")
    model: str = Field(description="The model asked.")
    incident_class: str = Field(description="The turn's class.")
    evidence: str = Field(description="`logged` or `inferred`.")
    status: int | None = Field(description="Upstream HTTP status, when known.")
    recovered_at: str | None = Field(description="The rung that recovered the turn, if a ladder did.")
    latency_ms: int | None = Field(description="The proxy's measured latency.")
    question: str | None = Field(description="The turn's user message (redacted, shortened).")
    tool_calls: str | None = Field(description="Tool calls the model made: `name(arguments)` (redacted, shortened).")
    error: str | None = Field(description="The proxy's error text (redacted, shortened).")


class SessionRow(_Model):
    """A failing session and its turns."""

    session_id: str = Field(description="The client session id (redacted like all log text).")
    model: str | None = Field(description="Model of the last turn.")
    origin: str | None = Field(description="Calling app of the last turn (redacted).")
    client: str | None = Field(description="Client of the last turn (redacted).")
    first_ts: datetime = Field(description="First request (UTC).")
    last_ts: datetime = Field(description="Last response (UTC).")
    turns: int = Field(description="Turns in the session.")
    failed_turns: int = Field(description="Turns not `ok`.")
    recovered_turns: int = Field(description="Turns the ladder recovered.")
    last_class: str | None = Field(description="How the last turn ended for the client.")
    ended_on_failure: bool = Field(description="The session ended on a failure (lost).")
    turn_rows: list[TurnRow] = Field(description="The turns shown: failed ones, with the first and last turn.")
    hidden_turns: int = Field(description="Turns of the session not shown (`ok` turns in between, or beyond the cap).")


class TopSessionsSection(_Model):
    """The sessions with the most failed turns, each with its turns."""

    limit: int = Field(description="Most sessions shown.")
    sessions: list[SessionRow] = Field(description="Most failed turns first, then lost sessions, then longer ones.")


# ---------------------------------------------------------------------------
# What on-call looks at (analyzer.outputs.oncall; every model, not only the focus)


class LatencyRow(_Model):
    """Latency percentiles of one model at one provider (question `latency_by_model`)."""

    model: str = Field(description="The model asked (redacted).")
    provider: str = Field(description="The provider that served it (redacted; `unrouted`/`streaming-unsupported` for refusals).")
    turns: int = Field(description="Turns of that model and provider in the period.")
    timed_turns: int = Field(description="Of which with a measured latency (unanswered turns have none).")
    p50_ms: float | None = Field(description="Median latency in milliseconds.")
    p95_ms: float | None = Field(description="95th percentile in milliseconds.")
    p99_ms: float | None = Field(description="99th percentile in milliseconds.")
    max_ms: float | None = Field(description="Slowest turn in milliseconds.")


class TokenRow(_Model):
    """Tokens of one model (question `tokens_by_model`)."""

    model: str = Field(description="The model (redacted).")
    providers: str = Field(description="The providers that served it, comma-separated (redacted).")
    turns: int = Field(description="Turns of the model in the period.")
    turns_with_usage: int = Field(description="Of which with the provider's usage object.")
    prompt_tokens: int = Field(description="Sum of prompt tokens.")
    completion_tokens: int = Field(description="Sum of completion tokens.")
    cached_tokens: int = Field(description="Sum of cached prompt tokens (where the provider reports them).")
    mean_completion_tokens: float | None = Field(description="Mean completion tokens per turn with usage.")


class RateLimitBurst(_Model):
    """A window of 429s of one provider and model (question `rate_limit_bursts`)."""

    provider: str = Field(description="The provider (redacted).")
    model: str = Field(description="The model (redacted).")
    start: datetime = Field(description="The first 429 of the burst (UTC).")
    end: datetime = Field(description="The last 429 of the burst (UTC).")
    duration_s: float = Field(description="end − start in seconds.")
    rate_limited_turns: int = Field(description="429s in the burst.")
    calls_in_window: int = Field(description="Every call of that provider and model inside the window.")
    ok_in_window: int = Field(description="Of which answered `ok`.")


class ProviderIncident(_Model):
    """A provider or model that failed every call of the period (question `provider_incidents`)."""

    incident: str = Field(description="The incident in one line, e.g. `nimbus unreachable: 14 of 14 calls` (redacted).")
    scope: Literal["provider", "model"] = Field(description="`provider` when the whole provider failed, else `model`.")
    models: str = Field(description="The models concerned, comma-separated (redacted).")
    symptom: str = Field(description="The most frequent reading of the failures (`unreachable`, `timing out`, ...).")
    first: datetime = Field(description="The first failed call (UTC).")
    last: datetime = Field(description="The last failed call (UTC).")


class ErrorGroup(_Model):
    """Error texts that differ only in numbers, times or ids (question `error_groups`)."""

    pattern: str = Field(description="The error text with numbers as `<n>`, times `<time>`, ids `<id>` (redacted).")
    turns: int = Field(description="Turns with an error of this pattern.")
    models: str = Field(description="Models that had it, comma-separated (redacted).")
    main_class: str = Field(description="The most frequent incident class of those turns.")
    engine_crash: bool = Field(description="The text is a vLLM engine death (`EngineCore`, `CUDA error`, ...): restart the pod.")
    last: datetime = Field(description="When it was last seen (UTC).")
    example_request_id: str = Field(description="The earliest turn with it, to look up (`records.raw`).")


class OnCallSection(_Model):
    """What on-call looks at: incidents, engine crashes, 429 bursts, latency, tokens, error texts."""

    incidents: list[ProviderIncident] = Field(description="Providers or models that failed every call (at least `incident_min_calls`).")
    incident_min_calls: int = Field(description="Fewest calls for an all-failed provider or model to be an incident.")
    engine_crash_turns: int = Field(description="Turns whose error is a vLLM engine crash text.")
    bursts: list[RateLimitBurst] = Field(description="429 bursts, by start time.")
    burst_gap_s: float = Field(description="Two 429s at most this many seconds apart are one burst.")
    latency: list[LatencyRow] = Field(description="Per model and provider, busiest first.")
    tokens: list[TokenRow] = Field(description="Per model, most tokens first.")
    error_groups: list[ErrorGroup] = Field(description="Normalised error texts: engine crashes first, then most frequent.")
    error_groups_omitted: int = Field(description="Less frequent error patterns not shown (`analyze sql error_groups` lists all).")


# ---------------------------------------------------------------------------
# Replicas and lost records (what the proxy itself says; every model)


class ReplicaRow(_Model):
    """Turns and failures of one proxy replica (`turns.proxy_pod`)."""

    replica: str = Field(description="The replica's pod name (redacted, control characters shown as `\\xNN`), "
                                     "or `(not said)` for turns whose input does not name it.")
    turns: int = Field(description="Turns of every model in the period on this replica.")
    failed: int = Field(description="Of which not `ok`.")
    failure_rate: float = Field(description="failed / turns (0 without turns).")
    failure_low: float = Field(description="95% Wilson lower bound of the failure rate.")
    failure_high: float = Field(description="95% Wilson upper bound of the failure rate.")
    slow_warnings: int = Field(description="Turns the proxy warned were slow (view `slow_turns`).")
    lost_records: int = Field(description="Records this replica's log lines say were lost in the period.")


class LostKindRow(_Model):
    """One kind of proxy log line that says records were lost (table `proxy_events`)."""

    kind: str = Field(description="`buffer-dropped`, `logging-imbalance`, `log-response-failed`, "
                                  "`log-request-failed`, `flush-failed` or `log-failures`.")
    meaning: str = Field(description="What a line of this kind says, in one sentence.")
    events: int = Field(description="Lines of this kind in the period.")
    lost: int = Field(description="Records they say were lost (0 for re-queued flushes and alarms).")


class SlowModelRow(_Model):
    """The proxy's slow-completion warnings for one model."""

    model: str = Field(description="The model the warning names (redacted).")
    warnings: int = Field(description="`Slow completion` lines in the period.")
    turns_flagged: int = Field(description="Turns in the period those warnings flag (`slow_turns.slow_warning`).")
    failed_flagged: int = Field(description="Of the flagged turns, how many are not `ok` (the rest are logged successes "
                                            "the caller may never have received).")
    max_ms: int | None = Field(description="The longest completion a warning reported, in milliseconds.")


class DeploymentFinding(_Model):
    """One thing that needs a deployment fix rather than a retry (analyzer.outputs.deployment)."""

    kind: str = Field(description="`answer-in-reasoning`, `thinking-off-leaks`, `reasoning-leaked`, `repaired`, "
                                  "`budget-refused`, `budget-never-recovered` or `frozen-gauges`.")
    model: str = Field(description="The model (or, for frozen gauges, the metric model name).")
    turns: int = Field(description="The turns (or tries, for the budget rung) it rests on.")
    message: str = Field(description="The finding in one sentence, with the fix.")


class ReasoningRow(_Model):
    """Per model: answers filed as reasoning, reasoning leaked into the content, answers repaired."""

    model: str = Field(description="The model, GLM first.")
    answer_in_reasoning: int = Field(description="Turns classed `answer-in-reasoning`.")
    answer_in_reasoning_tool_history: int = Field(description="Of those, with tool history (the ladder retries them).")
    reasoning_leaked: int = Field(description="Turns classed `reasoning-leaked`.")
    leaked_after_thinking_off: int = Field(description="Of those, after a request asking for thinking off.")
    repaired: int = Field(description="Answers whose leaked think block the proxy split out (`reasoning_repaired`).")


class DeploymentSection(_Model):
    """What needs a deployment fix rather than a retry: GLM parsers, templates, budgets, frozen gauges (every model)."""

    findings: list[DeploymentFinding] = Field(description="One per model and kind, as the summary prints them.")
    reasoning: list[ReasoningRow] = Field(description="The rows of the question `reasoning_findings`.")
    repaired: int = Field(description="Answers repaired in all.")


class ReplicasSection(_Model):
    """Replicas and lost records: turns per proxy replica, the proxy's own word on lost records, slow warnings."""

    replicas: list[ReplicaRow] = Field(description="One row per replica, by name; empty when no turn says its replica.")
    lost: list[LostKindRow] = Field(description="Per kind of line, the kinds present in the period.")
    lost_total: int = Field(description="Records the proxy says it lost in the period (the sum of `lost`; a response "
                                        "lost to `log_response failed` may also be in its window's imbalance).")
    untimed_events: int = Field(description="Lost-record lines without a time (stdout read without `--timestamps`): "
                                            "not placed in the period, not counted above.")
    slow: list[SlowModelRow] = Field(description="Per model with slow-completion warnings, GLM first.")
    slow_note: str = Field(description="What a slow-completion warning means (a flag, not a failure).")


# ---------------------------------------------------------------------------
# Methods footer


class QuarantineSample(_Model):
    """A line that could not be read (table `quarantine`)."""

    path: str = Field(description="Input file.")
    line_no: int = Field(description="Line number in it.")
    reason: str = Field(description="Why it was set aside.")


class Methods(_Model):
    """How the numbers were made: inputs, range, inference, quarantine, versions."""

    since: datetime = Field(description="Start of the period (inclusive, UTC).")
    until: datetime = Field(description="End of the period (exclusive, UTC).")
    data_first: datetime | None = Field(description="First turn in the whole database.")
    data_last: datetime | None = Field(description="Last turn in the whole database.")
    partial_period: bool = Field(description="The data does not cover the whole period.")
    input_files: int = Field(description="Input files ingested into the database.")
    input_forms: dict[str, int] = Field(description="Files per form (`jsonl`, `kubectl`, `parquet`).")
    input_bytes: int = Field(description="Total size of the input files.")
    input_examples: list[str] = Field(description="A few input paths (redacted).")
    records: int = Field(description="Distinct records in the database.")
    turns: int = Field(description="Turns of all models in the period.")
    inferred_turns: int = Field(description="Of which classified on inferred evidence.")
    inferred_share: float = Field(description="inferred_turns / turns.")
    truncated_turns: int = Field(description="Turns built only from stdout copies with fields cut to 200 characters.")
    quarantined_lines: int = Field(description="Lines set aside as malformed (all inputs).")
    quarantine_samples: list[QuarantineSample] = Field(description="Up to five of them.")
    metric_samples: int = Field(description="Metric samples in the database.")
    pod_windows: int = Field(description="Wedged/down windows in the database.")
    metrics_note: str | None = Field(description="What cannot be told without metrics, or None.")
    versions: dict[str, str] = Field(description="Software versions: analyzer, duckdb, plotly, plotly.js, jinja2, pydantic, python.")
    migrations: list[str] = Field(description="Schema migrations applied to the database.")
    generated_at: datetime = Field(description="When the report was rendered (UTC).")


class Assets(_Model):
    """What the page needs besides data: plotly.js, inline or from a CDN."""

    plotly_js: str | None = Field(description="plotly.js source to embed inline (our asset, not log text), or None.")
    plotly_cdn_url: str | None = Field(description="URL of plotly.js on its CDN when linked instead, or None.")
    plotly_js_version: str = Field(description="The plotly.js version.")


class ReportContext(_Model):
    """Everything the report template renders; its fields are the template's variables."""

    title: str = Field(description="The page title.")
    period: str = Field(description="The period, e.g. `2026-W47` or `2026-11-16 – 2026-11-23`.")
    headline: Headline = Field(description="The headline numbers.")
    timeline: TimelineSection = Field(description="Turns per day by class, windows shaded.")
    throughput: ThroughputSection = Field(description="Per-pod generation throughput.")
    ladder: LadderSection = Field(description="The ladder funnel or baseline.")
    breakdowns: BreakdownsSection = Field(description="Breakdowns by model, origin, client, thinking.")
    positions: PositionSection = Field(description="Failures by session position and tool-history depth.")
    length_budget: LengthBudgetSection = Field(description="length-with-no-content against the budget.")
    top_sessions: TopSessionsSection = Field(description="The top failing sessions with their turns.")
    deployment: DeploymentSection = Field(description="What needs a deployment fix rather than a retry.")
    oncall: OnCallSection = Field(description="What on-call looks at: incidents, crashes, 429 bursts, latency, tokens, errors.")
    replicas: ReplicasSection = Field(description="Turns per proxy replica, records the proxy says it lost, slow warnings.")
    methods: Methods = Field(description="The methods footer.")
    assets: Assets = Field(description="plotly.js, inline or linked.")
