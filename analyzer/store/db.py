"""The DuckDB database: opening it, append-only migrations, views from queries/.

Schema changes are named migration functions applied in order and recorded in the
``_migrations`` table; a migration is never edited once released, only followed by
a new one. New columns are nullable, with a comment saying what older rows hold.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import duckdb

from analyzer import __version__
from analyzer.core.errors import DatabaseError, WriteError, is_write_failure, one_line
from analyzer.core.interrupt import track
from analyzer.core.paths import default_db_path
from analyzer.store.catalog import create_temp_macros, create_views
from analyzer.store.record_sql import LOG_TIME_MAX, LOG_TIME_MIN, LOG_TIME_SQL, blank_sql, leak_sql
from analyzer.store.spill import database_spill_dir, scratch_spill_dir

Migration = Callable[[duckdb.DuckDBPyConnection], None]


# Connections inside a transaction() block (by id): a nested block joins the outer one.
_IN_TRANSACTION: set[int] = set()


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """One transaction: committed when the block ends, rolled back if it raises.

    Every write path uses it, so an interrupted run leaves the database as it was
    before the block. A block inside another one on the same connection joins it
    (the outer block commits or rolls back the whole), so a caller can run a whole
    job in one transaction, e.g. to compute something for one run and discard it.
    If the rollback itself fails (DuckDB has already aborted the transaction after
    an interrupted query), the original error is the one raised.
    """
    key = id(con)
    if key in _IN_TRANSACTION:
        yield con
        return
    con.execute("BEGIN TRANSACTION")
    _IN_TRANSACTION.add(key)
    try:
        yield con
    except BaseException:
        _IN_TRANSACTION.discard(key)
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:  # aborted or already gone: nothing of the block was committed
            pass
        raise
    _IN_TRANSACTION.discard(key)
    con.execute("COMMIT")


#: DuckDB's memory bound ($ANALYZER_MEMORY_LIMIT): with the Arrow batch being
#: stored beside it, a week's ingest stays well under 1 GB of peak RSS.
MEMORY_LIMIT = os.environ.get("ANALYZER_MEMORY_LIMIT", "384MB")
#: The bound while classifying, when $ANALYZER_MEMORY_LIMIT does not set one:
#: classification holds no Arrow batch, and its two wide statements spill at
#: 384 MB (measured on a week: ~2.5 CPU-s more, peak RSS 515 MB; at 640 MB, 755 MB).
CLASSIFY_MEMORY_LIMIT = os.environ.get("ANALYZER_MEMORY_LIMIT", "640MB")


@contextmanager
def memory_bound(con: duckdb.DuckDBPyConnection, limit: str) -> Iterator[duckdb.DuckDBPyConnection]:
    """Run the block with DuckDB's memory limit at ``limit``, then put back the one before.

    (DuckDB reports the limit rounded to 0.1 MiB, so the bound put back may be
    that much lower than the one set at connect.)
    """
    before = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    try:
        con.execute("SET memory_limit = ?", [limit])
    except duckdb.Error:  # a locked configuration keeps its bound
        yield con
        return
    try:
        yield con
    except BaseException:
        # DuckDB refuses even a SET on a transaction the failure left aborted: the
        # error that ended the block is what the caller sees (the caller's rollback
        # follows). GeneratorExit too: a block abandoned by a Ctrl-C in the middle of
        # the exit is closed by the collector, which would print the SET's error.
        try:
            con.execute("SET memory_limit = ?", [before])
        except duckdb.Error:
            pass
        raise
    con.execute("SET memory_limit = ?", [before])


@contextmanager
def discarded(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """A transaction that is always rolled back: what runs inside is seen by this block only."""
    key = id(con)
    if key in _IN_TRANSACTION:
        raise RuntimeError("discarded() cannot run inside another transaction")
    con.execute("BEGIN TRANSACTION")
    _IN_TRANSACTION.add(key)
    try:
        yield con
    finally:
        _IN_TRANSACTION.discard(key)
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass


def _m001_initial(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE SEQUENCE source_file_ids START 1;

        -- One row per input file ingested; drives idempotent, incremental re-runs.
        CREATE TABLE source_files (
            file_id      INTEGER PRIMARY KEY,
            path         VARCHAR NOT NULL UNIQUE,  -- absolute path (or URL) as read
            form         VARCHAR NOT NULL,         -- 'jsonl' | 'kubectl' | 'parquet'
            size_bytes   BIGINT,
            mtime        DOUBLE,
            fingerprint  VARCHAR,                  -- sha256 of size + first/last 64 KiB
            lines        BIGINT,                   -- lines (or Parquet rows) read
            records      BIGINT,                   -- proxy records found
            quarantined  BIGINT,                   -- lines set aside as malformed
            free_text    BIGINT,                   -- kubectl lines that are not records
            ingested_at  TIMESTAMP
        );

        -- One row per distinct proxy record (request, response, system_prompt).
        -- Typed hot columns for the analyses, the original record in `raw`.
        CREATE TABLE records (
            ts              TIMESTAMP NOT NULL,   -- `timestamp`, UTC
            type            VARCHAR NOT NULL,     -- request | response | system_prompt
            request_id      VARCHAR,
            session_id      VARCHAR,              -- null in old records
            client          VARCHAR,
            provider        VARCHAR,
            model           VARCHAR,
            origin          VARCHAR,
            -- request records
            message_count       INTEGER,
            tools_count         INTEGER,
            enable_thinking     BOOLEAN,
            tool_results_count  INTEGER,          -- role:tool messages after the last assistant message
            prompt_md5          VARCHAR,          -- md5 of user_message_this_turn (retry detection)
            has_messages        BOOLEAN,          -- full capture mode: the whole prompt is in raw
            messages_tool_history BOOLEAN,        -- tool messages/calls anywhere in `messages`
            -- response records
            latency_ms          BIGINT,
            has_content         BOOLEAN,
            has_tool_calls      BOOLEAN,
            has_reasoning       BOOLEAN,
            tool_call_count     INTEGER,
            content_chars       INTEGER,
            reasoning_chars     INTEGER,
            prompt_tokens       BIGINT,
            completion_tokens   BIGINT,
            cached_tokens       BIGINT,
            error               VARCHAR,
            upstream_headers    JSON,
            -- fields added by analyzer.online.log_fields; null in records from
            -- proxies without the module (all records before it shipped)
            log_fields_version  INTEGER,
            upstream_status     INTEGER,
            finish_reason       VARCHAR,
            max_tokens          INTEGER,
            thinking_token_budget INTEGER,
            tool_history        BOOLEAN,
            logged_class        VARCHAR,          -- log_fields' incident_class
            final_class         VARCHAR,
            ladder              JSON,
            -- system_prompt records
            system_sha256       VARCHAR,
            -- provenance
            truncated           BOOLEAN NOT NULL, -- a stdout copy with fields cut to 200 chars
            file_id             INTEGER NOT NULL,
            line_no             BIGINT NOT NULL,
            raw                 VARCHAR USING COMPRESSION zstd  -- the record as read
        );

        -- Lines that could not be read as records: nothing is silently dropped.
        CREATE TABLE quarantine (
            file_id     INTEGER NOT NULL,
            path        VARCHAR NOT NULL,
            line_no     BIGINT NOT NULL,
            reason      VARCHAR NOT NULL,
            snippet     VARCHAR                -- at most 200 characters of the line
        );

        -- analyzer.online.parse_error over each distinct error text (its first 200
        -- characters, all the rule reads), so SQL never re-implements it.
        CREATE TABLE error_kinds (
            provider    VARCHAR,
            error_head  VARCHAR NOT NULL,
            error_kind  VARCHAR,
            status      INTEGER
        );

        -- analyzer.online.decide over each distinct feature combination.
        CREATE TABLE feature_labels (
            status            INTEGER,
            finish_reason     VARCHAR,
            has_content       BOOLEAN,
            has_tool_calls    BOOLEAN,
            tool_history      BOOLEAN,
            has_reasoning     BOOLEAN,
            completion_tokens BIGINT,
            max_tokens        INTEGER,
            error_kind        VARCHAR,
            inferred          VARCHAR,         -- comma-separated reconstructed features
            incident_class    VARCHAR NOT NULL,
            decision_evidence VARCHAR NOT NULL, -- 'logged' | 'inferred'
            upstream_failure  BOOLEAN NOT NULL, -- a class a wedged/down pod explains
            ladder_trigger    VARCHAR           -- analyzer.online.ladder_trigger
        );

        -- Metric samples from Prometheus exports, scrapes, CSV or a live server.
        CREATE TABLE metric_samples (
            metric      VARCHAR NOT NULL,      -- normalized: vllm:generation_tokens_total, up, ...
            pod         VARCHAR,
            model_name  VARCHAR,
            instance    VARCHAR,
            job         VARCHAR,
            labels      JSON,
            ts          TIMESTAMP NOT NULL,
            value       DOUBLE,
            source      VARCHAR
        );

        -- Intervals when a pod serving a model was wedged or down (from metrics).
        CREATE TABLE pod_windows (
            pod         VARCHAR,
            model_name  VARCHAR,
            kind        VARCHAR NOT NULL,      -- 'wedged' | 'down'
            start_ts    TIMESTAMP NOT NULL,
            end_ts      TIMESTAMP NOT NULL,
            detail      VARCHAR
        );

        -- Log `model` -> metric `model_name`, for deployments whose served name
        -- differs from what clients send. Unmapped models match by equal name.
        CREATE TABLE model_map (
            log_model   VARCHAR PRIMARY KEY,
            model_name  VARCHAR NOT NULL
        );

        -- Facts about the last runs (inputs given, metrics present) for summaries.
        CREATE TABLE runs (
            started_at  TIMESTAMP,
            finished_at TIMESTAMP,
            inputs      VARCHAR[],
            metrics     BOOLEAN,
            status      VARCHAR
        );
        """
    )


def _m002_replay_attempts(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        -- Ladder attempts made by `analyze replay`: failed requests captured in full
        -- mode, re-sent through analyzer.online.run_ladder to a test endpoint.
        -- Same shape as a proxy's `ladder.attempts`; ladder_attempts unions them
        -- with source = 'replay'.
        CREATE TABLE replay_attempts (
            request_id        VARCHAR NOT NULL,
            ts                TIMESTAMP NOT NULL,   -- the original turn's request time
            session_id        VARCHAR,
            model             VARCHAR,
            trigger           VARCHAR,              -- the original turn's ladder trigger
            outcome           VARCHAR,
            recovered_at      VARCHAR,
            attempt_no        INTEGER NOT NULL,
            rung              VARCHAR NOT NULL,
            status            INTEGER,
            incident_class    VARCHAR,
            latency_ms        BIGINT,
            finish_reason     VARCHAR,
            prompt_tokens     BIGINT,
            completion_tokens BIGINT,
            error             VARCHAR,
            endpoint          VARCHAR,              -- where it was replayed (no credentials)
            replayed_at       TIMESTAMP
        );
        """
    )


def _m003_build_state(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        -- What each materialized table (queries/ files headed `-- table:`) was last
        -- built from, so it is rebuilt only when its inputs changed.
        CREATE TABLE build_state (
            name        VARCHAR PRIMARY KEY,
            signature   VARCHAR NOT NULL,
            built_at    TIMESTAMP
        );
        """
    )


def _m004_production_inputs(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        -- Which proxy replica wrote a record: the pod named by a multi-pod stdout
        -- prefix (`[pod/NAME/CONTAINER] `, stern's `NAME CONTAINER `). Null where
        -- the input does not say (S3 chunks, single-pod stdout, rows before 004).
        ALTER TABLE records ADD COLUMN proxy_pod VARCHAR;
        -- The ingestion batch (transaction) that stored a record: de-duplication
        -- tells this batch's rows from earlier ones. Null in rows before 004.
        ALTER TABLE records ADD COLUMN ingest_batch BIGINT;
        CREATE SEQUENCE ingest_batches START 1;
        -- Response evidence read at ingestion (backfilled below from `raw` for
        -- older rows): usage's completion_tokens_details.reasoning_tokens, and
        -- whether the logged content (or its preview) has no visible character.
        ALTER TABLE records ADD COLUMN reasoning_tokens BIGINT;
        ALTER TABLE records ADD COLUMN content_blank BOOLEAN;

        -- Progress through a file, so a big file is many transactions and a killed
        -- run resumes where it stopped. Rows before 004 hold NULL (read whole).
        ALTER TABLE source_files ADD COLUMN bytes_done BIGINT;   -- input bytes committed (uncompressed for gzip)
        ALTER TABLE source_files ADD COLUMN lines_done BIGINT;   -- lines (Parquet rows) committed
        ALTER TABLE source_files ADD COLUMN complete BOOLEAN;    -- false while a file is part-read

        -- Files that could not be read as logs: skipped, reported, never silent.
        CREATE TABLE skipped_files (
            path        VARCHAR NOT NULL,
            reason      VARCHAR NOT NULL,
            size_bytes  BIGINT,
            mtime       DOUBLE,
            seen_at     TIMESTAMP
        );

        -- Stdout lines that are data but not records: slow completions, normalized
        -- tool-call arguments, and the proxy's own word that records were lost.
        CREATE TABLE proxy_events (
            ts          TIMESTAMP,              -- the kubectl --timestamps stamp, when present
            proxy_pod   VARCHAR,                -- from a multi-pod prefix, when present
            kind        VARCHAR NOT NULL,       -- slow-completion | normalized-arguments | buffer-dropped |
                                                -- flush-failed | logging-imbalance | log-response-failed |
                                                -- log-response-failures
            request_id  VARCHAR,
            model       VARCHAR,
            lost        BIGINT,                 -- records the line says were lost (dropped, failed)
            value       BIGINT,                 -- the line's number: ms, count, entries re-queued ...
            text        VARCHAR,                -- the line, at most 500 characters
            file_id     INTEGER NOT NULL,
            line_no     BIGINT NOT NULL
        );

        -- Turns whose records changed since `turns` was last built, by turn key
        -- (the session, or `~request_id` for records without one): the next
        -- refresh re-derives only these (analyzer.classification.turns).
        CREATE TABLE turns_dirty (turn_key VARCHAR NOT NULL);

        -- The pod windows the `turns` table was last classified with: a refresh
        -- re-derives only the turns inside windows that appeared or vanished.
        CREATE TABLE turns_windows (
            model_name  VARCHAR,
            kind        VARCHAR,
            start_ts    TIMESTAMP,
            end_ts      TIMESTAMP
        );

        -- The last summaries (analyzer.outputs.summary_cache), keyed by a hash of the
        -- database's contents, the filters and the code: a re-run that changed
        -- nothing prints its summary without computing it again.
        CREATE TABLE summary_cache (
            key         VARCHAR PRIMARY KEY,
            summary     VARCHAR NOT NULL,      -- the summary as JSON
            built_at    TIMESTAMP
        );
        """
    )

    content = "json_extract_string(raw, '$.content')"
    preview = "json_extract_string(raw, '$.content_preview')"
    con.execute(
        f"""UPDATE records SET
                reasoning_tokens = TRY_CAST(json_extract(raw, '$.tokens.completion_tokens_details.reasoning_tokens') AS BIGINT),
                content_blank = CASE WHEN {content} IS NOT NULL THEN {blank_sql(content)}
                                     WHEN {preview} IS NOT NULL THEN {blank_sql(preview)} END
            WHERE type = 'response'"""
    )


def _m005_settings(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        -- Settings the database keeps between runs, so a one-off option does not
        -- change what later commands see:
        --   'caller_deadline_s': the callers' own deadline that makes an otherwise-ok
        --     answer late-200 (--caller-deadline);
        --   'pod_windows.wedge_window_s': the wedge window (seconds) the stored
        --     pod_windows were computed with (absent for windows computed before 005).
        CREATE TABLE settings (
            name    VARCHAR PRIMARY KEY,
            value   VARCHAR NOT NULL,
            set_at  TIMESTAMP
        );
        -- Two new features of analyzer.online.TurnFeatures; older label rows were
        -- decided by an older rule, so the derived caches are rebuilt from scratch
        -- (both are recomputed from `records` on the next classification).
        ALTER TABLE feature_labels ADD COLUMN no_answer BOOLEAN;  -- null in rows labelled before 005
        ALTER TABLE feature_labels ADD COLUMN late BOOLEAN;       -- null in rows labelled before 005
        DELETE FROM feature_labels;
        DELETE FROM error_kinds;
        DELETE FROM build_state;
        """
    )


def _m006_metric_series(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        -- Metric samples stored as series and points: a week holds a few
        -- hundred series and a million points, so each label set is stored once and
        -- a point carries only its series' number. `metric_samples` becomes a view
        -- with the columns the table had (queries/metric_samples.sql).
        CREATE TABLE metric_series (
            series_id   INTEGER PRIMARY KEY,
            metric      VARCHAR NOT NULL,      -- normalized: vllm:generation_tokens_total, up, ...
            pod         VARCHAR,               -- namespace/pod (analyzer.io.metric_samples.pod_identity)
            model_name  VARCHAR,
            instance    VARCHAR,
            job         VARCHAR,
            labels      JSON                   -- canonical JSON of the label set (sorted keys, no __name__)
        );
        -- Where points came from (a file's absolute path, or a Prometheus URL without credentials).
        CREATE TABLE metric_sources (
            source_id   INTEGER PRIMARY KEY,
            source      VARCHAR NOT NULL
        );
        -- One row per stored sample: a point of a series. (series_id, ts) is unique.
        CREATE TABLE metric_points (
            series_id   INTEGER NOT NULL,
            ts          TIMESTAMP NOT NULL,
            value       DOUBLE,
            source_id   INTEGER                -- null for samples stored without a source before 006
        );
        INSERT INTO metric_series
        SELECT row_number() OVER (ORDER BY metric, pod NULLS FIRST, model_name NULLS FIRST, instance NULLS FIRST,
                                           job NULLS FIRST, labels NULLS FIRST),
               metric, pod, model_name, instance, job, labels::JSON
        FROM (SELECT DISTINCT metric, pod, model_name, instance, job, labels::VARCHAR AS labels FROM metric_samples);
        INSERT INTO metric_sources
        SELECT row_number() OVER (ORDER BY source), source
        FROM (SELECT DISTINCT source FROM metric_samples WHERE source IS NOT NULL);
        INSERT INTO metric_points
        SELECT s.series_id, m.ts, m.value, f.source_id
        FROM metric_samples m
        JOIN metric_series s
          ON s.metric = m.metric AND s.pod IS NOT DISTINCT FROM m.pod
         AND s.model_name IS NOT DISTINCT FROM m.model_name AND s.instance IS NOT DISTINCT FROM m.instance
         AND s.job IS NOT DISTINCT FROM m.job AND s.labels::VARCHAR IS NOT DISTINCT FROM m.labels::VARCHAR
        LEFT JOIN metric_sources f ON f.source = m.source;
        DROP TABLE metric_samples;
        -- the view of the same name is created from queries/ right after the migrations
        DELETE FROM build_state WHERE name = 'views';
        """
    )


def _m007_ingest_pending(con: duckdb.DuckDBPyConnection) -> None:
    """Batches whose records are stored but not yet finished (de-duplicated, progress written)."""
    con.execute("CREATE TABLE ingest_pending (batch BIGINT PRIMARY KEY, stored_at TIMESTAMP)")


def _m008_ladder_weeks(con: duckdb.DuckDBPyConnection) -> None:
    """What a week after the ladder shipped needs: the records' ``ladder_armed``, and the class labels."""
    con.execute(
        """
        -- log_fields 3: whether the proxy ran the ladder for this request (its model
        -- gate); null in older records (a log_fields 2 record came from a proxy that
        -- ran the ladder for every model).
        ALTER TABLE records ADD COLUMN ladder_armed BOOLEAN;
        -- What analyzer.online says of each class a proxy can log: whether a wedged
        -- or down pod explains it, and the ladder trigger it is with and without tool
        -- history. A logged class is joined to it instead of being re-derived.
        CREATE TABLE class_labels (
            incident_class   VARCHAR NOT NULL,
            tool_history     BOOLEAN NOT NULL,
            upstream_failure BOOLEAN NOT NULL,
            ladder_trigger   VARCHAR,
            PRIMARY KEY (incident_class, tool_history)
        );
        -- log_fields 3: a rung the upstream refused (400/422: it will not take that
        -- shape), recorded apart from a rung that failed; replay records it too.
        ALTER TABLE replay_attempts ADD COLUMN refused BOOLEAN;
        -- analyzer.online now reads a cancelled handler, a refused request and an
        -- unknown model from their error texts: the derived caches are parsed and
        -- decided again from `records` on the next classification.
        DELETE FROM error_kinds;
        DELETE FROM feature_labels;
        DELETE FROM build_state;
        """
    )


def _m009_ingest_guards(con: duckdb.DuckDBPyConnection) -> None:
    """Source files' change time; records timed outside the log times moved to quarantine."""
    con.execute(
        f"""
        -- The file's status-change time (st_ctime) when registered: any write to it
        -- moves it, even one whose modification time was put back; null in rows
        -- registered before (their fingerprint decides, once).
        ALTER TABLE source_files ADD COLUMN ctime DOUBLE;
        -- Records an older analyzer stored with a time no log can hold (year 10000,
        -- 0000, negative years): every later summary and report failed on them.
        INSERT INTO quarantine
        SELECT r.file_id, coalesce(f.path, '?'), r.line_no,
               'timestamp ' || coalesce(left(json_extract_string(r.raw, '$.timestamp'), 40), '?')
                 || ' is not a log time (outside {LOG_TIME_MIN} .. {LOG_TIME_MAX})',
               left(r.raw, 200)
        FROM records r LEFT JOIN source_files f USING (file_id)
        WHERE NOT {LOG_TIME_SQL};
        UPDATE source_files f SET records = f.records - q.n, quarantined = f.quarantined + q.n
        FROM (SELECT file_id, count(*) AS n FROM records WHERE NOT {LOG_TIME_SQL} GROUP BY file_id) q
        WHERE f.file_id = q.file_id;
        DELETE FROM records WHERE NOT {LOG_TIME_SQL};
        DELETE FROM build_state;
        """
    )


def _m010_glm_shapes(con: duckdb.DuckDBPyConnection) -> None:
    """What GLM as it fails today needs: leaked think blocks, reasoning texts, repaired answers, frozen gauges."""
    con.execute(
        """
        -- Response evidence read at ingestion (backfilled below from `raw` for older
        -- rows): whether the content (or its preview) carries a think block that was
        -- not split out (analyzer.online.has_leaked_think_block), whether the
        -- reasoning text (or its preview) has no visible character, and log_fields 4's
        -- `reasoning_repaired` (the proxy split a leaked block out of the answer).
        ALTER TABLE records ADD COLUMN content_leak BOOLEAN;
        ALTER TABLE records ADD COLUMN reasoning_blank BOOLEAN;
        ALTER TABLE records ADD COLUMN reasoning_repaired BOOLEAN;
        -- A wedge inferred from the logs because the pod's own gauges read 0 while its
        -- generation counter was flat and its model's requests failed (frozen gauges);
        -- false for the windows the metrics show, null in rows before 010.
        ALTER TABLE pod_windows ADD COLUMN inferred BOOLEAN;
        -- log_fields 4: what the upstream said when it refused a rung (vLLM's 400 for a
        -- thinking_token_budget without a reasoning parser); replay records it too.
        ALTER TABLE replay_attempts ADD COLUMN refused_reason VARCHAR;
        -- Three new features of analyzer.online.TurnFeatures (answer-in-reasoning,
        -- reasoning-leaked): older label rows were decided by an older rule, so the
        -- derived caches are rebuilt from `records` on the next classification.
        ALTER TABLE feature_labels ADD COLUMN has_reasoning_text BOOLEAN;
        ALTER TABLE feature_labels ADD COLUMN reasoning_leaked BOOLEAN;
        ALTER TABLE feature_labels ADD COLUMN reasoning_at_cap BOOLEAN;
        DELETE FROM feature_labels;
        DELETE FROM build_state;
        """
    )
    content = "coalesce(json_extract_string(raw, '$.content'), json_extract_string(raw, '$.content_preview'))"
    reasoning = ("coalesce(json_extract_string(raw, '$.reasoning_content'), "
                 "json_extract_string(raw, '$.reasoning_content_preview'))")
    con.execute(
        f"""UPDATE records SET
                content_leak = {leak_sql(content)},
                reasoning_blank = {blank_sql(reasoning)},
                reasoning_repaired = TRY_CAST(json_extract(raw, '$.reasoning_repaired') AS BOOLEAN)
            WHERE type = 'response'"""
    )


def _m011_forget_pending(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        -- A forget whose removal committed and whose re-derivation has not finished yet:
        -- the files that held copies of the forgotten records are read again, the pod
        -- windows recomputed and the turns derived again, then the row goes. A forget
        -- killed in between leaves it; `analyze forget` (the same command again, or any
        -- later one) finishes it first (analyzer.jobs.forget).
        CREATE TABLE forget_pending (
            forgotten       VARCHAR[] NOT NULL,   -- the paths of the files it removed
            reread          VARCHAR[] NOT NULL,   -- files holding copies of their records: read again
            metric_sources  VARCHAR[] NOT NULL,   -- metric inputs it removed
            started_at      TIMESTAMP
        );
        """
    )


def _m012_gateway_records(con: duckdb.DuckDBPyConnection) -> None:
    """Records another gateway wrote: LiteLLM's logging payloads, read as requests and responses."""
    con.execute(
        """
        -- The gateway whose logs a record was read from: 'litellm' for a LiteLLM
        -- StandardLoggingPayload (analyzer.io.litellm_records maps each to a request
        -- and a response on its line), null for the proxy's own records. A LiteLLM
        -- call's retries and fallbacks share its call id: turn_features folds them
        -- into one turn.
        ALTER TABLE records ADD COLUMN gateway VARCHAR;
        DELETE FROM build_state;
        """
    )


#: Applied in order; append only. Never edit or reorder a released migration.
MIGRATIONS: list[tuple[str, Migration]] = [
    ("001_initial", _m001_initial),
    ("002_replay_attempts", _m002_replay_attempts),
    ("003_build_state", _m003_build_state),
    ("004_production_inputs", _m004_production_inputs),
    ("005_settings", _m005_settings),
    ("006_metric_series", _m006_metric_series),
    ("007_ingest_pending", _m007_ingest_pending),
    ("008_ladder_weeks", _m008_ladder_weeks),
    ("009_ingest_guards", _m009_ingest_guards),
    ("010_glm_shapes", _m010_glm_shapes),
    ("011_forget_pending", _m011_forget_pending),
    ("012_gateway_records", _m012_gateway_records),
]


# Ingests running in this process. Only one process writes a database file
# (DuckDB locks it), so a batch pending while none runs here was left by a killed
# run; while one runs, its batches are pending on purpose, and another connection
# this process opens to the same file (sharing its DuckDB instance) leaves them.
_INGESTS = threading.Lock()
_ingests_running = 0


@contextmanager
def ingest_running() -> Iterator[None]:
    """Mark an ingest as running in this process (see :func:`connect`'s clean-up)."""
    global _ingests_running
    with _INGESTS:
        _ingests_running += 1
    try:
        yield
    finally:
        with _INGESTS:
            _ingests_running -= 1


def discard_unfinished_batches(con: duckdb.DuckDBPyConnection) -> int:
    """Remove the records of batches stored but never finished; return how many batches.

    Ingestion stores a batch's records in one transaction and finishes it (de-
    duplication, quarantine, the files' progress) in a second. A run killed
    between the two leaves the batch in ``ingest_pending``: its records go, and
    as its files' progress was not advanced, the next run reads those lines again.
    """
    pending = con.execute("SELECT count(*) FROM ingest_pending").fetchall()[0][0]
    if pending:
        with transaction(con):
            con.execute("DELETE FROM records WHERE ingest_batch IN (SELECT batch FROM ingest_pending)")
            con.execute("DELETE FROM ingest_pending")
    return pending


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the migrations this database has not seen; return their names."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)"
    )
    done = {r[0] for r in con.execute("SELECT name FROM _migrations").fetchall()}
    applied = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        with transaction(con):
            fn(con)
            con.execute(
                "INSERT INTO _migrations VALUES (?, ?)",
                [name, datetime.now(timezone.utc).replace(tzinfo=None)],
            )
        applied.append(name)
    return applied


#: Rows per DuckDB row group in what the ingest writes (ATTACH's ROW_GROUP_SIZE;
#: DuckDB's own, and what other connections write, is DEFAULT_ROW_GROUP_ROWS).
#: A batch is one row group, and half of DuckDB's lets two batches be stored at
#: once, each a whole row group, in the memory one of DuckDB's took: on a week's
#: one file, benchmarks/ingest.py printed 21.00 s at 798 MB peak RSS, where the
#: last run of 122,880-row batches stored one at a time printed 32.91 s at 840 MB
#: (the `--json` output identical). Row groups of both sizes live in one file.
#:
#: Every command that writes opens the file with this size too, not only the
#: ingest. A checkpoint merges adjacent row groups that fit in fewer of the
#: size its connection writes: through a connection of DuckDB's size, the first
#: checkpoint after any write rewrote every table the ingest wrote, `raw`
#: included (benchmarks/checkpoint.py, a one-row CREATE TABLE on a week's
#: database: `analyze sql --write` took 11.64 s and grew the file from 169 to
#: 305 MB when it opened with DuckDB's size, 0.62 s and no growth with this one).
INGEST_ROW_GROUP_ROWS = 61_440
DEFAULT_ROW_GROUP_ROWS = 122_880

#: Settings of every connection: DuckDB never downloads or auto-loads an extension
#: (a SQLite file would otherwise make it fetch sqlite_scanner from the network).
NO_NETWORK_CONFIG = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
}
#: Settings of a read-only connection that answers questions (``analyze sql``, a
#: lake, ``analyzer.query`` on a path), applied in this order: no file or network
#: access (COPY TO, EXPORT DATABASE, read_csv('http://...'), ATTACH), then the
#: configuration locked (no SET, no extension settings) for the query.
READ_ONLY_SETTINGS = {"enable_external_access": False, "lock_configuration": True}
_DUCKDB_MAGIC = b"DUCK"  # bytes 8..12 of a DuckDB database file
_OTHER_FORMATS = ((b"SQLite format 3\x00", "a SQLite database"), (b"PAR1", "a Parquet file"),
                  (b"\x1f\x8b", "a gzip file"), (b"PK\x03\x04", "a zip file"))


def _check_file_format(target: str) -> None:
    """Refuse a file that is not a DuckDB database before DuckDB touches it."""
    p = Path(target)
    try:
        if not p.is_file() or p.stat().st_size == 0:
            return
        with p.open("rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise DatabaseError(f"cannot open database {target}: {exc.strerror or exc}") from exc
    if head[8:12] == _DUCKDB_MAGIC:
        return
    what = next((name for magic, name in _OTHER_FORMATS if head.startswith(magic)), "not a DuckDB database")
    raise DatabaseError(f"cannot open database {target}: it is {what}, not an analyzer database"
                        if what != "not a DuckDB database" else f"cannot open database {target}: not a DuckDB database file")


def check_ours(con: duckdb.DuckDBPyConnection, target: str) -> None:
    """Refuse someone else's DuckDB database, or one a newer analyzer wrote, before anything is written.

    Ours: empty (a new file), or holding ``_migrations`` with only migrations this
    version knows.

    Raises:
        DatabaseError: tables but no ``_migrations``; or migrations this version does not know.
    """
    # (duckdb_tables() and duckdb_views(): what information_schema.tables lists here,
    # without its binding cost on a connection's first statement)
    tables = {r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' "
        "UNION ALL SELECT view_name FROM duckdb_views() "
        "WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal").fetchall()}
    if not tables:
        return
    if "_migrations" not in tables:
        shown = ", ".join(sorted(tables)[:5]) + (" ..." if len(tables) > 5 else "")
        raise DatabaseError(f"{target} is a DuckDB database but not an analyzer database (it holds {shown}); "
                            "nothing was written to it: pass another --db")
    known = {name for name, _ in MIGRATIONS}
    unknown = sorted(r[0] for r in con.execute("SELECT name FROM _migrations").fetchall() if r[0] not in known)
    if unknown:
        raise DatabaseError(f"{target} was written by a newer analyzer (schema {', '.join(unknown)} unknown to "
                            f"analyzer {__version__}); upgrade the analyzer, or pass another --db")


def _open_attached(target: str, config: dict, row_group_rows: int) -> duckdb.DuckDBPyConnection | None:
    """``target`` attached with new row groups of ``row_group_rows`` rows, and in use.

    DuckDB sets the row group size when it attaches a file, not when it opens one
    as its main database: so the file is attached to an in-memory one, under the
    name a plain open gives it, and made the default (``USE``). Cursors of the
    connection start in the in-memory database: they must ``USE`` it too
    (:func:`use_same_database`). ``None`` when it cannot be attached so (this
    process holds the file in another DuckDB instance already, as a notebook's
    connection does; a file named like one of DuckDB's own databases): then the
    caller opens it plainly, with DuckDB's row groups, and a file that cannot be
    opened at all fails there with DuckDB's usual error.
    """
    con = duckdb.connect(":memory:", config=config)
    try:
        # Spilled data goes beside the file, as when DuckDB opens it (not to ./.tmp), in this run's own folder.
        con.execute("SET temp_directory = ?", [database_spill_dir(target)])
        literal = "'" + target.replace("'", "''") + "'"  # ATTACH takes no parameters
        con.execute(f"ATTACH {literal} (ROW_GROUP_SIZE {int(row_group_rows)})")
        use_same_database(con, con.execute(
            "SELECT database_name FROM duckdb_databases() WHERE NOT internal AND database_name <> 'memory'"
        ).fetchall()[0][0])
    except duckdb.Error:
        con.close()
        return None
    return con


def set_spill_dir(con: duckdb.DuckDBPyConnection, target: str | None) -> None:
    """Have ``con`` spill into a folder of this run's own (:mod:`analyzer.store.spill`): beside the
    database file ``target``, or in the temporary folder for an in-memory database (``None``)."""
    folder = scratch_spill_dir() if target is None else database_spill_dir(target)
    try:
        con.execute("SET temp_directory = ?", [folder])
    except duckdb.Error:  # the instance (shared with another connection of this process) spills already
        pass


def use_same_database(cur: duckdb.DuckDBPyConnection, name: str) -> None:
    """Make ``name`` (``current_database()`` of the connection ``cur`` came from) ``cur``'s default."""
    cur.execute('USE "' + name.replace('"', '""') + '"')


def row_group_rows(con: duckdb.DuckDBPyConnection) -> int:
    """Rows per row group that ``con`` writes into its database (see :data:`INGEST_ROW_GROUP_ROWS`)."""
    rows = con.execute("SELECT options['row_group_size'] FROM duckdb_databases() "
                       "WHERE database_name = current_database()").fetchall()
    return int(rows[0][0]) if rows and rows[0][0] else DEFAULT_ROW_GROUP_ROWS


def connect_writer(path: str | Path | None = None) -> duckdb.DuckDBPyConnection:
    """:func:`connect` as the analyzer's commands that write open the file.

    With the ingest's row groups (:data:`INGEST_ROW_GROUP_ROWS`), so that a
    commit or checkpoint of any command never re-packs what the ingest wrote.
    """
    return connect(path, row_groups=INGEST_ROW_GROUP_ROWS)


def connect(path: str | Path | None = None, *, read_only: bool = False,
            config: dict | None = None, settings: dict | None = None,
            row_groups: int | None = None) -> duckdb.DuckDBPyConnection:
    """Open (creating if needed) the analyzer database with its views ready.

    Args:
        path: the DuckDB file; default ``$ANALYZER_DB`` or ``./analyzer.duckdb``.
            ``":memory:"`` gives a throwaway database.
        read_only: open without write access (the database must already exist).
        config: further DuckDB settings to open the connection with.
        settings: DuckDB settings applied with ``SET`` once the connection is ready,
            in order (``analyze sql`` turns off external access, then locks the
            configuration).
        row_groups: rows per row group in what this connection writes
            (:data:`INGEST_ROW_GROUP_ROWS` for the analyzer's commands that
            write: :func:`connect_writer`); ``None``: DuckDB's.
            Only for a writable file, and not when this process holds the file
            already (see :func:`row_group_rows`).

    Never downloads an extension (:data:`NO_NETWORK_CONFIG`).

    Raises:
        DatabaseError: the file cannot be opened, is locked, is not a DuckDB file,
            is someone else's DuckDB database, or was written by a newer analyzer.
    """
    target = str(path) if path is not None else str(default_db_path())
    if read_only and target != ":memory:" and not Path(target).exists():
        raise DatabaseError(f"no database at {target}; run `analyze FILES...` first")
    if target != ":memory:":
        _check_file_format(target)
    try:
        full = {**NO_NETWORK_CONFIG, **(config or {})}
        con = None
        if row_groups and not read_only and target != ":memory:":
            con = _open_attached(target, full, row_groups)
        if con is None:
            con = duckdb.connect(target, read_only=read_only, config=full)
    except (duckdb.IOException, duckdb.Error) as exc:
        if is_write_failure(exc) and not Path(target).exists():
            raise WriteError(f"cannot create database {target}: {one_line(str(exc))}") from exc
        raise DatabaseError(f"cannot open database {target}: {one_line(str(exc))}") from exc

    track(con)  # Ctrl-C stops a long statement instead of waiting for it
    try:
        if target != ":memory:":
            check_ours(con, target)
        con.execute("SET TimeZone = 'UTC'")
        # DuckDB draws its own progress bar on long queries; the analyzer shows its
        # own on a terminal only, and nothing when piped.
        con.execute("SET enable_progress_bar = false")
        # DuckDB would use up to 80% of RAM as cache; a bound keeps a week's ingest
        # well under the memory target and makes large joins spill to disk instead.
        con.execute("SET memory_limit = ?", [MEMORY_LIMIT])
        set_spill_dir(con, None if target == ":memory:" else target)
        for name, value in (settings or {}).items():  # in order: lock_configuration comes last
            con.execute(f"SET {name} = ?", [value])
    except BaseException:
        con.close()
        raise
    if read_only:
        try:
            create_temp_macros(con)  # an older database lacks today's macros
        except duckdb.Error:
            pass  # not an analyzer database yet (no build_state): the query says what is missing
    else:
        try:
            migrate(con)
            if not _ingests_running:
                discard_unfinished_batches(con)  # a run killed inside a batch

            create_views(con)
        except duckdb.Error as exc:
            con.close()

            if is_write_failure(exc):
                raise WriteError(f"cannot write database {target}: {one_line(str(exc))}") from exc
            raise DatabaseError(f"{target} is not a usable analyzer database: {one_line(str(exc))}") from exc
    return con
