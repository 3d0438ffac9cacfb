"""``analyze export``: the classified turns (``--parquet DIR``) or the whole lake (``--lake DIR``) as Parquet."""

from __future__ import annotations

from pathlib import Path

from analyzer.cli.options import naming
from analyzer.cli.terminal import print_export_report, print_json, print_lake_report
from analyzer.core.errors import AnalyzerError, ExitCode
from analyzer.outputs.export import export_parquet
from analyzer.outputs.lake import export_lake
from analyzer.store.db import connect


def export_command(out_dir: str | Path | None, db: str | Path | None = None, *, lake: str | Path | None = None,
                   json_out: bool = False):
    """Export from the database (opened read-only) and print a one-line summary (or JSON); return the report
    (:class:`analyzer.outputs.export.ExportReport` or :class:`analyzer.outputs.lake.LakeReport`)."""
    if (out_dir is None) == (lake is None):
        raise AnalyzerError("give one of --parquet DIR (the turns) or --lake DIR (every relation)", ExitCode.USAGE)
    con = connect(db, read_only=True)
    try:
        if lake is not None:
            with naming(out_dir="--lake"):
                report = export_lake(con, lake)
        else:
            with naming(out_dir="--parquet"):
                report = export_parquet(con, out_dir)
    finally:
        con.close()
    if json_out:
        print_json(report.to_dict())
    elif lake is not None:
        print_lake_report(report)
    else:
        print_export_report(report)
    return report
