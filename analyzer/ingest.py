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

from .errors import InputError
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
BATCH_BYTES = int(os.environ.get("ANALYZER_BATCH_BYTES", 96 * 1024 * 1024))
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


def _lines_sql(form: str) -> str:
    """SQL yielding (file, line_no, line, is_stdout) for a batch in ``$files``."""
    if form == PARQUET:
        return """
            SELECT filename AS file, file_row_number + 1 AS line_no, entry AS line, false AS from_stdout
            FROM read_parquet($files, filename = true, file_row_number = true)
        """
    # read_csv with a NUL delimiter and no quoting is a fast, parallel line reader;
    # WITH ORDINALITY numbers lines in file order, across the files of the batch.
    return f"""
        SELECT file, n - min(n) OVER (PARTITION BY file) + 1 AS line_no, line,
               {'true' if form == KUBECTL else 'false'} AS from_stdout
        FROM read_csv($files, columns = {{'line': 'VARCHAR'}}, delim = '\\0', quote = '',
                      escape = '', header = false, auto_detect = false, filename = true,
                      max_line_size = {MAX_LINE_BYTES}, strict_mode = false)
             WITH ORDINALITY AS t(line, file, n)
    """


def _stage_sql(form: str) -> str:
    struct = json.dumps(RECORD_STRUCT).replace("'", "''")
    return f"""
    CREATE OR REPLACE TEMP TABLE stage AS
    WITH lines AS ({_lines_sql(form)}),
    cut AS (
        SELECT file, line_no, line, from_stdout,
               CASE WHEN from_stdout THEN regexp_extract(line, '{_STDOUT_PREFIX_RE}') ELSE '' END AS pfx
        FROM lines
    ),
    cand AS (
        SELECT file, line_no, line, from_stdout, pfx,
               CASE WHEN pfx <> '' THEN substr(line, length(pfx) + 1)
                    WHEN NOT from_stdout THEN line END AS candidate
        FROM cut
    ),
    parsed AS (
        SELECT *, try(json_transform(candidate, '{struct}')) AS j
        FROM cand
    )
    SELECT f.file_id, p.line_no, p.line, p.candidate, p.pfx, p.from_stdout, p.j,
           try_cast(p.j.timestamp AS TIMESTAMP) AS ts,
           CASE
             WHEN p.line IS NULL OR trim(p.line) = '' THEN 'blank'
             WHEN p.candidate IS NULL THEN 'free_text'
             WHEN p.j IS NULL THEN 'malformed JSON (invalid or cut-off line)'
             WHEN NOT starts_with(ltrim(p.candidate), '{{') THEN 'not a JSON object'
             WHEN p.j.type IS NULL OR p.j.type NOT IN {RECORD_TYPES} THEN 'not a proxy record (no request/response/system_prompt type)'
             WHEN try_cast(p.j.timestamp AS TIMESTAMP) IS NULL THEN 'no valid timestamp'
             ELSE 'ok'
           END AS verdict
    FROM parsed p JOIN batch_files f ON f.path = p.file
    """


_INSERT_RECORDS = """
INSERT INTO records
SELECT
    s.ts, s.j.type, s.j.request_id, s.j.session_id, s.j.client, s.j.provider, s.j.model, s.j.origin,
    s.j.message_count, s.j.tools_count, s.j.enable_thinking,
    CASE WHEN s.j.tool_results_this_turn IS NULL OR json_type(s.j.tool_results_this_turn) <> 'ARRAY' THEN NULL
         ELSE json_array_length(s.j.tool_results_this_turn) END,
    md5(s.j.user_message_this_turn),
    s.j.messages IS NOT NULL,
    -- The same test as analyzer.online.has_tool_history: a tool/function message,
    -- or an assistant message with tool calls, anywhere in the transcript.
    CASE WHEN s.j.messages IS NULL THEN NULL ELSE coalesce(list_bool_or(list_transform(s.j.messages,
        lambda m: m.role IN ('tool', 'function')
             OR (m.role = 'assistant' AND ((json_type(m.tool_calls) = 'ARRAY' AND json_array_length(m.tool_calls) > 0)
                                           OR (m.function_call IS NOT NULL AND json_type(m.function_call) <> 'NULL'))))), false) END,
    s.j.latency_ms, s.j.has_content, s.j.has_tool_calls, s.j.has_reasoning_content,
    CASE WHEN json_type(s.j.tool_calls) = 'ARRAY' THEN json_array_length(s.j.tool_calls) END,
    length(s.j.content), length(s.j.reasoning_content),
    s.j.tokens.prompt_tokens, s.j.tokens.completion_tokens, s.j.tokens.prompt_tokens_details.cached_tokens,
    s.j.error, s.j.upstream_headers,
    s.j.log_fields_version, s.j.upstream_status, s.j.finish_reason, s.j.max_tokens, s.j.thinking_token_budget,
    s.j.tool_history, s.j.incident_class, s.j.final_class, s.j.ladder,
    s.j.system_sha256,
    s.pfx <> '' AND contains(s.candidate, '…(+') AS truncated,
    s.file_id, s.line_no, s.candidate
FROM stage s
WHERE s.verdict = 'ok'
  AND NOT EXISTS (
      SELECT 1 FROM records r
      WHERE r.ts = s.ts AND r.type = s.j.type
        AND r.request_id IS NOT DISTINCT FROM s.j.request_id
        AND r.system_sha256 IS NOT DISTINCT FROM s.j.system_sha256)
QUALIFY row_number() OVER (
    PARTITION BY s.ts, s.j.type, s.j.request_id, s.j.system_sha256
    ORDER BY (s.pfx <> '' AND contains(s.candidate, '…(+')), s.file_id, s.line_no) = 1
"""

# A full copy arriving after a truncated stdout copy replaces it.
_DROP_TRUNCATED_SUPERSEDED = """
DELETE FROM records r
WHERE r.truncated AND EXISTS (
    SELECT 1 FROM stage s
    WHERE s.verdict = 'ok' AND NOT (s.pfx <> '' AND contains(s.candidate, '…(+'))
      AND r.ts = s.ts AND r.type = s.j.type
      AND r.request_id IS NOT DISTINCT FROM s.j.request_id
      AND r.system_sha256 IS NOT DISTINCT FROM s.j.system_sha256)
"""

_INSERT_QUARANTINE = f"""
INSERT INTO quarantine
SELECT s.file_id, f.path, s.line_no, s.verdict, left(s.line, {SNIPPET_CHARS})
FROM stage s JOIN batch_files f USING (file_id)
WHERE s.verdict NOT IN ('ok', 'blank', 'free_text')
"""

_FILE_STATS = """
SELECT file_id, max(line_no) AS lines,
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
    by_form: dict[str, list] = {}
    for item in todo:
        by_form.setdefault(item[0].form, []).append(item)
    for form in (JSONL, KUBECTL, PARQUET):
        batch: list = []
        size = 0
        for item in by_form.get(form, []):
            if batch and (size + item[0].size > BATCH_BYTES or len(batch) >= BATCH_FILES):
                yield batch
                batch, size = [], 0
            batch.append(item)
            size += item[0].size
        if batch:
            yield batch


def ingest(
    con: duckdb.DuckDBPyConnection,
    inputs: list[str],
    *,
    strict: bool = False,
    progress: Progress | None = None,
) -> IngestReport:
    """Read log files into the database; return what was done.

    Args:
        con: a connection from :func:`analyzer.db.connect`.
        inputs: files, directories and globs.
        strict: raise :class:`InputError` on the first batch with a malformed line
            (that batch is rolled back) instead of quarantining it.
        progress: called with ``(bytes_done, bytes_total)`` after each batch.

    Raises:
        InputError: an input does not exist or is not a proxy log; under
            ``strict``, a malformed line.
    """
    files = discover(inputs)
    report = IngestReport(files_seen=len(files))
    todo = _plan(con, files, report)
    total = sum(f.size for f, _ in todo)
    done = 0
    if progress:
        progress(0, total)
    for batch in _batches(todo):
        _ingest_batch(con, batch, report, strict)
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


def _ingest_batch(con: duckdb.DuckDBPyConnection, batch: list[tuple[SourceFile, int | None]], report: IngestReport, strict: bool) -> None:
    form = batch[0][0].form
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    con.execute("BEGIN TRANSACTION")
    try:
        rows = []
        for f, file_id in batch:
            if file_id is None:
                file_id = con.execute("SELECT nextval('source_file_ids')").fetchall()[0][0]
                con.execute(
                    "INSERT INTO source_files (file_id, path, form) VALUES (?, ?, ?)", [file_id, f.path, f.form]
                )
            else:
                con.execute("DELETE FROM quarantine WHERE file_id = ?", [file_id])
            rows.append((file_id, f.path))
        con.execute("CREATE OR REPLACE TEMP TABLE batch_files (file_id INTEGER, path VARCHAR)")
        con.executemany("INSERT INTO batch_files VALUES (?, ?)", rows)
        paths = [f.path for f, _ in batch]
        try:
            con.execute(_stage_sql(form), {"files": paths})
        except duckdb.Error as exc:
            raise InputError(f"cannot read {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''}: {exc}") from exc
        stats = {r[0]: r[1:] for r in con.execute(_FILE_STATS).fetchall()}
        bad = sum(s[2] for s in stats.values())
        if strict and bad:
            first = con.execute(
                "SELECT f.path, s.line_no, s.verdict FROM stage s JOIN batch_files f USING (file_id) "
                "WHERE s.verdict NOT IN ('ok', 'blank', 'free_text') ORDER BY f.path, s.line_no LIMIT 1"
            ).fetchall()[0]
            raise InputError(f"{first[0]}:{first[1]}: {first[2]} (--strict; {bad} bad line(s) in this batch)")
        before = con.execute("SELECT count(*) FROM records").fetchall()[0][0]
        con.execute(_DROP_TRUNCATED_SUPERSEDED)
        after_drop = con.execute("SELECT count(*) FROM records").fetchall()[0][0]
        con.execute(_INSERT_RECORDS)
        after = con.execute("SELECT count(*) FROM records").fetchall()[0][0]
        con.execute(_INSERT_QUARANTINE)
        for (f, _), (file_id, _path) in zip(batch, rows):
            lines, recs, quarantined, free_text = stats.get(file_id, (0, 0, 0, 0))
            con.execute(
                """UPDATE source_files SET size_bytes = ?, mtime = ?, fingerprint = ?, lines = ?, records = ?,
                   quarantined = ?, free_text = ?, ingested_at = ? WHERE file_id = ?""",
                [f.size, f.mtime, f.fingerprint(), lines or 0, recs, quarantined, free_text, now, file_id],
            )
            report.lines += lines or 0
            report.records += recs
            report.quarantined += quarantined
            report.free_text += free_text
        con.execute("DROP TABLE stage")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    new = after - after_drop
    replaced = before - after_drop
    report.files_ingested += len(batch)
    report.new_records += new - replaced
    report.duplicates = report.records - report.new_records
