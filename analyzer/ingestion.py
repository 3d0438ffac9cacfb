"""Ingest proxy logs into the database: fast, losing nothing, safely re-runnable.

DuckDB reads the files (its CSV reader as a line reader, its JSON parser per
line); Python only plans batches. Each batch of files is one transaction:
records, quarantined lines and the file registry commit together, so a run
killed half-way leaves the database as it was before that batch, and the next
run picks up the files not yet registered.

A record seen twice (an S3 chunk and the pod's stdout, or a file ingested twice)
is stored once, keyed by ``(type, request_id, system_sha256, timestamp)``; a
stdout copy whose fields were cut to 200 characters is replaced by the full copy
when that arrives.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Iterable

import duckdb

from .db import transaction
from .errors import ExitCode, InputError
from .sources import JSONL, KUBECTL, PARQUET, SourceFile, discover

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
MAX_LINE_BYTES = 512 * 1024 * 1024  # full-capture lines can be megabytes
# Input bytes per transaction: bounds memory (override with $ANALYZER_BATCH_BYTES).
BATCH_BYTES = int(os.environ.get("ANALYZER_BATCH_BYTES", 512 * 1024 * 1024))
BATCH_FILES = 4000

# A kubectl line: optional `kubectl logs --timestamps` stamp, then a record prefix.
_STDOUT_PREFIX_RE = r"^(?:\d{4}-\d\d-\d\dT[0-9:.]+Z )?(?:📥 REQUEST|✓ RESPONSE|✗ RESPONSE): "

Progress = Callable[[int, int], None]


@dataclass
class IngestReport:
    """What one ingestion run did (the summary prints it)."""

    files_seen: int = 0
    files_ingested: int = 0
    files_unchanged: int = 0
    lines: int = 0
    records: int = 0
    new_records: int = 0
    duplicates: int = 0
    quarantined: int = 0
    free_text: int = 0
    quarantine_samples: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return dict(self.__dict__)


# How a batch's lines are read: `text` (read_text, then split: fastest for many
# small chunk files), `lines` (read_csv as a line reader: streams big and gzip
# files), `parquet` (the `entry` column), `python` (a fallback for files DuckDB
# refuses, e.g. invalid UTF-8: decoded with replacement characters).
TEXT, LINES, PQ, PYTHON = "text", "lines", "parquet", "python"
# read_text + split wins for small files (DuckDB's CSV reader has a per-file
# cost); the CSV line reader wins from a few tens of KB up (measured on chunks).
TEXT_MAX_BYTES = 32 * 1024


_GLOB_CHARS = frozenset("*?[]{}")


def reader_for(f: SourceFile) -> str:
    """The reader for a file: by form, compression and size.

    DuckDB's readers take a path as a glob pattern, so a file whose name holds
    glob characters (``day[1].jsonl``) would match other files or none: such
    files are read in Python instead.
    """
    globby = any(c in _GLOB_CHARS for c in f.path)
    if f.form == PARQUET:
        if globby:
            raise InputError(f"{f.path}: Parquet files whose path holds glob characters "
                             f"({''.join(sorted(_GLOB_CHARS))}) cannot be read; rename it")
        return PQ
    if globby:
        return PYTHON
    if f.path.endswith(".gz") or f.size > TEXT_MAX_BYTES:
        return LINES
    return TEXT


def _lines_sql(form: str, reader: str) -> str:
    """SQL yielding (file, n, line, from_stdout) for the batch in ``$files``.

    ``n`` is the line number within the file for the text, Parquet and Python
    readers; for the `lines` reader it numbers the lines of the whole batch in
    file order (the stage turns it into a per-file number).
    """
    stdout = "true" if form == KUBECTL else "false"
    if reader == PQ:
        return """
            SELECT filename AS file, file_row_number + 1 AS n, entry AS line, false AS from_stdout
            FROM read_parquet($files, filename = true, file_row_number = true)
        """
    if reader == TEXT:
        return f"""
            SELECT file, unnest(lines) AS line, generate_subscripts(lines, 1) AS n, {stdout} AS from_stdout
            FROM (SELECT filename AS file, string_split(rtrim(content, chr(10)), chr(10)) AS lines
                  FROM read_text($files))
        """
    if reader == PYTHON:
        return f"SELECT file, n, line, {stdout} AS from_stdout FROM _python_lines"
    # read_csv with a NUL delimiter and no quoting is a fast, parallel line reader;
    # WITH ORDINALITY numbers lines in file order, across the files of the batch.
    return f"""
        SELECT file, n, line, {stdout} AS from_stdout
        FROM read_csv($files, columns = {{'line': 'VARCHAR'}}, delim = '\\0', quote = '',
                      escape = '', header = false, auto_detect = false, filename = true,
                      max_line_size = {MAX_LINE_BYTES}, strict_mode = false)
             WITH ORDINALITY AS t(line, file, n)
    """


def _candidates_sql(form: str, reader: str) -> str:
    """Lines with their record text: the JSON after a kubectl prefix, or the line itself."""
    return f"""
        SELECT file, n, line, pfx,
               CASE WHEN pfx <> '' THEN substr(line, length(pfx) + 1)
                    WHEN NOT from_stdout THEN line END AS candidate
        FROM (SELECT *, CASE WHEN from_stdout THEN regexp_extract(line, '{_STDOUT_PREFIX_RE}') ELSE '' END AS pfx
              FROM ({_lines_sql(form, reader)}))
    """


def _register_python_lines(con: duckdb.DuckDBPyConnection, paths: list[str]) -> None:
    """Read files in Python for the fallback reader (gzip aware, lossy decoding)."""
    import gzip

    import pyarrow as pa

    files, numbers, lines = [], [], []
    for path in paths:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            for i, raw in enumerate(f, start=1):
                files.append(path)
                numbers.append(i)
                lines.append(raw.rstrip(b"\r\n").decode("utf-8", errors="replace").replace("\x00", "\ufffd"))
    con.register("_python_lines", pa.table({"file": files, "n": numbers, "line": lines}))


# The typed hot columns of `records`, computed from the parsed record `j`.
_HOT_COLUMNS = """
    try_cast(j.timestamp AS TIMESTAMPTZ)::TIMESTAMP AS ts, j.type AS type, j.request_id AS request_id,
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


def _stage_sql(form: str, reader: str) -> str:
    """Pass 1: parse every line once; keep its verdict, provenance, typed columns and text.

    Batches are bounded in bytes, so holding the batch's record text here costs
    at most about a batch of memory and saves reading the files twice.
    """
    struct = json.dumps(RECORD_STRUCT).replace("'", "''")
    return f"""
    CREATE OR REPLACE TEMP TABLE stage AS
    WITH parsed AS (
        SELECT file, n, line, pfx, candidate,
               try(json_transform(candidate, '{struct}')) AS j
        FROM ({_candidates_sql(form, reader)})
    ),
    judged AS (
        SELECT *,
               pfx <> '' AND contains(candidate, '…(+') AS truncated,
               CASE
                 WHEN line IS NULL OR trim(line) = '' THEN 'blank'
                 WHEN candidate IS NULL THEN 'free_text'
                 WHEN j IS NULL THEN 'malformed JSON (invalid or cut-off line)'
                 WHEN NOT starts_with(ltrim(candidate), '{{') THEN 'not a JSON object'
                 WHEN j.type IS NULL OR j.type NOT IN {RECORD_TYPES}
                      THEN 'not a proxy record (no request/response/system_prompt type)'
                 WHEN try_cast(j.timestamp AS TIMESTAMPTZ)::TIMESTAMP IS NULL THEN 'no valid timestamp'
                 ELSE 'ok'
               END AS verdict
        FROM parsed
    ),
    typed AS (
        SELECT file, n, truncated, verdict,
               CASE WHEN verdict NOT IN ('ok', 'blank', 'free_text') THEN left(line, {SNIPPET_CHARS}) END AS snippet,
               CASE WHEN verdict = 'ok' THEN candidate END AS raw,
               {_HOT_COLUMNS}
        FROM judged
    )
    SELECT f.file_id, t.*
    FROM typed t JOIN batch_files f ON f.path = t.file
    """


# Line numbers: the `lines` reader numbers the whole batch, so a file's line number
# is n minus the file's first n plus one (an aggregate over the narrow `n` column,
# cheaper than a window over the wide stage rows). Other readers number per file.
def _line_numbers_sql(reader: str) -> str:
    if reader != LINES:
        return "CREATE OR REPLACE TEMP TABLE line_offsets AS SELECT DISTINCT file, 1::BIGINT AS first_n FROM stage"
    return "CREATE OR REPLACE TEMP TABLE line_offsets AS SELECT file, min(n) AS first_n FROM stage GROUP BY file"



# A full copy arriving after a truncated stdout copy replaces it.
_DROP_TRUNCATED_SUPERSEDED = """
DELETE FROM records r
WHERE r.truncated AND EXISTS (
    SELECT 1 FROM stage s
    WHERE s.verdict = 'ok' AND NOT s.truncated
      AND r.ts = s.ts AND r.type = s.type
      AND r.request_id IS NOT DISTINCT FROM s.request_id
      AND r.system_sha256 IS NOT DISTINCT FROM s.system_sha256)
"""

# The lines to store: new keys only, one line per key (a full copy before a truncated one).
_WINNERS = """
CREATE OR REPLACE TEMP TABLE winners AS
SELECT s.file, s.n
FROM stage s
WHERE s.verdict = 'ok'
  AND NOT EXISTS (
      SELECT 1 FROM records r
      WHERE r.ts = s.ts AND r.type = s.type
        AND r.request_id IS NOT DISTINCT FROM s.request_id
        AND r.system_sha256 IS NOT DISTINCT FROM s.system_sha256)
QUALIFY row_number() OVER (
    PARTITION BY s.ts, s.type, s.request_id, s.system_sha256
    ORDER BY s.truncated, s.file_id, s.n) = 1
"""


def _insert_records_sql(form: str, reader: str) -> str:
    """Pass 2: store the lines that won de-duplication, from the stage."""
    return f"""
    INSERT INTO records BY NAME
    SELECT s.* EXCLUDE (file, n, verdict, snippet), s.n - o.first_n + 1 AS line_no
    FROM stage s
    SEMI JOIN winners w ON w.file = s.file AND w.n = s.n
    JOIN line_offsets o ON o.file = s.file
    """


_INSERT_QUARANTINE = """
INSERT INTO quarantine
SELECT s.file_id, s.file, s.n - o.first_n + 1, s.verdict, s.snippet
FROM stage s JOIN line_offsets o USING (file)
WHERE s.verdict NOT IN ('ok', 'blank', 'free_text')
"""

_FILE_STATS = """
SELECT file_id, max(n) - min(n) + 1 AS lines,
       count(*) FILTER (WHERE verdict = 'ok') AS records,
       count(*) FILTER (WHERE verdict NOT IN ('ok', 'blank', 'free_text')) AS quarantined,
       count(*) FILTER (WHERE verdict = 'free_text') AS free_text
FROM stage GROUP BY file_id
"""


def _plan(con: duckdb.DuckDBPyConnection, files: list[SourceFile], report: IngestReport) -> list[tuple[SourceFile, int | None]]:
    """Which files need reading: new ones, and known ones whose content changed."""
    known = {
        r[0]: (r[1], r[2], r[3], r[4])
        for r in con.execute("SELECT path, file_id, size_bytes, mtime, fingerprint FROM source_files").fetchall()
    }
    todo = []
    for f in files:
        prev = known.get(f.path)
        if prev is None:
            todo.append((f, None))
            continue
        file_id, size, mtime, fp = prev
        if size == f.size and mtime == f.mtime:
            report.files_unchanged += 1
            continue
        if size == f.size and fp == f.fingerprint():
            con.execute("UPDATE source_files SET mtime = ? WHERE file_id = ?", [f.mtime, file_id])
            report.files_unchanged += 1
            continue
        todo.append((f, file_id))  # changed (a growing stdout log): read again; dedup keeps it single
    return todo


def _batches(todo: list[tuple[SourceFile, int | None]]) -> Iterable[list[tuple[SourceFile, int | None]]]:
    groups: dict[tuple[str, str], list] = {}
    for item in todo:
        groups.setdefault((item[0].form, reader_for(item[0])), []).append(item)
    for key in sorted(groups, key=lambda k: ((JSONL, KUBECTL, PARQUET).index(k[0]), k[1])):
        batch: list = []
        size = 0
        for item in groups[key]:
            if batch and (size + item[0].size > BATCH_BYTES or len(batch) >= BATCH_FILES):
                yield batch
                batch, size = [], 0
            batch.append(item)
            size += item[0].size
        if batch:
            yield batch


def ingest(
    con: duckdb.DuckDBPyConnection,
    inputs: list[str] | list[SourceFile],
    *,
    strict: bool = False,
    progress: Progress | None = None,
) -> IngestReport:
    """Read log files into the database; return what was done.

    Args:
        con: a connection from :func:`analyzer.db.connect`.
        inputs: files, directories and globs (or SourceFiles from :func:`discover`).
        strict: raise :class:`InputError` on the first batch with a malformed line
            (that batch is rolled back) instead of quarantining it.
        progress: called with ``(bytes_done, bytes_total)`` after each batch.

    Raises:
        InputError: an input does not exist or is not a proxy log; under
            ``strict``, a malformed line.
    """
    # Callers that already expanded the inputs (to fail before opening a
    # database) pass the SourceFiles; discovery is not done twice.
    if inputs and all(isinstance(i, SourceFile) for i in inputs):
        files = list(inputs)
    else:
        files = discover([str(i) for i in inputs])
    report = IngestReport(files_seen=len(files))
    todo = _plan(con, files, report)
    total = sum(f.size for f, _ in todo)
    done = 0
    if progress:
        progress(0, total)
    for batch in _batches(todo):
        reader = reader_for(batch[0][0])
        try:
            _ingest_batch(con, batch, report, strict, reader)
        except _ReaderRefused:
            # DuckDB would not read these files as text (e.g. invalid UTF-8): read
            # them in Python, decoding what it can, so no good line is lost.
            _ingest_batch(con, batch, report, strict, PYTHON)
        done += sum(f.size for f, _ in batch)
        if progress:
            progress(done, total)
    report.quarantine_samples = [
        {"path": p, "line_no": n, "reason": r}
        for p, n, r in con.execute(
            "SELECT path, line_no, reason FROM quarantine ORDER BY path, line_no LIMIT 5"
        ).fetchall()
    ]
    return report


def _register_batch(con: duckdb.DuckDBPyConnection, batch: list[tuple[SourceFile, int | None]]) -> None:
    """Give new files ids and lay out the batch as the temp table ``batch_files``."""
    import pyarrow as pa

    n_new = sum(1 for _, fid in batch if fid is None)
    new_ids = iter(r[0] for r in con.execute(
        "SELECT nextval('source_file_ids') FROM range(?)", [n_new]).fetchall()) if n_new else iter(())
    cols: dict[str, list] = {k: [] for k in ("file_id", "path", "form", "size_bytes", "mtime", "fingerprint", "is_new")}
    for f, fid in batch:
        cols["file_id"].append(fid if fid is not None else next(new_ids))
        cols["path"].append(f.path)
        cols["form"].append(f.form)
        cols["size_bytes"].append(f.size)
        cols["mtime"].append(f.mtime)
        cols["fingerprint"].append(f.fingerprint())
        cols["is_new"].append(fid is None)
    con.register("_batch_arrow", pa.table(cols))
    try:
        con.execute("CREATE OR REPLACE TEMP TABLE batch_files AS SELECT * FROM _batch_arrow")
    finally:
        con.unregister("_batch_arrow")


# The registry rows of the batch, with what the stage found in each file.
_BATCH_REGISTRY = """
SELECT b.file_id, b.path, b.form, b.size_bytes, b.mtime, b.fingerprint,
       coalesce(st.lines, 0) AS lines, coalesce(st.records, 0) AS records,
       coalesce(st.quarantined, 0) AS quarantined, coalesce(st.free_text, 0) AS free_text,
       $now AS ingested_at, b.is_new
FROM batch_files b LEFT JOIN ({stats}) st USING (file_id)
""".replace("{stats}", _FILE_STATS)


class _ReaderRefused(Exception):
    """DuckDB's reader failed on a batch; the batch was rolled back."""


def _ingest_batch(con: duckdb.DuckDBPyConnection, batch: list[tuple[SourceFile, int | None]], report: IngestReport,
                  strict: bool, reader: str) -> None:
    form = batch[0][0].form
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    paths = [f.path for f, _ in batch]
    registered = False
    try:
        with transaction(con):
            _register_batch(con, batch)
            # A changed file is read whole again: its old quarantine rows go, and
            # de-duplication keeps its records single.
            con.execute("DELETE FROM quarantine WHERE file_id IN (SELECT file_id FROM batch_files WHERE NOT is_new)")
            if reader == PYTHON:
                _register_python_lines(con, paths)
                registered = True
            try:
                con.execute(_stage_sql(form, reader), {"files": paths} if reader != PYTHON else None)
                con.execute(_line_numbers_sql(reader))
            except duckdb.Error as exc:
                if reader in (TEXT, LINES):
                    raise _ReaderRefused(str(exc)) from exc
                raise InputError(f"cannot read {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''}: {exc}") from exc
            lines, recs, bad, free_text = con.execute(
                "SELECT coalesce(sum(lines), 0), coalesce(sum(records), 0), coalesce(sum(quarantined), 0), "
                f"coalesce(sum(free_text), 0) FROM ({_FILE_STATS})"
            ).fetchall()[0]
            if strict and bad:
                first = con.execute(
                    "SELECT s.file, s.n - o.first_n + 1 AS line_no, s.verdict FROM stage s JOIN line_offsets o USING (file) "
                    "WHERE s.verdict NOT IN ('ok', 'blank', 'free_text') ORDER BY s.file, line_no LIMIT 1"
                ).fetchall()[0]
                raise InputError(f"{first[0]}:{first[1]}: {first[2]} (--strict; {bad} bad line(s) in this batch)",
                                 ExitCode.BAD_INPUT)
            before = con.execute("SELECT count(*) FROM records").fetchall()[0][0]
            con.execute(_DROP_TRUNCATED_SUPERSEDED)
            after_drop = con.execute("SELECT count(*) FROM records").fetchall()[0][0]
            con.execute(_WINNERS)
            con.execute(_insert_records_sql(form, reader))
            after = con.execute("SELECT count(*) FROM records").fetchall()[0][0]
            con.execute(_INSERT_QUARANTINE)
            con.execute(
                f"INSERT INTO source_files BY NAME SELECT * EXCLUDE (is_new) FROM ({_BATCH_REGISTRY}) WHERE is_new", {"now": now}
            )
            con.execute(
                f"""UPDATE source_files s SET size_bytes = r.size_bytes, mtime = r.mtime, fingerprint = r.fingerprint,
                           lines = r.lines, records = r.records, quarantined = r.quarantined,
                           free_text = r.free_text, ingested_at = r.ingested_at
                    FROM ({_BATCH_REGISTRY}) r WHERE s.file_id = r.file_id AND NOT r.is_new""",
                {"now": now},
            )
            con.execute("DROP TABLE stage")
            con.execute("DROP TABLE winners")
            con.execute("DROP TABLE line_offsets")
    finally:
        if registered:
            con.unregister("_python_lines")
    report.lines += lines
    report.records += recs
    report.quarantined += bad
    report.free_text += free_text
    report.files_ingested += len(batch)
    report.new_records += (after - after_drop) - (before - after_drop)
    report.duplicates = report.records - report.new_records
