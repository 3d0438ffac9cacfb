"""Benchmark: peak memory of ``analyze`` on a huge Prometheus answer, as a file and from a live server.

Generates (``tools.big_prometheus``) a ``query_range`` matrix answer of each size
asked (default 20 MB and 100 MB: 11,000 points per series at a 15 s step, vLLM
pods' labels, the metric names the analyzer reads), then runs, each in its own
process (peak RSS and CPU of that process from ``wait4``):

- ``file``: ``analyze LOGS --metrics big.json`` into a fresh database;
- ``live``: ``analyze LOGS --prometheus URL --since .. --until ..`` against a
  loopback server (in this process) that answers each range query as Prometheus
  would (the series of the names asked, the points of the range and step asked);

then each again on the same database (``rerun``): nothing may be stored twice.
Prints seconds, CPU seconds, peak RSS, samples read and stored per run, and the
target: every run on an answer of 100 MB or less under 1.5 GB of peak RSS, every
sample stored once (PASS or MISS); asserts nothing (shared machine). The tests
prove the same paths on 20 MB (tests/unit/ingestion/test_metrics_big_answers.py).

    PYTHONPATH=<tree under test> python benchmarks/big_prometheus.py [--sizes 20MB,100MB] [--forms file,live]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tools; the analyzer from PYTHONPATH first

from tools.big_prometheus import parse_size, serve, spec_for_bytes, write_answer, write_logs  # noqa: E402


def child(argv: list[str], cwd: str) -> dict:
    """Run ``argv``; its wall seconds, CPU seconds, peak RSS (bytes), exit code and stdout/stderr."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Drain the pipes in threads so a chatty child never blocks; wait4 gives this child's own peak RSS.
    import threading

    out: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k=k, f=f: out.__setitem__(k, f.read()))
               for k, f in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for r in readers:
        r.start()
    _, status, usage = os.wait4(proc.pid, 0)
    for r in readers:
        r.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"seconds": time.monotonic() - started, "cpu": usage.ru_utime + usage.ru_stime,
            "rss": usage.ru_maxrss * 1024, "rc": proc.returncode,
            "stdout": out["stdout"].decode(errors="replace"), "stderr": out["stderr"].decode(errors="replace")}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def analyze_argv(db: Path, logs: Path, form: str, target: str, spec) -> list[str]:
    """The ``analyze`` command of one form (``target``: the file, or the server's URL)."""
    argv = [sys.executable, "-m", "analyzer", "--db", str(db), "--json", str(logs)]
    if form == "file":
        return argv + ["--metrics", target]
    # The span holds 11,000 points at the spec's step: the step stays as it is.
    return argv + ["--prometheus", target, "--since", _iso(spec.t0), "--until", _iso(spec.end)]


def loaded(result: dict) -> dict:
    """The metrics load of a run's ``--json`` output: samples read, new, duplicates, warnings."""
    if result["rc"] != 0:
        return {"error": result["stderr"].strip().splitlines()[-1:] or [f"exit {result['rc']}"]}
    doc = json.loads(result["stdout"])
    loads = doc["metrics"]["loads"]
    return {"read": sum(x["samples_read"] for x in loads), "new": sum(x["samples_new"] for x in loads),
            "duplicates": sum(x["duplicates"] for x in loads),
            "warnings": [w for x in loads for w in x["warnings"]]}


def run(sizes: list[int], forms: list[str], directory: Path, rerun: bool = True) -> list[dict]:
    """Measure each (size, form); return one row per run."""
    env_root = os.environ.get("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    rows = []
    for size in sizes:
        spec = spec_for_bytes(size)
        big = directory / f"big-{size >> 20}MB.json"
        if not big.exists():
            write_answer(big, spec)
        logs = write_logs(directory / "logs.jsonl", spec)
        print(f"{big.name}: {big.stat().st_size / 1e6:.1f} MB, {spec.series} series x {spec.points} points = "
              f"{spec.samples:,} samples", flush=True)
        for form in forms:
            db = directory / f"{form}-{size >> 20}.duckdb"
            for suffix in ("", ".wal"):
                Path(str(db) + suffix).unlink(missing_ok=True)
            with serve(spec) as url:
                for label in ("first", "rerun")[: 2 if rerun else 1]:
                    argv = analyze_argv(db, logs, form, str(big) if form == "file" else url, spec)
                    r = child(argv, cwd=str(directory))
                    got = loaded(r)
                    row = {"size_mb": round(big.stat().st_size / 1e6, 1), "asked_mib": size >> 20, "form": form, "run": label,
                           "seconds": round(r["seconds"], 2), "cpu": round(r["cpu"], 2),
                           "peak_rss_mb": round(r["rss"] / 1e6), "expected": spec.samples, **got}
                    rows.append(row)
                    print(f"  {form:4} {label:5} {row['seconds']:7.2f} s {row['cpu']:7.2f} CPU-s  peak RSS "
                          f"{row['peak_rss_mb']:6} MB  " + (
                              f"read {got['read']:,} new {got['new']:,} dup {got['duplicates']:,}"
                              if "error" not in got else f"error: {got['error']}"), flush=True)
                    for w in got.get("warnings", [])[:3]:
                        print(f"        warning: {w}")
    del env_root
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="20MB,100MB")
    ap.add_argument("--forms", default="file,live")
    ap.add_argument("--dir", help="where the inputs and databases go (default: a temporary folder)")
    ap.add_argument("--no-rerun", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import analyzer

    print(f"analyzer: {Path(analyzer.__file__).parent}", flush=True)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    forms = args.forms.split(",")
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
        rows = run(sizes, forms, Path(args.dir), not args.no_rerun)
    else:
        with tempfile.TemporaryDirectory(prefix="analyzer-bigprom-") as tmp:
            rows = run(sizes, forms, Path(tmp), not args.no_rerun)
    print(target_line(rows), flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))


#: The bound of peak RSS for an answer of up to 100 MB, as a file or from a live server.
PEAK_RSS_TARGET = 1.5e9


def target_line(rows: list[dict]) -> str:
    """PASS when every run on an answer of at most 100 MB stayed under :data:`PEAK_RSS_TARGET` and stored
    every sample once (the first run all new, the rerun all duplicates), else MISS with the runs that did not."""
    checked = [r for r in rows if r["asked_mib"] <= 100]
    bad = [r for r in checked if "error" in r or r["peak_rss_mb"] * 1e6 >= PEAK_RSS_TARGET
           or (r["new"], r["duplicates"]) != ((r["expected"], 0) if r["run"] == "first" else (0, r["expected"]))]
    verdict = "PASS" if checked and not bad else "MISS"
    said = "; ".join(f"{r['size_mb']} MB {r['form']} {r['run']}: {r.get('peak_rss_mb')} MB" for r in bad)
    return (f"target: peak RSS < {PEAK_RSS_TARGET / 1e9:.1f} GB for answers up to 100 MB, each sample stored "
            f"once ({len(checked)} runs): {verdict}" + (f" ({said})" if said else ""))


if __name__ == "__main__":
    main()
