"""What each statement of a full classification costs on a week's database, and what it builds.

Analyzes the S3 chunk folder that ``benchmarks/ingest.py`` generates into a scratch
database (once, in a child process), then rebuilds the classification on a fresh
copy of it with :func:`analyzer.classification.turns.ensure_turns` (``force=True``), twice: with the
pod windows the week has (none: no metrics are loaded), and with ``--windows N``
deterministic windows of many hours to days over the week's models. For every
statement of a rebuild that takes 50 ms or more it prints the wall and process CPU
seconds and the bytes DuckDB spilled to disk (DuckDB's JSON profiler); then the
whole rebuild, and a fingerprint of the ``turns`` table built (its rows and a sum of
a hash of each row), so two trees can be compared row for row. Peak RSS is the
process's.

    PYTHONPATH=<tree under test> python benchmarks/classify.py [--dir DIR] [--sessions N] [--windows N] [--json]
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ingest import ENTRY, MB, generated_week, measure, week_parser  # noqa: E402  (this folder's benchmark, not a package)

# Deterministic windows (DuckDB's hash of the window's number) spread over the
# records' first week, cycling over the week's models and both kinds.
_WINDOWS = """
INSERT INTO pod_windows (pod, model_name, kind, start_ts, end_ts, detail)
SELECT 'bench-' || (i % 3), m.model, CASE WHEN i % 2 = 0 THEN 'wedged' ELSE 'down' END,
       lo + to_seconds(CAST(hash(i) % 600000 AS BIGINT)),
       lo + to_seconds(CAST(hash(i) % 600000 AS BIGINT) + CAST(hash(i * 7) % 200000 AS BIGINT)),
       'benchmarks/classify.py'
FROM range(?) r(i), (SELECT min(ts) AS lo FROM records),
     (SELECT model, row_number() OVER (ORDER BY model) - 1 AS k, count(*) OVER () AS n
      FROM (SELECT DISTINCT model FROM records WHERE model IS NOT NULL)) m
WHERE m.k = i % m.n
"""


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class _Timed:
    """A connection whose ``execute`` notes each statement's seconds, CPU and spill."""

    def __init__(self, con, profile: Path) -> None:
        self._con, self._profile, self.statements = con, profile, []

    def execute(self, sql: str, *args, **kwargs):
        self._profile.unlink(missing_ok=True)
        t, c = time.perf_counter(), _cpu()
        result = self._con.execute(sql, *args, **kwargs)
        wall = time.perf_counter() - t
        if wall >= 0.05:
            # A statement that returns rows finishes (and writes its profile) when
            # they are fetched: only the ones done now (CREATE ... AS) report a spill.
            spilled = None
            if self._profile.exists():
                spilled = json.loads(self._profile.read_text())["system"]["total_bytes_spilled"]
            self.statements.append({"sql": " ".join(sql.split())[:90], "wall_s": wall, "cpu_s": _cpu() - c,
                                    "spilled_mb": None if spilled is None else spilled / MB})
        return result

    def __getattr__(self, name):
        return getattr(self._con, name)


def rebuild(db: Path, windows: int, scratch: Path) -> dict:
    """The classification of ``db`` rebuilt (with ``windows`` extra pod windows), statement by statement."""
    import analyzer
    from analyzer.classification.turns import ensure_turns

    con = analyzer.connect(db)
    try:
        if windows:
            con.execute(_WINDOWS, [windows])
        profile = scratch / "profile.json"
        con.execute("PRAGMA enable_profiling = 'json'")
        con.execute("SET profiling_output = ?", [str(profile)])
        timed = _Timed(con, profile)
        t, c = time.perf_counter(), _cpu()
        ensure_turns(timed, force=True)
        total = {"wall_s": time.perf_counter() - t, "cpu_s": _cpu() - c}
        con.execute("PRAGMA disable_profiling")
        rows, digest = con.execute("SELECT count(*), sum(hash(t)::HUGEINT) FROM turns t").fetchall()[0]
        n_windows = con.execute("SELECT count(*) FROM pod_windows").fetchall()[0][0]
    finally:
        con.close()
    return {"windows": n_windows, "statements": timed.statements, **total, "turns": rows, "digest": str(digest)}


def main() -> None:
    """Analyze the generated chunk folder, rebuild its classification twice, print the figures."""
    ap = week_parser(__doc__)
    ap.add_argument("--windows", type=int, default=300, help="pod windows added for the second rebuild (default 300)")
    opts = ap.parse_args()
    s3 = generated_week(opts, "s3") / "s3"
    import analyzer

    with tempfile.TemporaryDirectory() as scratch:  # outside the source trees: PYTHONPATH picks the analyzer
        scratch = Path(scratch)
        base = scratch / "week.duckdb"
        measure([*ENTRY, str(s3), "--db", str(base), "--json"], scratch)
        runs = []
        for windows in (0, opts.windows):
            copy = scratch / "copy.duckdb"
            shutil.copyfile(base, copy)
            runs.append(rebuild(copy, windows, scratch))
            copy.unlink()
    out = {"analyzer": str(Path(analyzer.__file__).parent), "runs": runs,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if opts.json:
        print(json.dumps(out, indent=2))
        return
    print(f"analyzer under test: {out['analyzer']}")
    for r in runs:
        print(f"\nfull classification rebuild, {r['windows']:,} pod windows")
        print(f"  {'seconds':>7} {'CPU-s':>6} {'spilled':>9}  statement")
        for s in r["statements"]:
            spilled = "-" if s["spilled_mb"] is None else f"{s['spilled_mb']:,.0f} MB"
            print(f"  {s['wall_s']:7.2f} {s['cpu_s']:6.2f} {spilled:>9}  {s['sql']}")
        print(f"  {r['wall_s']:7.2f} {r['cpu_s']:6.2f} {'':>9}  the whole rebuild (ensure_turns, force=True)")
        print(f"  turns: {r['turns']:,} rows, digest {r['digest']}")
    print(f"\npeak RSS of this process: {out['peak_rss_mb']:,.0f} MB")


if __name__ == "__main__":
    main()
