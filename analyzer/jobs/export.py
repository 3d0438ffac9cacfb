"""``analyze export --lake DIR``: the database as a Parquet lake (:mod:`analyzer.outputs.lake`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analyzer.outputs.lake import LakeReport, export_lake
from analyzer.store.db import connect
from analyzer.store.lake import check_lake_path


@dataclass(frozen=True)
class ExportOptions:
    """Where the lake goes (``lake``: a folder, new, empty or an earlier lake) and the database it is made of.

    Raises:
        AnalyzerError: (usage, ``param="out_dir"``) a lake path no engine could read back.
    """

    lake: str | Path
    db: Path | None = None

    def __post_init__(self) -> None:
        check_lake_path(self.lake, "out_dir")


def run_export(opts: ExportOptions) -> LakeReport:
    """Export the database (opened read-only: other readers may share it) to ``opts.lake``; the report."""
    con = connect(opts.db, read_only=True)
    try:
        return export_lake(con, opts.lake)
    finally:
        con.close()
