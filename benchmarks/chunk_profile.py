"""Where the time of `analyze` on the S3 chunk folder goes: the figures behind the chunk target.

`benchmarks/ingest.py` says how long `analyze s3/` takes against the floor; this
says what it spends the time on, in four parts, each in a fresh process:

- ``parts``: one `analyze s3/ --db fresh --json` run in-process, with CPU timers
  around the ingest's parts (``time.thread_time`` around each store, each finish and
  each run of files read; process CPU around classification and the summary), and
  the process's CPU, system time and minor page faults (``getrusage``);
- ``forms``: telling the form of every chunk (read before any file is), best of 3;
- ``raw``: storing the first 245,760 lines of the one file as ``records.raw`` alone,
  four ways (zstd, as the analyzer does; uncompressed; DuckDB's own choice; NULL),
  four batches of 61,440 in their own transactions, one thread: CPU and file size;
- ``text``: what keeping each record's original text costs the whole run: `analyze
  s3/ --db fresh --json` in-process, as is and with ``records.raw`` stored as NULL
  (``analyzer.store.record_sql.STORE`` patched in that process only), three pairs in
  turn: wall, CPU, minor page faults and peak RSS of each, against the chunk floor
  (``benchmarks/ingest.py``'s) measured in the same run.

The ``text`` part measures a store the analyzer does not do (it always keeps the
text): it says how much of the chunk target the text accounts for, not a mode.
The timers wrap private functions of :mod:`analyzer.ingestion.logs` (``_Ingest._store``,
``_Ingest._finish``, ``whole_files``): this script follows them when they change.
Uses the inputs ``benchmarks/ingest.py`` generates (run it, or ``--quick``, first).

    PYTHONPATH=<tree under test> python benchmarks/chunk_profile.py [--dir DIR] [--sessions N] [--json]
"""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
RAW_LINES, RAW_BATCH = 245_760, 61_440
RAW_WAYS = ("zstd", "uncompressed", "auto", "null")


def child_parts(s3: str, db: str) -> dict:
    """One instrumented `analyze s3 --db db --json` in this process."""
    import analyzer.ingestion.logs as ingestion
    import analyzer.jobs.main_job as pipeline
    import analyzer.classification.turns as turns

    cpu: Counter = Counter()
    lock = threading.Lock()

    def thread_cpu(name, f):
        def timed(*a, **k):
            t = time.thread_time()
            try:
                return f(*a, **k)
            finally:
                with lock:
                    cpu[name] += time.thread_time() - t
        return timed

    def runs(*a, **k):  # the reader: a generator run in its own thread (prefetch)
        it = ingestion_whole_files(*a, **k)
        while True:
            t = time.thread_time()
            try:
                run = next(it)
            except StopIteration:
                return
            finally:
                with lock:
                    cpu["reader_cpu_s"] += time.thread_time() - t
            yield run

    def process_cpu(name, f):
        def timed(*a, **k):
            c, w = time.process_time(), time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                cpu[name + "_cpu_s"] += time.process_time() - c
                cpu[name + "_wall_s"] += time.perf_counter() - w
        return timed

    ingestion_whole_files = ingestion.whole_files
    ingestion.whole_files = runs
    ingestion._Ingest._store = thread_cpu("store_cpu_s", ingestion._Ingest._store)
    ingestion._Ingest._finish = thread_cpu("finish_cpu_s", ingestion._Ingest._finish)
    turns.refresh_turns = process_cpu("classify", turns.refresh_turns)
    pipeline.summarize_stored = process_cpu("summary", pipeline.summarize_stored)
    run = _analyze_here(s3, db)  # (before `cpu` is read: the run fills it)
    return {**cpu, **run}


def _analyze_here(s3: str, db: str) -> dict:
    """`analyze s3 --db db --json` in this process: its wall seconds, and the process's CPU, faults and peak RSS."""
    from analyzer.cli.app import main

    wall = time.perf_counter()
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")  # the summary is not the figure
    try:
        main([s3, "--db", db, "--json"])
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        sys.stdout.close()
        sys.stdout = out
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall_s": time.perf_counter() - wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "system_s": usage.ru_stime, "minor_faults": usage.ru_minflt, "peak_rss_mb": usage.ru_maxrss / 1024}


def child_forms(s3: str) -> dict:
    """Telling the form of every file of the folder, as the ingest does before reading any; best of 3."""
    from analyzer.io.sources import discover_inputs

    best = None
    for _ in range(3):
        files = discover_inputs([s3]).files
        t = time.perf_counter()
        forms = Counter(f.form for f in files)
        took = time.perf_counter() - t
        best = took if best is None else min(best, took)
    return {"files": len(files), "forms": dict(forms), "best_s": best}


def child_raw(one_file: str, way: str, db: str) -> dict:
    """The first RAW_LINES lines stored as a raw column alone, ``way``; thread CPU of the inserts and commits."""
    import duckdb

    con = duckdb.connect(db)
    con.execute("SET threads = 1")
    con.execute("SET preserve_insertion_order = false")
    con.execute("""CREATE TEMP TABLE src AS SELECT column0 AS line FROM read_csv($p, columns = {'column0': 'VARCHAR'},
                   delim = chr(1), quote = '', escape = '', header = false, max_line_size = 200000000) LIMIT $n""",
                {"p": one_file, "n": RAW_LINES})
    using = {"zstd": " USING COMPRESSION zstd", "uncompressed": " USING COMPRESSION uncompressed"}.get(way, "")
    con.execute(f"CREATE TABLE t (batch INTEGER, raw VARCHAR{using})")
    value = "NULL" if way == "null" else "line"
    t = time.thread_time()
    for i in range(RAW_LINES // RAW_BATCH):
        con.execute("BEGIN")
        con.execute(f"INSERT INTO t SELECT {i}, {value} FROM src LIMIT {RAW_BATCH} OFFSET {i * RAW_BATCH}")
        con.execute("COMMIT")
    con.execute("CHECKPOINT")
    took = time.thread_time() - t
    methods = [m for (m,) in con.execute("""SELECT DISTINCT compression FROM pragma_storage_info('t')
                                             WHERE column_name = 'raw' AND segment_type <> 'VALIDITY'""").fetchall()]
    con.close()
    return {"cpu_s": took, "mb": os.path.getsize(db) / 1e6, "methods": sorted(methods)}


TEXT_PAIRS = 3
TEXT_KEPT, TEXT_NULL = "candidate AS raw", "NULL AS raw"


def child_text(s3: str, db: str, way: str) -> dict:
    """One `analyze s3 --db db --json` in this process, the text kept (``kept``) or stored as NULL (``null``)."""
    import analyzer.store.record_sql as ingest_sql

    if way == "null":
        # Fails loudly when the store's SQL no longer names the text this way.
        assert ingest_sql.STORE.count(TEXT_KEPT) == 1, "analyzer.store.record_sql.STORE changed: update TEXT_KEPT"
        ingest_sql.STORE = ingest_sql.STORE.replace(TEXT_KEPT, TEXT_NULL)
    run = _analyze_here(s3, db)
    import duckdb

    con = duckdb.connect(db, read_only=True)
    records, texts = con.execute("SELECT count(*), count(raw) FROM records").fetchall()[0]
    con.close()
    return {**run, "records": records, "texts": texts}


CHILDREN = {"parts": child_parts, "forms": child_forms, "raw": child_raw, "text": child_text}


def _child(name: str, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as cwd:  # outside the source trees: PYTHONPATH picks the analyzer
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", name, *args],
                              cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{name}: exited {proc.returncode}: {proc.stderr[-1500:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def _span(runs: list[dict], key: str, fmt: str) -> str:
    """The least and the most of ``key`` over ``runs``, as "least-most" in ``fmt``."""
    vals = [r[key] for r in runs]
    return f"{fmt.format(min(vals))}-{fmt.format(max(vals))}"


def main() -> None:
    """Run the four parts on the generated week and print their figures."""
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(CHILDREN[sys.argv[2]](*sys.argv[3:])))
        return
    sys.path.insert(0, str(HERE))
    from ingest import child, fresh, generated_week, line_bound, warm, week_parser  # this folder's benchmark, not a package

    opts = week_parser(__doc__).parse_args()
    week = generated_week(opts, "s3", "week.jsonl")
    s3, one = week / "s3", week / "week.jsonl"
    with tempfile.TemporaryDirectory() as scratch:
        out = {"parts": _child("parts", str(s3), str(Path(scratch) / "parts.duckdb")),
               "forms": _child("forms", str(s3)),
               "raw": {way: _child("raw", str(one), way, str(Path(scratch) / f"raw-{way}.duckdb"))
                       for way in RAW_WAYS}}
        text: dict = {"kept": [], "null": []}
        for _ in range(TEXT_PAIRS):  # in turn, so that a slow spell of the machine meets both
            for way in text:
                db = fresh(Path(scratch) / f"text-{way}.duckdb")
                warm([str(s3)])
                text[way].append(_child("text", str(s3), str(db), way))
        floor = child("floor", str(one), str(s3 / "*" / "*.jsonl"), str(line_bound(one)), cwd=Path(scratch))
        out["text"] = {**text, "chunk_floor_s": floor["chunks_s"]}
    if opts.json:
        print(json.dumps(out, indent=2))
        return
    p = out["parts"]
    print(f"analyze {s3} (one instrumented run)")
    print(f"  wall {p['wall_s']:.2f} s, CPU {p['cpu_s']:.1f} s ({p['cpu_s'] / p['wall_s']:.2f} cores), "
          f"system {p['system_s']:.1f} s, {p['minor_faults']:,} minor faults, peak RSS {p['peak_rss_mb']:.0f} MB")
    for label, key in (("stores (INSERT + commit), thread CPU", "store_cpu_s"),
                       ("reader (runs of files), thread CPU", "reader_cpu_s"),
                       ("finish of the batches, thread CPU", "finish_cpu_s"),
                       ("classification, process CPU", "classify_cpu_s"),
                       ("summary, process CPU", "summary_cpu_s")):
        wall = p.get(key.replace("_cpu_s", "_wall_s"))
        print(f"  {label:40s} {p.get(key, 0):6.2f} s" + (f"  in {wall:.2f} s" if wall else ""))
    f = out["forms"]
    print(f"forms of {f['files']:,} files {f['forms']}: {f['best_s']:.2f} s (best of 3)")
    print(f"the first {RAW_LINES:,} lines of {one.name} stored as a raw column alone, "
          f"{RAW_LINES // RAW_BATCH} transactions, one thread:")
    for way, r in out["raw"].items():
        print(f"  {way:13s} {r['cpu_s']:5.2f} CPU-s  {r['mb']:6.1f} MB  ({', '.join(r['methods'])})")
    t = out["text"]
    fl = t["chunk_floor_s"]
    print(f"analyze {s3} with each record's text kept, and stored as NULL, {TEXT_PAIRS} pairs in turn "
          f"(chunk floor {fl:.2f} s, best of 2, this run):")
    for way in ("kept", "null"):
        runs = t[way]
        span = functools.partial(_span, runs)
        print(f"  {way:5s} {span('wall_s', '{:.2f}')} s  {span('cpu_s', '{:.1f}')} CPU-s  "
              f"{span('minor_faults', '{:,}')} faults  peak RSS {span('peak_rss_mb', '{:.0f}')} MB  "
              f"{min(r['wall_s'] for r in runs) / fl:.2f}-{max(r['wall_s'] for r in runs) / fl:.2f}x the floor  "
              f"({runs[0]['records']:,} records, {runs[0]['texts']:,} texts)")


if __name__ == "__main__":
    main()
