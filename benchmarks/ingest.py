"""Benchmark: `analyze` on a synthetic week of ~800,000 records (~1.2 GB), against baselines.

Measured in the same run, on the same files:

  (a) `analyze DIR --db fresh.duckdb --json`, end to end, as a user runs it;
  (b) the floor: DuckDB alone aggregating the files with read_ndjson and an explicit
      column list of the fields the classifier needs;
  (c) what an operator would write by hand: a standard-library json.loads loop that
      pairs requests with responses by request_id and tallies errors and empty answers;
  (d) `analyze` again with no new files.

Targets (see issue 3): (a)/(b) <= 4, (c)/(a) >= 2, peak memory of (a) < 1.5 GB,
(d) < 1 s. Prints figures and ratios; asserts nothing (machines here are shared
and noisy: read the figures, rerun when in doubt).

    python benchmarks/ingest.py [--sessions 50000] [--dir /tmp/analyzer-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer import simulate  # noqa: E402

FLOOR_COLUMNS = {
    "timestamp": "VARCHAR", "type": "VARCHAR", "request_id": "VARCHAR", "session_id": "VARCHAR",
    "model": "VARCHAR", "provider": "VARCHAR", "error": "VARCHAR", "has_content": "BOOLEAN",
    "has_tool_calls": "BOOLEAN", "has_reasoning_content": "BOOLEAN", "tool_results_this_turn": "JSON",
    "tokens": "STRUCT(completion_tokens BIGINT)", "finish_reason": "VARCHAR", "upstream_status": "INTEGER",
}


def generate(directory: Path, sessions: int) -> tuple[int, int, int]:
    """Write the synthetic week as S3 chunk files (reused when already there)."""
    marker = directory / f".complete-{sessions}"
    if not marker.exists():
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        t = time.perf_counter()
        week = simulate.simulate_week(seed=20261116, sessions=sessions)
        simulate.write_s3_chunks(week, directory / "s3")
        print(f"generated in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        marker.write_text("ok")
    files = [p for p in (directory / "s3").rglob("*.jsonl")]
    size = sum(p.stat().st_size for p in files)
    with open(files[0], "rb"):
        pass
    lines = 0
    for p in files:
        with open(p, "rb") as f:
            lines += sum(1 for _ in f)
    return len(files), size, lines


def floor(glob: str) -> tuple[float, list]:
    """(b): DuckDB read_ndjson with an explicit column list, aggregating."""
    con = duckdb.connect()
    cols = ", ".join(f"'{k}': '{v}'" for k, v in FLOOR_COLUMNS.items())
    sql = f"""
        SELECT type, count(*), count(error), count(*) FILTER (WHERE NOT has_content AND NOT has_tool_calls),
               count(DISTINCT request_id)
        FROM read_ndjson('{glob}', columns = {{{cols}}}, ignore_errors = true)
        GROUP BY type ORDER BY type
    """
    best, rows = float("inf"), []
    for _ in range(2):  # the first run also warms the page cache for everyone
        t = time.perf_counter()
        rows = con.execute(sql).fetchall()
        best = min(best, time.perf_counter() - t)
    con.close()
    return best, rows


def by_hand(files: list[Path]) -> tuple[float, dict]:
    """(c): a json.loads loop pairing requests and responses by request_id."""
    t = time.perf_counter()
    requests: dict[str, dict] = {}
    tally: Counter = Counter()
    for p in files:
        with open(p, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    tally["bad lines"] += 1
                    continue
                kind = rec.get("type")
                if kind == "request":
                    requests[rec["request_id"]] = rec
                elif kind == "response":
                    req = requests.pop(rec.get("request_id"), None)
                    tally["turns"] += 1
                    if req is None:
                        tally["orphan responses"] += 1
                    if rec.get("error"):
                        tally["errors"] += 1
                        if rec["error"].startswith("Provider returned 5") and req and req.get("tool_results_this_turn"):
                            tally["5xx with tool results"] += 1
                    elif not rec.get("has_content") and not rec.get("has_tool_calls"):
                        tally["empty answers"] += 1
    tally["unanswered"] = len(requests)
    return time.perf_counter() - t, dict(tally)


def analyze(args: list[str]) -> tuple[float, float, str]:
    """Run `analyze` as a user would; return wall seconds, peak RSS in MB, stdout."""
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "analyzer.cli", *args], stdout=subprocess.PIPE, stderr=err)
        out = proc.stdout.read()
        # wait4 reports this child's own peak RSS (Linux: kilobytes).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            raise SystemExit(f"analyze failed ({proc.returncode}): {err.read()[-2000:].decode()}")
    return wall, usage.ru_maxrss / 1024, out.decode()


def phases(directory: Path) -> dict[str, float]:
    """(e): where (a)'s time goes, run in-process on a fresh database."""
    from analyzer import db as dbmod, ingestion
    from analyzer.summary import build_summary
    from analyzer.turns import refresh_turns

    path = directory / "phases.duckdb"
    for p in (path, Path(str(path) + ".wal")):
        p.unlink(missing_ok=True)
    con = dbmod.connect(path)
    spent: dict[str, float] = {}

    class Timed:
        """Adds up DuckDB time per kind of statement."""

        def __init__(self, inner):
            self.inner = inner

        def execute(self, sql, *args):
            t = time.perf_counter()
            result = self.inner.execute(sql, *args)
            head = sql.strip().split("\n")[0]
            kind = ("parse every line (stage)" if "TEMP TABLE stage" in head
                    else "store records" if "INSERT INTO records" in head
                    else "commit (write to disk)" if head == "COMMIT" else "other ingest statements")
            spent[kind] = spent.get(kind, 0.0) + time.perf_counter() - t
            return result

        def __getattr__(self, name):
            return getattr(self.inner, name)

    t = time.perf_counter()
    ingestion.ingest(Timed(con), [str(directory / "s3")])
    spent["ingest in all"] = time.perf_counter() - t
    t = time.perf_counter()
    refresh_turns(con)
    spent["classify (labels + turns table)"] = time.perf_counter() - t
    t = time.perf_counter()
    build_summary(con)
    spent["summary"] = time.perf_counter() - t
    con.close()
    return spent


def storage_cost(directory: Path) -> tuple[float, float]:
    """(f): what keeping `raw` costs: CREATE TABLE AS of the typed columns, without and with it."""
    from analyzer.ingestion import RECORD_STRUCT, _HOT_COLUMNS, _candidates_sql
    from analyzer.sources import discover

    files = [f.path for f in discover([str(directory / "s3")])]
    struct = json.dumps(RECORD_STRUCT).replace("'", "''")
    out = []
    for with_raw in (False, True):
        path = directory / "ctas.duckdb"
        for p in (path, Path(str(path) + ".wal")):
            p.unlink(missing_ok=True)
        con = duckdb.connect(str(path))
        con.execute("SET memory_limit = '1GB'")
        raw = ", candidate AS raw" if with_raw else ""
        t = time.perf_counter()
        con.execute(f"""CREATE TABLE r AS SELECT {_HOT_COLUMNS} {raw}
                        FROM (SELECT candidate, try(json_transform(candidate, '{struct}')) AS j
                              FROM ({_candidates_sql('jsonl', 'lines')}))""", {"files": files})
        con.execute("CHECKPOINT")
        out.append(time.perf_counter() - t)
        con.close()
    return out[0], out[1]


def main() -> None:
    """Generate (or reuse) the week, run (a)-(d), print the figures and ratios."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=50_000, help="sessions to simulate (50,000 ≈ 800k records)")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/analyzer-bench"), help="where the synthetic week lives")
    opts = ap.parse_args()

    n_files, size, lines = generate(opts.dir, opts.sessions)
    files = sorted((opts.dir / "s3").rglob("*.jsonl"))
    print(f"input: {n_files:,} S3 chunk files, {size / 1e9:.2f} GB, {lines:,} lines")

    tb, floor_rows = floor(str(opts.dir / "s3" / "**" / "*.jsonl"))
    print(f"(b) floor, DuckDB read_ndjson + aggregate:   {tb:7.2f} s")

    db = opts.dir / "bench.duckdb"
    for p in (db, Path(str(db) + ".wal")):
        p.unlink(missing_ok=True)
    ta, peak, out = analyze([str(opts.dir / "s3"), "--db", str(db), "--json"])
    summary = json.loads(out)
    print(f"(a) analyze end to end, fresh database:      {ta:7.2f} s   peak RSS {peak:,.0f} MB")
    tc, tally = by_hand(files)
    print(f"(c) stdlib json.loads loop:                  {tc:7.2f} s")
    td, _, _ = analyze([str(opts.dir / "s3"), "--db", str(db), "--json"])
    print(f"(d) analyze again, no new files:             {td:7.2f} s")

    spent = phases(opts.dir)
    typed, with_raw = storage_cost(opts.dir)
    print("(e) where (a)'s time goes (in-process, fresh database):")
    for kind, seconds in spent.items():
        print(f"      {kind:36s} {seconds:7.2f} s")
    print(f"(f) CREATE TABLE AS, typed columns only:      {typed:7.2f} s   ({typed / tb:.1f}x floor)")
    print(f"    CREATE TABLE AS, typed columns + raw:     {with_raw:7.2f} s   ({with_raw / tb:.1f}x floor)")

    db_size = db.stat().st_size
    print()
    print(f"records stored {summary['ingest']['new_records']:,}, turns {summary['turns']:,}, "
          f"quarantined {summary['quarantined_lines']:,}; database {db_size / 1e6:,.0f} MB "
          f"({db_size / size:.0%} of the logs)")
    print(f"(a)/(b) = {ta / tb:5.2f}   target <= 4")
    print(f"(c)/(a) = {tc / ta:5.2f}   target >= 2")
    print(f"peak    = {peak:5.0f} MB target < 1536 MB")
    print(f"(d)     = {td:5.2f} s  target < 1 s")
    print(f"by hand tallied: {tally}")


if __name__ == "__main__":
    main()
