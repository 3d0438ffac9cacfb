"""Benchmark: `analyze` on a production-shaped week, against what DuckDB alone costs.

Generates (or reuses, under --dir) a week from ``tools.simulator`` -- several proxy
replicas, multi-turn tool sessions, the real record sizes -- in five forms: the S3
chunk folder, one file (the chunks concatenated in time order, as ``kubectl logs >
week.log`` or an export gives), that file gzipped, a 3x file (the week again shifted by
+7 and +14 days, ids suffixed, so every record is distinct) and one extra day (the
week's first day shifted by +21 days).

Then measures, in one run, on those files (see benchmarks/README.md for each row):
floor, store, the stdlib loop, `analyze` end to end on every form, its phases, the
incremental day, the no-op re-run, metrics ingest (benchmarks/metrics.py, when present)
and the report. Every row runs in its own process; peak RSS is that process's, from
``os.wait4``. Prints the figures, then the speed and memory targets with PASS/MISS computed
from this run's figures. Asserts nothing: the machine is shared and noisy.

    PYTHONPATH=<tree under test> python benchmarks/ingest.py [--quick] [--rows a,b] [--json]
"""

from __future__ import annotations

import argparse
import gzip as gzip_module
import importlib.util
import inspect
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261116
FULL_SESSIONS = 80_000
QUICK_SESSIONS = 8_000
MB = 1024 * 1024
GB_RSS = 1024  # "1 GB" of peak RSS, in MB (MiB)

# Row names for --rows, in the order they run (later rows use earlier rows' databases).
ROWS = ("floor", "store", "stdlib", "analyze-one", "analyze-one-store", "analyze-chunks", "analyze-gzip",
        "analyze-3x", "phases", "incremental", "noop", "report", "metrics")
# A row that needs another row's database runs that row too.
NEEDS = {"noop": "analyze-chunks", "incremental": "analyze-3x", "report": "analyze-one"}
# How the children start the analyzer: as the `analyze` console script does
# (`python -m analyzer`), or `analyzer.cli` for an old tree without analyzer/__main__.py
# (main() checks the tree under test; classify.py and checkpoint.py take this default).
ENTRY = ["-m", "analyzer"]

# The `analyze-one-store` row: one batch stored at a time (the default stores two),
# to show in the same run what the second store gives.
ONE_STORE = {"ANALYZER_STORES": "1"}

# The fields the classifier reads, typed, for the floor.
FLOOR_COLUMNS = {
    "timestamp": "VARCHAR", "type": "VARCHAR", "request_id": "VARCHAR", "session_id": "VARCHAR",
    "model": "VARCHAR", "provider": "VARCHAR", "error": "VARCHAR", "has_content": "BOOLEAN",
    "has_tool_calls": "BOOLEAN", "has_reasoning_content": "BOOLEAN", "tool_results_this_turn": "JSON",
    "tokens": "STRUCT(completion_tokens BIGINT)", "finish_reason": "VARCHAR", "upstream_status": "INTEGER",
}


def say(message: str) -> None:
    """Progress on stderr, only when stderr is a terminal (quiet when piped)."""
    if sys.stderr.isatty():
        print(f"  .. {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Input generation (cached in --dir)


#: Where the generated inputs are kept and reused (``--dir``).
BENCH_DIR = Path("/tmp/analyzer-bench")


def week_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a script that reads the week this one generates: ``--dir``, ``--sessions``, ``--json``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=BENCH_DIR, help="where ingest.py keeps the week (default: %(default)s)")
    ap.add_argument("--sessions", type=int, default=FULL_SESSIONS, help="the week's size (default %(default)s)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    return ap


def generated_week(opts: argparse.Namespace, *forms: str) -> Path:
    """The folder of the week ``opts`` names; exits, saying how to make it, when one of ``forms`` is not there."""
    week = opts.dir / f"week-{opts.sessions}"
    if not all(_done(week / form).exists() for form in forms):
        sys.exit(f"no generated week under {week}: run benchmarks/ingest.py (with --sessions {opts.sessions}) first")
    return week


def line_bound(one_file: Path) -> int:
    """The longest line DuckDB's readers must accept on the week's one file (its facts): twice its longest, at least 16 MB."""
    return max(16 * MB, 2 * json.loads(_done(one_file).read_text())["longest_line"])


def _done(path: Path) -> Path:
    """The marker saying ``path`` was written completely (and holding its facts)."""
    return path.with_name(path.name + ".done")


def _cached(path: Path, make) -> dict:
    """Run ``make()`` unless ``path`` was completed before; return (and keep) its facts."""
    marker = _done(path)
    if marker.exists():
        return {**json.loads(marker.read_text()), "reused": True}
    if path.is_dir():
        shutil.rmtree(path)
    path.unlink(missing_ok=True)
    t = time.perf_counter()
    facts = make() or {}
    facts["generated_s"] = round(time.perf_counter() - t, 1)
    marker.write_text(json.dumps(facts))
    return {**facts, "reused": False}


def _chunk_files(s3: Path) -> list[Path]:
    """The chunk files in time order (day folder, then the flush time that names them)."""
    return sorted(s3.rglob("*.jsonl"))


def make_chunks(s3: Path, sessions: int) -> dict:
    """The simulated week as the proxy's S3 chunk files."""
    # The simulator lives in the checkout's tools/ (never installed). Appended, not
    # prepended, so the analyzer under test is still the one PYTHONPATH names.
    if str(HERE.parent) not in sys.path:
        sys.path.append(str(HERE.parent))
    from tools import simulator

    result = simulator.write_s3_chunks(simulator.simulate_week(seed=SEED, sessions=sessions), s3)
    return {"records": result.records, "files": len(result.files)}


def make_one_file(s3: Path, out: Path) -> dict:
    """The chunks concatenated in time order; counts lines and the longest line."""
    lines = longest = 0
    with open(out, "wb") as dst:
        for chunk in _chunk_files(s3):
            with open(chunk, "rb") as src:
                for line in src:
                    lines += 1
                    longest = max(longest, len(line))
                    dst.write(line)
    return {"lines": lines, "longest_line": longest}


def make_gzip(src: Path, out: Path) -> dict:
    """The one file gzipped at level 1 (what a log shipper's rotation gives)."""
    with open(src, "rb") as fin, gzip_module.open(out, "wb", compresslevel=1) as fout:
        shutil.copyfileobj(fin, fout, 8 * MB)
    return {}


def _dates(s3: Path) -> list[str]:
    """The day folders of the week plus the day after (records near midnight spill)."""
    from datetime import date, timedelta

    days = sorted(p.name for p in s3.iterdir() if p.is_dir())
    last = date.fromisoformat(days[-1]) + timedelta(days=1)
    return days + [last.isoformat()]


def _shift_script(dates: list[str], days: int, suffix: str) -> str:
    """A sed script shifting every date by ``days`` and suffixing session and request ids.

    Dates are replaced latest first, so a shifted date is never shifted again.
    """
    from datetime import date, timedelta

    subs = [f"s/{d}/{(date.fromisoformat(d) + timedelta(days=days)).isoformat()}/g"
            for d in sorted(dates, reverse=True)]
    for key in ("session_id", "request_id"):
        subs.append(f's/"{key}": "([^"]*)"/"{key}": "\\1{suffix}"/g')
    return "\n".join(subs) + "\n"


def _sed(script: str, src: Path, dst, pre: list[str] | None = None) -> None:
    """``[grep ... |] sed -E`` of ``src`` into the open file ``dst`` (LC_ALL=C: bytes)."""
    env = {**os.environ, "LC_ALL": "C"}
    with tempfile.NamedTemporaryFile("w", suffix=".sed", delete=False) as f:
        f.write(script)
    try:
        if pre:
            grep = subprocess.Popen([*pre, str(src)], stdout=subprocess.PIPE, env=env)
            subprocess.run(["sed", "-E", "-f", f.name], stdin=grep.stdout, stdout=dst, env=env, check=True)
            grep.stdout.close()
            if grep.wait() not in (0, 1):
                raise RuntimeError("grep failed")
        else:
            subprocess.run(["sed", "-E", "-f", f.name, str(src)], stdout=dst, env=env, check=True)
    finally:
        os.unlink(f.name)


def make_three_weeks(s3: Path, one: Path, out: Path) -> dict:
    """Three weeks in one file: the week, then it shifted by +7 and by +14 days."""
    dates = _dates(s3)
    with open(out, "wb") as dst:
        with open(one, "rb") as src:
            shutil.copyfileobj(src, dst, 8 * MB)
        dst.flush()
        for days, suffix in ((7, "-w2"), (14, "-w3")):
            _sed(_shift_script(dates, days, suffix), one, dst)
            dst.flush()
    return {}


def make_extra_day(s3: Path, one: Path, out: Path) -> dict:
    """The week's first day shifted by +21 days: a new day for a month-sized database."""
    dates = _dates(s3)
    with open(out, "wb") as dst:
        _sed(_shift_script(dates[:1], 21, "-w4"), one, dst,
             pre=["grep", "-F", f'"timestamp": "{dates[0]}T'])
    return {}


def _lines(path: Path) -> int:
    """Newlines in ``path``, counted in blocks."""
    with open(path, "rb") as f:
        return sum(block.count(b"\n") for block in iter(lambda: f.read(8 * MB), b""))


def generate(base: Path, sessions: int) -> dict:
    """Write (or reuse) every form of the week under ``base/week-<sessions>``; return their facts."""
    week = base / f"week-{sessions}"
    week.mkdir(parents=True, exist_ok=True)
    s3, one = week / "s3", week / "week.jsonl"
    forms = {"s3": s3, "one": one, "gzip": week / "week.jsonl.gz",
             "three": week / "week3x.jsonl", "day": week / "day.jsonl"}
    steps = {
        "s3": lambda: make_chunks(s3, sessions),
        "one": lambda: make_one_file(s3, one),
        "gzip": lambda: make_gzip(one, forms["gzip"]),
        "three": lambda: make_three_weeks(s3, one, forms["three"]),
        "day": lambda: make_extra_day(s3, one, forms["day"]),
    }
    facts: dict = {"sessions": sessions, "dir": str(week)}
    for name, make in steps.items():
        say(f"input: {name}")
        facts[name] = _cached(forms[name], make)
        path = forms[name]
        facts[name]["path"] = str(path)
        facts[name]["bytes"] = (sum(p.stat().st_size for p in _chunk_files(path)) if path.is_dir()
                                else path.stat().st_size)
    for name in ("three", "day"):
        if "lines" not in facts[name]:
            facts[name]["lines"] = _lines(forms[name])
            _done(forms[name]).write_text(json.dumps({k: v for k, v in facts[name].items()
                                                      if k not in ("reused", "path", "bytes")}))
    return facts


# ---------------------------------------------------------------------------
# Measuring a child process


def measure(argv: list[str], cwd: Path, env_extra: dict | None = None) -> dict:
    """Run ``python argv`` in ``cwd``; return wall seconds, its peak RSS (MB) and stdout.

    ``cwd`` is outside every source tree, so ``-m analyzer`` imports the analyzer
    that PYTHONPATH names (Python puts the working directory first on ``sys.path``).
    """
    # As a user runs it: an installed package has its bytecode compiled (a shell with
    # PYTHONDONTWRITEBYTECODE set would recompile every module on every start).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | (env_extra or {})
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=err, cwd=cwd, env=env)
        out = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS (Linux: KB)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            tail = err.read()[-1500:].decode(errors="replace")
            raise RuntimeError(f"`{' '.join(argv[:3])} ...` exited {proc.returncode}: {tail}")
    # CPU seconds (user + system, all threads): steadier than wall on a shared machine.
    return {"wall_s": wall, "rss_mb": usage.ru_maxrss / 1024, "cpu_s": usage.ru_utime + usage.ru_stime,
            "stdout": out.decode()}


def warm(paths: list[str]) -> None:
    """Read every file under ``paths`` once, untimed, so that a row reads them from the page cache.

    As the floor's first read does for it: on a virtual machine the page cache is
    dropped at times (seen: a 3.7 GB input read from disk in 7.6 s, from the
    cache in 0.3 s), and a row that met a cold cache would count the disk's time.
    """
    buf = bytearray(4 * MB)
    for path in paths:
        files = [path] if not os.path.isdir(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
        for name in files:
            with open(name, "rb", buffering=0) as f:
                while f.readinto(buf):
                    pass


def analyze(inputs: list[str], db: Path, cwd: Path, env_extra: dict | None = None,
            entry: list[str] | None = None) -> dict:
    """`analyze INPUTS --db DB --json` as a user runs it (its inputs :func:`warm`): wall, peak RSS, what it stored."""
    warm(inputs)
    run = measure([*(entry or ENTRY), *inputs, "--db", str(db), "--json"], cwd, env_extra)
    summary = json.loads(run.pop("stdout"))
    ingest = summary.get("ingest", {})
    return {**run, "new_records": ingest.get("new_records"), "files_ingested": ingest.get("files_ingested"),
            "files_unchanged": ingest.get("files_unchanged"), "turns": summary.get("turns"),
            "quarantined": summary.get("quarantined_lines"),
            "db_mb": db.stat().st_size / MB if db.exists() else None}


def child(name: str, *args: str, cwd: Path) -> dict:
    """Run one of this script's ``--child`` measurements in a fresh process."""
    run = measure([str(Path(__file__).resolve()), "--child", name, *args], cwd)
    return {**json.loads(run.pop("stdout")), **run}


def fresh(path: Path) -> Path:
    """``path`` with any database (and WAL) left there removed."""
    for p in (path, Path(str(path) + ".wal"), Path(str(path) + ".rerun")):  # .rerun: older analyzers' record
        p.unlink(missing_ok=True)
    return path


# ---------------------------------------------------------------------------
# What the children measure (run with --child NAME)


def child_floor(path: str, glob: str, max_object: str) -> dict:
    """DuckDB alone: read_ndjson of the classifier's fields, aggregated; best of two."""
    import duckdb

    con = duckdb.connect()
    cols = ", ".join(f"'{k}': '{v}'" for k, v in FLOOR_COLUMNS.items())
    out = {}
    for label, source in (("one_file_s", path), ("chunks_s", glob)):
        sql = f"""
            SELECT type, count(*), count(error), count(*) FILTER (WHERE NOT has_content AND NOT has_tool_calls),
                   count(DISTINCT request_id), count(DISTINCT session_id), sum(tokens.completion_tokens)
            FROM read_ndjson(?, columns = {{{cols}}}, ignore_errors = true, maximum_object_size = {int(max_object)})
            GROUP BY type ORDER BY type
        """
        best = float("inf")
        for _ in range(2):  # the first also warms the page cache
            t = time.perf_counter()
            rows = con.execute(sql, [source]).fetchall()
            best = min(best, time.perf_counter() - t)
        out[label] = best
        out[label.replace("_s", "_rows")] = sum(r[1] for r in rows)
    return out


def child_store(path: str, db: str, max_line: str) -> dict:
    """DuckDB alone: one INSERT ... SELECT of the typed hot columns plus the raw line (zstd).

    Lines come from DuckDB's CSV reader (one VARCHAR column, a delimiter JSON never
    holds), into a fresh database file at DuckDB's default memory limit, then CHECKPOINT.
    """
    import duckdb

    try:
        from analyzer.store.record_sql import HOT_COLUMNS, RECORD_STRUCT
    except ImportError:  # a tree from before the batch SQL had a module of its own
        from analyzer.ingestion import _HOT_COLUMNS as HOT_COLUMNS, RECORD_STRUCT

    struct = json.dumps(RECORD_STRUCT).replace("'", "''")
    source = f"""
        SELECT {HOT_COLUMNS}, line AS raw
        FROM (SELECT line, j, try_cast(j.timestamp AS TIMESTAMPTZ)::TIMESTAMP AS ts
              FROM (SELECT line, try(json_transform(line, '{struct}')) AS j
                    FROM read_csv(?, columns = {{'line': 'VARCHAR'}}, header = false, delim = '\x01',
                                  quote = '', escape = '', auto_detect = false,
                                  max_line_size = {int(max_line)})))
    """
    con = duckdb.connect(db)
    con.execute("SET TimeZone = 'UTC'")  # as analyzer.store.db.connect: the TIMESTAMPTZ cast is UTC
    columns = con.execute(f"DESCRIBE {source}", [path]).fetchall()
    ddl = ", ".join(f'"{c[0]}" {c[1]}' for c in columns if c[0] != "raw")
    con.execute(f"CREATE TABLE store ({ddl}, raw VARCHAR USING COMPRESSION zstd)")
    t = time.perf_counter()
    con.execute(f"INSERT INTO store {source}", [path])
    con.execute("CHECKPOINT")
    seconds = time.perf_counter() - t
    rows = con.execute("SELECT count(*) FROM store").fetchall()[0][0]
    con.close()
    return {"store_s": seconds, "rows": rows, "db_mb": os.path.getsize(db) / MB}


def child_stdlib(path: str) -> dict:
    """What an operator writes by hand: json.loads every line, pair requests and responses."""
    t = time.perf_counter()
    requests: dict[str, dict] = {}
    tally: Counter = Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                tally["bad lines"] += 1
                continue
            kind = rec.get("type")
            if kind == "request":
                requests[rec.get("request_id")] = rec
            elif kind == "response":
                req = requests.pop(rec.get("request_id"), None)
                tally["turns"] += 1
                if req is None:
                    tally["orphan responses"] += 1
                if rec.get("error"):
                    tally["errors"] += 1
                    if str(rec["error"]).startswith("Provider returned 5") and req and req.get("tool_results_this_turn"):
                        tally["5xx with tool results"] += 1
                elif not rec.get("has_content") and not rec.get("has_tool_calls"):
                    tally["empty answers"] += 1
    tally["unanswered"] = len(requests)
    return {"loop_s": time.perf_counter() - t, "tally": dict(tally)}


def child_phases(path: str, db: str) -> dict:
    """`analyze`'s phases in one process on a fresh database: ingest, classify, summary."""
    from analyzer.store.db import connect
    from analyzer.ingestion.logs import ingest
    from analyzer.outputs.summary import build_summary
    from analyzer.classification.turns import refresh_turns

    try:  # the connection `analyze` ingests with
        from analyzer.store.db import INGEST_ROW_GROUP_ROWS

        opened = {"row_groups": INGEST_ROW_GROUP_ROWS}
    except ImportError:  # a tree from before the ingest's row groups
        opened = {}
    out = {}
    t = time.perf_counter()
    con = connect(db, **opened)
    out["connect_s"] = time.perf_counter() - t
    t = time.perf_counter()
    report = ingest(con, [path])
    out["ingest_s"] = time.perf_counter() - t
    t = time.perf_counter()
    refresh_turns(con)
    out["classify_s"] = time.perf_counter() - t
    t = time.perf_counter()
    summary = build_summary(con)
    out["summary_s"] = time.perf_counter() - t
    con.close()
    out.update(new_records=report.new_records, turns=summary.get("turns"))
    return out


CHILDREN = {"floor": child_floor, "store": child_store, "stdlib": child_stdlib, "phases": child_phases}


# ---------------------------------------------------------------------------
# The rows (run in the parent; each measures children)


class Bench:
    """One run: the inputs, a scratch folder for databases, and the figures so far."""

    def __init__(self, facts: dict, run_dir: Path, quick: bool):
        self.facts = facts
        self.run = run_dir
        self.quick = quick
        self.rows: dict[str, dict] = {}
        self.one = facts["one"]["path"]
        self.s3 = facts["s3"]["path"]
        self.max_line = line_bound(Path(self.one))

    def floor(self) -> dict:
        """DuckDB alone reading and aggregating the one file, then the chunk glob."""
        return child("floor", self.one, str(Path(self.s3) / "*" / "*.jsonl"), str(self.max_line), cwd=self.run)

    def store(self) -> dict:
        """DuckDB alone storing typed columns plus the raw line, one INSERT, on the one file."""
        warm([self.one])
        return child("store", self.one, str(fresh(self.run / "store.duckdb")), str(self.max_line), cwd=self.run)

    def stdlib(self) -> dict:
        """The stdlib json.loads loop on the one file."""
        warm([self.one])
        return child("stdlib", self.one, cwd=self.run)

    def analyze_one(self) -> dict:
        """`analyze week.jsonl` into a fresh database (kept for the report row)."""
        return analyze([self.one], fresh(self.run / "one.duckdb"), self.run)

    def analyze_one_store(self) -> dict:
        """`analyze week.jsonl` with one batch stored at a time (ANALYZER_STORES=1)."""
        out = analyze([self.one], fresh(self.run / "one-store.duckdb"), self.run, ONE_STORE)
        fresh(self.run / "one-store.duckdb")
        return out

    def analyze_chunks(self) -> dict:
        """`analyze s3/` (the chunk folder) into a fresh database (kept for the no-op row)."""
        return analyze([self.s3], fresh(self.run / "chunks.duckdb"), self.run)

    def analyze_gzip(self) -> dict:
        """`analyze week.jsonl.gz` into a fresh database."""
        out = analyze([self.facts["gzip"]["path"]], fresh(self.run / "gzip.duckdb"), self.run)
        fresh(self.run / "gzip.duckdb")
        return out

    def analyze_3x(self) -> dict:
        """`analyze week3x.jsonl` (three weeks, one file) into a fresh database (kept)."""
        return analyze([self.facts["three"]["path"]], fresh(self.run / "three.duckdb"), self.run)

    def phases(self) -> dict:
        """Where `analyze week.jsonl`'s time goes, in-process on a fresh database."""
        warm([self.one])
        out = child("phases", self.one, str(fresh(self.run / "phases.duckdb")), cwd=self.run)
        fresh(self.run / "phases.duckdb")
        return out

    def incremental(self) -> dict:
        """The extra day into an empty database, then into the 3x database."""
        day = self.facts["day"]["path"]
        empty = analyze([day], fresh(self.run / "day.duckdb"), self.run)
        fresh(self.run / "day.duckdb")
        warm([str(self.run / "three.duckdb")])  # the database the day goes into, as the day itself
        month = analyze([day], self.run / "three.duckdb", self.run)
        return {"empty": empty, "into_3x": month, "ratio": month["wall_s"] / empty["wall_s"]}

    def noop(self) -> dict:
        """`analyze s3/` again on its own database, three times: nothing new to read.

        The first re-run follows the ingest of `analyze-chunks`, as a scheduler's
        does. The figure is the slowest of the three; beside it, `analyze --help`
        alone (the interpreter, typer and the commands' modules).
        """
        db = self.run / "chunks.duckdb"
        runs = [analyze([self.s3], db, self.run) for _ in range(3)]
        out = max(runs, key=lambda r: r["wall_s"])
        out["runs_s"] = [r["wall_s"] for r in runs]
        out["startup_s"] = measure([*ENTRY, "--help"], self.run)["wall_s"]
        return out

    def report(self) -> dict:
        """`analyze report` from the one-file database."""
        warm([str(self.run / "one.duckdb")])
        run = measure([*ENTRY, "report", "--db", str(self.run / "one.duckdb"),
                       "-o", str(self.run / "report.html")], self.run)
        run.pop("stdout")
        run["html_mb"] = (self.run / "report.html").stat().st_size / MB
        run["turns"] = self.rows.get("analyze-one", {}).get("turns")
        return run

    def metrics(self) -> dict:
        """benchmarks/metrics.py's run(), when another branch has put it here."""
        path = HERE / "metrics.py"
        if not path.exists():
            return {"absent": "benchmarks/metrics.py not present"}
        spec = importlib.util.spec_from_file_location("bench_metrics", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        if not callable(getattr(module, "run", None)):
            return {"absent": "benchmarks/metrics.py has no run()"}
        params = inspect.signature(module.run).parameters
        kwargs = {}
        if "data_dir" in params:
            kwargs["data_dir"] = Path(self.facts["dir"]).parent / "metrics"
        if "scrape_bytes" in params and self.quick:
            kwargs["scrape_bytes"] = 100 * MB
        with tempfile.TemporaryDirectory(dir=self.run) as tmp:
            rows = module.run(tmp, **kwargs)
        out = {"rows": [{"label": r[0], "seconds": r[1], "rss_mb": r[2] / MB} for r in rows]}
        plain = [r for r in out["rows"] if "no metrics" in r["label"]]
        loaded = [r for r in out["rows"] if "--metrics" in r["label"]]
        if plain and loaded:
            out["extra_s"] = loaded[0]["seconds"] - plain[0]["seconds"]
        return out

    def run_rows(self, names: list[str]) -> None:
        """Run the chosen rows in order; a failing row is recorded, the others still run."""
        for name in names:
            say(f"row: {name}")
            need = NEEDS.get(name)
            if need and "error" in self.rows.get(need, {}):
                self.rows[name] = {"error": f"not run: it needs the database of {need}, which failed"}
                continue
            try:
                self.rows[name] = getattr(self, name.replace("-", "_"))()
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - metrics.py exits on a failed child: report it, go on
                self.rows[name] = {"error": f"{type(exc).__name__}: {exc}"}


# ---------------------------------------------------------------------------
# Targets and printing


def _get(rows: dict, *keys):
    """``rows[k1][k2]...`` or None when a row did not run or failed."""
    value = rows
    for k in keys:
        if not isinstance(value, dict) or k not in value:
            return None
        value = value[k]
    return value


def targets(rows: dict) -> list[dict]:
    """The speed and memory targets, each with this run's figure and whether it is met."""
    def ratio(a, b):
        return a / b if a is not None and b else None

    one, store = _get(rows, "analyze-one", "wall_s"), _get(rows, "store", "store_s")
    chunks, floor = _get(rows, "analyze-chunks", "wall_s"), _get(rows, "floor", "chunks_s")
    rss = {name: rows[name]["rss_mb"] for name in ("analyze-one", "analyze-one-store", "analyze-chunks", "analyze-gzip",
                                                   "analyze-3x")
           if _get(rows, name, "rss_mb") is not None}
    for key in ("empty", "into_3x"):
        if _get(rows, "incremental", key, "rss_mb") is not None:
            rss[f"incremental {key}"] = rows["incremental"][key]["rss_mb"]
    for name in ("noop", "report"):
        if _get(rows, name, "rss_mb") is not None:
            rss[name] = rows[name]["rss_mb"]
    for m in _get(rows, "metrics", "rows") or []:
        if m["label"].startswith("analyze"):
            rss[f"metrics: {m['label']}"] = m["rss_mb"]
    worst = max(rss, key=rss.get) if rss else None
    out = [
        {"target": "analyze / store, one file", "figure": ratio(one, store), "unit": "x", "limit": 2.0,
         "note": "goal 1.3"},
        {"target": "analyze / floor, chunks", "figure": ratio(chunks, floor), "unit": "x", "limit": 3.0},
        {"target": "no-op re-run, chunks", "figure": _get(rows, "noop", "wall_s"), "unit": "s", "limit": 1.0,
         "strict": True, "note": "slowest of 3, the first just after the ingest"},
        {"target": "analyze --help", "figure": _get(rows, "noop", "startup_s"), "unit": "s", "limit": 0.3,
         "strict": True, "note": "the interpreter, typer and the commands' modules"},
        {"target": "peak RSS, every analyze run", "figure": rss[worst] if worst else None, "unit": "MB",
         "limit": GB_RSS, "note": f"worst: {worst}" if worst else ""},
        {"target": "day into 3x db / into empty db", "figure": _get(rows, "incremental", "ratio"), "unit": "x",
         "limit": 2.0},
        {"target": "report render", "figure": _get(rows, "report", "wall_s"), "unit": "s", "limit": 30.0,
         "strict": True, "note": f"{rows['report']['turns']:,} turns" if _get(rows, "report", "turns") else ""},
        {"target": "metrics, extra seconds", "figure": _get(rows, "metrics", "extra_s"), "unit": "s", "limit": 3.0,
         "strict": True},
    ]
    for t in out:
        f = t["figure"]
        t["verdict"] = ("n/a" if f is None else
                        "PASS" if (f < t["limit"] if t.get("strict") else f <= t["limit"]) else "MISS")
    return out


def _analyzer_identity() -> dict:
    """Which analyzer the children import (PYTHONPATH decides) and its git commit."""
    code = "import analyzer, os; print(os.path.dirname(os.path.abspath(analyzer.__file__)))"
    where = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=tempfile.gettempdir()).stdout.strip()
    head = subprocess.run(["git", "-C", where, "log", "-1", "--format=%h %s"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", where, "status", "--porcelain", "--", ".."], capture_output=True,
                           text=True).stdout.strip()
    head = head or "not a git checkout"
    import duckdb

    return {"path": where, "commit": head + (" (+ uncommitted changes)" if dirty else ""),
            "duckdb": duckdb.__version__, "python": platform.python_version(), "cpus": os.cpu_count()}


def _s(x) -> str:
    """Seconds in a fixed width (a dash when missing)."""
    return "      -" if x is None else f"{x:7.2f}"


def _mb(x) -> str:
    """Megabytes in a fixed width (blank when missing)."""
    return "" if x is None else f"{x:7,.0f} MB"


def print_text(ident: dict, facts: dict, rows: dict, checks: list[dict]) -> None:
    """The human-readable report of one run."""
    p = print
    p(f"analyzer under test: {ident['path']}  [{ident['commit']}], run as `{ident.get('entry', 'python -m analyzer')}`")
    if "changed_during_run" in ident:
        p(f"WARNING: the analyzer changed during the run, to [{ident['changed_during_run']}]: "
          "rows ran on different versions")
    p(f"duckdb {ident['duckdb']}, python {ident['python']}, {ident['cpus']} cpus (shared)")
    s3, one = facts["s3"], facts["one"]
    p(f"input ({facts['dir']}): simulate_week(seed={SEED}, sessions={facts['sessions']:,})")
    p(f"  S3 chunks   {s3['files']:>7,} files  {s3['bytes'] / 1e9:6.2f} GB  {s3['records']:>10,} records")
    p(f"  one file    {1:>7,} file   {one['bytes'] / 1e9:6.2f} GB  {one['lines']:>10,} lines, "
      f"longest {one['longest_line'] / 1024:,.0f} KB")
    p(f"  gzip -1     {1:>7,} file   {facts['gzip']['bytes'] / 1e9:6.2f} GB")
    p(f"  3x file     {1:>7,} file   {facts['three']['bytes'] / 1e9:6.2f} GB  {facts['three']['lines']:>10,} lines")
    p(f"  extra day   {1:>7,} file   {facts['day']['bytes'] / 1e9:6.2f} GB  {facts['day']['lines']:>10,} lines")
    made = {k: facts[k].get("generated_s") for k in ("s3", "one", "gzip", "three", "day")}
    p("  generation: " + ", ".join(f"{k} {'reused' if facts[k]['reused'] else f'{v:.0f} s'}"
                                   for k, v in made.items()))
    p()
    p(f"{'row':52} {'seconds':>7} {'peak RSS':>10}")

    def line(label, seconds, rss=None, extra=""):
        p(f"{label:52} {_s(seconds)} {_mb(rss):>10}  {extra}".rstrip())

    def failed(name):
        if "error" in rows.get(name, {}):
            first = rows[name]["error"].strip().splitlines()[0]  # the whole text is in --json
            p(f"{name:52} FAILED: {first[:300]}")
            return True
        return name not in rows

    if not failed("floor"):
        r = rows["floor"]
        line("floor: DuckDB read_ndjson + aggregate, one file", r["one_file_s"], None, "best of 2")
        line("floor: DuckDB read_ndjson + aggregate, chunk glob", r["chunks_s"], r["rss_mb"],
             f"best of 2; {r['cpu_s']:.1f} CPU-s for all four reads")
    if not failed("store"):
        r = rows["store"]
        line("store: INSERT..SELECT typed + raw zstd, CHECKPOINT", r["store_s"], r["rss_mb"],
             f"{r['rows']:,} rows, {r['db_mb']:,.0f} MB db")
    if not failed("stdlib"):
        r = rows["stdlib"]
        line("stdlib json.loads loop pairing, one file", r["loop_s"], r["rss_mb"],
             f"{r['tally'].get('turns', 0):,} turns")
    for name, label in (("analyze-one", "one file"), ("analyze-chunks", "chunk folder"),
                        ("analyze-gzip", "gzip file"), ("analyze-3x", "3x file")):
        if not failed(name):
            r = rows[name]
            line(f"analyze end to end, {label}", r["wall_s"], r["rss_mb"],
                 f"{r['cpu_s']:.1f} CPU-s, {r['new_records'] or 0:,} records, {r['turns'] or 0:,} turns, "
                 f"{r['quarantined'] or 0:,} quarantined, {r['db_mb'] or 0:,.0f} MB db")
        if name == "analyze-one" and not failed("analyze-one-store"):
            r = rows["analyze-one-store"]
            line("  the same, one store (ANALYZER_STORES=1)", r["wall_s"], r["rss_mb"],
                 f"{r['cpu_s']:.1f} CPU-s, {r['new_records'] or 0:,} records, {r['turns'] or 0:,} turns")
    if not failed("phases"):
        r = rows["phases"]
        line("phases (in-process, one file): ingest", r["ingest_s"], r["rss_mb"], "RSS: the whole process")
        line("phases: classify (refresh_turns)", r["classify_s"])
        line("phases: summary (build_summary)", r["summary_s"])
        line("phases: connect + migrations", r["connect_s"])
    if not failed("incremental"):
        r = rows["incremental"]
        line("incremental: extra day into an empty db", r["empty"]["wall_s"], r["empty"]["rss_mb"],
             f"{r['empty']['new_records'] or 0:,} records")
        line("incremental: extra day into the 3x db", r["into_3x"]["wall_s"], r["into_3x"]["rss_mb"],
             f"ratio {r['ratio']:.2f}x, {r['into_3x']['turns'] or 0:,} turns in the db")
    if not failed("noop"):
        r = rows["noop"]
        line("no-op re-run, chunk folder", r["wall_s"], r["rss_mb"],
             f"slowest of 3 ({', '.join(f'{x:.2f}' for x in r['runs_s'])} s), {r['cpu_s']:.2f} CPU-s, "
             f"{r['files_unchanged'] or 0:,} files unchanged; `analyze --help` alone {r['startup_s']:.2f} s")
    if not failed("report"):
        r = rows["report"]
        line("report render (analyze report), one-file db", r["wall_s"], r["rss_mb"],
             f"{r['turns'] or 0:,} turns, {r['html_mb']:.1f} MB html")
    if not failed("metrics"):
        r = rows["metrics"]
        if "absent" in r:
            p(f"metrics: {r['absent']}")
        else:
            for m in r["rows"]:
                line(f"metrics: {m['label']}"[:52], m["seconds"], m["rss_mb"])
    p()
    p("targets (figures from this run)")
    for t in checks:
        fig = "      -" if t["figure"] is None else (f"{t['figure']:7,.0f}" if t["unit"] == "MB" else f"{t['figure']:7.2f}")
        op = "<" if t.get("strict") else "<="
        limit = f"{t['limit']:,.0f}" if t["unit"] == "MB" else f"{t['limit']:g}"
        p(f"  {t['target']:36} {fig} {t['unit']:2}  {op} {limit:>5} {t['unit']:2}  {t['verdict']:4}  {t.get('note', '')}"
          .rstrip())


def parse_rows(text: str | None) -> list[str]:
    """The rows to run, in run order, with the rows they need."""
    if not text:
        return list(ROWS)
    wanted = {r.strip() for r in text.split(",") if r.strip()}
    unknown = wanted - set(ROWS)
    if unknown:
        raise SystemExit(f"unknown row(s): {', '.join(sorted(unknown))}; choose from {', '.join(ROWS)}")
    wanted |= {NEEDS[r] for r in wanted if r in NEEDS}
    return [r for r in ROWS if r in wanted]


def main() -> None:
    """Generate (or reuse) the inputs, run the rows, print figures and targets."""
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(CHILDREN[sys.argv[2]](*sys.argv[3:])))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=BENCH_DIR,
                    help="where the generated inputs are kept and reused (default: %(default)s)")
    ap.add_argument("--sessions", type=int, help=f"sessions to simulate (default {FULL_SESSIONS:,}; "
                                                 f"--quick: {QUICK_SESSIONS:,})")
    ap.add_argument("--quick", action="store_true", help="a ~0.1x week, for a fast sanity run")
    ap.add_argument("--rows", help=f"comma-separated subset of: {','.join(ROWS)}")
    ap.add_argument("--json", action="store_true", help="print every figure as JSON on stdout")
    opts = ap.parse_args()
    names = parse_rows(opts.rows)
    sessions = opts.sessions or (QUICK_SESSIONS if opts.quick else FULL_SESSIONS)

    ident = _analyzer_identity()
    global ENTRY
    if not os.path.exists(os.path.join(ident["path"], "__main__.py")):
        ENTRY = ["-m", "analyzer.cli"]  # an old tree: its analyzer/cli.py was the entry
    ident["entry"] = " ".join(["python", *ENTRY])
    facts = generate(opts.dir, sessions)
    run_dir = opts.dir / f"run-{os.getpid()}"
    run_dir.mkdir(parents=True)
    try:
        bench = Bench(facts, run_dir, opts.quick)
        bench.run_rows(names)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    checks = targets(bench.rows)
    after = _analyzer_identity()
    if after["commit"] != ident["commit"]:  # a tree edited mid-run gives figures of two versions
        ident["changed_during_run"] = after["commit"]
    if opts.json:
        print(json.dumps({"analyzer": ident, "input": facts, "rows": bench.rows, "targets": checks}, indent=2))
    else:
        print_text(ident, facts, bench.rows, checks)


if __name__ == "__main__":
    main()
