"""Two lakes compared relation for relation: the same columns with the same types, the same rows.

A lake built on Spark (``analyze lake build``) and one exported from a database
(``analyze export --lake``) hold the same relations; what differs by nature is
when and by which run each was made (:data:`RUN_COLUMNS`), never what the logs
say. Rows are compared as multisets, every value as DuckDB reads it from the
files (JSON columns parsed).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import duckdb

from analyzer.store.lake import read_manifest
from analyzer.store.lake_files import verify_relation

#: Columns that say when (or in which of DuckDB's ingest batches) a run wrote a row: another run,
#: another value (a lake built on Spark has no ingest batches: NULL).
RUN_COLUMNS = {
    "_migrations": {"applied_at"},
    "settings": {"set_at"},
    "source_files": {"ingested_at"},
    "skipped_files": {"seen_at"},
    "records": {"ingest_batch"},
}


def relation_rows(lake: Path, table: str) -> tuple[list[tuple[str, str]], list[tuple]]:
    """The manifest's columns of ``table`` and its rows, read from the files the manifest lists (checked)."""
    doc = read_manifest(lake)
    entry = doc["tables"][table]
    files = verify_relation(lake, table, entry)
    con = duckdb.connect()
    try:
        cols = [tuple(c) for c in entry["columns"]]
        rows = con.execute("SELECT * FROM read_parquet(?, hive_partitioning = false)", [files]).fetchall()
        got = [(d[0], str(d[1])) for d in con.execute(
            "DESCRIBE SELECT * FROM read_parquet(?, hive_partitioning = false)", [files]).fetchall()]
    finally:
        con.close()
    want = [(c, "VARCHAR" if t == "JSON" else t) for c, t in cols]
    assert got == want, f"{lake} {table}: the files hold {got}, the manifest says {want}"
    return cols, rows


def _value(v, is_json: bool):
    if is_json and isinstance(v, str):
        return json.dumps(json.loads(v), sort_keys=True)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, list):
        return tuple(v)
    return v


def lake_differences(a: Path, b: Path, *, skip: dict[str, set[str]] | None = None) -> dict[str, str]:
    """``{relation: what differs first}`` between the lakes ``a`` and ``b`` (empty: the same).

    Each relation's columns and types must be the same in both manifests and
    files; its rows the same multiset, leaving out the columns of ``skip``
    (default :data:`RUN_COLUMNS`).
    """
    skip = RUN_COLUMNS if skip is None else skip
    ta, tb = read_manifest(a)["tables"], read_manifest(b)["tables"]
    out = {}
    if set(ta) != set(tb):
        out["(relations)"] = f"{sorted(set(ta) ^ set(tb))} in one lake only"
    for table in sorted(set(ta) & set(tb)):
        cols_a, rows_a = relation_rows(a, table)
        cols_b, rows_b = relation_rows(b, table)
        if cols_a != cols_b:
            out[table] = f"columns {cols_a} != {cols_b}"
            continue
        if ta[table]["partition"] != tb[table]["partition"]:
            out[table] = f"partitioned by {ta[table]['partition']} in one, {tb[table]['partition']} in the other"
            continue
        left = skip.get(table, set())
        keep = [i for i, (c, _) in enumerate(cols_a) if c not in left]
        json_cols = {i for i, (_, t) in enumerate(cols_a) if t == "JSON"}

        def shape(rows):
            return Counter(tuple(_value(r[i], i in json_cols) for i in keep) for r in rows)

        ca, cb = shape(rows_a), shape(rows_b)
        if ca != cb:
            only_a, only_b = list((ca - cb).elements()), list((cb - ca).elements())
            names = [cols_a[i][0] for i in keep]
            first = only_a[0] if only_a else only_b[0]
            other = min(only_b or only_a, key=lambda r: sum(x != y for x, y in zip(r, first)))
            diff = [f"{n}: {x!r} / {y!r}" for n, x, y in zip(names, first, other) if x != y]
            out[table] = (f"{len(rows_a)} rows / {len(rows_b)}; {len(only_a)} only in the first, {len(only_b)} only "
                          f"in the second; e.g. {diff[:6]}")
    return out
