"""The fixed cost of one small ``analyze`` run in process: what each test that runs the command pays.

Most tests run ``analyze`` on a few records (tests/support/cli.py runs it in process),
so the suite's time is largely this floor times the number of runs. The script runs
``analyze CHUNK --db NEW`` on one sample chunk into a new database ``--runs`` times,
prints the median per run, then profiles the same runs and prints the seconds per
run of the main steps (cumulative, from cProfile, so they overlap: the summary's
questions are inside the summary).

    python benchmarks/small_run.py [--runs 10]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.cli import analyze  # noqa: E402  (the in-process runner the tests use)

#: The steps printed, as cProfile names them (file, function).
STEPS = [
    ("jobs/main_job.py", "run_main_job", "the whole job"),
    ("store/db.py", "connect", "open a new database (schema, views)"),
    ("ingestion/logs.py", "ingest", "ingest"),
    ("classification/turns.py", "refresh_turns", "classify (refresh_turns)"),
    ("jobs/main_job.py", "summarize_stored", "the summary"),
    ("store/asking.py", "execute", "  questions' statements (most in the summary)"),
    ("cli/terminal/summary.py", "show_summary", "print it"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    runs = ap.parse_args().runs
    chunk = str(sorted((REPO / "sample_logs" / "s3").rglob("*.jsonl*"))[0])

    def once() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            ran = analyze(chunk, "--db", str(Path(tmp) / "a.duckdb"))
        assert ran.returncode == 0, ran.stderr

    once()  # imports and the query files, as a test session has them already
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        once()
        times.append(time.perf_counter() - t)
    print(f"analyze on one sample chunk ({Path(chunk).name}) into a new database, in process")
    print(f"  median per run {statistics.median(times):.3f} s  (min {min(times):.3f}, max {max(times):.3f}, {runs} runs)")

    profile = cProfile.Profile()
    profile.enable()
    for _ in range(runs):
        once()
    profile.disable()
    stats = pstats.Stats(profile).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
    print("per run, under cProfile (its overhead included; cumulative, so steps overlap):")
    for suffix, name, label in STEPS:
        ct = sum(v[3] for (f, _, n), v in stats.items() if n == name and f.endswith(suffix))
        print(f"  {label:40s} {ct / runs:.3f} s")


if __name__ == "__main__":
    main()
