"""The JVM's JIT on a short Spark run: ``analyze lake build`` of the sample week, default tiers against C1 alone.

The tests' JVMs (tests/conftest.py sets ``JAVA_TOOL_OPTIONS=-XX:TieredStopAtLevel=1``)
live seconds on small data; this prints what the setting saves on one such run, the
local lake build of the sample week (raw files and metrics), alternated so both
settings meet the same machine. For each run: wall seconds and the machine's busy
CPU-seconds over the run (from /proc/stat: the JVM is not a child this process
waits for, so its own rusage cannot count it; run on an otherwise idle machine).
Linux only; needs pyspark and Java.

    python benchmarks/spark_jit.py [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_logs"
SETTINGS = {"default tiers": None, "C1 alone": "-XX:TieredStopAtLevel=1"}


def busy_seconds() -> float:
    """The machine's CPU time spent not idle, in seconds (all cores), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def one_build(java_options: str | None, workdir: Path) -> tuple[float, float]:
    """(wall seconds, machine CPU-seconds) of one ``analyze lake build`` of the sample week into a new lake."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
    if java_options:
        env["JAVA_TOOL_OPTIONS"] = java_options
    lake = workdir / "lake"
    shutil.rmtree(lake, ignore_errors=True)
    cpu, wall = busy_seconds(), time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "analyzer", "lake", "build", str(SAMPLE / "s3"), str(SAMPLE / "kubectl"),
                        "--metrics", str(SAMPLE / "metrics"), "--lake", str(lake)],
                       cwd=workdir, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - wall, busy_seconds() - cpu
    if p.returncode != 0:
        sys.exit(f"analyze lake build failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each setting, alternated (default 3)")
    runs = parser.parse_args().runs
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            for name, options in SETTINGS.items():
                wall, cpu = one_build(options, Path(tmp))
                seen[name].append((wall, cpu))
                print(f"run {i + 1} {name:14} {wall:6.1f} s  {cpu:6.1f} CPU-s", flush=True)
    base_wall = statistics.median(w for w, _ in seen["default tiers"])
    base_cpu = statistics.median(c for _, c in seen["default tiers"])
    print(f"\nmedian of {runs} runs      wall      CPU   (ratio to default tiers)")
    for name, values in seen.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        print(f"{name:22} {wall:6.1f} s {cpu:6.1f} s   ({wall / base_wall:.2f}x wall, {cpu / base_cpu:.2f}x CPU)")


if __name__ == "__main__":
    main()
