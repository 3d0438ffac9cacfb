"""The consolidated Parquet tier: one row per record, typed columns plus the original JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from tools.simulator.week import SimulatedWeek

#: The columns of a consolidated file, and of a legacy one.


PARQUET_COLUMNS = ("ts", "type", "request_id", "session_id", "origin", "client", "provider", "model", "entry")
LEGACY_PARQUET_COLUMNS = ("ts", "type", "request_id", "origin", "entry")


def write_consolidated_parquet(
    records: SimulatedWeek | Iterable[dict],
    path: str | os.PathLike,
    legacy: bool = False,
) -> int:
    """Write records as one consolidated-tier Parquet file (zstd), ordered by ``ts``.

    Columns ``ts`` (TIMESTAMPTZ), ``type``, ``request_id``, ``session_id``,
    ``origin``, ``client``, ``provider``, ``model`` and ``entry`` (the original JSON
    line, verbatim); a ``legacy`` file has only ``ts, type, request_id, origin,
    entry``. Records stream through a temporary JSONL file next to ``path``, so
    memory stays flat. Uses DuckDB (imported here only).

    Returns:
        The number of rows written.
    """
    import duckdb  # only this writer needs it

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.jsonl")
    source = records.records() if isinstance(records, SimulatedWeek) else records
    n = 0
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for rec in source:
            f.write(json.dumps(rec) + "\n")
            n += 1
    cols = LEGACY_PARQUET_COLUMNS if legacy else PARQUET_COLUMNS
    exprs = {
        "ts": "CAST(json ->> 'timestamp' AS TIMESTAMPTZ) AS ts",
        "entry": "CAST(json AS VARCHAR) AS entry",
    }
    select = ", ".join(exprs.get(c, f"json ->> '{c}' AS {c}") for c in cols)
    try:
        con = duckdb.connect()
        con.execute("SET threads = 1")  # one writer thread: deterministic bytes
        con.execute("SET TimeZone = 'UTC'")
        if path.exists():
            path.unlink()
        src = str(tmp).replace("'", "''")
        dst = str(path).replace("'", "''")
        con.execute(
            f"COPY (SELECT {select} FROM read_ndjson_objects('{src}') ORDER BY ts) "
            f"TO '{dst}' (FORMAT parquet, COMPRESSION zstd)"
        )
        con.close()
    finally:
        tmp.unlink(missing_ok=True)
    return n
