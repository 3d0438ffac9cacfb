"""Benchmark: metrics of a production week, in every form, loaded as `analyze --metrics` loads them.

Generates (reused when already there) a week at a 15 s scrape interval:

- ``samples.csv``: 604,800 rows ``timestamp,metric,labels,value`` — three glm-5 pods
  of namespace ``llm`` x five series (up, generation counter, running, waiting,
  KV cache). glm-5-0 wedges three times (running stuck, waiting growing, KV
  full), glm-5-1 is its idle sibling during the first wedge, glm-5-2 is down
  (``up`` 0) once;
- ``query_range/*.json``: one ``/api/v1/query_range`` answer per metric for the
  week at the 11,000-point step (55 s), for namespace ``llm-b`` (glm-4.6 pods named
  like the glm-5 ones, and a qwen3 pod that sleeps every night) with the sleep,
  KV-cache and success series;
- ``scrape/glm-46-text.prom``: ~1 GB of concatenated timestamped text scrapes of
  one vLLM pod (histograms and all, as ``/metrics`` serves them);
- ``logs/week.jsonl``: a request every 20 s to glm-5 (tool-history 500s inside the
  wedges, served turns elsewhere) and qwen3's 503s while it sleeps.

Measured, each in its own process (peak RSS of that process from ``wait4``):

- loading each form alone into a fresh database (``load_metrics``);
- ``analyze logs`` and ``analyze logs --metrics samples.csv query_range/*.json``
  end to end: the difference is what the week's metrics add to a run (target < 3 s,
  peak RSS <= 1 GB).

Prints the figures and the episode table; asserts nothing (shared machine).

    python benchmarks/metrics.py [--dir /tmp/analyzer-metrics-bench] [--no-scrape]

:func:`run` returns ``[(label, seconds, peak_rss_bytes), ...]`` for other benchmarks.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

START = 1_794_787_200  # 2026-11-16T00:00:00Z, a Monday
WEEK = 7 * 86400
STEP = 15
RANGE_STEP = 55  # a week in at most 11,000 points
DAY = 86400

# (pod, start offset s, minutes) of the glm-5-0 wedges; the first one beside an idle glm-5-1.
WEDGES = [(1 * DAY + 14 * 3600, 43), (3 * DAY + 9 * 3600 + 1200, 20), (5 * DAY + 16 * 3600 + 600, 12)]
DOWN = (4 * DAY + 11 * 3600, 10)  # glm-5-2: up == 0
SLEEP_HOURS = (1, 6)  # qwen3-0 asleep 01:00-06:00 every night
GENERATION = 1  # bump when the generated data changes


# ---------------------------------------------------------------------------
# Generation


def _in(t: int, start: int, minutes: int) -> bool:
    return start <= t - START < start + minutes * 60


def _wedged(t: int) -> tuple[bool, int]:
    for start, minutes in WEDGES:
        if _in(t, start, minutes):
            return True, (t - START - start) // STEP
    return False, 0


def write_csv(path: Path) -> int:
    """The 600k-row samples CSV of namespace ``llm`` (JSON labels, as a Grafana/VictoriaMetrics export)."""
    rows = 0
    with path.open("w") as f:
        f.write("timestamp,metric,labels,value\n")
        tokens = {p: 1000.0 for p in ("glm-5-0", "glm-5-1", "glm-5-2")}
        for i in range(WEEK // STEP):
            t = START + i * STEP
            hour = (t - START) % DAY // 3600
            traffic = 2 if 8 <= hour < 23 else 0
            wedged, k = _wedged(t)
            first_wedge = _in(t, WEDGES[0][0], WEDGES[0][1])
            for pod in tokens:
                lab = f'"{{""namespace"": ""llm"", ""pod"": ""{pod}"", ""instance"": ""10.0.1.{pod[-1]}:8000"", ' \
                      f'""job"": ""vllm"", ""model_name"": ""glm-5"", ""engine"": ""0""}}"'
                up_lab = f'"{{""namespace"": ""llm"", ""pod"": ""{pod}"", ""instance"": ""10.0.1.{pod[-1]}:8000"", ' \
                         f'""job"": ""vllm""}}"'
                down = pod == "glm-5-2" and _in(t, *DOWN)
                if pod == "glm-5-0" and wedged:
                    running, waiting, kv = 4, 1 + k // 4, 1.0
                elif pod == "glm-5-1" and first_wedge:
                    running, waiting, kv = 0, 0, 0.05  # idle: the router sent everything to glm-5-0
                else:
                    running, waiting, kv = traffic, 0, 0.3 if traffic else 0.02
                    tokens[pod] += 400 * traffic
                f.write(f"{t},up,{up_lab},{0 if down else 1}\n")
                rows += 1
                if down:
                    continue
                f.write(f"{t},vllm:generation_tokens_total,{lab},{tokens[pod]}\n"
                        f"{t},vllm:num_requests_running,{lab},{running}\n"
                        f"{t},vllm:num_requests_waiting,{lab},{waiting}\n"
                        f"{t},vllm:kv_cache_usage_perc,{lab},{kv}\n")
                rows += 4
    return rows


def write_query_range(directory: Path) -> int:
    """One query_range answer per metric for namespace ``llm-b`` at the 11,000-point step."""
    directory.mkdir(parents=True, exist_ok=True)
    pods = {"glm-5-0": "glm-4.6", "glm-5-1": "glm-4.6", "qwen3-0": "qwen3"}
    times = list(range(START, START + WEEK, RANGE_STEP))

    def asleep(pod: str, t: int) -> bool:
        return pod == "qwen3-0" and SLEEP_HOURS[0] <= (t - START) % DAY // 3600 < SLEEP_HOURS[1]

    def target(pod: str) -> dict:
        return {"namespace": "llm-b", "pod": pod, "instance": f"10.0.2.{len(pod)}{pod[-1]}:8000", "job": "vllm"}

    def series(name: str, pod: str, values, **extra) -> dict:
        labels = {"__name__": name, **target(pod), **({} if name == "up" else {"model_name": pods[pod], "engine": "0"}),
                  **extra}
        return {"metric": labels, "values": [[t, f"{v:g}"] for t, v in zip(times, values)]}

    docs: dict[str, list] = {k: [] for k in ("up", "generation", "running", "waiting", "sleep", "kv", "success")}
    points = 0
    for pod in pods:
        tok, ok, gen, succ, run_, sl = 0.0, 0.0, [], [], [], []
        for t in times:
            busy = 8 <= (t - START) % DAY // 3600 < 23 and not asleep(pod, t)
            tok += 300 * busy
            ok += 2 * busy
            gen.append(tok)
            succ.append(ok)
            run_.append(1 if busy else 0)
            sl.append(asleep(pod, t))
        docs["up"].append(series("up", pod, [1] * len(times)))
        docs["generation"].append(series("vllm:generation_tokens_total", pod, gen))
        docs["running"].append(series("vllm:num_requests_running", pod, run_))
        docs["waiting"].append(series("vllm:num_requests_waiting", pod, [0] * len(times)))
        docs["kv"].append(series("vllm:kv_cache_usage_perc", pod, [0.3 * r for r in run_]))
        docs["success"].append(series("vllm:request_success_total", pod, succ, finished_reason="stop"))
        for state, value in (("awake", lambda s: 0 if s else 1), ("weights_offloaded", lambda s: 1 if s else 0),
                             ("discard_all", lambda s: 0)):
            docs["sleep"].append(series("vllm:engine_sleep_state", pod, [value(s) for s in sl], sleep_state=state))
    for name, result in docs.items():
        points += sum(len(s["values"]) for s in result)
        (directory / f"{name}.json").write_text(json.dumps(
            {"status": "success", "data": {"resultType": "matrix", "result": result}}))
    return points


def _scrape_template() -> str:
    """A vLLM /metrics page (one engine), timestamps left as {ts}; the kept series carry {fields}."""
    lab = 'engine="0",model_name="glm-4.6"'
    lines = ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
             "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} <<running>> <<ts>>",
             "# TYPE vllm:num_requests_waiting gauge", f"vllm:num_requests_waiting{{{lab}}} 0.0 <<ts>>",
             "# TYPE vllm:kv_cache_usage_perc gauge", f"vllm:kv_cache_usage_perc{{{lab}}} <<kv>> <<ts>>",
             "# TYPE vllm:generation_tokens_total counter", f"vllm:generation_tokens_total{{{lab}}} <<tokens>> <<ts>>",
             "# TYPE vllm:prompt_tokens_total counter", f"vllm:prompt_tokens_total{{{lab}}} <<prompt>> <<ts>>",
             "# TYPE vllm:request_success_total counter"]
    for reason in ("stop", "length", "abort"):
        lines.append(f'vllm:request_success_total{{{lab},finished_reason="{reason}"}} <<ok>> <<ts>>')
    lines.append("# TYPE vllm:engine_sleep_state gauge")
    for state, v in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
        lines.append(f'vllm:engine_sleep_state{{{lab},sleep_state="{state}"}} {v} <<ts>>')
    buckets = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0, 160.0, 640.0, 2560.0]
    for hist in ("time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
                 "request_queue_time_seconds", "request_inference_time_seconds", "request_prefill_time_seconds",
                 "request_decode_time_seconds", "request_prompt_tokens", "request_generation_tokens",
                 "iteration_tokens_total", "request_max_num_generation_tokens", "request_params_n"):
        lines.append(f"# HELP vllm:{hist} Histogram of {hist.replace('_', ' ')}.")
        lines.append(f"# TYPE vllm:{hist} histogram")
        for i, le in enumerate(buckets):
            lines.append(f'vllm:{hist}_bucket{{{lab},le="{le}"}} <<h{i}>> <<ts>>')
        lines.append(f'vllm:{hist}_bucket{{{lab},le="+Inf"}} <<ok>> <<ts>>')
        lines.append(f"vllm:{hist}_count{{{lab}}} <<ok>> <<ts>>")
        lines.append(f"vllm:{hist}_sum{{{lab}}} <<prompt>> <<ts>>")
    for name in ("python_gc_objects_collected_total", "process_resident_memory_bytes", "process_cpu_seconds_total"):
        lines += [f"# TYPE {name} gauge", f"{name} <<prompt>> <<ts>>"]
    text = "\n".join(lines) + "\n"
    # Label braces are literal; the <<fields>> become str.format fields.
    return re.sub(r"<<(\w+)>>", r"{\1}", text.replace("{", "{{").replace("}", "}}"))


def write_scrape(path: Path, target_bytes: int) -> int:
    """Concatenated timestamped scrapes of one pod every 15 s until ``target_bytes``; returns scrapes written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    template = _scrape_template()
    written = scrapes = 0
    tokens = ok = 0.0
    with path.open("w") as f:
        t = START
        while written < target_bytes:
            busy = 8 <= (t - START) % DAY // 3600 < 23
            tokens += 500 * busy
            ok += 3 * busy
            page = template.format(ts=t * 1000, running=2 * busy, kv=0.3 * busy, tokens=tokens, prompt=tokens * 9,
                                   ok=ok, **{f"h{i}": ok * (i + 1) / 23 for i in range(22)})
            f.write(page)
            written += len(page)
            scrapes += 1
            t += STEP
            if t >= START + WEEK:  # more than a week's bytes: a second week of the same pod
                t = START + WEEK + (t - START) % WEEK
    return scrapes


def write_logs(path: Path) -> int:
    """Requests to glm-5 every 20 s (tool-history 500s inside the wedges) and qwen3's 503s while it sleeps."""
    n = 0

    def stamp(t: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"

    with path.open("w") as f:
        for i in range(WEEK // 20):
            t = START + i * 20
            hour = (t - START) % DAY // 3600
            if not 8 <= hour < 23 and not _wedged(t)[0]:
                continue
            rid = f"{i:08x}"
            common = {"request_id": rid, "session_id": f"s-{i // 6}", "client": "geo-agent/v3.13.1",
                      "provider": "nrp", "model": "glm-5", "origin": "https://tpl.nrp-nautilus.io"}
            f.write(json.dumps({"timestamp": stamp(t), "type": "request", **common, "message_count": 4,
                                "tools_count": 5, "enable_thinking": False, "user_question": "q",
                                "tool_results_this_turn": [{"tool_call_id": "c1", "content": "rows"}]}) + "\n")
            if (_wedged(t)[0] or _in(t, *DOWN)) and i % 3 == 0:
                rec = {"latency_ms": 60, "error": "Provider returned 500: "}
            else:
                rec = {"latency_ms": 900, "has_content": True, "has_tool_calls": False,
                       "has_reasoning_content": False, "content": "ok", "content_preview": "ok",
                       "finish_reason": "stop", "tokens": {"prompt_tokens": 900, "completion_tokens": 40}}
            f.write(json.dumps({"timestamp": stamp(t + 2), "type": "response", **common, **rec}) + "\n")
            n += 1
        for d in range(7):
            for m in range(0, 40, 4):  # a client retrying a sleeping qwen3 at 02:00
                t = START + d * DAY + 2 * 3600 + m * 60
                rid = f"q{d}{m:06d}"
                common = {"request_id": rid, "session_id": f"q-{d}", "client": "geo-agent/v3.13.1",
                          "provider": "nrp", "model": "qwen3", "origin": "https://tpl.nrp-nautilus.io"}
                f.write(json.dumps({"timestamp": stamp(t), "type": "request", **common, "message_count": 2,
                                    "tools_count": 0, "enable_thinking": False, "user_question": "q"}) + "\n")
                f.write(json.dumps({"timestamp": stamp(t + 0.1), "type": "response", **common, "latency_ms": 5,
                                    "error": "Provider returned 503: model is sleeping"}) + "\n")
                n += 1
    return n


def generate(directory: Path, scrape_bytes: int) -> dict:
    """Write the week's files (reused when the marker says they are complete)."""
    marker = directory / f".complete-{GENERATION}-{scrape_bytes}"
    info = directory / "info.json"
    if marker.exists():
        return json.loads(info.read_text())
    directory.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    out = {"csv_rows": write_csv(directory / "samples.csv"),
           "json_points": write_query_range(directory / "query_range"),
           "scrapes": write_scrape(directory / "scrape" / "glm-46-text.prom", scrape_bytes) if scrape_bytes else 0}
    (directory / "logs").mkdir(exist_ok=True)
    out["turns"] = write_logs(directory / "logs" / "week.jsonl")
    info.write_text(json.dumps(out))
    marker.write_text("ok")
    print(f"generated in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------
# Measurement


#: CPU seconds (user + system) of the last child, by label: steadier than wall time on a shared machine.
CPU: dict[str, float] = {}


def _child(argv: list[str]) -> tuple[float, int, str]:
    """Run ``python argv`` from the project root; return wall seconds, its peak RSS in bytes, stdout.

    The child's CPU seconds are kept in ``CPU["last"]``.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=err, cwd=ROOT, env=env)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS (Linux: kilobytes)
        wall = time.perf_counter() - t
        CPU["last"] = usage.ru_utime + usage.ru_stime
        code = os.waitstatus_to_exitcode(status)
        if code:
            err.seek(0)
            raise SystemExit(f"{argv[:3]} failed ({code}): {err.read()[-2000:].decode()}")
    return wall, usage.ru_maxrss * 1024, out.decode()


_LOAD = """
import sys, time
from analyzer.store.db import connect
from analyzer.jobs.metrics import load_metrics
con = connect(sys.argv[1])
t = time.perf_counter()
r = load_metrics(con, sys.argv[2:])
print("RESULT", f"{time.perf_counter() - t:.3f} {r.samples_read} {r.samples_new}")
con.close()
"""


def run(tmpdir: str | Path, *, scrape_bytes: int = 1024**3, data_dir: str | Path | None = None,
        report: dict | None = None) -> list[tuple[str, float, int]]:
    """Generate the week (in ``data_dir``, default ``tmpdir``) and measure every form.

    Returns ``[(label, seconds, peak_rss_bytes), ...]``: each form loaded alone into
    a fresh database (seconds of ``load_metrics`` itself; RSS of the process), then
    ``analyze`` on the logs without and with the CSV and query_range metrics, end
    to end. ``report`` (a dict), when given, receives the generation counts and the
    ``analyze`` summary printed with the metrics.
    """
    tmp = Path(tmpdir)
    data = Path(data_dir) if data_dir else tmp / "data"
    info = generate(data, scrape_bytes)
    json_files = sorted(str(p) for p in (data / "query_range").glob("*.json"))
    forms = [(f"CSV, {info['csv_rows']:,} rows", [str(data / "samples.csv")]),
             (f"query_range JSON, {len(json_files)} files, {info['json_points']:,} points", json_files)]
    if scrape_bytes:
        scrape = data / "scrape" / "glm-46-text.prom"
        forms.append((f"text scrape, {scrape.stat().st_size / 1e9:.2f} GB, {info['scrapes']:,} scrapes", [str(scrape)]))
    rows = []
    for i, (label, paths) in enumerate(forms):
        db = tmp / f"form-{i}.duckdb"
        db.unlink(missing_ok=True)
        _wall, rss, out = _child(["-c", _LOAD, str(db), *paths])
        seconds, read, new = out.split("RESULT", 1)[1].split()
        rows.append((f"{label} ({int(new):,} stored)", float(seconds), rss))
        CPU[rows[-1][0]] = CPU["last"]
        db.unlink(missing_ok=True)
    logs = str(data / "logs" / "week.jsonl")
    for label, extra in (("analyze logs (no metrics)", []),
                         ("analyze logs --metrics CSV + query_range", ["--metrics", str(data / "samples.csv"), *json_files])):
        db = tmp / "analyze.duckdb"
        db.unlink(missing_ok=True)
        # Both through the typer app (analyzer.cli.app), so the difference is the metrics' alone.
        wall, rss, out = _child(["-m", "analyzer.cli.app", logs, "--db", str(db), *extra, "--json"])
        rows.append((label, wall, rss))
        CPU[label] = CPU["last"]
        if extra and report is not None:
            report.update(info=info, summary=json.loads(out), db=str(db))
        elif not extra:
            db.unlink(missing_ok=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/tmp/analyzer-metrics-bench", help="where the generated week is kept")
    ap.add_argument("--scrape-gb", type=float, default=1.0, help="size of the text scrape (0: none)")
    args = ap.parse_args()
    scrape_bytes = int(args.scrape_gb * 1024**3)
    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="analyzer-metrics-run-") as tmp:
        rows = run(tmp, scrape_bytes=scrape_bytes, data_dir=Path(args.dir), report=report)
        width = max(len(r[0]) for r in rows)
        print(f"{'form':<{width}}  {'seconds':>8}  {'process CPU s':>13}  {'peak RSS':>9}")
        for label, seconds, rss in rows:
            print(f"{label:<{width}}  {seconds:8.2f}  {CPU[label]:13.2f}  {rss / 2**20:6.0f} MB")
        base = dict((r[0], r[1]) for r in rows)
        with_m, without = "analyze logs --metrics CSV + query_range", "analyze logs (no metrics)"
        added = base[with_m] - base[without]
        print(f"\nthe week's CSV + query_range metrics add {added:.2f} s wall ({CPU[with_m] - CPU[without]:.2f} s CPU) "
              f"to a run (target < 3 s); peak RSS at most {max(r[2] for r in rows) / 2**20:.0f} MB "
              f"(target <= 1024 MB); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        sys.path.insert(0, str(ROOT))
        from rich.console import Console

        from analyzer.cli.terminal.summary import print_episodes

        print()
        print_episodes(report["summary"]["metrics"]["episodes"], Console(width=200, highlight=False))
        classes = report["summary"]["classes"]
        print(f"classes: wedged-pod {classes.get('wedged-pod', {}).get('count', 0)}, "
              f"pod-down {classes.get('pod-down', {}).get('count', 0)}; episode failed turns "
              f"{sum(e['failed_turns'] for e in report['summary']['metrics']['episodes'])}")


if __name__ == "__main__":
    main()
