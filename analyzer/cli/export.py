"""``analyze export --parquet DIR``: the classified turns as Parquet partitioned by day."""

from __future__ import annotations

from pathlib import Path

from analyzer.cli.options import naming
from analyzer.cli.terminal import print_export_report
from analyzer.outputs.export import export_parquet
from analyzer.store.db import connect


def export_command(out_dir: str | Path, db: str | Path | None = None):
    """Export from the database (opened read-only) and print a one-line summary; return the
    :class:`analyzer.outputs.export.ExportReport`."""
    con = connect(db, read_only=True)
    try:
        with naming(out_dir="--parquet"):
            report = export_parquet(con, out_dir)
    finally:
        con.close()
    print_export_report(report)
    return report
