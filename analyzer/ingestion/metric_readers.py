"""Metric files into the staging table: one reader per form.

- Prometheus API JSON (one answer, a list of them, or JSONL; plain or gzipped) is
  walked a series at a time by :mod:`.apistream`, the reader of live answers too:
  its memory follows a batch of points, not the file;
- CSV goes through DuckDB's ``read_csv`` (typed in SQL: epoch seconds or
  milliseconds, ISO 8601, values with NaN/Inf spellings); a file it refuses (a
  labels field with unquoted commas, a time it cannot type) is read by the Python
  parser, which takes the commas as part of the labels or names the bad line;
- text scrapes of :data:`STREAM_BYTES` or more (a week of federated or dumped
  samples reaches a gigabyte) stream through ``read_csv`` as a line reader:
  only the lines of kept metrics are held, so memory does not grow with the
  file. Smaller scrapes go through prometheus-client, which checks the whole
  syntax and is the reference the streamed reader is tested against.

Label sets are parsed once each (:func:`~.metric_stage.intern_labels`).
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Callable

import duckdb

from analyzer.core.errors import InputError, first_line
from analyzer.ingestion.apistream import SeriesStager, stream_json_file
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
    gzipped,
    parse_kv_labels,
    parse_labels_field,
    read_metrics_file,
    scrape_target_from_name,
    scrape_time,
)
from analyzer.io.metric_samples import KEPT_SPELLINGS
from analyzer.io.sources import RECORD_PREFIXES

#: Text scrapes from this size on stream through DuckDB instead of prometheus-client.
STREAM_BYTES = 32 * 1024 * 1024

_HEAD_BYTES = 64 * 1024

# A sample line: name, optional {labels} (values may hold } and escaped quotes),
# value, optional timestamp, optional OpenMetrics exemplar (# {...} v t).
_SAMPLE_RE = (r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?\s+(\S+)'
              r'(?:\s+([-+]?[0-9][0-9.eE+-]*))?\s*(?:#.*)?$')
_NAME_RE = r'^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)'


# Every kept name but `up` is at least this long: its first characters pre-select a line.
_PREFIX = min(len(s) for s in KEPT_SPELLINGS if s != "up")


def _prefixes() -> list[str]:
    return sorted({s[:_PREFIX] for s in KEPT_SPELLINGS if s != "up"})


def head_text(path: Path) -> str:
    """The first 64 KiB of a file's text (gunzipped), for detection."""
    opener = gzip.open if path.suffix == ".gz" or gzipped(path) else open
    try:
        with opener(path, "rb") as f:
            data = f.read(_HEAD_BYTES)
    except (OSError, EOFError) as exc:
        raise InputError(f"{path}: cannot read metrics file: {exc}") from exc
    return data.decode("utf-8-sig", errors="replace")


def _not_a_proxy_log(path: Path, head: str) -> None:
    """A proxy log given as metrics (``--metrics`` took a log file): say so, never guess."""
    first = next((ln for ln in head.splitlines() if ln.strip()), "")
    looks_like_log = any(m in head for m in RECORD_PREFIXES)
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

    ``con`` is the scratch database of :func:`~.metric_stage.open_stage`, never the analyzer's.
    ``tick()`` is called before each batch of an API JSON file is staged (the progress
    bar; an exception it raises stops the reading).

    Raises:
        InputError: the file cannot be read or does not parse in its detected form.
    """
    head = head_text(path)
    _not_a_proxy_log(path, head)
    form = detect_form(head, path.name)
    if form == JSON:
        _stage_json(con, path, series, tick)
        return JSON, []
    if form == CSV:
        if _stage_csv(con, path, head, series):
            return CSV, []
        clear_stage(con)
    elif path.stat().st_size >= STREAM_BYTES:
        return stage_text_stream(con, path, series)
    read = read_metrics_file(path)  # raises InputError with the precise reason
    stage_samples(con, read.samples)
    intern_labels(con, lambda key: json.loads(key), series, scrape_target_from_name(path) if read.form in (
        EXPOSITION, OPENMETRICS) else None)
    return read.form, read.notes


def _stage_json(con: duckdb.DuckDBPyConnection, path: Path, series: Series,
                tick: Callable[[], None] | None = None) -> None:
    """Stage a Prometheus API JSON file a series at a time (:mod:`.apistream`).

    Raises:
        InputError: not valid JSON, or not API answers of matrix or vector results.
    """
    stager = SeriesStager(con, tick)
    try:
        stream_json_file(path, stager)
        stager.finish(series)
    except (ValueError, EOFError, OSError) as exc:  # EOFError, OSError: a truncated or corrupt gzip
        raise InputError(f"{path}: not a valid {JSON} metrics file: {exc}") from exc


# ---------------------------------------------------------------------------
# CSV


# A CSV time (epoch seconds, milliseconds above 1e11, or ISO 8601) as epoch microseconds,
# from the trimmed text `t` and its number `x` (computed once each in a subquery).
_CSV_EPOCH_US = ("CASE WHEN x IS NOT NULL THEN CASE WHEN isfinite(x) THEN "
                 "round(CASE WHEN abs(x) > 1e11 THEN x / 1000.0 ELSE x END * 1e6)::BIGINT END "
                 "ELSE epoch_us(TRY_CAST(t AS TIMESTAMPTZ)) END")


def _stage_csv(con: duckdb.DuckDBPyConnection, path: Path, head: str, series: Series) -> bool:
    """Stage a CSV export through DuckDB; False when DuckDB cannot take it as it is (the Python parser will)."""
    header = [h.strip().lower() for h in next(csv.reader([head.splitlines()[0] if head else ""]), [])]
    if any(c not in header for c in CSV_COLUMNS):
        return False  # the Python parser says which column is missing
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
            """, {"path": str(path), "columns": columns, "comp": "gzip" if gzipped(path) else "none"})
    except duckdb.InterruptException:  # Ctrl-C: never a reason to read the file another way
        raise
    except duckdb.Error:  # unquoted commas in labels, a ragged row: the Python parser decides
        return False
    bad = con.execute(f"SELECT count(*) FROM {STAGE} WHERE src IS NULL AND (ts_us IS NULL OR value IS NULL)"
                      ).fetchall()[0][0]
    if bad:
        return False
    try:
        intern_labels(con, parse_labels_field, series)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------
# Text exposition, streamed


def stage_text_stream(con: duckdb.DuckDBPyConnection, path: Path, series: Series) -> tuple[str, list[str]]:
    """Stream a text scrape (0.0.4 or OpenMetrics) of any size into the stage.

    Only lines of kept metrics (and ``# EOF``) are kept from DuckDB's line reader;
    a kept line that is not a sample is an error naming its line number.

    Raises:
        InputError: a malformed sample line of a kept metric, or a file DuckDB cannot
            read as lines (a line over 1 MiB).
    """
    con.execute("CREATE OR REPLACE TEMP TABLE _metric_lines (n BIGINT, line VARCHAR)")
    try:
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
            """, {"path": str(path), "comp": "gzip" if gzipped(path) else "none", "prefixes": _prefixes()})
        openmetrics = con.execute("SELECT count(*) FROM _metric_lines WHERE line = '# EOF'").fetchall()[0][0] > 0
        form = OPENMETRICS if openmetrics else EXPOSITION
        bad = con.execute(f"""
            SELECT n, line FROM _metric_lines
            WHERE line <> '# EOF' AND NOT regexp_full_match(trim(line), '{_SAMPLE_RE}')
            ORDER BY n LIMIT 1""").fetchall()
        if bad:
            raise InputError(f"{path}: not a valid {form} metrics file: line {bad[0][0]}: not a sample: {bad[0][1][:120]!r}")
        default_ts, stamp_from = scrape_time(path)
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
    except duckdb.InterruptException:  # Ctrl-C: never a reason to read the file another way
        raise
    except duckdb.Error as exc:
        raise InputError(f"{path}: not a valid text metrics file: {first_line(exc)}") from exc  # not the line it quotes
    finally:
        con.execute("DROP TABLE IF EXISTS _metric_lines")
    notes = [f"{path}: samples without timestamps stamped with the {stamp_from}"] if untimed else []
    if not staged:
        notes.append(f"{path}: no samples (read as {form})")
    try:
        intern_labels(con, lambda key: parse_kv_labels(key) if key else {}, series, scrape_target_from_name(path))
    except ValueError as exc:
        raise InputError(f"{path}: not a valid {form} metrics file: {exc}") from exc
    return form, notes
