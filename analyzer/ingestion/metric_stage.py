"""One input's samples in a staging table, their label sets interned, then stored once.

Every reader (DuckDB's for CSV and big text scrapes, the series walk for API JSON,
the Python parsers for the rest) fills the table ``_metric_stage`` of a scratch in-memory DuckDB (its
own connection, so a reader that gives up on a file never aborts the caller's
transaction, and it spills to a temporary directory beyond its memory limit)
with one row per sample:
its position in the input (``ord``), the metric as spelled, the labels *as the
input wrote them* (``label_key``: JSON text, ``k=v`` text, ...), time and value.
:func:`intern_labels` then parses each distinct ``label_key`` once (a week of
samples has a few hundred label sets, not 600,000) into the canonical labels and
the pod, model, instance and job they name, and :func:`store_stage` writes the
samples not yet stored with one ``INSERT ... SELECT`` over an Arrow stream of the
de-duplicated stage: each series (metric and label set) once into ``metric_series``,
its points (series number, time, value, source number) into ``metric_points``;
the view ``metric_samples`` joins them back into one row per sample.

A sample is identified by ``(metric, pod, labels, ts)``: loading the same file
twice, or the same series from two exports that overlap, stores each point once.
When two inputs disagree on the value of the same point, the first one loaded
wins (within one input, the first in input order) and the other is counted as a
duplicate: a series has one value per instant.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Callable, Iterable

import duckdb

from analyzer.core.interrupt import track
from analyzer.io.metric_samples import KEPT_SPELLINGS, Sample, canonical_name, labels_json, pod_identity, target_of
from analyzer.store.db import registered
from analyzer.store.spill import scratch_spill_dir

STAGE = "_metric_stage"
LABELS = "_metric_labels"
NAMES = "_metric_names"
FINAL = "_metric_final"  # the de-duplicated stage, ready to store

#: The stored metric names, numbered (the stage carries the number, not the name).
CANONICAL = tuple(sorted({canonical_name(s) for s in KEPT_SPELLINGS}))


@dataclass
class Series:
    """The series interned so far in one load: canonical labels -> id, and what each names."""

    ids: dict[tuple[str, str | None], int] = field(default_factory=dict)
    rows: list[tuple] = field(default_factory=list)  # (sid, labels JSON, pod, model_name, instance, job)


@dataclass
class StageStats:
    """What one input held, as the load report counts it."""

    read: int = 0
    non_finite: int = 0
    other_metrics: int = 0
    new: int = 0
    duplicates: int = 0
    notes: list[str] = field(default_factory=list)


#: The scratch database's memory bound, besides the analyzer's own (``ANALYZER_MEMORY_LIMIT``).
SCRATCH_MEMORY = "384MB"


def open_stage() -> duckdb.DuckDBPyConnection:
    """A scratch in-memory DuckDB holding the empty staging tables; close it with :func:`close_stage`."""
    scratch = duckdb.connect()
    track(scratch)  # a Ctrl-C stops a long read (a big CSV or scrape) instead of waiting for it
    spill = scratch_spill_dir("metrics-")  # in this run's folder: swept by a later run if this one is killed
    scratch.execute("SET TimeZone = 'UTC'")  # naive times in CSV are UTC, as everywhere
    scratch.execute("SET memory_limit = ?", [SCRATCH_MEMORY])
    scratch.execute("SET temp_directory = ?", [spill])
    scratch.execute("SET preserve_insertion_order = true")
    # DuckDB draws its own progress bar on stdout for long reads (a big scrape): that
    # would corrupt `--json`; the analyzer shows progress on stderr itself.
    scratch.execute("SET enable_progress_bar = false")
    scratch.execute("CREATE TABLE _spill_dir AS SELECT ?::VARCHAR AS path", [spill])
    # src: the input a row came from (NULL while that input is being read, see seal_input).
    scratch.execute(f"""CREATE TABLE {STAGE} (
        ord BIGINT, metric VARCHAR, label_key VARCHAR, ts_us BIGINT, value DOUBLE, src INTEGER)""")
    scratch.execute(f"CREATE TABLE {LABELS} (label_key VARCHAR, sid INTEGER, src INTEGER)")
    scratch.execute(f"CREATE TABLE {NAMES} (spelling VARCHAR, mid INTEGER)")
    scratch.executemany(f"INSERT INTO {NAMES} VALUES (?, ?)",
                        [[s, CANONICAL.index(canonical_name(s))] for s in KEPT_SPELLINGS])
    return scratch


def close_stage(scratch: duckdb.DuckDBPyConnection) -> None:
    """Close the scratch database and remove its spill directory."""
    try:
        spill = scratch.execute("SELECT path FROM _spill_dir").fetchall()[0][0]
    finally:
        scratch.close()
    shutil.rmtree(spill, ignore_errors=True)


# Stage row ids below this fit the packed order of store_stage.
_ROWS = 2**32

#: The columns a reader fills (``src`` is set by :func:`seal_input`).
STAGE_COLUMNS = "(ord, metric, label_key, ts_us, value)"


def clear_stage(scratch: duckdb.DuckDBPyConnection) -> None:
    """Drop what the input being read staged so far (a reader gave up half-way on it)."""
    scratch.execute(f"DELETE FROM {STAGE} WHERE src IS NULL")
    scratch.execute(f"DELETE FROM {LABELS} WHERE src IS NULL")


def seal_input(scratch: duckdb.DuckDBPyConnection, src: int) -> None:
    """Mark the rows of the input just read as input number ``src`` (the order inputs were given)."""
    scratch.execute(f"UPDATE {STAGE} SET src = $src WHERE src IS NULL", {"src": src})
    scratch.execute(f"UPDATE {LABELS} SET src = $src WHERE src IS NULL", {"src": src})


def stage_samples(scratch: duckdb.DuckDBPyConnection, samples: Iterable[Sample]) -> int:
    """Put parsed samples (the Python readers) into the stage; return how many were read.

    Every sample is staged, other metrics too, so the counts match the SQL readers.
    The labels dict of a series is serialized once (its id is cached with it).
    """
    import pyarrow as pa

    cols: dict[str, list] = {k: [] for k in ("ord", "metric", "label_key", "ts_us", "value")}
    encoded: dict[int, tuple[dict, str]] = {}
    for i, s in enumerate(samples):
        hit = encoded.get(id(s.labels))
        if hit is None or hit[0] is not s.labels:
            hit = encoded[id(s.labels)] = (s.labels, labels_json(s.labels))
        cols["ord"].append(i)
        cols["metric"].append(s.metric)
        cols["label_key"].append(hit[1])
        cols["ts_us"].append(s.ts_us)
        cols["value"].append(s.value)
    if not cols["ord"]:
        return 0
    arrow = pa.table({
        "ord": pa.array(cols["ord"], pa.int64()),
        "metric": pa.array(cols["metric"], pa.string()),
        "label_key": pa.array(cols["label_key"], pa.string()),
        "ts_us": pa.array(cols["ts_us"], pa.int64()),
        "value": pa.array(cols["value"], pa.float64()),
    })
    with registered(scratch, "_metric_arrow", arrow):
        scratch.execute(f"INSERT INTO {STAGE} {STAGE_COLUMNS} SELECT * FROM _metric_arrow")
    return len(cols["ord"])


def intern_labels(scratch: duckdb.DuckDBPyConnection, parse: Callable[[str], dict[str, str]], series: Series,
                  fallback_pod: str | None = None, keys: list[str] | None = None) -> Series:
    """Parse each distinct ``label_key`` of the kept samples once; map it to its series id.

    Two spellings of one label set (JSON and ``k=v``) are one series. Returns
    ``series`` with the series added. ``keys``: those
    distinct keys when the reader knows them already (else the stage is read).

    Raises:
        ValueError: (from ``parse``) a label set that does not parse.
    """
    if keys is None:
        keys = [k for (k,) in scratch.execute(
            f"SELECT DISTINCT label_key FROM {STAGE} s JOIN {NAMES} n ON n.spelling = s.metric WHERE s.src IS NULL"
        ).fetchall()]
    rows = []
    for key in keys:
        labels = parse(key)
        labels.pop("__name__", None)
        canonical, pod = labels_json(labels), pod_identity(labels, fallback_pod)
        sid = series.ids.get((canonical, pod))
        if sid is None:
            sid = series.ids[(canonical, pod)] = len(series.rows)
            series.rows.append((sid, canonical, pod, labels.get("model_name"), *target_of(labels)))
        rows.append([key, sid])
    if rows:
        scratch.executemany(f"INSERT INTO {LABELS} (label_key, sid) VALUES (?, ?)", rows)
    return series


def store_stage(con: duckdb.DuckDBPyConnection, scratch: duckdb.DuckDBPyConnection, series: Series,
                sources: list[str]) -> StageStats:
    """Insert the staged samples of kept metrics not yet in ``con``; empty the stage; return the counts.

    ``sources[src]`` names input ``src``. A sample is stored as a point
    (``metric_points``: series number, time, value, source number) of its series
    (``metric_series``: the metric and label set, stored once, found again by
    metric, pod and labels on later loads). All inputs of a load go in one
    ``INSERT``. Runs inside the caller's transaction on ``con``, if any. Only
    integers, times and values cross from the scratch database per sample.
    """
    import pyarrow as pa

    read, other, non_finite, lo, hi, packable = scratch.execute(f"""
        SELECT count(*), count(*) FILTER (WHERE n.mid IS NULL),
               count(*) FILTER (WHERE n.mid IS NOT NULL AND NOT isfinite(s.value)),
               min(s.ts_us) FILTER (WHERE n.mid IS NOT NULL), max(s.ts_us) FILTER (WHERE n.mid IS NOT NULL),
               count(s.ord) = count(*) AND coalesce(min(s.src) >= 0 AND min(s.ord) >= 0 AND max(s.rowid) < {_ROWS}, true)
        FROM {STAGE} s LEFT JOIN {NAMES} n ON n.spelling = s.metric""").fetchall()[0]
    kept = read - other - non_finite
    if not kept:
        _empty(scratch)
        return StageStats(read=read, non_finite=non_finite, other_metrics=other)
    # NaN says nothing about whether a counter moved (and is Prometheus' staleness
    # marker); infinities neither. One value per series and instant: the first input
    # wins, within an input the first point in order: `ord`, then the stage's row
    # order (insertion order is kept, and CSV rows all have ord 0). That order as one
    # HUGEINT when the numbers fit (src 31 bits, ord 63, rowid 32: always, short of four
    # billion staged rows): the same minimum as the (src, ord, rowid) struct, and cheaper
    # to aggregate than it (benchmarks/README.md has the figure).
    first = ("(st.src::HUGEINT << 96) + (st.ord::HUGEINT << 32) + st.rowid" if packable
             else "(st.src, st.ord, st.rowid)")
    scratch.execute(f"""
        CREATE OR REPLACE TABLE {FINAL} AS
        SELECT n.mid, l.sid, st.ts_us, arg_min(st.value, {first}) AS value,
               min(st.src) AS src
        FROM {STAGE} st
        JOIN {NAMES} n ON n.spelling = st.metric
        JOIN {LABELS} l ON l.label_key = st.label_key AND l.src = st.src
        WHERE isfinite(st.value)
        GROUP BY n.mid, l.sid, st.ts_us""")
    _empty(scratch)
    pairs = scratch.execute(f"SELECT DISTINCT mid, sid FROM {FINAL} ORDER BY mid, sid").fetchall()
    series_ids, fresh = series_ids_for(con, [(CANONICAL[mid], *series.rows[sid][1:]) for mid, sid in pairs])
    source_ids = source_ids_for(con, sources)
    scratch.register("_metric_map_in", pa.table({
        "mid": pa.array([m for m, _ in pairs], pa.int32()), "sid": pa.array([s for _, s in pairs], pa.int32()),
        "series_id": pa.array(series_ids, pa.int32())}))
    scratch.register("_metric_src_in", pa.table({
        "src": pa.array(range(len(sources)), pa.int32()), "source_id": pa.array(source_ids, pa.int32())}))
    stream = scratch.sql(f"""
        SELECT m.series_id, f.ts_us, f.value, s.source_id
        FROM {FINAL} f
        JOIN _metric_map_in m ON m.mid = f.mid AND m.sid = f.sid
        JOIN _metric_src_in s ON s.src = f.src
        """).to_arrow_reader(batch_size=200_000)
    con.register("_metric_in", stream)
    try:
        # Only series stored before can hold these points already: a load of new
        # series (a fresh week) skips the anti-join that keeps a point stored once.
        old = [sid for sid, new in zip(series_ids, fresh) if not new]
        overlap = bool(old) and con.execute(
            """SELECT count(*) FROM metric_points
               WHERE list_contains($ids, series_id) AND ts BETWEEN make_timestamp($lo) AND make_timestamp($hi)""",
            {"ids": old, "lo": lo, "hi": hi}).fetchall()[0][0] > 0
        new_only = """
            AND NOT EXISTS (SELECT 1 FROM metric_points m
                            WHERE m.series_id = s.series_id AND m.ts = make_timestamp(s.ts_us))""" if overlap else ""
        new = con.execute(f"""
            INSERT INTO metric_points (series_id, ts, value, source_id)
            SELECT s.series_id, make_timestamp(s.ts_us), s.value, s.source_id
            FROM _metric_in s
            WHERE true {new_only}
            """).fetchall()[0][0]
    finally:
        con.unregister("_metric_in")
        stream.close()
        scratch.unregister("_metric_map_in")
        scratch.unregister("_metric_src_in")
        scratch.execute(f"DROP TABLE IF EXISTS {FINAL}")
    return StageStats(read=read, non_finite=non_finite, other_metrics=other, new=new, duplicates=kept - new)


def series_ids_for(con: duckdb.DuckDBPyConnection, wanted: list[tuple]) -> tuple[list[int], list[bool]]:
    """``metric_series`` ids of ``(metric, labels, pod, model_name, instance, job)``, adding the missing ones.

    Returns the ids in the order given and whether each series is new. A series
    is found by metric, pod and labels (model_name, instance and job follow from them).
    """
    import pyarrow as pa

    cols = list(zip(*wanted))
    table = pa.table({
        "k": pa.array(range(len(wanted)), pa.int32()), "metric": pa.array(cols[0], pa.string()),
        "labels": pa.array(cols[1], pa.string()), "pod": pa.array(cols[2], pa.string()),
        "model_name": pa.array(cols[3], pa.string()), "instance": pa.array(cols[4], pa.string()),
        "job": pa.array(cols[5], pa.string())})
    with registered(con, "_metric_series_in", table):
        found = dict(con.execute("""
            SELECT i.k, min(s.series_id) FROM _metric_series_in i
            JOIN metric_series s ON s.metric = i.metric AND s.pod IS NOT DISTINCT FROM i.pod
                                AND s.labels::VARCHAR = i.labels
            GROUP BY i.k""").fetchall())
        missing = [k for k in range(len(wanted)) if k not in found]
        if missing:
            first = con.execute("SELECT coalesce(max(series_id), 0) + 1 FROM metric_series").fetchall()[0][0]
            con.execute("""
                INSERT INTO metric_series (series_id, metric, pod, model_name, instance, job, labels)
                SELECT $first + list_position($missing, k) - 1, metric, pod, model_name, instance, job, labels::JSON
                FROM _metric_series_in WHERE list_contains($missing, k)""", {"first": first, "missing": missing})
            found.update({k: first + i for i, k in enumerate(missing)})
    new = set(missing)
    return [found[k] for k in range(len(wanted))], [k in new for k in range(len(wanted))]


def source_ids_for(con: duckdb.DuckDBPyConnection, sources: list[str]) -> list[int]:
    """``metric_sources`` ids of ``sources`` (in order), adding the missing ones."""
    known = dict(con.execute("SELECT source, min(source_id) FROM metric_sources WHERE list_contains($s, source) "
                             "GROUP BY source", {"s": sources}).fetchall())
    missing = list(dict.fromkeys(s for s in sources if s not in known))
    if missing:
        first = con.execute("SELECT coalesce(max(source_id), 0) + 1 FROM metric_sources").fetchall()[0][0]
        con.executemany("INSERT INTO metric_sources VALUES (?, ?)", [[first + i, s] for i, s in enumerate(missing)])
        known.update({s: first + i for i, s in enumerate(missing)})
    return [known[s] for s in sources]


def _empty(scratch: duckdb.DuckDBPyConnection) -> None:
    scratch.execute(f"DELETE FROM {STAGE}")
    scratch.execute(f"DELETE FROM {LABELS}")
