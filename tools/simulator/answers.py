"""Successful upstream answers: tool-call rounds and final answers, with their text.

The content a model produces for a session (answers with numbers, reasoning traces,
tool calls with SQL or map arguments, the tool results the client sends back), its
latency (time to first token, prefill, decode) and its usage object in the shape of
the provider (vLLM, OpenRouter with costs, Anthropic).
"""

from __future__ import annotations

import json
from typing import Any

from tools.simulator.apps import ANSWERS, GROUP_COLUMNS, PLACES, PREAMBLES, REASONING, STATES
from tools.simulator.draws import pick, ri
from tools.simulator.faults import Outcome


class Answers:
    """The successful answers of a session's upstream, and the text they are made of.

    A part of :class:`~tools.simulator.sessions.Session`: the methods read the
    session's state (``rng``, ``prof``, ``app``, ``ctx_tokens``, ``reasoning_on``,
    ``rounds``, ``last_user``, ``requests``) and draw from its generator, so the
    order of draws is the session's own.
    """

    def _numbers(self) -> dict[str, Any]:
        rng = self.rng
        a, b, c = rng.sample(PLACES, 3)
        return {"a": a, "b": b, "c": c, "n1": f"{ri(rng, 40_000, 400_000):,}",
                "n2": f"{ri(rng, 5_000, 90_000):,}", "n3": f"{ri(rng, 200_000, 4_000_000):,}",
                "k": ri(rng, 3, 60), "p": ri(rng, 8, 41), "q": ri(rng, 1, 12),
                "m": f"{ri(rng, 2, 90) / 10:.1f}", "s": pick(rng, STATES),
                "p2": ri(rng, 55, 79), "q2": ri(rng, 21, 48)}

    def _answer_text(self) -> str:
        rng = self.rng
        text = pick(rng, ANSWERS).format(**self._numbers())
        if rng.random() < 0.3:
            text += " Would you like me to break this down further?"
        return text

    def _reasoning_text(self, n: int) -> str:
        rng = self.rng
        parts = [f"The user asks: \"{self.last_user[:90]}\""]
        parts.extend(rng.sample(REASONING, n))
        return " ".join(parts)

    def _tool_call(self, name: str) -> tuple[str, str, str]:
        rng = self.rng
        cid = f"chatcmpl-tool-{rng.getrandbits(128):032x}"
        ds = pick(rng, self.app.datasets)
        if name == "query":
            col = pick(rng, GROUP_COLUMNS)
            args = json.dumps({"sql": (
                f"SELECT {col}, SUM(GIS_Acres) AS total, COUNT(*) AS n FROM read_parquet('{ds}') "
                f"WHERE State_Nm ILIKE '%{pick(rng, PLACES)}%' GROUP BY {col} ORDER BY total DESC "
                f"LIMIT {pick(rng, (5, 10, 20))}")})
        elif name == "get_dataset_schema":
            args = json.dumps({"dataset_id": ds.rsplit("/", 1)[-1].removesuffix(".parquet")})
        elif name == "list_datasets":
            args = "{}"
        elif name in ("show_layer", "filter_layer"):
            args = json.dumps({"layer_id": ds.rsplit("/", 1)[-1].removesuffix(".parquet"),
                               "filter": ["in", ["get", "State_Nm"], ["literal", [pick(rng, PLACES)]]]})
        elif name in ("fly_to", "set_map_view"):
            args = json.dumps({"lat": round(rng.uniform(30, 46), 3), "lng": round(rng.uniform(-124, -95), 3),
                               "zoom": ri(rng, 5, 11)})
        else:
            args = "{}"
        return cid, name, args

    def _tool_result(self, name: str, args: str) -> str:
        rng = self.rng
        if name == "query":
            if rng.random() < 0.08:
                return ('Binder Error: Referenced column "acres" not found in FROM clause!\n'
                        'Candidate bindings: "ACRES", "GIS_Acres"')
            rows = ri(rng, 3, 7)
            lines = ["| name | total |", "|---|---|"]
            for i in range(rows):
                lines.append(f"| {pick(rng, PLACES)} {i + 1} | {ri(rng, 1_000, 200_000):,}.{ri(rng, 0, 9)} |")
            return "\n".join(lines)
        if name == "get_dataset_schema":
            cols = rng.sample(("State_Nm", "Mang_Name", "Unit_Nm", "GAP_Sts", "GIS_Acres", "Des_Tp", "geom"), 5)
            return json.dumps({"id": json.loads(args).get("dataset_id"),
                               "columns": [{"name": c, "type": "DOUBLE" if c == "GIS_Acres" else "VARCHAR"}
                                           for c in cols]})
        if name == "list_datasets":
            return json.dumps([d.rsplit("/", 1)[-1].removesuffix(".parquet") for d in self.app.datasets])
        if name in ("show_layer", "filter_layer"):
            return f"Layer shown ({ri(rng, 40, 4000):,} features)."
        if name in ("fly_to", "set_map_view"):
            return "Map moved."
        return "OK"

    def _usage(self, prompt: int, completion: int, reasoning_tokens: int = 0) -> dict:
        p = self.prof
        if p.usage == "vllm":
            return {"prompt_tokens": prompt, "total_tokens": prompt + completion,
                    "completion_tokens": completion, "prompt_tokens_details": None}
        cached = 0 if self.requests <= 1 else int(prompt * self.rng.uniform(0.6, 0.95))
        if p.usage == "anthropic":
            return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                    "prompt_tokens_details": {"cached_tokens": cached}}
        cin = (prompt - cached) * p.price_in / 1e6 + cached * p.price_in / 1e7
        cout = completion * p.price_out / 1e6
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "cost": round(cin + cout, 8), "is_byok": False,
                "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                "cost_details": {"upstream_inference_cost": None,
                                 "upstream_inference_prompt_cost": round(cin, 8),
                                 "upstream_inference_completions_cost": round(cout, 8)},
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens, "image_tokens": 0}}

    def _gen_latency(self, prompt: int, completion: int) -> int:
        p, rng = self.prof, self.rng
        ms = p.ttft_ms + prompt * p.prefill_us_per_token / 1000 + completion * p.ms_per_token
        return max(30, int(ms * rng.lognormvariate(0, 0.25)))

    def _ok(self, want_tools: bool, *, finish: str | None = None, no_tools: bool = False,
            thinking: bool | None = None) -> Outcome:
        """A successful answer: tool calls (agent round) or a final answer."""
        rng = self.rng
        reasoning_on = self.reasoning_on if thinking is None else thinking
        reasoning = self._reasoning_text(ri(rng, 1, 2)) if reasoning_on else ""
        r_tokens = ri(rng, 60, 380) if reasoning_on else 0
        if want_tools and not no_tools:
            names = self._next_tools()
            calls = [self._tool_call(n) for n in names]
            content = pick(rng, PREAMBLES)
            c_tokens = r_tokens + sum(len(a) // 4 + 12 for _, _, a in calls) + len(content) // 4
            fin = finish or "tool_calls"
        else:
            calls = []
            content = self._answer_text()
            c_tokens = r_tokens + len(content) // 4 + ri(rng, 10, 120)
            fin = finish or "stop"
        prompt = self.ctx_tokens
        repaired = 0
        if calls and self.prof.p_repair and rng.random() < self.prof.p_repair:
            repaired = 1
        return Outcome("ok", self._gen_latency(prompt, c_tokens), status=200, content=content, reasoning=reasoning,
                       tool_calls=calls, finish=fin, usage=self._usage(prompt, c_tokens, r_tokens), repaired=repaired,
                       completion_tokens=c_tokens)

    def _next_tools(self) -> list[str]:
        """The tools of the next agent round: schema first, queries, then the map."""
        rng, tools = self.rng, self.app.tools
        if self.rounds == 0 and "get_dataset_schema" in tools and rng.random() < 0.6:
            return ["get_dataset_schema"]
        if self.rounds == 0 and "list_datasets" in tools and rng.random() < 0.2:
            return ["list_datasets"]
        if self.rounds >= self.rounds_planned - 1 and "show_layer" in tools and rng.random() < 0.5:
            return ["show_layer", "fly_to"] if "fly_to" in tools else ["show_layer"]
        if rng.random() < 0.12:
            return ["query", "query"]
        return ["query"]
