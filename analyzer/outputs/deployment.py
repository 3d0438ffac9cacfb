"""What needs a deployment fix rather than a retry: the GLM parser, template and budget findings.

GLM releases and their vLLM/SGLang parsers fail in ways a retry does not mend:

- the reasoning parser files an answer given without thinking as reasoning
  (``answer-in-reasoning``, sgl-project/sglang#37645): fix the parser;
- thinking "off" sent to a template with no off switch (GLM-5.3) stops vLLM's
  reasoning extraction while the model thinks on, and the scratchpad lands in the
  content (``reasoning-leaked`` after thinking-off requests, vllm-project/vllm#54744):
  say which generation the served name runs, so thinking off is sent as the lowest
  reasoning effort (``analyzer.online.templates``);
- the thinking-budget rung never recovers: the deployment ignores
  ``thinking_token_budget`` under MTP speculative decoding (vllm-project/vllm#39573,
  #54906) or refuses it without a reasoning parser (vLLM's 400 "thinking_token_budget
  is set but reasoning_config is not configured");
- a wedge whose running/waiting gauges read 0 (the hang came before the gauge
  update, vllm-project/vllm PR #46811) is inferred from the failing requests: the
  live alert, gated on those gauges, cannot see it.

:func:`deployment_findings` turns the questions ``reasoning_findings`` and
``thinking_budget_rung`` (queries/) and the inferred pod windows into one
sentence each, per model: the summary prints them and ``--json`` carries them.
"""

from __future__ import annotations

from typing import Any

import duckdb

from analyzer.store.asking import ask

#: The budget rung is called out as never recovering after this many tries without a recovery.
BUDGET_MIN_TRIES = 3

_REASONING_KEYS = ("model", "answer_in_reasoning", "answer_in_reasoning_tool_history",
                   "answer_in_reasoning_recovered", "reasoning_leaked", "leaked_after_thinking_off", "repaired")
_BUDGET_KEYS = ("model", "tries", "recovered", "refused", "refused_no_parser", "client_budgets_refused")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def deployment_findings(con: duckdb.DuckDBPyConnection, scope: dict[str, Any],
                        episodes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The findings that need a deployment fix, per model, in the summary's scope.

    ``scope`` is the summary's, exactly its keys ``since``, ``until`` and ``models`` (the questions' parameters);
    ``episodes`` the summary's pod windows (:func:`analyzer.classification.windows.wedged_episodes`),
    whose inferred wedges become findings too. Returns ``findings`` (each ``kind``,
    ``model``, ``turns`` and a ``message`` a person acts on), the rows behind them
    (``reasoning``, ``thinking_budget``) and ``repaired``, the answers the proxy
    repaired in all.
    """
    reasoning = [dict(zip(_REASONING_KEYS, r)) for r in ask(con, "reasoning_findings", scope)]
    budget = [dict(zip(_BUDGET_KEYS, r)) for r in ask(con, "thinking_budget_rung", scope)]
    findings: list[dict[str, Any]] = []

    def add(kind: str, model: str | None, turns: int, message: str) -> None:
        findings.append({"kind": kind, "model": model, "turns": turns, "message": message})

    for r in reasoning:
        m = r["model"]
        if r["answer_in_reasoning"]:
            n, recovered = r["answer_in_reasoning"], r["answer_in_reasoning_recovered"]
            retried = f"; the ladder recovered {recovered:,} of them" if recovered else ""
            add("answer-in-reasoning", m, n,
                f"the reasoning parser filed {_plural(n, 'answer')} of {m} as reasoning (answer-in-reasoning: a 200 "
                f"with empty content and the answer in reasoning_content){retried}: the fix is the deployment's "
                "reasoning parser, not a retry")
        off = r["leaked_after_thinking_off"]
        if off:
            add("thinking-off-leaks", m, off,
                f"thinking off leaks reasoning into content on {m} ({_plural(off, 'turn')}): its template has no "
                "off switch; say which GLM generation it serves (the normalizer's templates, the proxy's "
                "thinking_templates) so thinking off is sent as reasoning_effort low")
        other = r["reasoning_leaked"] - off
        if other:
            add("reasoning-leaked", m, other,
                f"reasoning leaked into the content on {m} ({_plural(other, 'turn')} without a thinking-off "
                "request): the deployment's reasoning parser did not split the think block out")
        if r["repaired"]:
            add("repaired", m, r["repaired"],
                f"{_plural(r['repaired'], 'answer')} repaired on {m}: the proxy split the leaked think block out "
                "before passing the answer on (the turns stay reasoning-leaked)")

    for b in budget:
        m = b["model"]
        no_parser = b["refused_no_parser"] + b["client_budgets_refused"]
        if no_parser:
            add("budget-refused", m, no_parser,
                f"vLLM refused thinking_token_budget {_plural(no_parser, 'time')} on {m}: the server has no reasoning "
                "config (\"thinking_token_budget is set but reasoning_config is not configured\"); start vLLM with "
                "--reasoning-parser (older vLLM also needs --reasoning-config)")
        if b["tries"] >= BUDGET_MIN_TRIES and not b["recovered"]:
            add("budget-never-recovered", m, b["tries"],
                f"the budget rung never recovered a length turn in {b['tries']:,} tries on {m}: the deployment may "
                "ignore thinking_token_budget (MTP) or refuse it (no reasoning parser)")

    for e in episodes or []:
        if e.get("inferred"):
            add("frozen-gauges", e["model_name"], e["failed_turns"],
                f"{e['pod'] or '?'} ({e['model_name']}): a suspected wedge from {e['start'][:19].replace('T', ' ')} "
                "UTC: its generation counter "
                "was flat while requests failed, but its running/waiting gauges read 0 (frozen gauges); the live "
                "alert cannot see it")

    return {"findings": findings, "reasoning": reasoning, "thinking_budget": budget,
            "repaired": sum(r["repaired"] for r in reasoning)}
