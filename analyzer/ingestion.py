"""Ingest proxy logs into the database: fast, in bounded memory, losing nothing, re-runnable.

One streaming pass. Python reads every input a block at a time
(:mod:`analyzer.linereader`: plain, gzip, standard input; Parquet's ``entry``
column by row batch) and hands Arrow arrays of numbered lines to DuckDB; it never
touches a line one by one. Lines from many small files, or from a slice of a big
one, gather into a batch of a DuckDB row group of lines (or about ``BATCH_BYTES``).
Each batch is two transactions:

1. the store (on a connection of its own, in a thread, while this thread reads
   the next batch): every line that is a record is parsed once
   (``json_transform``) and inserted into ``records`` with its typed hot columns
   and its original text (``raw``), streamed from the Arrow batch, what a bare
   INSERT of the same columns costs; the batch is marked in ``ingest_pending``;
2. the finish (on the caller's connection, batch after batch): the other lines
   (free text, blank, malformed) are judged, bad ones to ``quarantine`` with
   file and line, stdout lines that are data to ``proxy_events``; then
   de-duplication on the narrow key columns (type, request id, system prompt
   hash, session, timestamp): this batch's copies of records stored before, or
   twice in it, are deleted, and a stdout copy whose fields were cut to 200
   characters is replaced by the full copy when that arrives; then the files'
   progress is written to ``source_files`` and the mark cleared.

A big file is many batches: ``source_files`` records how far each file has been
finished (bytes and lines), so a killed run leaves the database consistent (the
next connection removes the records of a batch stored but not finished) and the
next run resumes where it stopped. A file that cannot be read (a fake or
truncated gzip, an unreadable file, a Parquet file with another schema) is
recorded in ``skipped_files`` and costs no other file its records.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import duckdb

from .db import discard_unfinished_batches, transaction
from .errors import ExitCode, InputError
from .input_readers import FileFailed, WholeFile, parquet_pieces, stdin_pieces, text_pieces, whole_files
from .linereader import MAX_LINE_BYTES, LineBlock, LongLine, arrow, prefetch
from .online import BLANK_CHARS
from .sources import JSONL, KUBECTL, PARQUET, STDIN, Discovered, FormError, SourceFile, discover_inputs

# The fields read into typed columns; everything else stays in `raw`.
RECORD_STRUCT = {
    "timestamp": "VARCHAR",
    "type": "VARCHAR",
    "request_id": "VARCHAR",
    "session_id": "VARCHAR",
    "client": "VARCHAR",
    "provider": "VARCHAR",
    "model": "VARCHAR",
    "origin": "VARCHAR",
    "message_count": "INTEGER",
    "tools_count": "INTEGER",
    "enable_thinking": "BOOLEAN",
    "user_message_this_turn": "VARCHAR",
    "tool_results_this_turn": "JSON",
    "messages": [{"role": "VARCHAR", "tool_calls": "JSON", "function_call": "JSON"}],
    "latency_ms": "BIGINT",
    "has_content": "BOOLEAN",
    "has_tool_calls": "BOOLEAN",
    "has_reasoning_content": "BOOLEAN",
    "content": "VARCHAR",
    "content_preview": "VARCHAR",
    "reasoning_content": "VARCHAR",
    "tool_calls": "JSON",
    "tokens": {
        "prompt_tokens": "BIGINT",
        "completion_tokens": "BIGINT",
        "prompt_tokens_details": {"cached_tokens": "BIGINT"},
        "completion_tokens_details": {"reasoning_tokens": "BIGINT"},
    },
    "error": "VARCHAR",
    "upstream_headers": "JSON",
    "log_fields_version": "INTEGER",
    "upstream_status": "INTEGER",
    "finish_reason": "VARCHAR",
    "max_tokens": "INTEGER",
    "thinking_token_budget": "INTEGER",
    "tool_history": "BOOLEAN",
    "incident_class": "VARCHAR",
    "final_class": "VARCHAR",
    "ladder": "JSON",
    "system_sha256": "VARCHAR",
}

RECORD_TYPES = ("request", "response", "system_prompt")
SNIPPET_CHARS = 200
# At most this many input bytes per batch (override with $ANALYZER_BATCH_BYTES):
# bounds memory when records are long (the Arrow batch plus DuckDB's working set
# stay under 1 GB). Room for a whole row group of the week's longest stretch of
# records (299 MB): a batch cut short is written through the WAL (measured: its
# store 7.0 s, against 5.4 s whole).
BATCH_BYTES = int(os.environ.get("ANALYZER_BATCH_BYTES", 320 * 1024 * 1024))
# Lines per transaction: whole DuckDB row groups (122,880 rows), so no commit
# leaves a part-filled row group for the next checkpoint to rewrite (measured:
# that rewrite cost a third of the ingest).
BATCH_LINES = int(os.environ.get("ANALYZER_BATCH_LINES", 122_880))
# Bytes read at a time.
_READ_BLOCK = max(4096, min(8 * 1024 * 1024, BATCH_BYTES // 4))
# Files up to this size (and never over the longest line kept) are read whole,
# many at a time (S3 chunks are ~100 KB): one open and read each, one split per run.
_SMALL_FILE = min(_READ_BLOCK, MAX_LINE_BYTES)
# Batches stored at once, each by a DuckDB connection of its own ($ANALYZER_STORES).
# Two use both cores (measured on a week: ingest 24 s -> 16 s) but need DuckDB's
# bound near 700 MB not to spill, and hold two batches of lines: peak RSS ~1.2 GB.
# One keeps the whole run under 1 GB.
_STORES = max(1, int(os.environ.get("ANALYZER_STORES", 1)))
# The next batch is read while the last one is stored (and the one before it is
# finished meanwhile): DuckDB's store runs back to back. The lines of the batches
# in flight (stored, or being read) stay under _FLIGHT_BYTES together, so reading
# ahead holds about one typical batch more, never two of the biggest.
_IN_FLIGHT = max(_STORES, 2)
_FLIGHT_BYTES = max(BATCH_BYTES, int(os.environ.get("ANALYZER_FLIGHT_BYTES", 320 * 1024 * 1024)))
# DuckDB threads while ingesting ($ANALYZER_STORE_THREADS; 0: DuckDB's own number).
# One: an INSERT on two threads leaves two part row groups that are copied and
# compressed again at its end (measured: more CPU, no less time); the store
# connections use the cores instead.
_STORE_THREADS = int(os.environ.get("ANALYZER_STORE_THREADS", 1))
# Runs of small files read ahead of the batch DuckDB is storing.
_RUNS_AHEAD = 3

# A kubectl stdout line: an optional multi-pod prefix (`kubectl logs --prefix`:
# `[pod/NAME/CONTAINER] `, or stern's `NAME CONTAINER `), an optional
# `--timestamps` stamp, then the record prefix.
_POD_PREFIX_RE = r"(?:\[pod/([^/\] ]+)/[^\] ]*\] |([a-z0-9][-a-z0-9.]*) ([a-z0-9][-a-z0-9]*) )"
_STAMP_RE = r"(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:?\d\d) )"
_STDOUT_PREFIX_RE = rf"^{_POD_PREFIX_RE}?{_STAMP_RE}?(?:📥 REQUEST|✓ RESPONSE|✗ RESPONSE): "
# The same prefixes before one of the proxy's own warning lines (for
# proxy_events): they all start with one of these marks.
_EVENT_PREFIX_RE = rf"^{_POD_PREFIX_RE}?{_STAMP_RE}?(?:⚠️|🧹|🚨|ℹ️)"

Progress = Callable[[int, int], None]


@dataclass
class IngestReport:
    """What one ingestion run did (the summary prints it)."""

    files_seen: int = 0
    files_ingested: int = 0
    files_unchanged: int = 0
    files_resumed: int = 0
    lines: int = 0
    records: int = 0
    new_records: int = 0
    duplicates: int = 0
    quarantined: int = 0
    free_text: int = 0
    proxy_events: int = 0
    quarantine_samples: list[dict] = field(default_factory=list)
    #: files that could not be read as logs: ``{"path", "reason"}``
    skipped_files: list[dict] = field(default_factory=list)
    #: inputs passed over on purpose (derived Parquet tiers, FIFOs, metric files): ``{"path", "note"}``
    notes: list[dict] = field(default_factory=list)
    #: metric files found among the logs, for the metrics loader
    metric_files: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return dict(self.__dict__)


# ---------------------------------------------------------------------------
# SQL of one batch. `batch_lines` is the Arrow batch: (file_id, line_no, line,
# from_stdout, file_pod).

_STRUCT_SQL = json.dumps(RECORD_STRUCT).replace("'", "''")

def blank_sql(expr: str) -> str:
    """SQL true when ``expr`` has no visible character: analyzer.online.is_blank's rule."""
    # "No character outside BLANK_CHARS", as a regex: it stops at the first visible
    # character and copies nothing (trim(expr, chars) decodes the character set and
    # copies the text for every row: measured ~1.4 CPU-s on a week's responses).
    visible = "[^" + "".join(f"\\x{{{ord(c):x}}}" for c in BLANK_CHARS) + "]"
    return f"(NOT regexp_matches({expr}, '{visible}'))"


# The typed hot columns of `records`, computed from the parsed record `j`.
_HOT_COLUMNS = """
    ts, j.type AS type, j.request_id AS request_id,
    j.session_id AS session_id, j.client AS client, j.provider AS provider, j.model AS model,
    j.origin AS origin,
    j.message_count AS message_count, j.tools_count AS tools_count, j.enable_thinking AS enable_thinking,
    CASE WHEN j.tool_results_this_turn IS NULL OR json_type(j.tool_results_this_turn) <> 'ARRAY' THEN NULL
         ELSE json_array_length(j.tool_results_this_turn) END AS tool_results_count,
    md5(j.user_message_this_turn) AS prompt_md5,
    j.messages IS NOT NULL AS has_messages,
    -- The same test as analyzer.online.has_tool_history: a tool/function message,
    -- or an assistant message with tool calls, anywhere in the transcript.
    CASE WHEN j.messages IS NULL THEN NULL ELSE coalesce(list_bool_or(list_transform(j.messages,
        lambda m: m.role IN ('tool', 'function')
             OR (m.role = 'assistant' AND ((json_type(m.tool_calls) = 'ARRAY' AND json_array_length(m.tool_calls) > 0)
                                           OR (m.function_call IS NOT NULL AND json_type(m.function_call) <> 'NULL'))))),
        false) END AS messages_tool_history,
    j.latency_ms AS latency_ms, j.has_content AS has_content, j.has_tool_calls AS has_tool_calls,
    j.has_reasoning_content AS has_reasoning,
    CASE WHEN json_type(j.tool_calls) = 'ARRAY' THEN json_array_length(j.tool_calls) END AS tool_call_count,
    length(j.content) AS content_chars, length(j.reasoning_content) AS reasoning_chars,
    j.tokens.prompt_tokens AS prompt_tokens, j.tokens.completion_tokens AS completion_tokens,
    j.tokens.prompt_tokens_details.cached_tokens AS cached_tokens,
    j.tokens.completion_tokens_details.reasoning_tokens AS reasoning_tokens,
    CASE WHEN j.content IS NOT NULL THEN {blank}(j.content)
         WHEN j.content_preview IS NOT NULL THEN {blank}(j.content_preview) END AS content_blank,
    j.error AS error, j.upstream_headers AS upstream_headers,
    j.log_fields_version AS log_fields_version, j.upstream_status AS upstream_status,
    j.finish_reason AS finish_reason, j.max_tokens AS max_tokens,
    j.thinking_token_budget AS thinking_token_budget, j.tool_history AS tool_history,
    j.incident_class AS logged_class, j.final_class AS final_class, j.ladder AS ladder,
    j.system_sha256 AS system_sha256
""".replace("{blank}(j.content)", blank_sql("j.content")).replace("{blank}(j.content_preview)", blank_sql("j.content_preview"))

# Words that mark a free-text stdout line as data (see proxy_events).
_EVENT_WORDS = ("Slow completion", "Normalized", "Log buffer exceeded", "S3 flush failed",
                "Logging imbalance", "log_response", "log_request")

def _judged(source: str) -> str:
    """The lines of ``source`` (shaped like ``batch_lines``) parsed and judged, as CTEs ending in ``judged``."""
    return f"""
WITH cut AS (
    SELECT file_id, line_no, line, file_pod,
           CASE WHEN from_stdout THEN regexp_extract(line, '{_STDOUT_PREFIX_RE}') ELSE '' END AS pfx,
           from_stdout
    FROM {source}
),
cand AS (
    SELECT *, CASE WHEN pfx <> '' THEN substr(line, length(pfx) + 1)
                   WHEN NOT from_stdout THEN line END AS candidate
    FROM cut
),
parsed AS (
    SELECT *, try(json_transform(candidate, '{_STRUCT_SQL}')) AS j FROM cand
),
timed AS (
    SELECT *, try_cast(j.timestamp AS TIMESTAMPTZ)::TIMESTAMP AS ts FROM parsed
),
judged AS (
    SELECT *,
           CASE
             -- the common case first: CASE evaluates later branches only for the rest
             WHEN j.type IN {RECORD_TYPES} AND ts IS NOT NULL THEN 'ok'
             WHEN candidate IS NULL THEN CASE WHEN trim(line) = '' THEN 'blank' ELSE 'free_text' END
             WHEN trim(candidate) = '' THEN 'blank'
             WHEN j IS NULL THEN 'malformed JSON (invalid or cut-off line)'
             WHEN NOT starts_with(ltrim(candidate), '{{') THEN 'not a JSON object'
             WHEN j.type IS NULL OR j.type NOT IN {RECORD_TYPES}
                  THEN 'not a proxy record (no request/response/system_prompt type)'
             ELSE 'no valid timestamp'
           END AS verdict
    FROM timed
)"""


_POD_OF_PREFIX = r"""coalesce(CASE WHEN pfx <> '' THEN coalesce(nullif(regexp_extract(pfx, '^\[pod/([^/\] ]+)/', 1), ''),
                                                   nullif(regexp_extract(pfx, '^([a-z0-9][-a-z0-9.]*) [a-z0-9][-a-z0-9]* ', 1), ''))
                END, file_pod)"""

# 1. Every line that is a record goes straight into `records`: one parse, one
# write, streamed from the Arrow batch (what a bare INSERT of the same columns
# costs). De-duplication follows, on the narrow key columns. A stdout copy is
# truncated when its JSON holds the proxy's `…(+N chars)` marker; the proxy's
# json.dumps escapes the ellipsis (`\u2026`), so both spellings count.
_STORE = f"""
INSERT INTO records BY NAME
{_judged('batch_lines')}
SELECT {_HOT_COLUMNS},
       pfx <> '' AND (contains(candidate, '…(+') OR contains(candidate, '\\u2026(+')) AS truncated,
       file_id, line_no, candidate AS raw,
       {_POD_OF_PREFIX} AS proxy_pod,
       $batch AS ingest_batch
FROM judged
WHERE verdict = 'ok'
"""

# 2. The other lines (free text, blank, bad) are judged again, which costs little:
# they are few, or parse nothing. Bad ones go to quarantine, data lines to
# proxy_events.
_REST = f"""
CREATE OR REPLACE TEMP TABLE rest AS
{_judged("(SELECT * FROM batch_lines b ANTI JOIN (SELECT file_id, line_no FROM records WHERE ingest_batch = $batch) r USING (file_id, line_no))")}
SELECT file_id, line_no, verdict,
       {_POD_OF_PREFIX} AS proxy_pod,
       CASE WHEN verdict NOT IN ('ok', 'blank', 'free_text') THEN left(line, {SNIPPET_CHARS}) END AS snippet,
       CASE WHEN verdict = 'free_text' AND ({' OR '.join(f"contains(line, '{w}')" for w in _EVENT_WORDS)})
            THEN left(line, 2000) END AS event_line
FROM judged
"""


def _same(a: str, b: str) -> str:
    """The key that makes two lines the same record."""
    return f"""{a}.ts = {b}.ts AND {a}.type = {b}.type
    AND {a}.request_id IS NOT DISTINCT FROM {b}.request_id
    AND {a}.system_sha256 IS NOT DISTINCT FROM {b}.system_sha256
    AND {a}.session_id IS NOT DISTINCT FROM {b}.session_id"""


# 3. De-duplication. `older`: this batch's records already stored by an earlier
# batch (an S3 chunk and the pod's stdout, a file given twice, a day present as
# chunks and as Parquet). Bounded by the batch's time range (zone maps skip the rest).
# Batches stored but not finished yet (`ingest_pending`: later batches, stored
# beside this one) are not older: each de-duplicates against this one when it is
# finished. A stored row is named by its batch as well as its file and line: a
# file read again holds the same file and line numbers as its earlier reading.
_OLDER = f"""
CREATE OR REPLACE TEMP TABLE older AS
SELECT b.file_id, b.line_no, b.truncated, b.proxy_pod,
       r.file_id AS o_file, r.line_no AS o_line, r.ingest_batch AS o_batch, r.truncated AS o_truncated,
       r.proxy_pod AS o_pod
FROM (SELECT file_id, line_no, ts, type, request_id, system_sha256, session_id, truncated, proxy_pod
      FROM records WHERE ingest_batch = $batch) b
JOIN (SELECT file_id, line_no, ingest_batch, ts, type, request_id, system_sha256, session_id, truncated, proxy_pod
      FROM records
      WHERE ts BETWEEN $lo AND $hi AND ingest_batch IS DISTINCT FROM $batch
        AND (ingest_batch IS NULL OR ingest_batch NOT IN (SELECT batch FROM ingest_pending))) r
  ON {_same('r', 'b')}
"""

# A full copy replaces a stored truncated stdout copy (keeping the replica it named) ...
_REPLACE_TRUNCATED = [
    """UPDATE records SET proxy_pod = o.o_pod FROM older o
       WHERE records.ingest_batch = $batch AND records.file_id = o.file_id AND records.line_no = o.line_no
         AND o.o_truncated AND NOT o.truncated AND records.proxy_pod IS NULL AND o.o_pod IS NOT NULL""",
    """DELETE FROM records USING older o
       WHERE records.ingest_batch IS NOT DISTINCT FROM o.o_batch AND records.file_id = o.o_file
         AND records.line_no = o.o_line AND o.o_truncated AND NOT o.truncated""",
]
# ... and any other copy of a stored record is dropped (its replica carried over).
_DROP_SEEN = [
    """UPDATE records SET proxy_pod = o.proxy_pod FROM older o
       WHERE records.ingest_batch IS NOT DISTINCT FROM o.o_batch AND records.file_id = o.o_file
         AND records.line_no = o.o_line
         AND NOT (o.o_truncated AND NOT o.truncated) AND records.proxy_pod IS NULL AND o.proxy_pod IS NOT NULL""",
    """DELETE FROM records USING older o
       WHERE records.ingest_batch = $batch AND records.file_id = o.file_id AND records.line_no = o.line_no
         AND NOT (o.o_truncated AND NOT o.truncated)""",
]

# Copies of one record within the batch: the first full copy stays.
_TWINS = f"""
CREATE OR REPLACE TEMP TABLE twins AS
WITH mine AS (
    SELECT file_id, line_no, ts, type, request_id, system_sha256, session_id, truncated, proxy_pod
    FROM records WHERE ingest_batch = $batch
),
keys AS (
    SELECT ts, type, request_id, system_sha256, session_id FROM mine GROUP BY ALL HAVING count(*) > 1
)
SELECT m.file_id, m.line_no,
       row_number() OVER key_ AS copy_no,
       max(m.proxy_pod) OVER (PARTITION BY m.ts, m.type, m.request_id, m.system_sha256, m.session_id) AS any_pod
FROM mine m JOIN keys k ON {_same('m', 'k')}
WINDOW key_ AS (PARTITION BY m.ts, m.type, m.request_id, m.system_sha256, m.session_id
                ORDER BY m.truncated, m.file_id, m.line_no)
"""
_DROP_TWINS = [
    """UPDATE records SET proxy_pod = t.any_pod FROM twins t
       WHERE records.ingest_batch = $batch AND records.file_id = t.file_id AND records.line_no = t.line_no
         AND t.copy_no = 1 AND records.proxy_pod IS NULL""",
    """DELETE FROM records USING twins t
       WHERE records.ingest_batch = $batch AND records.file_id = t.file_id AND records.line_no = t.line_no
         AND t.copy_no > 1""",
]

# The turns these new records belong to are re-derived at the next refresh.
_MARK_DIRTY = """
INSERT INTO turns_dirty
SELECT DISTINCT coalesce(session_id, '~' || coalesce(request_id, ''))
FROM records
WHERE ingest_batch = $batch AND type IN ('request', 'response')
"""

_INSERT_QUARANTINE = """
INSERT INTO quarantine
SELECT s.file_id, f.path, s.line_no, s.verdict, s.snippet
FROM rest s JOIN batch_files f USING (file_id)
WHERE s.verdict NOT IN ('ok', 'blank', 'free_text')
"""

# Stdout lines that are data (analyzer/proxy_events): what the proxy says about
# slow turns, repaired tool calls, and records it lost.
_INSERT_EVENTS = f"""
INSERT INTO proxy_events
SELECT try_cast(nullif(trim(regexp_extract(event_line, '{_EVENT_PREFIX_RE}', 4)), '') AS TIMESTAMPTZ)::TIMESTAMP AS ts,
       coalesce(nullif(regexp_extract(event_line, '{_EVENT_PREFIX_RE}', 1), ''),
                nullif(regexp_extract(event_line, '{_EVENT_PREFIX_RE}', 2), ''), proxy_pod) AS proxy_pod,
       kind,
       nullif(regexp_extract(event_line, 'request_id=([0-9A-Za-z_-]+)', 1), '') AS request_id,
       nullif(regexp_extract(event_line, '\\(model=([^,)]+)', 1), '') AS model,
       CASE kind
         WHEN 'buffer-dropped' THEN try_cast(regexp_extract(event_line, 'dropped (\\d+) oldest', 1) AS BIGINT)
         WHEN 'logging-imbalance' THEN greatest(
             try_cast(regexp_extract(event_line, 'Logging imbalance: (\\d+) responses for (\\d+) requests', 2) AS BIGINT)
           - try_cast(regexp_extract(event_line, 'Logging imbalance: (\\d+) responses for (\\d+) requests', 1) AS BIGINT), 0)
         WHEN 'log-response-failed' THEN 1
         WHEN 'log-request-failed' THEN 1
         ELSE 0 END AS lost,
       CASE kind
         WHEN 'slow-completion' THEN try_cast(regexp_extract(event_line, 'Slow completion: (\\d+)ms', 1) AS BIGINT)
         WHEN 'normalized-arguments' THEN try_cast(regexp_extract(event_line, 'Normalized (\\d+) tool-call', 1) AS BIGINT)
         WHEN 'buffer-dropped' THEN try_cast(regexp_extract(event_line, 'exceeded (\\d+) entries', 1) AS BIGINT)
         WHEN 'flush-failed' THEN try_cast(regexp_extract(event_line, '(\\d+) entries re-queued', 1) AS BIGINT)
         WHEN 'logging-imbalance' THEN try_cast(regexp_extract(event_line, 'Logging imbalance: (\\d+) responses', 1) AS BIGINT)
         WHEN 'log-failures' THEN try_cast(regexp_extract(event_line, 'has now failed (\\d+) times', 1) AS BIGINT)
         END AS value,
       left(event_line, 500) AS text, file_id, line_no
FROM (
    SELECT *, CASE
        WHEN contains(event_line, 'Slow completion: ') THEN 'slow-completion'
        WHEN contains(event_line, 'Normalized ') AND contains(event_line, 'tool-call argument') THEN 'normalized-arguments'
        WHEN contains(event_line, 'Log buffer exceeded ') THEN 'buffer-dropped'
        WHEN contains(event_line, 'S3 flush failed') THEN 'flush-failed'
        WHEN contains(event_line, 'Logging imbalance: ') THEN 'logging-imbalance'
        WHEN contains(event_line, 'log_response failed') THEN 'log-response-failed'
        WHEN contains(event_line, 'log_request failed') THEN 'log-request-failed'
        WHEN contains(event_line, 'has now failed ') THEN 'log-failures'
        END AS kind
    FROM rest WHERE event_line IS NOT NULL
) WHERE kind IS NOT NULL
"""

_BATCH_STATS = """
SELECT file_id, sum(records), sum(quarantined), sum(free_text) FROM (
    SELECT file_id, count(*) AS records, 0 AS quarantined, 0 AS free_text
    FROM records WHERE ingest_batch = $batch GROUP BY file_id
    UNION ALL
    SELECT file_id, 0, count(*) FILTER (WHERE verdict NOT IN ('ok', 'blank', 'free_text')),
           count(*) FILTER (WHERE verdict = 'free_text')
    FROM rest GROUP BY file_id
) GROUP BY file_id
"""


# ---------------------------------------------------------------------------
# Planning: which files need reading, and from where.

@dataclass
class _Todo:
    """A file to read: new (file_id None), changed (read whole again) or part-read (resume)."""

    source: SourceFile
    file_id: int | None = None
    resume_bytes: int = 0
    resume_lines: int = 0
    new_id: int | None = None  # allocated in bulk for new files


def _plan(con: duckdb.DuckDBPyConnection, files: list[SourceFile], report: IngestReport) -> list[_Todo]:
    """Which files need reading: new ones, part-read ones, and known ones whose content changed."""
    # A re-run over thousands of known chunks finds them unchanged from these three
    # columns; the others are fetched only when some file is new, part-read or changed.
    quick = {path: (size, mtime, complete) for path, size, mtime, complete in con.execute(
        "SELECT path, size_bytes, mtime, complete FROM source_files").fetchall()}
    pending = []
    for f in files:
        prev = quick.get(f.path)
        if prev is not None and f._form != STDIN and prev[2] is not False and prev[0] == f.size and prev[1] == f.mtime:
            report.files_unchanged += 1
        else:
            pending.append(f)
    if not pending:
        return []
    known = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT path, file_id, size_bytes, mtime, fingerprint, bytes_done, lines_done, complete FROM source_files"
        ).fetchall()
    }
    todo = []
    for f in pending:
        prev = known.get(f.path)
        if prev is None or f._form == STDIN:  # (`f.form` would read every known file's head)
            todo.append(_Todo(f))
            continue
        file_id, size, mtime, fp, bytes_done, lines_done, complete = prev
        if complete is False:
            if f.fingerprint() == fp:
                report.files_resumed += 1
                todo.append(_Todo(f, file_id, bytes_done or 0, lines_done or 0))
            else:
                todo.append(_Todo(f, file_id))
            continue
        if size == f.size and mtime == f.mtime:
            report.files_unchanged += 1
            continue
        if size == f.size and fp == f.fingerprint():
            con.execute("UPDATE source_files SET mtime = ? WHERE file_id = ?", [f.mtime, file_id])
            report.files_unchanged += 1
            continue
        todo.append(_Todo(f, file_id))  # changed (a growing stdout log): read again; dedup keeps it single
    return todo


# ---------------------------------------------------------------------------
# Reading: every form becomes LineBlocks.

# ---------------------------------------------------------------------------
# Batches.

@dataclass
class _FileState:
    """What this run has read of one file so far."""

    todo: _Todo
    file_id: int
    bytes_done: int = 0
    lines_done: int = 0
    complete: bool = False
    records: int = 0
    quarantined: int = 0
    free_text: int = 0
    lines: int = 0
    registered: bool = False  # has a source_files row (committed or in this batch)
    reset: bool = False  # re-read whole: old quarantine rows go at its first batch


class _Batch:
    """Lines gathered for one transaction, and the file progress they complete."""

    def __init__(self) -> None:
        self.pieces: list = []  # Arrow record batches shaped like _batch_schema()
        self.long_lines: list[tuple[int, str, int, str, str]] = []
        self.files: dict[int, _FileState] = {}
        self.nbytes = 0
        self.lines = 0
        # small pieces, not yet made columns: (lines, file_id, first_line, from_stdout, pod)
        self.small: list[tuple] = []
        self.small_bytes = 0

    def seal(self) -> None:
        """Make the small pieces gathered so far Arrow batches: one per run of consecutive slices
        of one array (no copy), else one merged batch (a copy)."""
        if not self.small:
            return
        groups: list[list[tuple]] = []
        key = None
        for item in self.small:
            lines = item[0]
            k = lines.buffers()[1].address
            if not groups or k != key or lines.offset != groups[-1][-1][0].offset + len(groups[-1][-1][0]):
                groups.append([])
            groups[-1].append(item)
            key = k
        # A long run of slices stays one uncopied batch; short ones (files read one by
        # one: gzip chunks, say) are merged until a batch is worth DuckDB's scan.
        cur: list[tuple] = []
        cur_lines = 0
        for g in groups:
            n = sum(len(it[0]) for it in g)
            if cur and (cur_lines >= _SMALL_PIECE or n >= _SMALL_PIECE):
                self.pieces.append(_columns(cur))
                cur, cur_lines = [], 0
            cur.extend(g)
            cur_lines += n
        if cur:
            self.pieces.append(_columns(cur))
        self.small, self.small_bytes = [], 0

    def add(self, state: _FileState, piece: LineBlock, stdout: bool, pod: str | None) -> None:
        n = len(piece.lines)
        self.files[state.file_id] = state
        if not n:
            return
        item = (piece.lines, state.file_id, piece.first_line, stdout, pod)
        if n < _SMALL_PIECE:
            # Thousands of small chunk files make thousands of small pieces, and both
            # building columns per piece and DuckDB scanning many tiny batches cost
            # per piece: they are gathered and made columns together, some MB at a
            # time (slices of one run of files without a copy, others merged).
            self.small.append(item)
            self.small_bytes += piece.nbytes
            if self.small_bytes >= _SEAL_BYTES:
                self.seal()
        else:
            self.pieces.append(_columns([item]))
        self.nbytes += piece.nbytes
        self.lines += n
        self.files[state.file_id] = state

    def touch(self, state: _FileState) -> None:
        self.files[state.file_id] = state

    def empty(self) -> bool:
        return not self.files


_SMALL_PIECE = 4096  # lines: pieces smaller than this are merged
_SEAL_BYTES = 16 * 1024 * 1024  # merged a few MB at a time


def _batch_schema():
    pa, _ = arrow()
    return pa.schema([
        ("file_id", pa.int32()), ("line_no", pa.int64()), ("line", pa.large_string()),
        ("from_stdout", pa.bool_()), ("file_pod", pa.large_string()),
    ])


def _columns(items: list[tuple]):
    """One Arrow batch (``batch_lines``' shape) of pieces ``(lines, file_id, first_line, from_stdout, pod)``.

    The per-line columns are run-length decoded from one value per piece: the
    cost is per line in C++, not per piece in Python.
    """
    pa, pc = arrow()
    ends, at = [], 0
    for it in items:
        at += len(it[0])
        ends.append(at)
    ends_arr = pa.array(ends, pa.int32())

    def runs(values, typ):
        return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends_arr, pa.array(values, typ)))

    starts = [e - len(it[0]) for e, it in zip(ends, items)]
    index = pc.cumulative_sum(pa.nulls(at, pa.int64()).fill_null(1), start=-1)  # 0, 1, 2, ...
    cols = [
        runs([it[1] for it in items], pa.int32()),
        pc.add(index, runs([it[2] - s for it, s in zip(items, starts)], pa.int64())),
        _joined([it[0] for it in items]),
        runs([it[3] for it in items], pa.bool_()),
        runs([it[4] for it in items], pa.large_string()),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=_batch_schema())


def _joined(arrays: list):
    """The arrays one after the other: without a copy when they are consecutive slices of one
    array (the files of a run of small files), else concatenated."""
    pa, _ = arrow()
    if len(arrays) == 1:
        return arrays[0]
    first = arrays[0]
    bufs = first.buffers()
    at = first.offset + len(first)
    for a in arrays[1:]:
        if a.offset != at or a.buffers()[1].address != bufs[1].address:
            return pa.concat_arrays(arrays)
        at += len(a)
    return pa.Array.from_buffers(first.type, at - first.offset, bufs, offset=first.offset)


# An S3 chunk named by a newer proxy: `HH-MM-SS-<host>-<pid>-<8hex>.jsonl`, where
# the host is the pod's $HOSTNAME, i.e. the replica that wrote it.
_CHUNK_NAME = re.compile(r"^\d\d-\d\d-\d\d-(.+)-\d+-[0-9a-f]{8}\.jsonl(?:\.gz)?$")


def chunk_pod(path: str) -> str | None:
    """The proxy replica named by an S3 chunk's file name, if it names one."""
    m = _CHUNK_NAME.match(os.path.basename(path))
    return m.group(1) if m and m.group(1) != "nohost" else None


@dataclass
class _Sealed:
    """A batch cut and handed to a store connection, with what it needs to be finished."""

    n: dict  # {"batch": its number in records.ingest_batch}
    table: object  # the Arrow table of its lines, shaped like _batch_schema()
    progress: list  # (file state, lines_done, bytes_done, complete) when it was cut
    registry: dict  # its files' registry columns (_registry_rows)
    long_lines: list
    done: int = 0  # input bytes read when it was cut (for the progress callback)
    nbytes: int = 0  # its lines' bytes
    future: object = None


class _Ingest:
    """One ingestion run over planned files."""

    def __init__(self, con, report: IngestReport, strict: bool, progress: Progress | None, total: int):
        self.con = con
        self.report = report
        self.strict = strict
        self.progress = progress
        self.total = total
        self.done = 0
        self.batch = _Batch()
        self.now = datetime.now(timezone.utc).replace(tzinfo=None)
        self.inflight: deque[_Sealed] = deque()  # stored or being stored, not yet finished
        self.room = BATCH_BYTES  # what the batch being read may hold (_room)
        self._stores = None  # the store connections' threads, started with the first batch
        self._cursors: list = []
        self._free: list = []
        self._lock = threading.Lock()

    # -- files -------------------------------------------------------------
    def read_all(self, todos: Iterable[_Todo]) -> None:
        """Read the planned files in order; runs of small plain files are read ahead, whole, in a thread."""
        todos = list(todos)
        small = [t for t in todos if self._small(t)]
        if len(small) < 2:  # nothing to gain from a reader of runs
            for t in todos:
                self.read_file(t)
            return
        runs = prefetch(whole_files(small, cap=_SMALL_FILE), depth=_RUNS_AHEAD)
        ahead: list[WholeFile] = []
        try:
            for t in todos:
                if not self._small(t):
                    self.read_file(t)
                    continue
                if not ahead:
                    ahead = next(runs)
                self._whole_file(ahead.pop(0))
        finally:
            runs.close()

    @staticmethod
    def _small(t: _Todo) -> bool:
        """A file read whole with others (:func:`whole_files`): small, plain text, newline-separated, from its start."""
        f = t.source
        return (f.form in (JSONL, KUBECTL) and not f.compressed and f.separator == b"\n"
                and not t.resume_bytes and f.size <= _SMALL_FILE)

    def _new_state(self, todo: _Todo) -> _FileState:
        return _FileState(todo, file_id=todo.file_id if todo.file_id is not None else self._new_id(todo),
                          bytes_done=todo.resume_bytes, lines_done=todo.resume_lines,
                          registered=todo.file_id is not None,
                          reset=todo.file_id is not None and not todo.resume_lines)

    def _whole_file(self, w: WholeFile) -> None:
        """One small file read whole: its lines into the batch, the file complete."""
        todo = w.todo
        f = todo.source
        if w.fallback:
            self.read_file(todo)
            return
        state = self._new_state(todo)
        if w.error is not None:  # as read_file does with a file that fails before its first line
            self._skip(f, w.error, state)
            if not state.registered:
                self.done += f.size  # nothing read: not registered, so the next run tries again
                return
        if w.block is not None:
            self._add(state, w.block, KUBECTL in (f.form, f.text_form), chunk_pod(f.path) if f.form == JSONL else None)
        state.complete = True
        self.batch.touch(state)
        self.done += f.size
        if self.batch.nbytes >= self.room or self.batch.lines >= BATCH_LINES:
            self.flush()

    def read_file(self, todo: _Todo) -> None:
        f = todo.source
        state = self._new_state(todo)
        try:  # taken now, while the file is there: its registry row needs it
            f.fingerprint()
        except FormError as exc:
            self._skip(f, exc.reason, state)
            self.done += f.size
            return
        stdout = KUBECTL in (f.form, f.text_form)
        pod = chunk_pod(f.path) if f.form == JSONL else None
        disk = [0]
        if f.form == PARQUET:
            pieces = prefetch(parquet_pieces(todo, disk))
        elif f.form == STDIN:  # not read ahead: an idle pipe commits from this thread
            pieces = stdin_pieces(todo, disk, on_idle=self._flush_if_pending, block=_READ_BLOCK)
        elif f.size > 4 * _READ_BLOCK:  # small files gain nothing from a thread of their own
            pieces = prefetch(text_pieces(todo, disk, block=_READ_BLOCK))
        else:
            pieces = text_pieces(todo, disk, block=_READ_BLOCK)
        start_done = self.done
        try:
            for piece in pieces:
                if isinstance(piece, LongLine):
                    self._long_line(state, piece)
                else:
                    self._add(state, piece, stdout, pod)
                self.done = start_done + min(disk[0], f.size or disk[0])
                if self.batch.nbytes >= self.room or self.batch.lines >= BATCH_LINES:
                    self.flush()
        except FileFailed as exc:
            self._skip(f, str(exc), state)
            if not state.lines_done and not state.registered:
                self.done = start_done + f.size  # nothing read: not registered, so the next run tries again
                return
        state.complete = True
        self.batch.touch(state)
        self.done = start_done + (f.size or disk[0])
        if f.form == STDIN:
            self.drain()

    def _add(self, state: _FileState, piece: LineBlock, stdout: bool, pod: str | None) -> None:
        """Add lines to the batch, cutting a block where the batch reaches whole row groups."""
        while True:
            room = BATCH_LINES - self.batch.lines
            if len(piece.lines) <= room or not piece.exact:
                break
            if room > 0:
                head, piece = piece.split(room)
                self._take(state, head, stdout, pod)
            self.flush()
        self._take(state, piece, stdout, pod)

    def _take(self, state: _FileState, piece: LineBlock, stdout: bool, pod: str | None) -> None:
        self.batch.add(state, piece, stdout, pod)
        state.bytes_done = piece.end_offset
        state.lines_done = piece.first_line + len(piece.lines) - 1

    def _new_id(self, todo: _Todo) -> int:
        if todo.new_id is None:
            return self.con.execute("SELECT nextval('source_file_ids')").fetchall()[0][0]
        return todo.new_id

    def _long_line(self, state: _FileState, piece: LongLine) -> None:
        reason = f"line longer than {piece.length:,} bytes (limit ANALYZER_MAX_LINE_BYTES): not kept"
        head = piece.head.decode("utf-8", errors="replace")[:SNIPPET_CHARS]
        if self.strict:
            raise InputError(f"{state.todo.source.path}:{piece.line_no}: {reason} (--strict)", ExitCode.BAD_INPUT)
        self.batch.long_lines.append((state.file_id, state.todo.source.path, piece.line_no, reason, head))
        state.bytes_done = piece.end_offset
        state.lines_done = piece.line_no
        self.batch.touch(state)

    def _skip(self, f: SourceFile, reason: str, state: _FileState | None = None) -> None:
        read = f" (after {state.lines_done:,} lines, which are kept)" if state and state.lines_done else ""
        self.report.skipped_files.append({"path": f.path, "reason": reason + read})

    def _flush_if_pending(self) -> None:
        if self.batch.nbytes:
            self.drain()  # an idle pipe: what it sent is committed now

    # -- batches: stored two at a time, finished in order --------------------
    def flush(self) -> None:
        """Hand the gathered batch to a store connection, finish the one before, and return to read on.

        A batch is two transactions. The store (on one of ``_STORES`` connections,
        in a thread of its own) inserts its records and marks the batch in
        ``ingest_pending``. The finish (on this connection, batch after batch)
        judges the other lines, de-duplicates, writes quarantine, events and the
        files' progress, and clears the mark. So while DuckDB stores a batch on
        one core, this thread finishes the one before and reads the next on the
        other: the stores run back to back (measured on a week: the finishing and
        reading that came between them were a fifth of the ingest). DuckDB's
        INSERT of one batch uses one core well and two poorly (measured); with
        ``ANALYZER_STORES=2`` two batches are stored at once.
        A run killed between the two leaves a marked batch, which the next
        connection removes (:func:`analyzer.db.discard_unfinished_batches`): the
        files' progress was not advanced, so its lines are read again.
        """
        batch, self.batch = self.batch, _Batch()
        if batch.empty():
            return
        batch.seal()
        pa, _ = arrow()
        sealed = _Sealed(
            n={"batch": self.con.execute("SELECT nextval('ingest_batches')").fetchall()[0][0]},
            table=pa.Table.from_batches(batch.pieces, schema=_batch_schema()),
            # what each file had reached when this batch was cut (reading goes on meanwhile)
            progress=[(st, st.lines_done, st.bytes_done, st.complete) for st in batch.files.values()],
            registry=self._registry_rows(batch),
            long_lines=batch.long_lines,
            done=self.done,
            nbytes=batch.nbytes,
        )
        sealed.future = self._pool().submit(self._store, sealed)
        self.inflight.append(sealed)
        # Read ahead only into room for a whole row group of lines like these: a batch
        # of fewer rows is not written as its own row groups but appended row by row
        # through the WAL at commit, then checkpointed (measured: seconds a batch).
        whole = min(BATCH_BYTES, int(1.1 * BATCH_LINES * sealed.nbytes / max(1, len(sealed.table))))
        while self.inflight and (len(self.inflight) >= _IN_FLIGHT or self._room() < whole):
            self._finish(self.inflight.popleft())
        self.room = self._room()

    def _room(self) -> int:
        """The bytes the batch being read may hold, beside the batches in flight."""
        return min(BATCH_BYTES, _FLIGHT_BYTES - sum(s.nbytes for s in self.inflight))

    def drain(self) -> None:
        """Finish every batch handed to a store connection."""
        self.flush()
        while self.inflight:
            self._finish(self.inflight.popleft())
        self.room = self._room()

    def close(self, *, abandon: bool = False) -> None:
        """Stop the store connections: after :meth:`drain`, or ``abandon``-ing the batches in flight."""
        if abandon:
            for s in self.inflight:
                s.future.cancel()
            for cur in self._cursors:
                try:
                    cur.interrupt()
                except duckdb.Error:  # closed already
                    pass
        if self._stores is not None:
            self._stores.shutdown(wait=True)
            for cur in self._cursors:
                cur.close()
            self._stores = None
        self.inflight.clear()

    def _pool(self):
        if self._stores is None:
            from concurrent.futures import ThreadPoolExecutor

            from .interrupt import track

            self._cursors = []
            for _ in range(_STORES):
                cur = self.con.cursor()
                cur.execute("SET TimeZone = 'UTC'")  # as analyzer.db.connect: timestamps are UTC
                track(cur)
                self._cursors.append(cur)
            self._free = list(self._cursors)
            self._stores = ThreadPoolExecutor(max_workers=_STORES, thread_name_prefix="analyzer-store")
        return self._stores

    def _store(self, s: "_Sealed") -> int:
        """The first transaction of a batch: its records, typed and raw, and the pending mark."""
        with self._lock:
            cur = self._free.pop()
        try:
            cur.register("batch_lines", s.table)
            try:
                with transaction(cur):
                    inserted = cur.execute(_STORE, s.n).fetchall()[0][0]
                    cur.execute("INSERT INTO ingest_pending VALUES ($batch, now())", s.n)
            finally:
                cur.unregister("batch_lines")
        finally:
            with self._lock:
                self._free.append(cur)
        return inserted

    def _finish(self, s: "_Sealed") -> None:
        """The second transaction of a batch (in batch order): everything but the records' insert."""
        inserted = s.future.result()  # the store's error, if it failed, surfaces here
        con = self.con
        n = s.n
        con.register("batch_lines", s.table)
        try:
            with transaction(con):
                self._register_files(s.registry)
                con.execute(_REST, n)
                stats = {r[0]: tuple(int(x) for x in r[1:]) for r in con.execute(_BATCH_STATS, n).fetchall()}
                bad = sum(st[1] for st in stats.values())
                if self.strict and bad:
                    first = con.execute(
                        "SELECT f.path, s.line_no, s.verdict FROM rest s JOIN batch_files f USING (file_id) "
                        "WHERE s.verdict NOT IN ('ok', 'blank', 'free_text') ORDER BY f.path, s.line_no LIMIT 1"
                    ).fetchall()[0]
                    raise InputError(f"{first[0]}:{first[1]}: {first[2]} (--strict; {bad} bad line(s) in this batch)",
                                     ExitCode.BAD_INPUT)
                new = inserted - self._deduplicate(n) if inserted else 0
                con.execute(_MARK_DIRTY, n)
                con.execute(_INSERT_QUARANTINE)
                if s.long_lines:
                    con.executemany("INSERT INTO quarantine VALUES (?, ?, ?, ?, ?)", s.long_lines)
                events = con.execute(_INSERT_EVENTS).fetchall()[0][0]
                self._update_files(s.progress, stats, s.long_lines)
                con.execute("DROP TABLE rest")
                con.execute("DELETE FROM ingest_pending WHERE batch = $batch", n)
        finally:
            con.unregister("batch_lines")
        r = self.report
        lines = len(s.table)
        recs = sum(st[0] for st in stats.values())
        r.lines += lines + len(s.long_lines)
        r.records += recs
        r.new_records += new
        r.duplicates = r.records - r.new_records
        r.quarantined += bad + len(s.long_lines)
        r.free_text += sum(st[2] for st in stats.values())
        r.proxy_events += events
        if self.progress:
            self.progress(min(s.done, self.total), self.total)

    def _deduplicate(self, n: dict) -> int:
        """Drop this batch's copies of records stored before, or twice in it; return how many went.

        A stored truncated stdout copy that this batch holds whole is replaced by
        it (and counted as gone: the record is not new).
        """
        con = self.con
        lo, hi = con.execute("SELECT min(ts), max(ts) FROM records WHERE ingest_batch = $batch", n).fetchall()[0]
        gone = 0
        con.execute(_OLDER, {**n, "lo": lo, "hi": hi})
        if con.execute("SELECT count(*) FROM older").fetchall()[0][0]:
            for sql in (*_REPLACE_TRUNCATED, *_DROP_SEEN):
                changed = con.execute(sql, n if "$batch" in sql else None).fetchall()[0][0]
                if sql.lstrip().startswith("DELETE"):
                    gone += changed
        con.execute("DROP TABLE older")
        con.execute(_TWINS, n)
        if con.execute("SELECT count(*) FROM twins").fetchall()[0][0]:
            for sql in _DROP_TWINS:
                changed = con.execute(sql, n).fetchall()[0][0]
            gone += changed
        con.execute("DROP TABLE twins")
        return gone

    def _registry_rows(self, batch: _Batch) -> dict[str, list]:
        """The registry columns of a batch's files, taken when it is cut (the next batch sees them registered)."""
        cols: dict[str, list] = {k: [] for k in ("file_id", "path", "form", "size_bytes", "mtime", "fingerprint",
                                                 "is_new", "reset")}
        for st in batch.files.values():
            f = st.todo.source
            for k, v in (("file_id", st.file_id), ("path", f.path), ("form", f.form), ("size_bytes", f.size),
                         ("mtime", f.mtime), ("fingerprint", f.fingerprint()), ("is_new", not st.registered),
                         ("reset", st.registered and st.reset)):
                cols[k].append(v)
            st.registered, st.reset = True, False
        return cols

    def _register_files(self, cols: dict[str, list]) -> None:
        """New files get their registry row (part-read until complete); re-read files lose old rows.

        One statement for the whole batch, however many files it holds: a batch of
        thousands of small chunks costs no more registry work than one big file.
        """
        pa, _ = arrow()
        self.con.register("_batch_files_arrow", pa.table(cols))
        try:
            self.con.execute("CREATE OR REPLACE TEMP TABLE batch_files AS SELECT * FROM _batch_files_arrow")
        finally:
            self.con.unregister("_batch_files_arrow")
        self.con.execute(
            """INSERT INTO source_files (file_id, path, form, size_bytes, mtime, fingerprint, lines, records,
                                         quarantined, free_text, ingested_at, bytes_done, lines_done, complete)
               SELECT file_id, path, form, size_bytes, mtime, fingerprint, 0, 0, 0, 0, $now, 0, 0, false
               FROM batch_files WHERE is_new""", {"now": self.now})
        if any(cols["reset"]):
            self.con.execute("DELETE FROM quarantine WHERE file_id IN (SELECT file_id FROM batch_files WHERE reset)")
            self.con.execute("DELETE FROM proxy_events WHERE file_id IN (SELECT file_id FROM batch_files WHERE reset)")
            self.con.execute(
                """UPDATE source_files s SET size_bytes = b.size_bytes, mtime = b.mtime, fingerprint = b.fingerprint,
                          lines = 0, records = 0, quarantined = 0, free_text = 0, complete = false
                   FROM batch_files b WHERE b.reset AND s.file_id = b.file_id""")

    def _update_files(self, progress: list[tuple], stats: dict, long_lines: list) -> None:
        """The batch's progress through each of its files, in one statement."""
        long_by_file: dict[int, int] = {}
        for x in long_lines:
            long_by_file[x[0]] = long_by_file.get(x[0], 0) + 1
        cols: dict[str, list] = {k: [] for k in ("file_id", "lines_done", "records", "quarantined", "free_text",
                                                 "bytes_done", "complete", "size_bytes")}
        for st, lines_done, bytes_done, complete in progress:
            rec, bad, free = stats.get(st.file_id, (0, 0, 0))
            f = st.todo.source
            for k, v in (("file_id", st.file_id), ("lines_done", lines_done), ("records", rec),
                         ("quarantined", bad + long_by_file.get(st.file_id, 0)), ("free_text", free),
                         ("bytes_done", bytes_done), ("complete", complete),
                         ("size_bytes", f.size if f.form != STDIN else bytes_done)):
                cols[k].append(v)
        pa, _ = arrow()
        self.con.register("_progress_arrow", pa.table(cols))
        try:
            self.con.execute(
                """UPDATE source_files s SET lines = u.lines_done, records = s.records + u.records,
                          quarantined = s.quarantined + u.quarantined, free_text = s.free_text + u.free_text,
                          bytes_done = u.bytes_done, lines_done = u.lines_done, complete = u.complete,
                          ingested_at = $now, size_bytes = u.size_bytes
                   FROM _progress_arrow u WHERE s.file_id = u.file_id""", {"now": self.now})
        finally:
            self.con.unregister("_progress_arrow")
        self.report.files_ingested += sum(1 for p in progress if p[3])


def _record_skipped(con: duckdb.DuckDBPyConnection, report: IngestReport, now: datetime) -> None:
    """Keep the files this run skipped in ``skipped_files`` (one row per path, the latest reason)."""
    if not report.skipped_files:
        return
    with transaction(con):
        for s in report.skipped_files:
            con.execute("DELETE FROM skipped_files WHERE path = ?", [s["path"]])
            con.execute("INSERT INTO skipped_files VALUES (?, ?, ?, ?, ?)",
                        [s["path"], s["reason"], s.get("size"), s.get("mtime"), now])


def ingest(
    con: duckdb.DuckDBPyConnection,
    inputs: list[str] | list[SourceFile] | Discovered,
    *,
    strict: bool = False,
    progress: Progress | None = None,
) -> IngestReport:
    """Read log files into the database; return what was done.

    Args:
        con: a connection from :func:`analyzer.db.connect`.
        inputs: files, directories, globs and ``-`` for standard input (or what
            :func:`analyzer.sources.discover_inputs` found).
        strict: raise :class:`InputError` on the first batch with a malformed line
            (that batch is rolled back) instead of quarantining it.
        progress: called with ``(bytes_done, bytes_total)`` after each batch.

    Files that cannot be read are skipped and listed in the report's
    ``skipped_files`` (and the ``skipped_files`` table); every other file is read.

    Raises:
        InputError: an argument matches nothing; under ``strict``, a malformed line.
    """
    # Callers that already expanded the inputs (to fail before opening a
    # database) pass the SourceFiles; discovery is not done twice.
    if isinstance(inputs, Discovered):
        found = inputs
    elif inputs and all(isinstance(i, SourceFile) for i in inputs):
        found = discover_inputs([], files=list(inputs))  # type: ignore[arg-type]
    else:
        found = discover_inputs([str(i) for i in inputs])
    report = IngestReport(files_seen=len(found.files))
    report.notes.extend(found.notes)
    report.skipped_files.extend(found.skipped)
    todo = []
    # Only files to read are opened: a re-run over thousands of known chunks reads none.
    for t in _plan(con, found.files, report):
        f = t.source
        try:  # telling the form reads a file's first bytes: a failure skips that file only
            form = f.form
        except FormError as exc:
            report.skipped_files.append({"path": f.path, "reason": exc.reason, "size": f.size, "mtime": f.mtime})
            continue
        if form == "metrics":
            report.metric_files.append(f.path)
            report.notes.append({"path": f.path, "note": "Prometheus metrics among the logs: loaded as metrics"})
            continue
        todo.append(t)
    fresh = [t for t in todo if t.file_id is None]
    if fresh:
        ids = con.execute("SELECT nextval('source_file_ids') FROM range(?)", [len(fresh)]).fetchall()
        for t, (i,) in zip(fresh, ids):
            t.new_id = i
    if todo:
        # pyarrow's default allocator (mimalloc) keeps freed batches mapped; the
        # system allocator hands them back, which keeps a long ingest's peak memory
        # near one batch (measured: ~100-200 MB less peak RSS on a week). Arrow is
        # loaded only when there is something to read.
        pa, _ = arrow()
        pa.set_memory_pool(pa.system_memory_pool())
    total = sum(t.source.size for t in todo)
    run = _Ingest(con, report, strict, progress, total)
    if progress:
        progress(0, total)
    with _ingest_settings(con):
        try:
            run.read_all(_ordered(todo))
            run.drain()
        except BaseException:
            run.close(abandon=True)  # the batches in flight are abandoned ...
            _discard_after_abort(con)  # ... and what they stored removed
            raise
        run.close()
    _record_skipped(con, report, run.now)
    report.quarantine_samples = [
        {"path": p, "line_no": n, "reason": r}
        for p, n, r in con.execute(
            "SELECT path, line_no, reason FROM quarantine ORDER BY path, line_no LIMIT 5"
        ).fetchall()
    ]
    return report


def _discard_after_abort(con: duckdb.DuckDBPyConnection) -> None:
    """Remove what abandoned batches stored, on the way out of a failed or interrupted run.

    Ctrl-C also wakes a thread that interrupts every connection, and it may do so
    while a rollback or this runs (leaving the transaction aborted, not rolled
    back): rolled back and tried a few times. If it still fails, the next
    connection removes them (:func:`analyzer.db.discard_unfinished_batches`).
    """
    for _ in range(5):
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:  # no transaction open: the usual case
            pass
        try:
            discard_unfinished_batches(con)
            return
        except duckdb.Error:
            time.sleep(0.05)


@contextmanager
def _ingest_settings(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB's settings for storing batches (they are the database's, shared by its connections)."""
    before = con.execute("SELECT current_setting('threads'), current_setting('preserve_insertion_order')").fetchall()[0]
    if _STORE_THREADS:
        con.execute(f"SET threads = {_STORE_THREADS}")
    # Row order in `records` carries no meaning (file and line say where a record
    # came from); not keeping it lets DuckDB write row groups as they fill.
    con.execute("SET preserve_insertion_order = false")
    try:
        yield
    finally:
        con.execute(f"SET threads = {int(before[0])}")
        con.execute(f"SET preserve_insertion_order = {'true' if before[1] else 'false'}")


def _ordered(todo: list[_Todo]) -> Iterable[_Todo]:
    """Full copies before stdout copies (fewer truncated rows to replace), Parquet last."""
    rank = {JSONL: 0, KUBECTL: 1, PARQUET: 2, STDIN: 3}
    return sorted(todo, key=lambda t: rank.get(t.source.form, 9))
