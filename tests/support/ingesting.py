"""Ingest into a real DuckDB file the way `analyze` does, for the ingestion tests."""

from __future__ import annotations

from pathlib import Path

from analyzer.db import connect
from analyzer.ingestion import ingest
from analyzer.turns import refresh_turns


def run(db: Path, inputs: list, **kw):
    """Ingest ``inputs`` into ``db`` and classify; return the IngestReport."""
    con = connect(db)
    try:
        report = ingest(con, [str(i) for i in inputs], **kw)
        refresh_turns(con)
        return report
    finally:
        con.close()
