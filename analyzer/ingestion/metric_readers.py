"""Metric files into the staging table at DuckDB's speed, with the Python parsers as the referee.

- CSV goes through ``read_csv`` (typed in SQL: epoch seconds or milliseconds, ISO
  8601, values with NaN/Inf spellings);
- Prometheus API JSON (one response, a list of them, or JSONL) through
  ``read_json`` into typed lists when its documents are success responses of
  matrix or vector results, else through ``read_json_objects`` as JSON text;
  either way its results are unnested in SQL;
- text scrapes of :data:`STREAM_BYTES` or more (a week of federated or dumped
  samples reaches a gigabyte) stream through ``read_csv`` as a line reader:
  only the lines of kept metrics are held, so memory does not grow with the
  file. Smaller scrapes go through prometheus-client, which checks the whole
  syntax.

Label sets are parsed once each (:func:`~.stage.intern_labels`). Whenever the
SQL path meets something it does not accept as is (a time or value it cannot
type, a CSV row with unquoted commas, an error response), the file is read again
by the Python parser of :mod:`analyzer.io.metric_formats`, which either reads it or raises the
precise error: the fast path never changes what a file means.
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Callable

import duckdb

from analyzer.core.durations import US
from analyzer.core.errors import InputError
from analyzer.ingestion.metric_stage import (
    NAMES,
    STAGE,
    STAGE_COLUMNS,
    Series,
    clear_stage,
    intern_labels,
    stage_samples,
)
from analyzer.io.metric_formats import (
    CSV,
    CSV_COLUMNS,
    EXPOSITION,
    JSON,
    OPENMETRICS,
    detect_form,
    discover_metric_files,
    parse_kv_labels,
    parse_labels_field,
    read_metrics_file,
    scrape_target_from_name,
    scrape_time_from_name,
)
from analyzer.io.metric_samples import KEPT_SPELLINGS

#: Text scrapes from this size on stream through DuckDB instead of prometheus-client.
STREAM_BYTES = 32 * 1024 * 1024
#: API JSON files from this size on (inflated, for a gzipped one) are walked a series at a
#: time (:mod:`.apistream`) instead of DuckDB's ``read_json``, whose memory grows to about
#: forty times a single document's size.
JSON_STREAM_BYTES = 8 * 1024 * 1024

_HEAD_BYTES = 64 * 1024
# DuckDB's JSON reader allocates its buffer from this bound: a plain file's size is the
# largest document it can hold; a gzipped one is given room to inflate.
_MAX_JSON_OBJECT = 2**31 - 1
_GZIP_JSON_OBJECT = 512 * 1024 * 1024

# A sample line: name, optional {labels} (values may hold } and escaped quotes),
# value, optional timestamp, optional OpenMetrics exemplar (# {...} v t).
_SAMPLE_RE = (r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?\s+(\S+)'
              r'(?:\s+([-+]?[0-9][0-9.eE+-]*))?\s*(?:#.*)?$')
_NAME_RE = r'^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)'


# Every kept name but `up` is at least this long: its first characters pre-select a line.
_PREFIX = min(len(s) for s in KEPT_SPELLINGS if s != "up")


def _prefixes() -> list[str]:
    return sorted({s[:_PREFIX] for s in KEPT_SPELLINGS if s != "up"})


class _Fallback(Exception):
    """The SQL path cannot take this file as is: read it with the Python parser."""


def head_text(path: Path) -> str:
    """The first 64 KiB of a file's text (gunzipped), for detection."""
    with path.open("rb") as f:
        magic = f.read(2)
    opener = gzip.open if path.suffix == ".gz" or magic == b"\x1f\x8b" else open
    try:
        with opener(path, "rb") as f:
            data = f.read(_HEAD_BYTES)
    except (OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read metrics file: {exc}") from exc
    return data.decode("utf-8-sig", errors="replace")


def _compression(path: Path) -> str:
    with path.open("rb") as f:
        return "gzip" if f.read(2) == b"\x1f\x8b" else "none"


def _not_a_proxy_log(path: Path, head: str) -> None:
    """A proxy log given as metrics (``--metrics`` took a log file): say so, never guess."""
    first = next((ln for ln in head.splitlines() if ln.strip()), "")
    looks_like_log = any(m in head for m in ("📥 REQUEST: ", "✓ RESPONSE: ", "✗ RESPONSE: "))
    if not looks_like_log and first.lstrip().startswith("{"):
        try:
            doc = json.loads(first)
        except json.JSONDecodeError:
            doc = None
        looks_like_log = isinstance(doc, dict) and doc.get("type") in ("request", "response") and "data" not in doc
    if looks_like_log:
        raise InputError(
            f"{path}: this is a proxy log, not a metrics file; give log files before --metrics "
            "(everything after --metrics up to the next option is read as metrics)")


def check_metric_paths(paths: list[str]) -> None:
    """Fail early on a metrics path that matches nothing or holds a proxy log (before any ingest).

    Raises:
        InputError: as :func:`stage_file` would, but before the logs are read.
    """
    for path in discover_metric_files(paths):
        _not_a_proxy_log(path, head_text(path)[:4096])


def stage_file(con: duckdb.DuckDBPyConnection, path: Path, series: Series,
               tick: Callable[[], None] | None = None) -> tuple[str, list[str]]:
    """Read one metrics file into the stage (labels interned into ``series``); return its form and notes.

    ``con`` is the scratch database of :func:`~.stage.open_stage`, never the analyzer's.
    ``tick()`` is called now and then while a big file is read in Python (an exception
    it raises stops the reading: the run was abandoned).

    Raises:
        InputError: the file cannot be read or does not parse in its detected form.
    """
    head = head_text(path)
    _not_a_proxy_log(path, head)
    form = detect_form(head, path.name)
    try:
        if form == CSV:
            _stage_csv(con, path, head, series)
            return CSV, []
        if form == JSON:
            _stage_json(con, path, series, tick)
            return JSON, []
        if path.stat().st_size >= STREAM_BYTES:
            return stage_text_stream(con, path, series)
    except _Fallback:
        clear_stage(con)
    read = read_metrics_file(path)  # raises InputError with the precise reason
    stage_samples(con, read.samples)
    intern_labels(con, lambda key: json.loads(key), scrape_target_from_name(path) if read.form in (
        EXPOSITION, OPENMETRICS) else None, series)
    return read.form, read.notes


# ---------------------------------------------------------------------------
# CSV


# A CSV time (epoch seconds, milliseconds above 1e11, or ISO 8601) as epoch microseconds,
# from the trimmed text `t` and its number `x` (computed once each in a subquery).
_CSV_EPOCH_US = ("CASE WHEN x IS NOT NULL THEN CASE WHEN isfinite(x) THEN "
                 "round(CASE WHEN abs(x) > 1e11 THEN x / 1000.0 ELSE x END * 1e6)::BIGINT END "
                 "ELSE epoch_us(TRY_CAST(t AS TIMESTAMPTZ)) END")


def _stage_csv(con: duckdb.DuckDBPyConnection, path: Path, head: str, series: Series) -> None:
    header = [h.strip().lower() for h in next(csv.reader([head.splitlines()[0] if head else ""]), [])]
    if any(c not in header for c in CSV_COLUMNS):
        raise _Fallback  # the Python parser says which column is missing
    columns = {f"c{i}": "VARCHAR" for i in range(len(header))}
    pos = {c: f"c{header.index(c)}" for c in CSV_COLUMNS}
    try:
        con.execute(f"""
            INSERT INTO {STAGE} {STAGE_COLUMNS}
            -- ord 0: the file's order is the stage's row order (a numbered window would
            -- read the file on one thread); see store_stage
            SELECT 0 AS ord, m, l, {_CSV_EPOCH_US}, v
            -- labels untrimmed: a copy of every long field saved; parse_labels_field strips
            -- each distinct key, so keys differing only in spaces are one series
            FROM (SELECT trim({pos['metric']}) AS m, {pos['labels']} AS l, trim({pos['timestamp']}) AS t,
                         TRY_CAST(trim({pos['timestamp']}) AS DOUBLE) AS x, TRY_CAST(trim({pos['value']}) AS DOUBLE) AS v
                  FROM read_csv($path, header = false, skip = 1, columns = $columns, delim = ',', quote = '"',
                                escape = '"', auto_detect = false, strict_mode = true, compression = $comp))
            WHERE coalesce(m, '') <> '' OR coalesce(t, '') <> ''
            """, {"path": str(path), "columns": columns, "comp": _compression(path)})
    except duckdb.InterruptException:  # Ctrl-C (or a run abandoned): never a reason to read another way
        raise
    except duckdb.Error as exc:  # unquoted commas in labels, a ragged row: the Python parser decides
        raise _Fallback from exc
    bad = con.execute(f"SELECT count(*) FROM {STAGE} WHERE src IS NULL AND (ts_us IS NULL OR value IS NULL)"
                      ).fetchall()[0][0]
    if bad:
        raise _Fallback
    try:
        intern_labels(con, parse_labels_field, series=series)
    except ValueError as exc:
        raise _Fallback from exc


# ---------------------------------------------------------------------------
# Prometheus API JSON


# A query_range/query answer as DuckDB types it: the series' labels stay JSON text
# (any names), a point is [time, "value"] as text (cast below, as from_json would).
_RESULT = 'STRUCT(metric JSON, "values" VARCHAR[][], "value" VARCHAR[])[]'
_RESPONSE = {"status": "VARCHAR", "data": f"STRUCT(resultType VARCHAR, result {_RESULT})"}
_JSON_DOCS = "_metric_json_docs"
_JSON_SERIES = "_metric_json_series"


def _series_labels(text: str) -> dict[str, str]:
    """A series' ``metric`` object (JSON text) as labels."""
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError(f"series labels are not an object: {text[:80]}")
    return {str(k): str(v) for k, v in doc.items()}


def _json_bound(path: Path, comp: str) -> int:
    bound = _GZIP_JSON_OBJECT if comp == "gzip" else path.stat().st_size + 1024
    return min(bound, _MAX_JSON_OBJECT)


def _typed_json_bound(path: Path, comp: str) -> int:
    """:func:`_json_bound` for ``read_json``, which allocates twice its bound up front:
    a gzipped file's own inflated size (its trailer), not the generous bound. A
    trailer that says too little (several gzip members) makes the typed read fail,
    and the JSON-text reader takes the file."""
    if comp != "gzip":
        return _json_bound(path, comp)
    with path.open("rb") as f:
        f.seek(-4, 2)
        inflated = int.from_bytes(f.read(4), "little")  # ISIZE: the size mod 2**32
    return min(inflated + 1024, _GZIP_JSON_OBJECT)


def _stage_json(con: duckdb.DuckDBPyConnection, path: Path, series: Series,
                tick: Callable[[], None] | None = None) -> None:
    """Stage a Prometheus API JSON file.

    The usual file (success responses whose ``data`` is a matrix or vector) is
    read once by ``read_json`` into typed lists, and its points are staged with
    a short key per series (``d:i``) whose label text is parsed once. Anything
    else (bare ``data``, other shapes, types ``read_json`` refuses) goes through
    :func:`_stage_json_objects`, which reads JSON text as before; it and the
    Python parser behind it decide what such a file means.
    """
    if _json_size(path) >= JSON_STREAM_BYTES and _stage_json_stream(con, path, series, tick):
        return
    if not _stage_json_typed(con, path, series):
        _stage_json_objects(con, path, series)


def _json_size(path: Path) -> int:
    """A JSON file's size as read: a gzipped one's inflated size (its trailer, mod 4 GiB: at
    least the compressed size)."""
    size = path.stat().st_size
    if _compression(path) != "gzip":
        return size
    with path.open("rb") as f:
        f.seek(-4, 2)
        return max(size, int.from_bytes(f.read(4), "little"))


def _stage_json_stream(con: duckdb.DuckDBPyConnection, path: Path, series: Series,
                       tick: Callable[[], None] | None = None) -> bool:
    """A big JSON file walked a series at a time (:func:`~.apistream.stream_json_file`); False
    (nothing staged) when its layout is not one the walk follows.

    Raises:
        InputError: not valid JSON, or not API responses of matrix or vector results.
    """
    from analyzer.ingestion.apistream import (  # numpy, only for a big JSON file
        NotStreamable,
        SeriesStager,
        stream_json_file,
    )

    stager = SeriesStager(con, tick)
    try:
        stream_json_file(path, stager)
        stager.finish(series)
    except NotStreamable:
        clear_stage(con)
        return False
    except (ValueError, EOFError, OSError) as exc:  # EOFError, OSError: a truncated or corrupt gzip
        raise InputError(f"{path}: not a valid {JSON} metrics file: {exc}") from exc
    return True


def _stage_json_typed(con: duckdb.DuckDBPyConnection, path: Path, series: Series) -> bool:
    """The typed read of :func:`_stage_json`; False (nothing staged) when the file is not of the usual shape."""
    comp = _compression(path)
    try:
        try:
            # Materialized once: the checks, the series and the points read it, not the file.
            con.execute(f"""
                CREATE OR REPLACE TEMP TABLE {_JSON_DOCS} AS
                SELECT row_number() OVER () AS d, status, data
                FROM read_json($path, columns = $columns, format = 'auto',
                               maximum_object_size = {_typed_json_bound(path, comp)}, compression = $comp)
                """, {"path": str(path), "columns": _RESPONSE, "comp": comp})
            usual = con.execute(f"""
                SELECT count(*) = 0 FROM {_JSON_DOCS}
                WHERE coalesce(status, 'success') <> 'success' OR data IS NULL
                   OR coalesce(data.resultType, '') NOT IN ('matrix', 'vector')
                """).fetchall()[0][0]
            if not usual:
                return False
            # Each series once: its key, label text, name and how many points it stages.
            con.execute(f"""
                CREATE OR REPLACE TEMP TABLE {_JSON_SERIES} AS
                SELECT d::VARCHAR || ':' || i AS k, coalesce(s.metric, '{{}}')::VARCHAR AS labels,
                       coalesce(s.metric ->> '__name__', '') AS name,
                       CASE WHEN kind = 'matrix' THEN len(coalesce(s."values", []))
                            WHEN s."value" IS NULL THEN 0 ELSE 1 END AS points
                FROM (SELECT d, data.resultType AS kind, unnest(data.result) AS s,
                             generate_subscripts(data.result, 1) AS i
                      FROM {_JSON_DOCS})
                """)
            # The same points, names, times and values as _stage_json_objects stages.
            con.execute(f"""
                INSERT INTO {STAGE} {STAGE_COLUMNS}
                WITH series AS (
                    SELECT d, data.resultType AS kind, unnest(data.result) AS s,
                           generate_subscripts(data.result, 1) AS i
                    FROM {_JSON_DOCS}
                ), points AS (
                    SELECT d, i, name, unnest(pts) AS p, generate_subscripts(pts, 1) AS j
                    FROM (SELECT d, i, coalesce(s.metric ->> '__name__', '') AS name,
                                 CASE WHEN kind = 'matrix' THEN coalesce(s."values", [])
                                      WHEN s."value" IS NULL THEN []
                                      ELSE [s."value"] END AS pts
                          FROM series)
                )
                SELECT (d::BIGINT << 42) + (i::BIGINT << 21) + j, name, d::VARCHAR || ':' || i,
                       round(CAST(p[1] AS DOUBLE) * 1e6)::BIGINT, TRY_CAST(p[2] AS DOUBLE)
                FROM points
                """)
        except duckdb.InterruptException:  # Ctrl-C (or a run abandoned): never a reason to read another way
            raise
        except duckdb.Error:  # a statement that fails stages nothing: the JSON-text reader decides
            return False
        bad = con.execute(f"SELECT count(*) FROM {STAGE} WHERE src IS NULL AND (ts_us IS NULL OR value IS NULL)"
                          ).fetchall()[0][0]
        if bad:
            raise _Fallback
        # The series of kept metrics with points: the keys the stage holds for them.
        labels = dict(con.execute(f"""
            SELECT k, labels FROM {_JSON_SERIES}
            WHERE points > 0 AND name IN (SELECT spelling FROM {NAMES}) ORDER BY k""").fetchall())
        try:
            intern_labels(con, lambda key: _series_labels(labels[key]), series=series, keys=list(labels))
        except ValueError as exc:
            raise _Fallback from exc
        return True
    finally:
        con.execute(f"DROP TABLE IF EXISTS {_JSON_DOCS}")
        con.execute(f"DROP TABLE IF EXISTS {_JSON_SERIES}")


def _stage_json_objects(con: duckdb.DuckDBPyConnection, path: Path, series: Series) -> None:
    """Any JSON file: each document read as JSON text, its shape checked in SQL (see :func:`_stage_json`)."""
    comp = _compression(path)
    docs = f"""
        SELECT row_number() OVER () AS d, coalesce(json -> 'data', json) AS data, json ->> 'status' AS status
        FROM read_json_objects($path, format = 'auto', maximum_object_size = {_json_bound(path, comp)},
                               compression = $comp)
    """
    params = {"path": str(path), "comp": comp}
    try:
        # Anything but success responses (or bare `data`) of matrix/vector results: the Python parser says what.
        odd = con.execute(f"""
            SELECT count(*) FROM ({docs})
            WHERE coalesce(status, 'success') <> 'success' OR json_type(data) <> 'OBJECT'
               OR json_type(data -> 'result') NOT IN ('ARRAY', 'NULL')
               OR coalesce(data ->> 'resultType', '') NOT IN ('matrix', 'vector')
            """, params).fetchall()[0][0]
        if odd:
            raise _Fallback
        # Typed lists, not JSON strings: a week's answer is millions of [time, "value"] pairs.
        con.execute(f"""
            INSERT INTO {STAGE} {STAGE_COLUMNS}
            WITH res AS (
                SELECT d, data ->> 'resultType' AS kind,
                       from_json(coalesce(data -> 'result', '[]'),
                                 '[{{"metric": "JSON", "values": [["VARCHAR"]], "value": ["VARCHAR"]}}]') AS r
                FROM ({docs})
            ), series AS (
                SELECT d, kind, unnest(r) AS s, generate_subscripts(r, 1) AS i FROM res
            ), points AS (
                -- the series' name and label text once per series, not per point
                SELECT d, i, name, label_key, unnest(pts) AS p, generate_subscripts(pts, 1) AS j
                FROM (SELECT d, i, coalesce(s.metric ->> '__name__', '') AS name,
                             coalesce(s.metric, '{{}}')::VARCHAR AS label_key,
                             CASE WHEN kind = 'matrix' THEN coalesce(s."values", [])
                                  WHEN s."value" IS NULL THEN []
                                  ELSE [s."value"] END AS pts
                      FROM series)
            )
            SELECT (d::BIGINT << 42) + (i::BIGINT << 21) + j, name, label_key,
                   round(CAST(p[1] AS DOUBLE) * 1e6)::BIGINT, TRY_CAST(p[2] AS DOUBLE)
            FROM points
            """, params)
    except duckdb.InterruptException:  # Ctrl-C (or a run abandoned): never a reason to read another way
        raise
    except duckdb.Error as exc:
        raise _Fallback from exc
    bad = con.execute(f"SELECT count(*) FROM {STAGE} WHERE src IS NULL AND (ts_us IS NULL OR value IS NULL)"
                      ).fetchall()[0][0]
    if bad:
        raise _Fallback

    try:
        intern_labels(con, _series_labels, series=series)
    except ValueError as exc:
        raise _Fallback from exc


# ---------------------------------------------------------------------------
# Text exposition, streamed


def stage_text_stream(con: duckdb.DuckDBPyConnection, path: Path, series: Series) -> tuple[str, list[str]]:
    """Stream a text scrape (0.0.4 or OpenMetrics) of any size into the stage.

    Only lines of kept metrics (and ``# EOF``) are kept from DuckDB's line reader;
    a kept line that is not a sample is an error naming its line number.

    Raises:
        InputError: a malformed sample line of a kept metric, or no time to give it.
    """
    con.execute("CREATE OR REPLACE TEMP TABLE _metric_lines (n BIGINT, line VARCHAR)")
    con.execute(f"""
        INSERT INTO _metric_lines
        SELECT n, line FROM (
            SELECT n, line
            FROM read_csv($path, columns = {{'line': 'VARCHAR'}}, delim = '\\0', quote = '', escape = '',
                          header = false, auto_detect = false, strict_mode = false, compression = $comp,
                          max_line_size = 1048576, buffer_size = 16777216)
                 WITH ORDINALITY AS t(line, n)
        )
        WHERE line = '# EOF'
           -- a cheap look at the first characters sorts out the histogram lines (most of a
           -- vLLM scrape) before the exact name is taken
           OR ((left(line, {_PREFIX}) IN (SELECT unnest($prefixes)) OR starts_with(line, 'up{{')
                OR starts_with(line, 'up ') OR starts_with(line, ' ') OR starts_with(line, chr(9)))
               AND regexp_extract(line, '{_NAME_RE}', 1) IN (SELECT spelling FROM {NAMES}))
        """, {"path": str(path), "comp": _compression(path), "prefixes": _prefixes()})
    try:
        openmetrics = con.execute("SELECT count(*) FROM _metric_lines WHERE line = '# EOF'").fetchall()[0][0] > 0
        form = OPENMETRICS if openmetrics else EXPOSITION
        bad = con.execute(f"""
            SELECT n, line FROM _metric_lines
            WHERE line <> '# EOF' AND NOT regexp_full_match(trim(line), '{_SAMPLE_RE}')
            ORDER BY n LIMIT 1""").fetchall()
        if bad:
            raise InputError(f"{path}: not a valid {form} metrics file: line {bad[0][0]}: not a sample: {bad[0][1][:120]!r}")
        default_ts = scrape_time_from_name(path)
        stamp_from = "time in file name"
        if default_ts is None:
            default_ts = round(path.stat().st_mtime * US)
            stamp_from = "file modification time"
        # 0.0.4 timestamps are milliseconds, OpenMetrics' seconds.
        scale = "1e6" if openmetrics else "1e3"
        con.execute(f"""
            INSERT INTO {STAGE} {STAGE_COLUMNS}
            SELECT n, x.name, coalesce(x.labels, ''),
                   CASE WHEN x.ts = '' THEN $default_ts ELSE round(CAST(x.ts AS DOUBLE) * {scale})::BIGINT END,
                   CAST(x.value AS DOUBLE)
            FROM (SELECT n, regexp_extract(trim(line), '{_SAMPLE_RE}', ['name', 'labels', 'value', 'ts']) AS x
                  FROM _metric_lines WHERE line <> '# EOF')
            """, {"default_ts": default_ts})
        staged, untimed = con.execute(
            f"SELECT count(*), count(*) FILTER (WHERE ts_us = $t) FROM {STAGE} WHERE src IS NULL",
            {"t": default_ts}).fetchall()[0]
    except duckdb.InterruptException:  # Ctrl-C (or a run abandoned): never a reason to read another way
        raise
    except duckdb.Error as exc:
        raise InputError(f"{path}: not a valid text metrics file: {exc}") from exc
    finally:
        con.execute("DROP TABLE IF EXISTS _metric_lines")
    notes = [f"{path}: samples without timestamps stamped with the {stamp_from}"] if untimed else []
    if not staged:
        notes.append(f"{path}: no samples (read as {form})")
    try:
        intern_labels(con, lambda key: parse_kv_labels(key) if key else {}, scrape_target_from_name(path), series)
    except ValueError as exc:
        raise InputError(f"{path}: not a valid {form} metrics file: {exc}") from exc
    return form, notes
