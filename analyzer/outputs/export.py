"""``analyze export --parquet DIR``: the classified turns as Parquet, partitioned by day.

The hand-off format for bigger engines (Spark, Trino, Athena, DuckDB elsewhere):
one folder per UTC day of the request time, hive style, so engines prune days by
path and infer the ``day`` column::

    DIR/day=2026-11-16/data_0.parquet
    DIR/day=2026-11-17/data_0.parquet
    DIR/_analyzer_export.json      what was exported (engines skip `_` files)

Every column of the ``turns`` view is written (names and meaning as in
docs/views.md); JSON columns (``ladder``) are written as text, which every engine reads.
Re-exporting replaces the export: the new files are written beside ``DIR`` first,
then each day folder is swapped in and days that no longer exist are removed, so
a reader never sees a half-written day. Nothing else in ``DIR`` is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from analyzer.core.errors import AnalyzerError, ExitCode

MANIFEST = "_analyzer_export.json"
PARTITION = "day"


@dataclass
class ExportReport:
    """What an export wrote."""

    path: str
    rows: int = 0
    days: list[str] = field(default_factory=list)
    files: int = 0
    removed_days: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return asdict(self)


def _turns_select(con: duckdb.DuckDBPyConnection) -> str:
    cols = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'turns' ORDER BY column_index"
    ).fetchall()
    if not cols:
        raise AnalyzerError("the database has no `turns` view; run `analyze FILES...` first", ExitCode.DATABASE)
    exprs = [f'CAST("{c}" AS VARCHAR) AS "{c}"' if t == "JSON" else f'"{c}"' for c, t in cols]
    return f"SELECT {', '.join(exprs)}, CAST(ts AS DATE) AS {PARTITION} FROM turns"


def swap_in(src: Path, dest: Path, *, trash: Path | None = None) -> None:
    """Put the folder ``src`` in the place of ``dest`` (renames on one filesystem: a reader
    sees the old folder or the new one, never a half-written one).

    The old folder is moved into ``trash`` (a folder on ``dest``'s filesystem; default:
    beside ``dest``'s parent) and removed."""
    if trash is not None:
        old = trash / f"{dest.name}-{uuid.uuid4().hex[:8]}"
    else:
        old = dest.parent.parent / f".{dest.parent.name}.old-{uuid.uuid4().hex[:8]}"
    if dest.exists():
        os.replace(dest, old)
    os.replace(src, dest)
    shutil.rmtree(old, ignore_errors=True)


def write_manifest(path: Path, doc: dict) -> None:
    """Write ``doc`` as JSON to ``path`` whole (a temporary file renamed over it): written last,
    it is what tells a reader the export is complete."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _day_dirs(d: Path) -> dict[str, Path]:
    if not d.is_dir():
        return {}
    return {p.name.split("=", 1)[1]: p for p in d.iterdir() if p.is_dir() and p.name.startswith(f"{PARTITION}=")}


def export_parquet(con: duckdb.DuckDBPyConnection, out_dir: str | Path, *, compression: str = "zstd") -> ExportReport:
    """Write the ``turns`` view to ``out_dir`` as Parquet partitioned by day (hive style).

    Idempotent: a re-export replaces every ``day=...`` folder and removes days no
    longer present. Returns an :class:`ExportReport`.

    Raises:
        AnalyzerError: ``out_dir`` is a file (``param="out_dir"``), or cannot be written.
    """
    out = Path(out_dir).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise AnalyzerError(f"out_dir {out}: exists and is not a directory", ExitCode.USAGE, param="out_dir")
    # Staged beside the target (same filesystem, so the swap is a rename), hidden
    # so no reader globbing the parent picks it up.
    staging = out.parent / f".{out.name}.staging-{uuid.uuid4().hex[:8]}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        select = _turns_select(con)
        rows = con.execute("SELECT count(*) FROM turns").fetchall()[0][0]
        if rows:
            # The relation API takes the path as a value, never pasted into SQL.
            con.sql(f"{select} ORDER BY ts, request_id").write_parquet(
                str(staging), partition_by=[PARTITION], compression=compression)
        new = _day_dirs(staging)
        old = _day_dirs(out)
        report = ExportReport(path=str(out), rows=rows, days=sorted(new))
        for day, src in sorted(new.items()):
            dest = out / src.name
            swap_in(src, dest)
            report.files += sum(1 for f in dest.iterdir() if f.suffix == ".parquet")
        for day in sorted(set(old) - set(new)):
            shutil.rmtree(old[day])
            report.removed_days.append(day)
        manifest = {
            "table": "turns",
            "partitioning": f"hive: {PARTITION}=YYYY-MM-DD (UTC day of the request time `ts`)",
            "rows": rows,
            "days": report.days,
            "columns": [r[0] for r in con.execute("DESCRIBE turns").fetchall()] + [PARTITION],
            "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        write_manifest(out / MANIFEST, manifest)
        return report
    except OSError as exc:
        raise AnalyzerError(f"cannot write the export to {out}: {exc}", ExitCode.FAILED) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def open_export(parquet_dir: str | Path) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose ``turns`` view reads an export.

    The questions of ``queries/`` that read only ``turns`` then run on the export
    as they run on the database (``analyzer.query(name, db=open_export(dir))``).
    """
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    pattern = str(Path(parquet_dir).expanduser().resolve() / "*" / "*.parquet")
    con.read_parquet(pattern, hive_partitioning=True).create_view("turns")
    return con
