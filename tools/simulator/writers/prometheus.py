"""Prometheus exports of the vLLM pods: ``/api/v1/query_range`` answers for ``up`` and the
vLLM counters and gauges, computed from the week's own traffic, other tenants' load
and the scenario's windows (wedged, down, quiet night, restart, scrape gap)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from tools.simulator.clock import US, to_us
from tools.simulator.draws import ri
from tools.simulator.week import SimulatedWeek
from tools.simulator.world import demand

# The scrape step of the exported range queries.


_PROMETHEUS_STEP_S = 30


_METRIC_FILES = (
    ("up", "up.json"),
    ("vllm:generation_tokens_total", "vllm_generation_tokens_total.json"),
    ("vllm:num_requests_running", "vllm_num_requests_running.json"),
    ("vllm:num_requests_waiting", "vllm_num_requests_waiting.json"),
)


def write_prometheus_exports(week: SimulatedWeek, root: str | os.PathLike) -> list[Path]:
    """Write Prometheus ``/api/v1/query_range`` answers for the week's vLLM pods.

    One file per metric under ``root`` (``up.json``,
    ``vllm_generation_tokens_total.json``, ``vllm_num_requests_running.json``,
    ``vllm_num_requests_waiting.json``; the ``:`` of the metric names becomes ``_``
    in file names so they check out everywhere), each
    ``{"status": "success", "data": {"resultType": "matrix", "result": [...]}}``
    with one series per pod at a 30 s step. Labels: ``__name__``, ``model_name``,
    ``pod``, ``instance``, ``job`` and, on the vLLM series, ``engine`` (``up`` keeps
    ``model_name`` through a relabel rule, so a pod that is down still maps to its
    model).

    The series are computed from the week's own traffic (completion tokens while a
    request runs, requests running/waiting) plus other NRP tenants' load, with the
    scenario's windows: a wedged pod keeps ``up == 1`` with a flat counter and stuck
    requests, a down pod has ``up == 0`` and no vLLM series, the quiet night has no
    demand at all, a restart resets the counter, a scrape gap drops every series.

    Returns:
        The files written.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    sc = week.scenario
    step = _PROMETHEUS_STEP_S * US
    t0, t_end = sc.start_us, sc.end_us
    n = (t_end - t0) // step + 1
    pods = list(sc.vllm_pods)
    by_model: dict[str, list[int]] = {}
    for i, pod in enumerate(pods):
        by_model.setdefault(pod.model_name, []).append(i)
    firsts = [(to_us(p.first) if p.first else t0) for p in pods]
    lasts = [(to_us(p.last) if p.last else t_end) for p in pods]
    gen = [[0.0] * n for _ in pods]
    running = [[0] * n for _ in pods]
    waiting = [[0] * n for _ in pods]
    # A frozen wedge is a wedge whose gauges never saw its requests (they read 0).
    windows = [(e.model_name, to_us(e.start), to_us(e.end), "frozen" if e.frozen else e.kind)
               for e in (*sc.episodes, *sc.non_episodes) if e.kind in ("wedged", "down", "quiet")]
    gaps = [(to_us(e.start), to_us(e.end)) for e in sc.non_episodes if e.kind == "scrape-gap"]

    def window_of(model: str, t: int) -> str | None:
        for m, s, e, kind in windows:
            if m == model and s <= t < e:
                return kind
        return None

    def pod_for(model: str, t: int) -> int | None:
        best = None
        for i in by_model.get(model, ()):
            if firsts[i] <= t:
                best = i
        return best

    def k_at_or_after(t: int) -> int:
        return max(0, min(n, -((t0 - t) // step)))

    # Our own traffic.
    started: dict[str, tuple[int, str]] = {}
    for ev in week.events():
        rec = ev.record
        if rec is None or rec.get("provider") != "nrp" or rec.get("model") not in by_model:
            continue
        rid = rec.get("request_id")
        if rec["type"] == "request":
            started[rid] = (ev.t_us, rec["model"])
            continue
        if rec["type"] != "response" or rid not in started:
            continue
        t_req, model = started.pop(rid)
        i = pod_for(model, t_req)
        if i is None:
            continue
        t_resp = ev.t_us
        k0, k1 = k_at_or_after(t_req), k_at_or_after(t_resp)
        stuck = window_of(model, t_req) in ("wedged",)
        for k in range(k0, k1):
            if stuck:
                waiting[i][k] += 1
            else:
                running[i][k] += 1
        tokens = (rec.get("tokens") or {}).get("completion_tokens") or 0
        if "error" not in rec and tokens:
            # Generated while the request ran: spread over the samples it spans.
            last = min(k1, n - 1)
            first = min(k0, last)
            per = tokens / (last - first + 1)
            for k in range(first, last + 1):
                gen[i][k] += per
    # Other tenants, the wedge's stuck requests, and the series themselves.
    out: dict[str, list[dict]] = {name: [] for name, _ in _METRIC_FILES}
    for i, pod in enumerate(pods):
        rng = random.Random(f"{week.seed}:{pod.pod}")
        restarts = sorted(to_us(r) for r in pod.restarts)
        value = float(pod.counter_start)
        ups, gens, runs, waits = [], [], [], []
        stuck = 0
        for k in range(n):
            t = t0 + k * step
            w = window_of(pod.model_name, t)
            if w in ("wedged", "frozen", "down", "quiet") or not (firsts[i] <= t <= lasts[i]):
                bg = 0.0
            else:
                bg = pod.background_tokens_per_s * demand(t) * _PROMETHEUS_STEP_S * rng.uniform(0.5, 1.5)
            while restarts and restarts[0] <= t:
                restarts.pop(0)
                value = 0.0
                bg *= rng.uniform(0.05, 0.3)
            if w == "wedged":
                stuck = stuck or ri(rng, 4, 7)
                gen_k = 0.0
                run_k, wait_k = stuck, waiting[i][k] + ri(rng, 0, 2)
            elif w == "frozen":
                gen_k, run_k, wait_k = 0.0, 0, 0
            else:
                stuck = 0
                gen_k = gen[i][k] + bg
                other = 0 if bg == 0 else int(bg / (_PROMETHEUS_STEP_S * 45) + rng.random())
                run_k, wait_k = running[i][k] + other, waiting[i][k]
            if w == "down":
                gen_k = 0.0
            value += gen_k
            if not (firsts[i] <= t <= lasts[i]) or any(s <= t < e for s, e in gaps):
                continue
            ts = t // US
            if w == "down":
                ups.append([ts, "0"])
                continue
            ups.append([ts, "1"])
            gens.append([ts, str(int(value))])
            runs.append([ts, str(run_k)])
            waits.append([ts, str(wait_k)])
        target = {"instance": pod.instance, "job": pod.job, "model_name": pod.model_name, "pod": pod.pod}
        series = {"up": ups, "vllm:generation_tokens_total": gens, "vllm:num_requests_running": runs,
                  "vllm:num_requests_waiting": waits}
        for name, values in series.items():
            if not values:
                continue
            labels = {"__name__": name, **({} if name == "up" else {"engine": pod.engine}), **target}
            out[name].append({"metric": dict(sorted(labels.items())), "values": values})
    written = []
    for name, filename in _METRIC_FILES:
        doc = {"status": "success", "data": {"resultType": "matrix", "result": out[name]}}
        target = root / filename
        with open(target, "w", encoding="utf-8", newline="\n") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        written.append(target)
    return written
