"""The lake built from raw logs: Spark on a standalone cluster of two workers against DuckDB, on one machine.

For each week (``--scales``: 1 is the sample week, ``sample_logs/``; 10 a week of
ten times its sessions, made by ``tools.simulator`` as ``sample_logs/generate.py``
makes the sample, and kept under ``--dir``):

- ``duckdb``: ``analyze S3 KUBECTL --metrics M --db NEW`` then ``analyze export
  --lake DIR`` (the lake as one machine makes it), each a process of its own;
- ``spark``: ``spark-submit --master spark://127.0.0.1:PORT analyzer/spark_submit.py
  S3 KUBECTL --metrics M --lake DIR`` on a standalone cluster started for the run
  (``tools.spark_cluster``: a master and two workers of one core each, all on this
  machine), as docs/spark.md submits it;
- ``added day``: the lake of the first six days' chunks (and the metrics), then the
  seventh day's chunks added to it, timed: on Spark ``analyze lake build`` of that
  day into the lake; on DuckDB ``analyze DAY --db`` into the six days' database
  then ``analyze export --lake`` (an export writes the whole lake again).

Printed: seconds (and the ratio against DuckDB in the same run), the peak resident
memory of DuckDB's process, of Spark's driver (the spark-submit JVM and its
Python), and of the cluster (master, workers, executors and their Python workers,
summed, sampled every 0.2 s), and whether the two lakes hold the same rows in
every relation, with the 1-minute load average before and after each week (other
work on the machine slows both engines). Nothing is asserted (machines are shared:
read the ratios, rerun when in doubt).

    python benchmarks/spark_lake.py                  # the sample week and a 10x week
    python benchmarks/spark_lake.py --scales 1       # the sample week only
    python benchmarks/spark_lake.py --json           # every figure as JSON
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))  # tools/, from a checkout
sys.path.insert(0, str(HERE))
from ingest import measure  # noqa: E402  (this folder's benchmark, not a package)

from tools.spark_cluster import PeakRss, StandaloneCluster, spark_home  # noqa: E402

SAMPLE = REPO / "sample_logs"
SAMPLE_SESSIONS = 400  # sample_logs/generate.py's
BENCH_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / "analyzer-bench"
#: Spark's memory for the runs: enough for the 10x week's executors and driver.
SPARK_CONF = ["--conf", "spark.executor.memory=2g", "--driver-memory", "2g"]


def say(message: str) -> None:
    """Progress on stderr, only when stderr is a terminal (quiet when piped)."""
    if sys.stderr.isatty():
        print(f"  .. {message}", file=sys.stderr, flush=True)


def week(scale: int, bench_dir: Path) -> Path:
    """The folder of the week of ``scale`` times the sample's sessions (``s3/``, ``kubectl/``, ``metrics/``)."""
    if scale == 1:
        return SAMPLE
    out = bench_dir / f"spark-week-x{scale}"
    done = out / ".done"
    if done.exists():
        return out
    say(f"generating a {scale}x week into {out}")
    shutil.rmtree(out, ignore_errors=True)
    import tools.simulator as sim

    sys.path.insert(0, str(SAMPLE))
    from generate import DAYS, FLUSH_INTERVAL_S, SEED, START  # sample_logs/generate.py's constants

    simulated = sim.simulate_week(seed=SEED, sessions=SAMPLE_SESSIONS * scale, start=START, days=DAYS)
    sim.write_s3_chunks(simulated, out / "s3", flush_interval_s=FLUSH_INTERVAL_S, malformed=True)
    sim.write_kubectl_stdout(simulated, out / "kubectl", s3_enabled=True, flush_interval_s=FLUSH_INTERVAL_S)
    sim.write_prometheus_exports(simulated, out / "metrics")
    done.write_text("\n")
    return out


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def on_duckdb(logs: list[str], metrics: list[str], scratch: Path, name: str) -> dict:
    """``analyze`` into a new database, then ``analyze export --lake``."""
    db, lake = scratch / f"{name}.duckdb", scratch / f"{name}-lake"
    ran = measure(["-m", "analyzer", *logs, "--metrics", *metrics, "--db", str(db), "--json"], scratch)
    exported = measure(["-m", "analyzer", "export", "--lake", str(lake), "--db", str(db), "--json"], scratch)
    return {"seconds": ran["wall_s"] + exported["wall_s"], "analyze_s": ran["wall_s"], "export_s": exported["wall_s"],
            "rss_mb": max(ran["rss_mb"], exported["rss_mb"]), "lake": lake, "db": db}


def on_spark(cluster: StandaloneCluster, logs: list[str], metrics: list[str], lake: Path, scratch: Path) -> dict:
    """``spark-submit`` of the lake build on ``cluster``: seconds, the driver's and the cluster's peak RSS."""
    argv = [str(spark_home() / "bin" / "spark-submit"), "--master", cluster.url, *SPARK_CONF,
            str(REPO / "analyzer" / "spark_submit.py"), *logs, *(["--metrics", *metrics] if metrics else []),
            "--lake", str(lake), "--json"]
    env = {**cluster.driver_env(), "PYSPARK_DRIVER_PYTHON": sys.executable}
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=scratch)
    with PeakRss(lambda: [proc.pid]) as driver, PeakRss(lambda: [p.pid for p in cluster.processes]) as nodes:
        out, err = proc.communicate()
    seconds = time.perf_counter() - started
    if proc.returncode:
        raise RuntimeError(f"spark-submit exited {proc.returncode}: {err.decode(errors='replace')[-2000:]}")
    return {"seconds": seconds, "driver_rss_mb": driver.peak_mb, "cluster_rss_mb": nodes.peak_mb,
            "report": json.loads(out)}


def same_rows(a: Path, b: Path) -> bool:
    """Whether the two lakes' manifests give every relation the same rows."""
    ra = {t: e["rows"] for t, e in json.loads((a / "_manifest.json").read_text())["tables"].items()}
    rb = {t: e["rows"] for t, e in json.loads((b / "_manifest.json").read_text())["tables"].items()}
    return ra == rb


def run_scale(scale: int, cluster: StandaloneCluster, bench_dir: Path, scratch: Path) -> dict:
    folder = week(scale, bench_dir)
    days = sorted(p.name for p in (folder / "s3").iterdir() if p.is_dir())
    logs, metrics = [str(folder / "s3"), str(folder / "kubectl")], [str(folder / "metrics")]
    work = scratch / f"x{scale}"
    work.mkdir()
    row: dict = {"scale": scale, "input_mb": round(size_mb(folder / "s3") + size_mb(folder / "kubectl"), 1),
                 "days": len(days), "load_before": round(os.getloadavg()[0], 1)}
    say(f"{scale}x week on DuckDB")
    duck = on_duckdb(logs, metrics, work, "week")
    say(f"{scale}x week on Spark ({cluster.url})")
    spark = on_spark(cluster, logs, metrics, work / "spark-lake", work)
    row["duckdb"] = {k: v for k, v in duck.items() if k not in ("lake", "db")}
    row["spark"] = {k: v for k, v in spark.items() if k != "report"}
    row["records"] = spark["report"]["lake"]["tables"]["records"]
    row["turns"] = spark["report"]["lake"]["tables"]["turns"]
    row["same_rows"] = same_rows(duck["lake"], work / "spark-lake")

    say(f"{scale}x: a day added")
    first = [str(folder / "s3" / d) for d in days[:-1]]
    last = [str(folder / "s3" / days[-1])]
    on_spark(cluster, first, metrics, work / "by-day-lake", work)
    added = on_spark(cluster, last, [], work / "by-day-lake", work)
    measure(["-m", "analyzer", *first, "--metrics", *metrics, "--db", str(work / "by-day.duckdb"), "--json"], work)
    day_in = measure(["-m", "analyzer", *last, "--db", str(work / "by-day.duckdb"), "--json"], work)
    day_out = measure(["-m", "analyzer", "export", "--lake", str(work / "by-day-duck-lake"),
                       "--db", str(work / "by-day.duckdb"), "--json"], work)
    row["added_day"] = {"spark_s": added["seconds"], "days_written": added["report"]["days_written"],
                        "duckdb_s": day_in["wall_s"] + day_out["wall_s"], "duckdb_analyze_s": day_in["wall_s"],
                        "duckdb_export_s": day_out["wall_s"],
                        "same_rows": same_rows(work / "by-day-duck-lake", work / "by-day-lake")}
    row["load_after"] = round(os.getloadavg()[0], 1)
    return row


def print_text(rows: list[dict], identity: dict) -> None:
    print(f"analyzer {identity['commit']} ({identity['path']}); {identity['cpus']} cores; Spark standalone: "
          "a master and 2 workers of 1 core each on this machine, spark-submit from this machine")
    for r in rows:
        d, s, a = r["duckdb"], r["spark"], r["added_day"]
        print(f"\n{r['scale']}x week: {r['input_mb']:,} MB of chunks and stdout, {r['days']} days, "
              f"{r['records']:,} records, {r['turns']:,} turns (1-minute load average {r['load_before']} "
              f"before, {r['load_after']} after: other work on the machine slows both engines)")
        print(f"  DuckDB  analyze + export --lake   {d['seconds']:7.1f} s  (analyze {d['analyze_s']:.1f} s, "
              f"export {d['export_s']:.1f} s)  peak RSS {d['rss_mb']:,.0f} MB")
        print(f"  Spark   lake build (standalone)   {s['seconds']:7.1f} s  = {s['seconds'] / d['seconds']:.1f}x DuckDB  "
              f"peak RSS driver {s['driver_rss_mb']:,.0f} MB, cluster {s['cluster_rss_mb']:,.0f} MB")
        print(f"  same rows in every relation: {'yes' if r['same_rows'] else 'NO'}")
        print(f"  a day added ({a['days_written'][0]} .. {a['days_written'][-1]} written): Spark {a['spark_s']:.1f} s, "
              f"DuckDB {a['duckdb_s']:.1f} s (analyze {a['duckdb_analyze_s']:.1f} s + export "
              f"{a['duckdb_export_s']:.1f} s) = {a['spark_s'] / a['duckdb_s']:.1f}x; same rows: "
              f"{'yes' if a['same_rows'] else 'NO'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", default="1,10", help="weeks to build, in sample weeks (default %(default)s)")
    ap.add_argument("--dir", type=Path, default=BENCH_DIR, help="where the bigger weeks are kept (default %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    opts = ap.parse_args()
    scales = [int(s) for s in opts.scales.split(",")]
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    identity = {"path": str(REPO), "commit": commit or "?", "cpus": os.cpu_count()}
    opts.dir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="spark-lake-", dir=opts.dir))
    rows = []
    try:
        with StandaloneCluster(scratch / "cluster", workers=2, memory="3g") as cluster:
            for scale in scales:
                rows.append(run_scale(scale, cluster, opts.dir, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if opts.json:
        print(json.dumps({"analyzer": identity, "rows": rows}, indent=2))
    else:
        print_text(rows, identity)


if __name__ == "__main__":
    main()
