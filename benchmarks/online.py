"""Per-call cost of the online module on a realistic tool-calling transcript.

Not a test: run it by hand (``python benchmarks/online.py``) and read the figures.

It times, per call, the work a proxy does for one failing answer of a long GLM
tool session: :func:`features_from_exchange` on the answer, :func:`classify`,
:func:`normalize_thinking`, and building every rung payload
(``rung_payloads(payload, ALL_RUNGS)``). The same work is then timed with each
rung payload built from ``copy.deepcopy(payload)`` -- what a ladder that does not
share unchanged objects would cost -- in the same run, so the ratio is fair.

Targets: under 50 µs per call, and at least 20x cheaper than the deepcopy variant.
Figures are best-of-N ``timeit`` repeats (the least disturbed run on a shared
machine).
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import timeit

from analyzer.online import (
    ALL_RUNGS,
    build_rung,
    classify,
    features_from_exchange,
    normalize_thinking,
    rung_payloads,
)

TARGET_US = 50.0
TARGET_RATIO = 20.0
MODEL = "glm-5"


def _table(rng: random.Random, rows: int) -> str:
    """A markdown result table like the geo-agent's SQL tool returns."""
    names = ["Marin County", "Tejon Ranch", "Malheur NWR", "Point Reyes", "Cosumnes River Preserve",
             "Headwaters Forest", "Anza-Borrego Desert", "Los Angeles County", "Sierra Nevada"]
    lines = ["| name | state | gap_status | total_acres | n |", "|---|---|---|---|---|"]
    for i in range(rows):
        lines.append(f"| {rng.choice(names)} {i} | CA | {rng.randint(1, 4)} | "
                     f"{rng.uniform(1e3, 2e5):,.1f} | {rng.randint(1, 999)} |")
    return "\n".join(lines)


def _tool(name: str, description: str, props: dict) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": props, "required": sorted(props)[:1]}}}


def realistic_payload(n_messages: int = 40, target_bytes: int = 200_000, seed: int = 7) -> dict:
    """A 40-message GLM tool-calling transcript of about 200 KB (JSON)."""
    rng = random.Random(seed)
    tools = [
        _tool("query", "Run a DuckDB SQL query over the PAD-US, CPAD and SVI parquet files.",
              {"sql": {"type": "string", "description": "A single SELECT statement."},
               "limit": {"type": "integer", "minimum": 1, "maximum": 1000}}),
        _tool("show_layer", "Show a map layer, optionally filtered.",
              {"layer_id": {"type": "string", "enum": ["padus-4.1", "cpad-2024", "svi-2022", "ecoregions"]},
               "filter": {"type": "array", "items": {}}}),
        _tool("hide_layer", "Hide a map layer.", {"layer_id": {"type": "string"}}),
        _tool("fly_to", "Move the map.", {"lat": {"type": "number"}, "lng": {"type": "number"},
                                          "zoom": {"type": "number", "minimum": 0, "maximum": 22}}),
        _tool("get_schema", "Describe the columns of a dataset.", {"dataset": {"type": "string"}}),
        _tool("set_style", "Colour a layer by a column.",
              {"layer_id": {"type": "string"}, "column": {"type": "string"},
               "palette": {"type": "string", "enum": ["viridis", "magma", "greens"]}}),
    ]
    system = ("You are a geospatial analysis assistant for protected-area data. " * 40 + "\n") * 8
    messages: list[dict] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "How close is California to 30x30? Break it down by ecoregion."},
    ]
    call = 0
    while len(messages) < n_messages - 1:
        call += 1
        cid = f"chatcmpl-tool-{rng.getrandbits(128):032x}"
        name = rng.choice(["query", "query", "show_layer", "get_schema"])
        args = json.dumps({"sql": f"SELECT name, SUM(GIS_Acres) AS total FROM padus WHERE gap <= {call % 4 + 1} "
                                  f"GROUP BY name ORDER BY total DESC LIMIT 25"} if name == "query"
                          else {"layer_id": "padus-4.1", "filter": ["==", ["get", "State_Nm"], "CA"]})
        messages.append({"role": "assistant", "content": "",
                         "reasoning_content": "I should look at the acreage by GAP status first. " * 3,
                         "tool_calls": [{"id": cid, "type": "function",
                                         "function": {"name": name, "arguments": args}}]})
        messages.append({"role": "tool", "tool_call_id": cid, "content": _table(rng, 60)})
        if len(messages) < n_messages - 1 and call % 6 == 0:
            messages.append({"role": "assistant", "content": "So far: " + "the coverage is uneven. " * 20,
                             "tool_calls": []})
            messages.append({"role": "user", "content": "What about only GAP 1 and 2?"})
    messages = messages[: n_messages - 1]
    messages.append({"role": "user", "content": "And how has that changed since 2015?"})
    payload = {"model": MODEL, "messages": messages, "tools": tools, "tool_choice": "auto",
               "temperature": 0.0, "max_tokens": 4096, "parallel_tool_calls": True}
    # Pad the tool results evenly to reach the target size.
    size = len(json.dumps(payload))
    results = [m for m in messages if m["role"] == "tool"]
    if size < target_bytes and results:
        extra = (target_bytes - size) // len(results)
        filler = "\n| ... | CA | 4 | 0.0 | 0 |" * (extra // 27 + 1)
        for m in results:
            m["content"] += filler[:extra]
    return payload


def online_work(payload: dict) -> None:
    """What the proxy does per failing call (rung payloads share unchanged objects)."""
    f = features_from_exchange(payload, 500, b"")
    classify(f)
    normalize_thinking(payload, MODEL, True)
    rung_payloads(payload, ALL_RUNGS)


def deepcopy_work(payload: dict) -> None:
    """The same work with every rung payload built from a deep copy."""
    f = features_from_exchange(payload, 500, b"")
    classify(f)
    normalize_thinking(payload, MODEL, True)
    [(r, build_rung(copy.deepcopy(payload), r)) for r in ALL_RUNGS]


def best_us(fn, payload: dict, repeat: int, min_time: float = 0.2) -> float:
    """Best-of-``repeat`` µs per call, each repeat running about ``min_time`` s."""
    timer = timeit.Timer(lambda: fn(payload))
    number, _ = timer.autorange()
    number = max(1, int(number * min_time / 0.2))
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="timeit repeats (best is reported)")
    args = parser.parse_args(argv)

    payload = realistic_payload()
    size = len(json.dumps(payload))
    tool_msgs = sum(1 for m in payload["messages"] if m.get("role") == "tool")
    print(f"transcript: {len(payload['messages'])} messages ({tool_msgs} tool results), "
          f"{len(payload['tools'])} tools, {size / 1000:.0f} KB JSON")
    print(f"work per call: features_from_exchange + classify + normalize_thinking + "
          f"rung_payloads(payload, {len(ALL_RUNGS)} rungs)")

    snapshot = copy.deepcopy(payload)
    shared = best_us(online_work, payload, args.repeat)
    deep = best_us(deepcopy_work, payload, args.repeat)
    assert payload == snapshot, "the online module mutated the payload"

    ratio = deep / shared
    print(f"online module (shared objects): {shared:9.1f} µs/call   (target < {TARGET_US:.0f} µs)")
    print(f"with copy.deepcopy per rung:    {deep:9.1f} µs/call")
    print(f"ratio: {ratio:.1f}x cheaper than deepcopy   (target >= {TARGET_RATIO:.0f}x)")
    met = shared < TARGET_US and ratio >= TARGET_RATIO
    print("targets:", "met" if met else "MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
