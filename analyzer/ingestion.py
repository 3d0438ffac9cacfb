"""Ingest proxy logs into the database: fast, in bounded memory, losing nothing, re-runnable.

One streaming pass. Python reads every input a block at a time
(:mod:`analyzer.linereader`: plain, gzip, standard input; Parquet's ``entry``
column by row batch) and hands Arrow arrays of numbered lines to DuckDB; it never
touches a line one by one. Lines from many small files, or from a slice of a big
one, gather into a batch of about ``BATCH_BYTES``; each batch is one transaction:

1. ``stage``: every line parsed once (``json_transform``) into its verdict,
   provenance and typed hot columns -- not the line itself, which stays in the
   Arrow batch;
2. de-duplication against the batch and the database (keyed by type, request id,
   system prompt hash, session and timestamp; a stdout copy whose fields were cut
   to 200 characters is replaced by the full copy when that arrives);
3. the winners inserted with their original text (``raw``), joined back from the
   batch; bad lines into ``quarantine`` with file and line; stdout lines that are
   data into ``proxy_events``; the files' progress into ``source_files``.

A big file is many batches: ``source_files`` records how far each file has been
committed (bytes and lines), so a killed run leaves the database consistent and
the next run resumes where it stopped. A file that cannot be read (a fake or
truncated gzip, an unreadable file, a Parquet file with another schema) is
recorded in ``skipped_files`` and costs no other file its records.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from .db import transaction
from .errors import ExitCode, InputError
from .linereader import LineBlock, LongLine, read_lines
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
    "reasoning_content": "VARCHAR",
    "tool_calls": "JSON",
    "tokens": {
        "prompt_tokens": "BIGINT",
        "completion_tokens": "BIGINT",
        "prompt_tokens_details": {"cached_tokens": "BIGINT"},
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
# Input bytes per transaction (override with $ANALYZER_BATCH_BYTES). Big enough
# that a commit fills DuckDB row groups (122,880 rows) on real record sizes, small
# enough that the Arrow batch plus DuckDB's working set stay well under 1 GB.
BATCH_BYTES = int(os.environ.get("ANALYZER_BATCH_BYTES", 160 * 1024 * 1024))
# Bytes read at a time: a big file is cut into batches at block boundaries.
_READ_BLOCK = max(4096, min(8 * 1024 * 1024, BATCH_BYTES // 4))
#: Standard input commits what has arrived after this many idle seconds.
STDIN_IDLE_FLUSH_S = 2.0

# A kubectl stdout line: an optional multi-pod prefix (`kubectl logs --prefix`:
# `[pod/NAME/CONTAINER] `, or stern's `NAME CONTAINER `), an optional
# `--timestamps` stamp, then the record prefix.
_POD_PREFIX_RE = r"(?:\[pod/([^/\] ]+)/[^\] ]*\] |([a-z0-9][-a-z0-9.]*) ([a-z0-9][-a-z0-9]*) )"
_STAMP_RE = r"(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:?\d\d) )"
_STDOUT_PREFIX_RE = rf"^{_POD_PREFIX_RE}?{_STAMP_RE}?(?:📥 REQUEST|✓ RESPONSE|✗ RESPONSE): "
# The same prefix before a free-text line (for proxy_events).
_FREE_PREFIX_RE = rf"^(?:\[pod/([^/\] ]+)/[^\] ]*\] )?{_STAMP_RE}?"

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
    j.error AS error, j.upstream_headers AS upstream_headers,
    j.log_fields_version AS log_fields_version, j.upstream_status AS upstream_status,
    j.finish_reason AS finish_reason, j.max_tokens AS max_tokens,
    j.thinking_token_budget AS thinking_token_budget, j.tool_history AS tool_history,
    j.incident_class AS logged_class, j.final_class AS final_class, j.ladder AS ladder,
    j.system_sha256 AS system_sha256
"""

# Words that mark a free-text stdout line as data (see proxy_events).
_EVENT_WORDS = ("Slow completion", "Normalized", "Log buffer exceeded", "S3 flush failed",
                "Logging imbalance", "log_response", "log_request")

_STAGE = f"""
CREATE OR REPLACE TEMP TABLE stage AS
WITH cut AS (
    SELECT file_id, line_no, line, file_pod,
           CASE WHEN from_stdout THEN regexp_extract(line, '{_STDOUT_PREFIX_RE}') ELSE '' END AS pfx,
           from_stdout
    FROM batch_lines
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
)
SELECT file_id, line_no, verdict, length(pfx) AS pfx_len,
       CASE WHEN verdict = 'ok' THEN candidate END AS raw,
       coalesce(CASE WHEN pfx <> '' THEN coalesce(nullif(regexp_extract(pfx, '^\\[pod/([^/\\] ]+)/', 1), ''),
                                                   nullif(regexp_extract(pfx, '^([a-z0-9][-a-z0-9.]*) [a-z0-9][-a-z0-9]* ', 1), ''))
                END, file_pod) AS proxy_pod,
       pfx <> '' AND contains(candidate, '…(+') AS truncated,
       CASE WHEN verdict NOT IN ('ok', 'blank', 'free_text') THEN left(line, {SNIPPET_CHARS}) END AS snippet,
       CASE WHEN verdict = 'free_text' AND ({' OR '.join(f"contains(line, '{w}')" for w in _EVENT_WORDS)})
            THEN left(line, 2000) END AS event_line,
       {_HOT_COLUMNS}
FROM judged
"""

# The key that makes two lines the same record.
_SAME_RECORD = """
    r.ts = s.ts AND r.type = s.type
    AND r.request_id IS NOT DISTINCT FROM s.request_id
    AND r.system_sha256 IS NOT DISTINCT FROM s.system_sha256
    AND r.session_id IS NOT DISTINCT FROM s.session_id
"""

# A stored copy's replica carries over to a new copy of the same record (the full
# S3 copy has no pod; the stdout copy that named it may have come first).
_POD_FROM_RECORDS = f"""
UPDATE stage s SET proxy_pod = r.proxy_pod
FROM records r
WHERE s.verdict = 'ok' AND s.proxy_pod IS NULL AND r.proxy_pod IS NOT NULL
  AND r.ts BETWEEN $lo AND $hi AND {_SAME_RECORD}
"""

_POD_TO_RECORDS = f"""
UPDATE records r SET proxy_pod = s.proxy_pod
FROM stage s
WHERE s.verdict = 'ok' AND r.proxy_pod IS NULL AND s.proxy_pod IS NOT NULL
  AND r.ts BETWEEN $lo AND $hi AND {_SAME_RECORD}
"""

# A full copy arriving after a truncated stdout copy replaces it.
_DROP_TRUNCATED_SUPERSEDED = f"""
DELETE FROM records r
WHERE r.truncated AND r.ts BETWEEN $lo AND $hi AND EXISTS (
    SELECT 1 FROM stage s WHERE s.verdict = 'ok' AND NOT s.truncated AND {_SAME_RECORD})
"""

# The lines to store: new keys only, one line per key (a full copy before a
# truncated one), with the replica any copy in the batch named.
_WINNERS = f"""
CREATE OR REPLACE TEMP TABLE winners AS
SELECT file_id, line_no, pod FROM (
    SELECT s.file_id, s.line_no,
           max(s.proxy_pod) OVER key_ AS pod,
           row_number() OVER (key_ ORDER BY s.truncated, s.file_id, s.line_no) AS copy_no
    FROM stage s
    WHERE s.verdict = 'ok'
      AND NOT EXISTS (SELECT 1 FROM records r WHERE r.ts BETWEEN $lo AND $hi AND {_SAME_RECORD})
    WINDOW key_ AS (PARTITION BY s.ts, s.type, s.request_id, s.system_sha256, s.session_id)
) WHERE copy_no = 1
"""

_INSERT_RECORDS = """
INSERT INTO records BY NAME
SELECT s.* EXCLUDE (verdict, pfx_len, proxy_pod, snippet, event_line), w.pod AS proxy_pod
FROM stage s
JOIN winners w USING (file_id, line_no)
"""

# The turns these new records belong to are re-derived at the next refresh.
_MARK_DIRTY = """
INSERT INTO turns_dirty
SELECT DISTINCT coalesce(s.session_id, '~' || coalesce(s.request_id, ''))
FROM stage s SEMI JOIN winners w USING (file_id, line_no)
WHERE s.type IN ('request', 'response')
"""

_INSERT_QUARANTINE = """
INSERT INTO quarantine
SELECT s.file_id, f.path, s.line_no, s.verdict, s.snippet
FROM stage s JOIN batch_files f USING (file_id)
WHERE s.verdict NOT IN ('ok', 'blank', 'free_text')
"""

# Stdout lines that are data (analyzer/proxy_events): what the proxy says about
# slow turns, repaired tool calls, and records it lost.
_INSERT_EVENTS = f"""
INSERT INTO proxy_events
SELECT try_cast(nullif(regexp_extract(event_line, '{_FREE_PREFIX_RE}', 2), '') AS TIMESTAMPTZ)::TIMESTAMP AS ts,
       coalesce(nullif(regexp_extract(event_line, '{_FREE_PREFIX_RE}', 1), ''), proxy_pod) AS proxy_pod,
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
    FROM stage WHERE event_line IS NOT NULL
) WHERE kind IS NOT NULL
"""

_BATCH_STATS = """
SELECT file_id, count(*) FILTER (WHERE verdict = 'ok') AS records,
       count(*) FILTER (WHERE verdict NOT IN ('ok', 'blank', 'free_text')) AS quarantined,
       count(*) FILTER (WHERE verdict = 'free_text') AS free_text
FROM stage GROUP BY file_id
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


def _plan(con: duckdb.DuckDBPyConnection, files: list[SourceFile], report: IngestReport) -> list[_Todo]:
    """Which files need reading: new ones, part-read ones, and known ones whose content changed."""
    known = {
        r[0]: r[1:]
        for r in con.execute(
            "SELECT path, file_id, size_bytes, mtime, fingerprint, bytes_done, lines_done, complete FROM source_files"
        ).fetchall()
    }
    todo = []
    for f in files:
        prev = known.get(f.path)
        if prev is None or f.form == STDIN:
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

class _FileFailed(Exception):
    """A file could not be read (further); the reason is for skipped_files."""


class _CountingReader:
    """A raw file that counts the bytes read from disk (progress for gzip inputs)."""

    def __init__(self, raw):
        self.raw = raw
        self.pos = 0

    def read(self, n: int = -1) -> bytes:
        b = self.raw.read(n)
        self.pos += len(b)
        return b

    def readinto(self, b) -> int:  # gzip.GzipFile reads through readinto when it can
        n = self.raw.readinto(b)
        self.pos += n or 0
        return n


def _gzip_read(stream: gzip.GzipFile) -> Callable[[int], bytes]:
    """``read(n)`` over a gzip stream that hands over what inflated before a cut.

    ``GzipFile.read`` raises on a truncated file and drops what it had inflated;
    reading with ``read1`` keeps it, and the error comes on the next call, so the
    lines before the cut are kept and the file is reported.
    """
    pending: list[BaseException] = []

    def read(n: int) -> bytes:
        if pending:
            raise pending.pop()
        parts, got = [], 0
        while got < n:
            try:
                b = stream.read1(n - got)
            except (OSError, EOFError, zlib.error) as exc:
                if not parts:
                    raise
                pending.append(exc)
                break
            if not b:
                break
            parts.append(b)
            got += len(b)
        return b"".join(parts)

    return read


def _text_pieces(todo: _Todo, disk: list[int]) -> Iterator[LineBlock | LongLine]:
    """The lines of a text file (plain or gzip), from where a previous run stopped."""
    f = todo.source
    try:
        raw = open(f.path, "rb")
    except OSError as exc:
        raise _FileFailed(f"cannot read: {exc.strerror or exc}") from exc
    with raw:
        counting = _CountingReader(raw)
        gz = f.compressed
        stream = gzip.GzipFile(fileobj=counting, mode="rb") if gz else counting
        try:
            if todo.resume_bytes:
                if gz:  # no random access into gzip: inflate and discard up to the offset
                    left = todo.resume_bytes
                    while left > 0:
                        got = stream.read(min(left, 8 << 20))
                        if not got:
                            break
                        left -= len(got)
                else:
                    raw.seek(todo.resume_bytes)
                    counting.pos = todo.resume_bytes
            for piece in read_lines(stream, first_line=todo.resume_lines + 1, offset=todo.resume_bytes,
                                    sep=f.separator, block=_READ_BLOCK, read=_gzip_read(stream) if gz else None):
                disk[0] = counting.pos
                yield piece
        except (OSError, EOFError, zlib.error) as exc:
            what = "truncated or damaged gzip" if gz else "read failed"
            raise _FileFailed(f"{what}: {exc}") from exc


def _parquet_pieces(todo: _Todo, disk: list[int]) -> Iterator[LineBlock]:
    """The ``entry`` column of a consolidated Parquet file as numbered lines (row numbers)."""
    import pyarrow.parquet as pq

    f = todo.source
    try:
        pf = pq.ParquetFile(f.path)
    except (OSError, pa.ArrowException) as exc:
        raise _FileFailed(f"not a readable Parquet file: {exc}") from exc
    if "entry" not in pf.schema_arrow.names:
        raise _FileFailed(f"Parquet without an `entry` column (columns: {', '.join(pf.schema_arrow.names[:8])})")
    row = 0
    skip = todo.resume_lines
    groups = []
    for i in range(pf.num_row_groups):  # whole row groups before the resume point are not read
        n = pf.metadata.row_group(i).num_rows
        if row + n <= skip:
            row += n
            continue
        groups.append(i)
    try:
        for batch in pf.iter_batches(batch_size=20_000, columns=["entry"], row_groups=groups):
            col = batch.column(0)
            if row < skip:
                cut = min(skip - row, len(col))
                col, row = col.slice(cut), row + cut
                if not len(col):
                    continue
            if not pa.types.is_large_string(col.type):
                col = col.cast(pa.large_string())
            nbytes = col.nbytes
            row += len(col)
            disk[0] = int(f.size * row / max(pf.metadata.num_rows, 1))
            yield LineBlock(row - len(col) + 1, col, row, nbytes)
    except (OSError, pa.ArrowException) as exc:
        raise _FileFailed(f"Parquet read failed: {exc}") from exc


def _stdin_pieces(todo: _Todo, disk: list[int], on_idle: Callable[[], None]) -> Iterator[LineBlock | LongLine]:
    """Standard input, as it arrives: what has come is committed after a pause."""
    import select
    import sys

    fd = sys.stdin.fileno()
    head = todo.source.head or b""
    state = {"head": head}

    def read(n: int) -> bytes:
        if state["head"]:
            out, state["head"] = state["head"], b""
            return out
        while True:
            try:
                ready, _, _ = select.select([fd], [], [], STDIN_IDLE_FLUSH_S)
            except (OSError, ValueError):  # not selectable (a regular file): just read
                ready = [fd]
            if ready:
                b = os.read(fd, n)
                disk[0] += len(b)
                return b
            on_idle()

    if todo.source.compressed:
        inflater = zlib.decompressobj(wbits=31)
        raw_read = read

        def read(n: int) -> bytes:  # noqa: F811 - inflate as it arrives
            while True:
                b = raw_read(n)
                if not b:
                    return inflater.flush()
                out = inflater.decompress(b)
                if out:
                    return out

    try:
        yield from read_lines(None, read=read, sep=todo.source.separator, block=_READ_BLOCK)  # type: ignore[arg-type]
    except zlib.error as exc:
        raise _FileFailed(f"damaged gzip on standard input: {exc}") from exc


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
        self.pieces: list[pa.RecordBatch] = []
        self.long_lines: list[tuple[int, str, int, str, str]] = []
        self.files: dict[int, _FileState] = {}
        self.nbytes = 0

    def add(self, state: _FileState, piece: LineBlock, stdout: bool, pod: str | None) -> None:
        n = len(piece.lines)
        ones = pa.nulls(n, pa.int64()).fill_null(1)
        cols = [
            pa.nulls(n, pa.int32()).fill_null(state.file_id),
            pc.cumulative_sum(ones, start=piece.first_line - 1),
            piece.lines,
            pa.nulls(n, pa.bool_()).fill_null(stdout),
            pa.nulls(n, pa.large_string()) if pod is None else pa.nulls(n, pa.large_string()).fill_null(pod),
        ]
        self.pieces.append(pa.RecordBatch.from_arrays(cols, schema=_BATCH_SCHEMA))
        self.nbytes += piece.nbytes
        self.files[state.file_id] = state

    def touch(self, state: _FileState) -> None:
        self.files[state.file_id] = state

    def empty(self) -> bool:
        return not self.files


_BATCH_SCHEMA = pa.schema([
    ("file_id", pa.int32()), ("line_no", pa.int64()), ("line", pa.large_string()),
    ("from_stdout", pa.bool_()), ("file_pod", pa.large_string()),
])

# An S3 chunk named by a newer proxy: `HH-MM-SS-<host>-<pid>-<8hex>.jsonl`, where
# the host is the pod's $HOSTNAME, i.e. the replica that wrote it.
_CHUNK_NAME = re.compile(r"^\d\d-\d\d-\d\d-(.+)-\d+-[0-9a-f]{8}\.jsonl(?:\.gz)?$")


def chunk_pod(path: str) -> str | None:
    """The proxy replica named by an S3 chunk's file name, if it names one."""
    m = _CHUNK_NAME.match(os.path.basename(path))
    return m.group(1) if m and m.group(1) != "nohost" else None


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
        self.any_pods = bool(con.execute("SELECT count(*) FROM records WHERE proxy_pod IS NOT NULL").fetchall()[0][0])

    # -- files -------------------------------------------------------------
    def read_file(self, todo: _Todo) -> None:
        f = todo.source
        state = _FileState(todo, file_id=todo.file_id if todo.file_id is not None else self._new_id(),
                           bytes_done=todo.resume_bytes, lines_done=todo.resume_lines,
                           registered=todo.file_id is not None,
                           reset=todo.file_id is not None and not todo.resume_lines)
        stdout = KUBECTL in (f.form, f.text_form)
        pod = chunk_pod(f.path) if f.form == JSONL else None
        disk = [0]
        if f.form == PARQUET:
            pieces = _parquet_pieces(todo, disk)
        elif f.form == STDIN:
            pieces = _stdin_pieces(todo, disk, on_idle=self._flush_if_pending)
        else:
            pieces = _text_pieces(todo, disk)
        start_done = self.done
        try:
            for piece in pieces:
                if isinstance(piece, LongLine):
                    self._long_line(state, piece)
                else:
                    self.batch.add(state, piece, stdout, pod)
                    state.bytes_done = piece.end_offset
                    state.lines_done = piece.first_line + len(piece.lines) - 1
                self.done = start_done + min(disk[0], f.size or disk[0])
                if self.batch.nbytes >= BATCH_BYTES:
                    self.flush()
        except _FileFailed as exc:
            self._skip(f, str(exc), state)
            if not state.lines_done and not state.registered:
                self.done = start_done + f.size  # nothing read: not registered, so the next run tries again
                return
        state.complete = True
        self.batch.touch(state)
        self.done = start_done + (f.size or disk[0])
        if f.form == STDIN:
            self.flush()

    def _new_id(self) -> int:
        return self.con.execute("SELECT nextval('source_file_ids')").fetchall()[0][0]

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
            self.flush()

    # -- one transaction ----------------------------------------------------
    def flush(self) -> None:
        batch, self.batch = self.batch, _Batch()
        if batch.empty():
            return
        con = self.con
        table = pa.Table.from_batches(batch.pieces, schema=_BATCH_SCHEMA)
        con.register("batch_lines", table)
        try:
            with transaction(con):
                self._register_files(batch)
                con.execute(_STAGE)
                stats = {r[0]: r[1:] for r in con.execute(_BATCH_STATS).fetchall()}
                bad = sum(s[1] for s in stats.values())
                if self.strict and bad:
                    first = con.execute(
                        "SELECT f.path, s.line_no, s.verdict FROM stage s JOIN batch_files f USING (file_id) "
                        "WHERE s.verdict NOT IN ('ok', 'blank', 'free_text') ORDER BY f.path, s.line_no LIMIT 1"
                    ).fetchall()[0]
                    raise InputError(f"{first[0]}:{first[1]}: {first[2]} (--strict; {bad} bad line(s) in this batch)",
                                     ExitCode.BAD_INPUT)
                lo, hi = con.execute("SELECT min(ts), max(ts) FROM stage WHERE verdict = 'ok'").fetchall()[0]
                new = 0
                if lo is not None:
                    span = {"lo": lo, "hi": hi}
                    if self.any_pods:
                        con.execute(_POD_FROM_RECORDS, span)
                    stage_pods = con.execute(
                        "SELECT count(*) FROM stage WHERE proxy_pod IS NOT NULL AND verdict = 'ok'").fetchall()[0][0]
                    if stage_pods:
                        con.execute(_POD_TO_RECORDS, span)
                    dropped = con.execute(_DROP_TRUNCATED_SUPERSEDED, span).fetchall()[0][0]
                    con.execute(_WINNERS, span)
                    inserted = con.execute(_INSERT_RECORDS).fetchall()[0][0]
                    con.execute(_MARK_DIRTY)
                    new = inserted - dropped
                    if stage_pods:
                        self.any_pods = True
                con.execute(_INSERT_QUARANTINE)
                if batch.long_lines:
                    con.executemany("INSERT INTO quarantine VALUES (?, ?, ?, ?, ?)", batch.long_lines)
                events = con.execute(_INSERT_EVENTS).fetchall()[0][0]
                self._update_files(batch, stats)
                con.execute("DROP TABLE stage")
                con.execute("DROP TABLE IF EXISTS winners")
        finally:
            con.unregister("batch_lines")
        r = self.report
        lines = len(table)
        recs = sum(s[0] for s in stats.values())
        r.lines += lines + len(batch.long_lines)
        r.records += recs
        r.new_records += new
        r.duplicates = r.records - r.new_records
        r.quarantined += bad + len(batch.long_lines)
        r.free_text += sum(s[2] for s in stats.values())
        r.proxy_events += events
        if self.progress:
            self.progress(self.done, self.total)

    def _register_files(self, batch: _Batch) -> None:
        """New files get their registry row (part-read until complete); re-read files lose old quarantine rows."""
        import pyarrow as pa

        rows = {k: [] for k in ("file_id", "path")}
        for st in batch.files.values():
            rows["file_id"].append(st.file_id)
            rows["path"].append(st.todo.source.path)
        self.con.register("_batch_files_arrow", pa.table(rows))
        try:
            self.con.execute("CREATE OR REPLACE TEMP TABLE batch_files AS SELECT * FROM _batch_files_arrow")
        finally:
            self.con.unregister("_batch_files_arrow")
        for st in batch.files.values():
            f = st.todo.source
            if not st.registered:
                self.con.execute(
                    "INSERT INTO source_files (file_id, path, form, size_bytes, mtime, fingerprint, lines, records, "
                    "quarantined, free_text, ingested_at, bytes_done, lines_done, complete) "
                    "VALUES (?, ?, ?, ?, ?, ?, 0, 0, 0, 0, ?, 0, 0, false)",
                    [st.file_id, f.path, f.form, f.size, f.mtime, f.fingerprint(), self.now],
                )
                st.registered = True
            elif st.reset:
                self.con.execute("DELETE FROM quarantine WHERE file_id = ?", [st.file_id])
                self.con.execute(
                    "UPDATE source_files SET size_bytes = ?, mtime = ?, fingerprint = ?, lines = 0, records = 0, "
                    "quarantined = 0, free_text = 0, complete = false WHERE file_id = ?",
                    [f.size, f.mtime, f.fingerprint(), st.file_id],
                )
                st.reset = False

    def _update_files(self, batch: _Batch, stats: dict) -> None:
        for st in batch.files.values():
            rec, bad, free = stats.get(st.file_id, (0, 0, 0))
            bad += sum(1 for x in batch.long_lines if x[0] == st.file_id)
            self.con.execute(
                "UPDATE source_files SET lines = ?, records = records + ?, quarantined = quarantined + ?, "
                "free_text = free_text + ?, bytes_done = ?, lines_done = ?, complete = ?, ingested_at = ?, "
                "size_bytes = ? WHERE file_id = ?",
                [st.lines_done, rec, bad, free, st.bytes_done, st.lines_done, st.complete, self.now,
                 st.todo.source.size if st.todo.source.form != STDIN else st.bytes_done, st.file_id],
            )
            if st.complete:
                self.report.files_ingested += 1


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
    files = []
    for f in found.files:  # telling the form reads a file's first bytes: a failure skips that file only
        try:
            form = f.form
        except FormError as exc:
            report.skipped_files.append({"path": f.path, "reason": exc.reason, "size": f.size, "mtime": f.mtime})
            continue
        if form == "metrics":
            report.metric_files.append(f.path)
            report.notes.append({"path": f.path, "note": "Prometheus metrics among the logs: loaded as metrics"})
            continue
        files.append(f)
    todo = _plan(con, files, report)
    total = sum(t.source.size for t in todo)
    run = _Ingest(con, report, strict, progress, total)
    if progress:
        progress(0, total)
    for t in _ordered(todo):
        run.read_file(t)
    run.flush()
    _record_skipped(con, report, run.now)
    report.quarantine_samples = [
        {"path": p, "line_no": n, "reason": r}
        for p, n, r in con.execute(
            "SELECT path, line_no, reason FROM quarantine ORDER BY path, line_no LIMIT 5"
        ).fetchall()
    ]
    return report


def _ordered(todo: list[_Todo]) -> Iterable[_Todo]:
    """Full copies before stdout copies (fewer truncated rows to replace), Parquet last."""
    rank = {JSONL: 0, KUBECTL: 1, PARQUET: 2, STDIN: 3}
    return sorted(todo, key=lambda t: rank.get(t.source.form, 9))
