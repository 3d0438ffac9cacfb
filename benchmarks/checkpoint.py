"""What one small write costs on a database `analyze` wrote: by the analyzer's command, and by a plain DuckDB open.

The ingest writes row groups of 61,440 rows (``analyzer.store.db.INGEST_ROW_GROUP_ROWS``);
DuckDB's own size is 122,880, and its checkpoint merges adjacent row groups that fit
in fewer of the size its connection writes. This script analyzes the S3 chunk folder
that ``benchmarks/ingest.py`` generates into a scratch database (once), then writes
one row into a fresh copy of it three ways, each in a fresh process:

- ``analyze sql "CREATE TABLE notes AS SELECT 1 AS x" --write --db COPY``;
- the same statement through ``analyzer.connect(COPY)`` (a notebook's connection),
  then ``close()`` (the checkpoint);
- the same through a plain ``duckdb.connect(COPY)`` (DuckDB's own memory limit).

For each it prints the wall seconds, the CPU seconds and peak RSS of that process,
the file's size before and after, and the row groups of ``records`` before and after.

    PYTHONPATH=<tree under test> python benchmarks/checkpoint.py [--dir DIR] [--sessions N] [--json]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ingest import ENTRY, MB, generated_week, measure, week_parser  # noqa: E402  (this folder's benchmark, not a package)

WRITE = "CREATE TABLE notes AS SELECT 1 AS x"
# A notebook's connection, and a plain DuckDB one.
NOTEBOOK = "import analyzer, sys; con = analyzer.connect(sys.argv[1]); con.execute(sys.argv[2]); con.close()"
PLAIN = "import duckdb, sys; con = duckdb.connect(sys.argv[1]); con.execute(sys.argv[2]); con.close()"
WAYS = ("analyze sql --write", "analyzer.connect + close", "duckdb.connect + close")


def _row_groups(db: Path) -> int:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('records')").fetchall()[0][0]
    finally:
        con.close()


def run(s3: Path, scratch: Path) -> dict:
    """The analyzed database, then the write each way (:data:`WAYS`) on a copy of it."""
    base = scratch / "week.duckdb"
    analyzed = measure([*ENTRY, str(s3), "--db", str(base), "--json"], scratch)
    out = {"analyze_s": analyzed["wall_s"], "mb": base.stat().st_size / MB, "row_groups": _row_groups(base)}
    ways = {"analyze sql --write": [*ENTRY, "sql", WRITE, "--write", "--db"],
            "analyzer.connect + close": ["-c", NOTEBOOK], "duckdb.connect + close": ["-c", PLAIN]}
    for name, argv in ways.items():
        copy = scratch / "copy.duckdb"
        shutil.copyfile(base, copy)
        args = [*argv, str(copy), WRITE] if argv[0] == "-c" else [*argv, str(copy)]
        m = measure(args, scratch)
        out[name] = {"wall_s": m["wall_s"], "cpu_s": m["cpu_s"], "rss_mb": m["rss_mb"],
                     "mb_after": copy.stat().st_size / MB, "row_groups_after": _row_groups(copy)}
        copy.unlink()
    return out


def main() -> None:
    """Analyze the generated chunk folder, write one row each way, print the figures."""
    opts = week_parser(__doc__).parse_args()
    s3 = generated_week(opts, "s3") / "s3"
    with tempfile.TemporaryDirectory() as scratch:  # outside the source trees: PYTHONPATH picks the analyzer
        out = run(s3, Path(scratch))
    if opts.json:
        print(json.dumps(out, indent=2))
        return
    print(f"analyze {s3}: {out['analyze_s']:.2f} s, {out['mb']:.0f} MB, records in {out['row_groups']} row groups")
    print(f"one row written ({WRITE}) into a copy of that database, then closed:")
    for name in WAYS:
        r = out[name]
        print(f"  {name:24s} {r['wall_s']:6.2f} s  {r['cpu_s']:6.2f} CPU-s  peak RSS {r['rss_mb']:5.0f} MB  "
              f"file {out['mb']:.0f} -> {r['mb_after']:.0f} MB  records {out['row_groups']} -> "
              f"{r['row_groups_after']} row groups")


if __name__ == "__main__":
    main()
