"""The SQL of one ingestion batch: what :mod:`analyzer.ingestion.logs` runs on each.

``batch_lines`` is the Arrow batch of numbered lines (``file_id, line_no, line,
from_stdout, file_pod``, :func:`analyzer.io.batch_lines.batch_schema`). The store
runs :data:`STORE`; the finish runs :data:`REST` (the lines that are not records,
judged; :data:`NO_REST` when every line was one), :data:`BATCH_STATS`, the
de-duplication statements (:data:`OLDER` and the statements that act on it,
:data:`TWINS` and its), :data:`MARK_DIRTY`, :data:`INSERT_QUARANTINE` and
:data:`INSERT_EVENTS`. ``$batch`` is the batch's
number in ``records.ingest_batch``.
"""

from __future__ import annotations

import json

from analyzer.io.linereader import MALFORMED, SNIPPET_CHARS, SURROGATE_ESCAPE_RE
from analyzer.online import BLANK_CHARS, THINK_CLOSE, THINK_OPEN

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
    # Lists whose elements are never read, only counted: typed as lists of NULL,
    # DuckDB counts them without writing each element back as JSON text (which a
    # "JSON" type does, at a cost that grows with long tool results). A value that
    # is not a list transforms to NULL.
    "tool_results_this_turn": ["NULL"],
    # An assistant message's tool_calls likewise: only whether it is a non-empty
    # list is read (as JSON, every message's calls would be written back as text
    # and parsed again).
    "messages": [{"role": "VARCHAR", "tool_calls": ["NULL"], "function_call": "JSON"}],
    "latency_ms": "BIGINT",
    "has_content": "BOOLEAN",
    "has_tool_calls": "BOOLEAN",
    "has_reasoning_content": "BOOLEAN",
    "content": "VARCHAR",
    "content_preview": "VARCHAR",
    "reasoning_content": "VARCHAR",
    "reasoning_content_preview": "VARCHAR",
    "tool_calls": ["NULL"],
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
    "ladder_armed": "BOOLEAN",
    "reasoning_repaired": "BOOLEAN",
    "system_sha256": "VARCHAR",
    # LiteLLM's payloads read as records (analyzer.io.litellm_records): the gateway
    # that wrote them, and the deployment as the replica hint. The proxy's records
    # have neither: its replica comes from the stdout prefix or the chunk's name.
    "gateway": "VARCHAR",
    "proxy_pod": "VARCHAR",
}

RECORD_TYPES = ("request", "response", "system_prompt")

# The times a record can hold (UTC, from LOG_TIME_MIN up to, not including,
# LOG_TIME_MAX; docs/log-format.md). DuckDB reads "10000-01-01", "0000-01-01",
# negative years, "infinity" and "epoch" as timestamps, which Python cannot hold
# (every later summary and report failed) or which pull the report's default week
# to year 9999. A record timed outside is quarantined with its time. Fixed bounds,
# not the clock's: a verdict must not depend on when a file is read (the
# simulated weeks and benchmarks are dated ahead of some clocks).
LOG_TIME_MIN = "2000-01-01"
LOG_TIME_MAX = "2100-01-01"
LOG_TIME_SQL = f"(ts >= TIMESTAMP '{LOG_TIME_MIN}' AND ts < TIMESTAMP '{LOG_TIME_MAX}')"

# A kubectl stdout line: an optional multi-pod prefix (`kubectl logs --prefix`:
# `[pod/NAME/CONTAINER] `, or stern's `NAME CONTAINER `), an optional
# `--timestamps` stamp, then the record prefix.
_POD_PREFIX_RE = r"(?:\[pod/([^/\] ]+)/[^\] ]*\] |([a-z0-9][-a-z0-9.]*) ([a-z0-9][-a-z0-9]*) )"
_STAMP_RE = r"(\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:?\d\d) )"
#: Read by this SQL and by an engine that judges lines without it (analyzer.questions.spark.raw_records):
#: group 1 is the pod of a kubectl prefix, group 2 the pod of a stern one.
STDOUT_PREFIX_RE = rf"^{_POD_PREFIX_RE}?{_STAMP_RE}?(?:📥 REQUEST|✓ RESPONSE|✗ RESPONSE): "
# The same prefixes before one of the proxy's own warning lines (for
# proxy_events): they all start with one of these marks.
_EVENT_PREFIX_RE = rf"^{_POD_PREFIX_RE}?{_STAMP_RE}?(?:⚠️|🧹|🚨|ℹ️)"

STRUCT_SQL = json.dumps(RECORD_STRUCT).replace("'", "''")

def _blank_class() -> str:
    """BLANK_CHARS as a regex character class."""
    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in BLANK_CHARS) + "]"


def blank_sql(expr: str) -> str:
    """SQL true when ``expr`` has no visible character: analyzer.online.is_blank's rule."""
    # "No character outside BLANK_CHARS", as a regex: it stops at the first visible
    # character and copies nothing (trim(expr, chars) decodes the character set and
    # copies the text for every row).
    visible = "[^" + _blank_class()[1:]
    return f"(NOT regexp_matches({expr}, '{visible}'))"


def leak_sql(expr: str) -> str:
    """SQL true when ``expr`` carries a leaked think block: analyzer.online.has_leaked_think_block's rule.

    Opens with ``<think>`` after blank characters, or holds a ``</think>`` with no
    ``<think>`` before it. Null for a null ``expr``. Most answers hold neither tag:
    the CASE reads them once for ``think>`` and stops.
    """
    return (f"(CASE WHEN NOT contains({expr}, 'think>') THEN false "
            f"ELSE regexp_matches({expr}, '^{_blank_class()}*{THINK_OPEN}') "
            f"OR (strpos({expr}, '{THINK_CLOSE}') > 0 AND (strpos({expr}, '{THINK_OPEN}') = 0 "
            f"OR strpos({expr}, '{THINK_CLOSE}') < strpos({expr}, '{THINK_OPEN}'))) END)")


# The typed hot columns of `records`, computed from the parsed record `j`.
HOT_COLUMNS = """
    ts, j.type AS type, j.request_id AS request_id,
    j.session_id AS session_id, j.client AS client, j.provider AS provider, j.model AS model,
    j.origin AS origin,
    j.message_count AS message_count, j.tools_count AS tools_count, j.enable_thinking AS enable_thinking,
    len(j.tool_results_this_turn) AS tool_results_count,
    md5(j.user_message_this_turn) AS prompt_md5,
    j.messages IS NOT NULL AS has_messages,
    -- The same test as analyzer.online.has_tool_history: a tool/function message,
    -- or an assistant message with tool calls, anywhere in the transcript.
    CASE WHEN j.messages IS NULL THEN NULL ELSE coalesce(list_bool_or(list_transform(j.messages,
        lambda m: m.role IN ('tool', 'function')
             OR (m.role = 'assistant' AND (len(m.tool_calls) > 0
                                           OR (m.function_call IS NOT NULL AND json_type(m.function_call) <> 'NULL'))))),
        false) END AS messages_tool_history,
    j.latency_ms AS latency_ms, j.has_content AS has_content, j.has_tool_calls AS has_tool_calls,
    j.has_reasoning_content AS has_reasoning,
    len(j.tool_calls) AS tool_call_count,
    length(j.content) AS content_chars, length(j.reasoning_content) AS reasoning_chars,
    j.tokens.prompt_tokens AS prompt_tokens, j.tokens.completion_tokens AS completion_tokens,
    j.tokens.prompt_tokens_details.cached_tokens AS cached_tokens,
    j.tokens.completion_tokens_details.reasoning_tokens AS reasoning_tokens,
    CASE WHEN j.content IS NOT NULL THEN {blank}(j.content)
         WHEN j.content_preview IS NOT NULL THEN {blank}(j.content_preview) END AS content_blank,
    {leak}(coalesce(j.content, j.content_preview)) AS content_leak,
    {blank}(coalesce(j.reasoning_content, j.reasoning_content_preview)) AS reasoning_blank,
    j.reasoning_repaired AS reasoning_repaired,
    j.error AS error, j.upstream_headers AS upstream_headers,
    j.log_fields_version AS log_fields_version, j.upstream_status AS upstream_status,
    j.finish_reason AS finish_reason, j.max_tokens AS max_tokens,
    j.thinking_token_budget AS thinking_token_budget, j.tool_history AS tool_history,
    j.incident_class AS logged_class, j.final_class AS final_class, j.ladder AS ladder,
    j.ladder_armed AS ladder_armed, j.system_sha256 AS system_sha256, j.gateway AS gateway
""".replace("{blank}(j.content)", blank_sql("j.content")).replace("{blank}(j.content_preview)", blank_sql("j.content_preview")) \
   .replace("{leak}(coalesce(j.content, j.content_preview))", leak_sql("coalesce(j.content, j.content_preview)")) \
   .replace("{blank}(coalesce(j.reasoning_content, j.reasoning_content_preview))",
            blank_sql("coalesce(j.reasoning_content, j.reasoning_content_preview)"))

#: Words that mark a free-text stdout line as data (see proxy_events).
EVENT_WORDS = ("Slow completion", "Normalized", "Log buffer exceeded", "S3 flush failed",
                "Logging imbalance", "log_response", "log_request")

def _judged(source: str) -> str:
    """The lines of ``source`` (shaped like ``batch_lines``) parsed and judged, as CTEs ending in ``judged``."""
    return f"""
WITH cut AS (
    SELECT file_id, line_no, line, file_pod,
           CASE WHEN from_stdout THEN regexp_extract(line, '{STDOUT_PREFIX_RE}') ELSE '' END AS pfx,
           from_stdout
    FROM {source}
),
cand AS (
    SELECT *, CASE WHEN pfx <> '' THEN substr(line, length(pfx) + 1)
                   WHEN NOT from_stdout THEN line END AS candidate
    FROM cut
),
parsed AS (
    SELECT *, try(json_transform(candidate, '{STRUCT_SQL}')) AS j FROM cand
),
timed AS (
    SELECT *, try_cast(j.timestamp AS TIMESTAMPTZ)::TIMESTAMP AS ts FROM parsed
),
judged AS (
    SELECT *,
           CASE
             -- the common case first: CASE evaluates later branches only for the rest
             WHEN j.type IN {RECORD_TYPES} AND {LOG_TIME_SQL} THEN 'ok'
             WHEN candidate IS NULL THEN CASE WHEN trim(line) = '' THEN 'blank' ELSE 'free_text' END
             WHEN trim(candidate) = '' THEN 'blank'
             WHEN j IS NULL THEN '{MALFORMED}'
             WHEN NOT starts_with(ltrim(candidate), '{{') THEN 'not a JSON object'
             WHEN j.type IS NULL OR j.type NOT IN {RECORD_TYPES}
                  THEN 'not a proxy record (no request/response/system_prompt type)'
             WHEN ts IS NOT NULL THEN 'timestamp ' || left(j.timestamp, 40) || ' is not a log time (outside {LOG_TIME_MIN} .. {LOG_TIME_MAX})'
             ELSE 'no valid timestamp'
           END AS verdict
    FROM timed
)"""


_POD_OF_PREFIX = r"""coalesce(CASE WHEN pfx <> '' THEN coalesce(nullif(regexp_extract(pfx, '^\[pod/([^/\] ]+)/', 1), ''),
                                                   nullif(regexp_extract(pfx, '^([a-z0-9][-a-z0-9.]*) [a-z0-9][-a-z0-9]* ', 1), ''))
                END, j.proxy_pod, file_pod)"""

# 1. Every line that is a record goes straight into `records`: one parse, one
# write, streamed from the Arrow batch (what a bare INSERT of the same columns
# costs). De-duplication follows, on the narrow key columns. A stdout copy is
# truncated when its JSON holds the proxy's `…(+N chars)` marker; the proxy's
# json.dumps escapes the ellipsis (`\u2026`), so both spellings count.
def _store(source: str) -> str:
    return f"""
INSERT INTO records BY NAME
{_judged(source)}
SELECT {HOT_COLUMNS},
       pfx <> '' AND (contains(candidate, '…(+') OR contains(candidate, '\\u2026(+')) AS truncated,
       file_id, line_no, candidate AS raw,
       {_POD_OF_PREFIX} AS proxy_pod,
       $batch AS ingest_batch
FROM judged
WHERE verdict = 'ok'
"""


STORE = _store("batch_lines")

# 2. The other lines (free text, blank, bad) are judged again, which costs little:
# they are few, or parse nothing. Bad ones go to quarantine, data lines to
# proxy_events.
REST = f"""
CREATE OR REPLACE TEMP TABLE rest AS
{_judged("(SELECT * FROM batch_lines b ANTI JOIN (SELECT file_id, line_no FROM records WHERE ingest_batch = $batch) r USING (file_id, line_no))")}
SELECT file_id, line_no, verdict,
       {_POD_OF_PREFIX} AS proxy_pod,
       CASE WHEN verdict NOT IN ('ok', 'blank', 'free_text') THEN left(line, {SNIPPET_CHARS}) END AS snippet,
       CASE WHEN verdict = 'free_text' AND ({' OR '.join(f"contains(line, '{w}')" for w in EVENT_WORDS)})
            THEN left(line, 2000) END AS event_line,
       -- a line DuckDB refused for a lone surrogate escape: mended in Python (io.linereader.mend_surrogates)
       CASE WHEN verdict = '{MALFORMED}' AND regexp_matches(line, '{SURROGATE_ESCAPE_RE}') THEN line END AS mend_line
FROM judged
"""

# The lines mended in Python (`mended`: file_id, line_no, line) stored as STORE does,
# in the batch's finish; they leave `rest`.
STORE_MENDED = _store("(SELECT b.file_id, b.line_no, m.line, b.from_stdout, b.file_pod "
                      "FROM batch_lines b JOIN mended m USING (file_id, line_no))")
LEAVE_REST = """
DELETE FROM rest USING (SELECT file_id, line_no FROM records WHERE ingest_batch = $batch) r
WHERE rest.file_id = r.file_id AND rest.line_no = r.line_no
"""

# REST when the store took every line of the batch as a record (a chunk folder's
# usual batch): nothing is left to judge, and judging would read the whole batch
# again to find nothing.
NO_REST = """
CREATE OR REPLACE TEMP TABLE rest (file_id INTEGER, line_no BIGINT, verdict VARCHAR, proxy_pod VARCHAR,
                                   snippet VARCHAR, event_line VARCHAR, mend_line VARCHAR)
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
# file read again holds the same file and line numbers as its earlier reading; and
# by its type: a LiteLLM payload's line holds its request and its response.
OLDER = f"""
CREATE OR REPLACE TEMP TABLE older AS
SELECT b.file_id, b.line_no, b.type, b.truncated, b.proxy_pod,
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
REPLACE_TRUNCATED = [
    """UPDATE records SET proxy_pod = o.o_pod FROM older o
       WHERE records.ingest_batch = $batch AND records.file_id = o.file_id AND records.line_no = o.line_no
         AND records.type = o.type
         AND o.o_truncated AND NOT o.truncated AND records.proxy_pod IS NULL AND o.o_pod IS NOT NULL""",
    """DELETE FROM records USING older o
       WHERE records.ingest_batch IS NOT DISTINCT FROM o.o_batch AND records.file_id = o.o_file
         AND records.line_no = o.o_line AND records.type = o.type AND o.o_truncated AND NOT o.truncated""",
]
# ... and any other copy of a stored record is dropped (its replica carried over).
DROP_SEEN = [
    """UPDATE records SET proxy_pod = o.proxy_pod FROM older o
       WHERE records.ingest_batch IS NOT DISTINCT FROM o.o_batch AND records.file_id = o.o_file
         AND records.line_no = o.o_line AND records.type = o.type
         AND NOT (o.o_truncated AND NOT o.truncated) AND records.proxy_pod IS NULL AND o.proxy_pod IS NOT NULL""",
    """DELETE FROM records USING older o
       WHERE records.ingest_batch = $batch AND records.file_id = o.file_id AND records.line_no = o.line_no
         AND records.type = o.type AND NOT (o.o_truncated AND NOT o.truncated)""",
]

# Copies of one record within the batch: the first full copy stays.
TWINS = f"""
CREATE OR REPLACE TEMP TABLE twins AS
WITH mine AS (
    SELECT file_id, line_no, ts, type, request_id, system_sha256, session_id, truncated, proxy_pod
    FROM records WHERE ingest_batch = $batch
),
keys AS (
    SELECT ts, type, request_id, system_sha256, session_id FROM mine GROUP BY ALL HAVING count(*) > 1
)
SELECT m.file_id, m.line_no, m.type,
       row_number() OVER key_ AS copy_no,
       max(m.proxy_pod) OVER (PARTITION BY m.ts, m.type, m.request_id, m.system_sha256, m.session_id) AS any_pod
FROM mine m JOIN keys k ON {_same('m', 'k')}
WINDOW key_ AS (PARTITION BY m.ts, m.type, m.request_id, m.system_sha256, m.session_id
                ORDER BY m.truncated, m.file_id, m.line_no)
"""
DROP_TWINS = [
    """UPDATE records SET proxy_pod = t.any_pod FROM twins t
       WHERE records.ingest_batch = $batch AND records.file_id = t.file_id AND records.line_no = t.line_no
         AND records.type = t.type AND t.copy_no = 1 AND records.proxy_pod IS NULL""",
    """DELETE FROM records USING twins t
       WHERE records.ingest_batch = $batch AND records.file_id = t.file_id AND records.line_no = t.line_no
         AND records.type = t.type AND t.copy_no > 1""",
]

# The turns these new records belong to are re-derived at the next refresh.
MARK_DIRTY = """
INSERT INTO turns_dirty
SELECT DISTINCT coalesce(session_id, '~' || coalesce(request_id, ''))
FROM records
WHERE ingest_batch = $batch AND type IN ('request', 'response')
"""

INSERT_QUARANTINE = """
INSERT INTO quarantine
SELECT s.file_id, f.path, s.line_no, s.verdict, s.snippet
FROM rest s JOIN batch_files f USING (file_id)
WHERE s.verdict NOT IN ('ok', 'blank', 'free_text')
"""

# Stdout lines that are data (analyzer/proxy_events): what the proxy says about
# slow turns, repaired tool calls, and records it lost.
INSERT_EVENTS = f"""
INSERT INTO proxy_events
SELECT CASE WHEN {LOG_TIME_SQL} THEN ts END AS ts,  -- a stamp outside the log times: none
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
    SELECT *, try_cast(nullif(trim(regexp_extract(event_line, '{_EVENT_PREFIX_RE}', 4)), '') AS TIMESTAMPTZ)::TIMESTAMP AS ts,
        CASE
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

BATCH_STATS = """
SELECT file_id, sum(records), sum(quarantined), sum(free_text) FROM (
    SELECT file_id, count(*) AS records, 0 AS quarantined, 0 AS free_text
    FROM records WHERE ingest_batch = $batch GROUP BY file_id
    UNION ALL
    SELECT file_id, 0, count(*) FILTER (WHERE verdict NOT IN ('ok', 'blank', 'free_text')),
           count(*) FILTER (WHERE verdict = 'free_text')
    FROM rest GROUP BY file_id
) GROUP BY file_id
"""
