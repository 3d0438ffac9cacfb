"""What on-call people look for: latency, tokens, 429 bursts, dead providers, error texts, crashes.

The numbers come from the question files of ``queries/`` (``latency_by_model``,
``tokens_by_model``, ``rate_limit_bursts``, ``provider_incidents``,
``error_groups``), run with the summary's filters, so ``analyze sql NAME`` shows
exactly what the summary and the report show. :func:`build_oncall` gathers them
into one JSON-ready block (the summary's ``oncall`` key and the report's on-call
section); :func:`parse_fail_on` and :func:`check_fail_on` are ``--fail-on``: a
cron job's thresholds over the summary, crossing one exits with
:attr:`analyzer.core.errors.ExitCode.THRESHOLD`.

Every piece of log text in the block (model and provider names, error texts)
has been through :func:`analyzer.core.scrub.scrub`;
:func:`analyzer.cli.terminal.summary.print_oncall` prints it with control characters escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.core.isotime import iso_utc as _iso
from analyzer.core.scrub import scrub
from analyzer.online import CLASSES
from analyzer.outputs.rows import records

#: Two 429s of one provider and model at most this far apart are one burst.
BURST_GAP_S = 300
#: A burst needs this many 429s (a lone one is not a burst).
BURST_MIN_TURNS = 2
#: A provider or model must have failed at least this many calls to be an incident.
INCIDENT_MIN_CALLS = 3
#: Error groups kept in the block (the most frequent; engine crashes always).
ERROR_GROUPS = 20


def _num(value: Any) -> Any:
    """DuckDB's HUGEINT sums and rounded quantiles as plain ints (JSON-friendly)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _clean(text: Any) -> str | None:
    return scrub(str(text)) if text is not None else None


# Stand-ins for the placeholders of a normalised text while scrubbing: digits keep a
# credential's shape whole (`Bearer <n>abc...` or `hf_ab<addr>cd...` would otherwise
# hide the rest from the scrubber's patterns).
_STAND_INS = (("<n>", "9090909"), ("<id>", "8080808"), ("<addr>", "7070707"), ("<time>", "6060606"))


def _clean_pattern(pattern: Any) -> str | None:
    """A normalised error text, scrubbed as the text it came from would be."""
    if pattern is None:
        return None
    text = str(pattern)
    for placeholder, digits in _STAND_INS:
        text = text.replace(placeholder, digits)
    text = scrub(text)
    for placeholder, digits in _STAND_INS:
        text = text.replace(digits, placeholder)
    return text


def build_oncall(
    con: duckdb.DuckDBPyConnection,
    *,
    models: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    burst_gap_s: float = BURST_GAP_S,
    burst_min_turns: int = BURST_MIN_TURNS,
    incident_min_calls: int = INCIDENT_MIN_CALLS,
    error_groups: int = ERROR_GROUPS,
) -> dict[str, Any]:
    """The on-call block over the turns in scope (``models`` exact names, ``[since, until)``).

    Returns a JSON-ready dict: ``latency`` (per model and provider: p50/p95/p99/max
    ms), ``tokens`` (per model), ``rate_limit_bursts`` (429 windows),
    ``incidents`` (providers or models that failed every call, each with its
    one-line ``incident`` name), ``error_groups`` (normalised error texts, the
    ``error_groups`` most frequent plus every engine crash; ``error_groups_omitted``
    says how many more), ``engine_crash_turns`` and the parameters used.
    """
    scope = {"since": since, "until": until, "model": None, "models": list(models) if models else None}
    latency = [
        {"model": _clean(r["model"]), "provider": _clean(r["provider"]), "turns": r["turns"],
         "timed_turns": r["timed_turns"], "failed_turns": r["failed_turns"],
         "p50_ms": _num(r["p50_latency_ms"]), "p95_ms": _num(r["p95_latency_ms"]),
         "p99_ms": _num(r["p99_latency_ms"]), "max_ms": _num(r["max_latency_ms"]),
         "p50_ok_ms": _num(r["p50_ok_latency_ms"])}
        for r in records(con, "latency_by_model", scope)
    ]
    tokens = [
        {"model": _clean(r["model"]), "providers": _clean(r["providers"]), "turns": r["turns"],
         "turns_with_usage": r["turns_with_usage"], "prompt_tokens": int(r["prompt_tokens"]),
         "completion_tokens": int(r["completion_tokens"]), "cached_tokens": int(r["cached_tokens"]),
         "total_tokens": int(r["total_tokens"]), "mean_prompt_tokens": _num(r["mean_prompt_tokens"]),
         "mean_completion_tokens": _num(r["mean_completion_tokens"]),
         "p95_completion_tokens": _num(r["p95_completion_tokens"])}
        for r in records(con, "tokens_by_model", scope)
    ]
    bursts = [
        {"provider": _clean(r["provider"]), "model": _clean(r["model"]), "start": _iso(r["start_ts"]),
         "end": _iso(r["end_ts"]), "duration_s": r["duration_s"], "rate_limited_turns": r["rate_limited_turns"],
         "calls_in_window": r["calls_in_window"], "ok_in_window": r["ok_in_window"], "sessions": r["sessions"]}
        for r in records(con, "rate_limit_bursts", {**scope, "gap_s": burst_gap_s, "min_turns": burst_min_turns})
    ]
    incidents = [
        {"incident": _clean(r["incident"]), "scope": r["scope"], "provider": _clean(r["provider"]),
         "model": _clean(r["model"]), "models": _clean(r["models"]), "calls": r["calls"],
         "failed_calls": r["failed_calls"], "symptom": r["symptom"], "symptom_calls": r["symptom_calls"],
         "first": _iso(r["first_ts"]), "last": _iso(r["last_ts"])}
        for r in records(con, "provider_incidents", {**scope, "min_calls": incident_min_calls})
    ]
    groups = records(con, "error_groups", scope)
    # Crashes sort first in the question, so the cut keeps every one of them.
    keep = [g for i, g in enumerate(groups) if i < error_groups or g["engine_crash"]]
    return {
        "latency": latency,
        "tokens": tokens,
        "rate_limit_bursts": bursts,
        "incidents": incidents,
        "error_groups": [
            {"pattern": _clean_pattern(g["pattern"]), "turns": g["turns"], "distinct_texts": g["distinct_texts"],
             "models": _clean(g["models"]), "providers": _clean(g["providers"]), "main_class": g["main_class"],
             "engine_crash": bool(g["engine_crash"]), "first": _iso(g["first_ts"]), "last": _iso(g["last_ts"]),
             "example_request_id": _clean(g["example_request_id"]), "example_error": _clean(g["example_error"])}
            for g in keep
        ],
        "error_groups_omitted": len(groups) - len(keep),
        "error_turns": sum(g["turns"] for g in groups),
        "engine_crash_turns": sum(g["turns"] for g in groups if g["engine_crash"]),
        "parameters": {"burst_gap_s": burst_gap_s, "burst_min_turns": burst_min_turns,
                       "incident_min_calls": incident_min_calls},
    }


# ---------------------------------------------------------------------------
# --fail-on


#: Metrics a threshold can name besides the incident classes.
EXTRA_METRICS = {
    "failed": "turns whose class is not ok",
    "ladder-addressable": "turns the ladder could address",
    "engine-crashes": "turns whose error text is a vLLM engine crash",
    "incidents": "providers or models that failed every call",
    "rate-limit-bursts": "429 bursts",
    "quarantined": "malformed lines quarantined",
}
#: Metrics that are not turns of the summary: counts only, never a share.
_COUNT_ONLY = ("incidents", "rate-limit-bursts", "quarantined")

_SPEC = re.compile(r"^\s*(?P<metric>[a-z0-9][a-z0-9_-]*)\s*(?P<op>>=|>)\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<pct>%?)\s*$")
#: A bad threshold's error is about ``parse_fail_on``'s ``specs``, which its message calls "threshold".
_ABOUT_SPECS = {"param": "specs", "names": {"threshold": "specs"}}


@dataclass(frozen=True)
class Threshold:
    """One ``--fail-on`` condition: ``METRIC>N`` (a count) or ``METRIC>N%`` (a share of the turns)."""

    metric: str
    op: str
    value: float
    percent: bool

    def crossed(self, observed: float) -> bool:
        """Whether ``observed`` (a count, or a share in [0, 1] for a percent threshold) crosses it."""
        limit = self.value / 100 if self.percent else self.value
        return observed >= limit if self.op == ">=" else observed > limit


def parse_fail_on(specs: Iterable[str] | None) -> list[Threshold]:
    """Parse threshold ``specs`` (the ``--fail-on`` values; each may hold several separated by commas).

    Raises:
        AnalyzerError: (exit code 2, ``param="specs"``) a malformed condition or an
            unknown metric, said as ``threshold 'x>>1': ...``.
    """
    known = set(CLASSES) | set(EXTRA_METRICS)
    out = []
    for spec in specs or ():
        for part in spec.split(","):
            if not part.strip():
                continue
            m = _SPEC.match(part.lower())
            if not m:
                raise AnalyzerError(f"threshold {part.strip()!r}: expected METRIC>N or METRIC>N% "
                                    "(e.g. 'tool-history-5xx>2%', 'wedged-pod>0')", ExitCode.USAGE, **_ABOUT_SPECS)
            metric = m["metric"]
            if metric not in known:
                raise AnalyzerError(f"threshold {part.strip()!r}: unknown metric {metric!r}; known: "
                                    + ", ".join(list(CLASSES) + list(EXTRA_METRICS)), ExitCode.USAGE, **_ABOUT_SPECS)
            if m["pct"] and metric in _COUNT_ONLY:
                raise AnalyzerError(f"threshold {part.strip()!r}: {metric} is a count, not a share of the turns",
                                    ExitCode.USAGE, **_ABOUT_SPECS)
            out.append(Threshold(metric, m["op"], float(m["value"]), bool(m["pct"])))
    return out


def _observed(summary: dict[str, Any], metric: str) -> int:
    oncall = summary.get("oncall") or {}
    if metric in summary.get("classes", {}) or metric in CLASSES:
        return summary.get("classes", {}).get(metric, {}).get("count", 0)
    return {
        "failed": summary["turns"] - summary.get("classes", {}).get("ok", {}).get("count", 0),
        "ladder-addressable": summary.get("ladder_addressable", 0),
        "engine-crashes": oncall.get("engine_crash_turns", 0),
        "incidents": len(oncall.get("incidents", [])),
        "rate-limit-bursts": len(oncall.get("rate_limit_bursts", [])),
        "quarantined": summary.get("quarantined_lines", 0),
    }[metric]


def check_fail_on(summary: dict[str, Any], thresholds: Iterable[Threshold]) -> None:
    """Raise when a threshold is crossed (after the summary was printed).

    Shares are of the summary's turns (its ``--model``/``--since``/``--until``
    scope): ``tool-history-5xx>2%`` under ``--model glm-5`` is the GLM-5 rate.

    Raises:
        AnalyzerError: exit code :attr:`~analyzer.core.errors.ExitCode.THRESHOLD` (7), ``param="thresholds"``,
            one line naming every crossed threshold and its value.
    """
    crossed = []
    turns = summary.get("turns", 0)
    for t in thresholds:
        count = _observed(summary, t.metric)
        observed = (count / turns if turns else 0.0) if t.percent else count
        if t.crossed(observed):
            shown = (f"{observed * 100:.2f}% ({count:,} of {turns:,} turns)" if t.percent else f"{count:,}")
            crossed.append(f"{t.metric} {shown} {t.op} {t.value:g}{'%' if t.percent else ''}")
    if crossed:
        raise AnalyzerError(
            f"{len(crossed)} threshold{'s' if len(crossed) != 1 else ''} crossed: " + "; ".join(crossed),
            ExitCode.THRESHOLD, param="thresholds",
        )
