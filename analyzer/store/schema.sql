-- The analyzer database's schema: every table and sequence a new database starts with.
--
-- Run once, in one transaction, on a new file (analyzer.store.migrations.migrate), which
-- records it in `_migrations` as 000_baseline. The views and macros are not here: they
-- come from queries/ on every writable connection (analyzer.store.catalog.create_views).
--
-- Until v0.1.0 is tagged this file is edited in place (a new column goes at the end of
-- its table). From then on it is frozen: a change is a migration appended to
-- analyzer/store/migrations.py, which runs after this file on new and old databases alike.

CREATE SEQUENCE source_file_ids START 1;
-- The ingestion batch (transaction) each record was stored by: records.ingest_batch.
CREATE SEQUENCE ingest_batches START 1;

-- One row per input file ingested; drives idempotent, incremental re-runs.
CREATE TABLE source_files (
    file_id      INTEGER PRIMARY KEY,
    path         VARCHAR NOT NULL UNIQUE,  -- absolute path (or URL) as read
    form         VARCHAR NOT NULL,         -- 'jsonl' | 'kubectl' | 'parquet'
    size_bytes   BIGINT,
    mtime        DOUBLE,
    fingerprint  VARCHAR,                  -- analyzer.io.sources.file_fingerprint
    lines        BIGINT,                   -- lines (or Parquet rows) read
    records      BIGINT,                   -- proxy records found
    quarantined  BIGINT,                   -- lines set aside as malformed
    free_text    BIGINT,                   -- kubectl lines that are not records
    ingested_at  TIMESTAMP,
    -- Progress through a file, so a big file is many transactions and a killed
    -- run resumes where it stopped.
    bytes_done   BIGINT,                   -- input bytes committed (uncompressed for gzip)
    lines_done   BIGINT,                   -- lines (Parquet rows) committed
    complete     BOOLEAN,                  -- false while a file is part-read
    -- The file's status-change time (st_ctime) when registered: any write to it
    -- moves it, even one whose modification time was put back.
    ctime        DOUBLE
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
    raw                 VARCHAR USING COMPRESSION zstd,  -- the record as read
    -- Which proxy replica wrote a record: the pod named by a multi-pod stdout
    -- prefix (`[pod/NAME/CONTAINER] `, stern's `NAME CONTAINER `) or an S3 chunk's
    -- name. Null where the input does not say (single-pod stdout, chunk names
    -- without the host).
    proxy_pod           VARCHAR,
    -- The ingestion batch (transaction) that stored a record: de-duplication
    -- tells this batch's rows from earlier ones.
    ingest_batch        BIGINT,
    -- response evidence read at ingestion: usage's
    -- completion_tokens_details.reasoning_tokens, and whether the logged content
    -- (or its preview) has no visible character
    reasoning_tokens    BIGINT,
    content_blank       BOOLEAN,
    -- log_fields 3: whether the proxy ran the ladder for this request (its model
    -- gate); null in older records (a log_fields 2 record came from a proxy that
    -- ran the ladder for every model)
    ladder_armed        BOOLEAN,
    -- response evidence read at ingestion: whether the content (or its preview)
    -- carries a think block that was not split out
    -- (analyzer.online.has_leaked_think_block), whether the reasoning text (or its
    -- preview) has no visible character, and log_fields 4's `reasoning_repaired`
    -- (the proxy split a leaked block out of the answer)
    content_leak        BOOLEAN,
    reasoning_blank     BOOLEAN,
    reasoning_repaired  BOOLEAN
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

-- analyzer.online.decide over each distinct feature combination
-- (analyzer.online.TurnFeatures).
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
    ladder_trigger    VARCHAR,          -- analyzer.online.ladder_trigger
    no_answer         BOOLEAN,
    late              BOOLEAN,
    has_reasoning_text BOOLEAN,
    reasoning_leaked  BOOLEAN,
    reasoning_at_cap  BOOLEAN
);

-- Intervals when a pod serving a model was wedged or down (from metrics).
CREATE TABLE pod_windows (
    pod         VARCHAR,
    model_name  VARCHAR,
    kind        VARCHAR NOT NULL,      -- 'wedged' | 'down'
    start_ts    TIMESTAMP NOT NULL,
    end_ts      TIMESTAMP NOT NULL,
    detail      VARCHAR,
    -- a wedge inferred from the logs because the pod's own gauges read 0 while its
    -- generation counter was flat and its model's requests failed (frozen gauges);
    -- false for the windows the metrics show
    inferred    BOOLEAN
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
    replayed_at       TIMESTAMP,
    refused           BOOLEAN,              -- the upstream refused the rung (400/422: it will not take that shape)
    refused_reason    VARCHAR               -- what the upstream said when it refused
);

-- What each materialized table (queries/ files headed `-- table:`) was last
-- built from, so it is rebuilt only when its inputs changed.
CREATE TABLE build_state (
    name        VARCHAR PRIMARY KEY,
    signature   VARCHAR NOT NULL,
    built_at    TIMESTAMP
);

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

-- Settings the database keeps between runs, so a one-off option does not
-- change what later commands see:
--   'caller_deadline_s': the callers' own deadline that makes an otherwise-ok
--     answer late-200 (--caller-deadline);
--   'pod_windows.wedge_window_s': the wedge window (seconds) the stored
--     pod_windows were computed with.
CREATE TABLE settings (
    name    VARCHAR PRIMARY KEY,
    value   VARCHAR NOT NULL,
    set_at  TIMESTAMP
);

-- Metric samples stored as series and points: a week holds a few hundred series
-- and a million points, so each label set is stored once and a point carries
-- only its series' number. The view `metric_samples` (queries/metric_samples.sql)
-- joins them back into one row per sample.
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
    source_id   INTEGER
);

-- Batches whose records are stored but not yet finished (de-duplicated, progress
-- written): a run killed in between leaves them, and the next connection removes
-- their records (analyzer.store.db.discard_unfinished_batches).
CREATE TABLE ingest_pending (
    batch       BIGINT PRIMARY KEY,
    stored_at   TIMESTAMP
);

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
