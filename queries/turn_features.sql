-- view: turn_features
-- title: Per-turn features, before classification
-- One row per request record, paired with its response record (same request_id
-- and session, the first response at or after the request and within an hour of
-- it: 8-hex ids drawn by many processes collide over months), plus responses
-- whose request record is missing. Carries the features analyzer.online.decide reads;
-- `inferred` lists the features reconstructed from evidence rather than logged.
-- Legacy records (no log_fields): status parsed from the error text (via the
-- error_kinds table, filled by analyzer.online.parse_error); tool history from
-- full-capture `messages`, this turn's tool results, or earlier turns of the
-- session. Ladder records: the features of the original attempt (ladder.attempts[0]).
-- Content that is only whitespace is no content (records.content_blank, set at
-- ingestion from analyzer.online.BLANK_CHARS: a test checks the two agree); a
-- reasoning text is one with a visible character (records.reasoning_blank); a
-- content carrying a think block that was not split out, or an answer the proxy
-- says it repaired, leaked its reasoning (records.content_leak, from
-- analyzer.online.has_leaked_think_block); a
-- response with no error and no has_* fields is a 200 with no usable answer;
-- `late` compares the latency with the caller deadline in `settings`.
-- A gateway's call (records.gateway: LiteLLM's payloads) is one turn however many
-- attempts it logged: its retries and fallbacks share its call id, so the turn is
-- the call's first request and its last response (the answer the client got); the
-- earlier responses are attempts, not turns of their own.
-- req and resp are read three and four times: NOT MATERIALIZED scans `records`
-- each time (a columnar scan with the type filter pushed down; req's window runs
-- over the gateway's records alone) instead of copying half its rows into a
-- buffer that spills to disk (benchmarks/README.md, classify.py, has the figures).
WITH req AS NOT MATERIALIZED (
    SELECT * FROM records WHERE type = 'request' AND gateway IS NULL
    UNION ALL
    SELECT * FROM records WHERE type = 'request' AND gateway IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY request_id, session_id ORDER BY ts, file_id, line_no) = 1
),
resp AS NOT MATERIALIZED (
    SELECT * REPLACE (
        -- The proxy logs has_content = bool(content): "\n\n" counts. Ingestion
        -- marks content with no visible character (analyzer.online.is_blank).
        CASE WHEN has_content AND content_blank THEN false ELSE has_content END AS has_content,
        CASE WHEN reasoning_tokens > 0 THEN true ELSE has_reasoning END AS has_reasoning,
        -- the proxy cuts reasoning_content at 4,000 characters (LOG_REASONING_MAX):
        -- a length at the cap is not the true length
        CASE WHEN reasoning_chars = 4000 THEN NULL ELSE reasoning_chars END AS reasoning_chars),
        coalesce(reasoning_chars = 4000, false) AS reasoning_cut,
        coalesce(NOT reasoning_blank, has_reasoning) AS has_reasoning_text,
        -- the whole reasoning text was logged (a full copy) and stops short of the
        -- cap, or it is at the cap; unknown for a stdout copy cut to 200 characters
        CASE WHEN reasoning_chars = 4000 THEN true
             WHEN NOT truncated AND reasoning_chars IS NOT NULL THEN false END AS reasoning_at_cap,
        content_leak OR coalesce(reasoning_repaired, false) AS reasoning_leaked
    FROM records WHERE type = 'response'
),
matched AS (
    -- The response each request pairs with: narrow, then joined back below.
    -- (A hash join and a min: ids rarely repeat, so this beats an ASOF join's sort.)
    SELECT q.request_id, q.session_id, q.ts,
           CASE WHEN q.gateway IS NULL THEN min(p.ts) ELSE max(p.ts) END AS response_ts
    FROM req q
    JOIN resp p
      ON p.request_id = q.request_id
     AND coalesce(p.session_id, '') = coalesce(q.session_id, '')
     AND p.ts >= q.ts AND p.ts <= q.ts + INTERVAL 1 HOUR
    GROUP BY q.request_id, q.session_id, q.ts, q.gateway
),
paired AS (
    SELECT q.ts, q.request_id, q.session_id, q.model, q.provider, q.origin, q.client,
           q.enable_thinking, q.message_count, q.tools_count, q.tool_results_count,
           q.prompt_md5, q.has_messages, q.messages_tool_history, q.truncated AS request_truncated,
           p.ts AS response_ts, p.latency_ms, p.has_content, p.has_tool_calls, p.has_reasoning,
           p.tool_call_count, p.content_chars, p.reasoning_chars, p.prompt_tokens,
           p.completion_tokens, p.cached_tokens, p.error, p.upstream_headers,
           p.log_fields_version, p.upstream_status, p.finish_reason, p.max_tokens,
           p.thinking_token_budget, p.tool_history AS logged_tool_history,
           p.logged_class, p.final_class, p.ladder, p.ladder_armed, p.truncated AS response_truncated,
           p.reasoning_tokens, p.reasoning_cut, p.has_reasoning_text, p.reasoning_at_cap, p.reasoning_leaked,
           p.reasoning_repaired,
           coalesce(q.proxy_pod, p.proxy_pod) AS proxy_pod,
           p.provider AS response_provider
    FROM req q
    LEFT JOIN matched m
      ON m.request_id = q.request_id AND m.session_id IS NOT DISTINCT FROM q.session_id AND m.ts = q.ts
    LEFT JOIN resp p
      ON p.request_id = m.request_id AND p.session_id IS NOT DISTINCT FROM m.session_id AND p.ts = m.response_ts
),
orphans AS (
    -- A response whose request record was lost is still a turn.
    SELECT p.ts, p.request_id, p.session_id, p.model, p.provider, p.origin, p.client,
           NULL::BOOLEAN, NULL::INTEGER, NULL::INTEGER, NULL::INTEGER,
           NULL::VARCHAR, NULL::BOOLEAN, NULL::BOOLEAN, NULL::BOOLEAN,
           p.ts, p.latency_ms, p.has_content, p.has_tool_calls, p.has_reasoning,
           p.tool_call_count, p.content_chars, p.reasoning_chars, p.prompt_tokens,
           p.completion_tokens, p.cached_tokens, p.error, p.upstream_headers,
           p.log_fields_version, p.upstream_status, p.finish_reason, p.max_tokens,
           p.thinking_token_budget, p.tool_history,
           p.logged_class, p.final_class, p.ladder, p.ladder_armed, p.truncated,
           p.reasoning_tokens, p.reasoning_cut, p.has_reasoning_text, p.reasoning_at_cap, p.reasoning_leaked,
           p.reasoning_repaired,
           p.proxy_pod, p.provider
    FROM resp p
    WHERE NOT EXISTS (
        SELECT 1 FROM matched x
        WHERE x.request_id = p.request_id AND x.session_id IS NOT DISTINCT FROM p.session_id
          AND (x.response_ts = p.ts
               -- an earlier attempt of a gateway's call: part of the call's turn
               OR (p.gateway IS NOT NULL AND p.ts >= x.ts AND p.ts <= x.response_ts)))
),
turns0 AS (
    SELECT * FROM paired
    UNION ALL
    SELECT * FROM orphans
),
first_tool AS (
    -- When each session first carried tool structure: the earliest turn with tool
    -- results in its request or tool calls in its response. Taken from the narrow
    -- pieces, not from turns0: read twice, turns0's wide rows were copied into a
    -- buffer (measured on a week: 290 MB spilled at a 384 MB bound). A response's
    -- own time stands for its turn's when no request pairs with it; when one does,
    -- the request's time (never later) is in the min beside it.
    SELECT session_id, min(ts) AS first_tool_ts
    FROM (SELECT session_id, ts FROM req WHERE session_id IS NOT NULL AND tool_results_count > 0
          UNION ALL
          SELECT m.session_id, m.ts
          FROM matched m
          JOIN resp p
            ON p.request_id = m.request_id AND p.session_id = m.session_id AND p.ts = m.response_ts
          WHERE m.session_id IS NOT NULL AND p.has_tool_calls
          UNION ALL
          SELECT session_id, ts FROM resp WHERE session_id IS NOT NULL AND has_tool_calls)
    GROUP BY session_id
),
evidence AS (
    SELECT t.*,
           t.response_ts IS NOT NULL AS answered,
           -- Earlier turns of the session left tool structure in this transcript.
           CASE WHEN t.session_id IS NOT NULL THEN coalesce(ft.first_tool_ts < t.ts, false) END AS earlier_tool_turns,
           t.ladder -> '$.attempts[0]' AS first_attempt,
           e.error_kind AS parsed_error_kind,
           e.status AS parsed_status
    FROM turns0 t
    LEFT JOIN first_tool ft ON ft.session_id = t.session_id
    -- error_kinds is keyed by the provider of the response that carries the error:
    -- a request that names another provider must not hide the error (class ok).
    LEFT JOIN error_kinds e
      ON e.error_head = left(t.error, 200)
     AND e.provider IS NOT DISTINCT FROM t.response_provider
)
SELECT
    request_id, session_id, ts, response_ts, model, provider, origin, client,
    enable_thinking, message_count, tools_count, tool_results_count, prompt_md5, has_messages,
    answered, latency_ms, content_chars, reasoning_chars, reasoning_cut, reasoning_tokens, tool_call_count,
    prompt_tokens, cached_tokens, error, upstream_headers, thinking_token_budget,
    coalesce(request_truncated, false) OR coalesce(response_truncated, false) AS truncated,
    log_fields_version IS NOT NULL AS has_log_fields,
    -- the features analyzer.online.decide reads
    CASE WHEN first_attempt IS NOT NULL THEN CAST(first_attempt ->> 'status' AS INTEGER)
         WHEN log_fields_version IS NOT NULL THEN upstream_status
         WHEN answered AND error IS NULL THEN 200
         ELSE parsed_status END AS status,
    CASE WHEN first_attempt IS NOT NULL THEN first_attempt ->> 'finish_reason'
         ELSE finish_reason END AS finish_reason,
    CASE WHEN first_attempt IS NOT NULL THEN CAST(first_attempt ->> 'has_content' AS BOOLEAN)
         ELSE has_content END AS has_content,
    CASE WHEN first_attempt IS NOT NULL THEN CAST(first_attempt ->> 'has_tool_calls' AS BOOLEAN)
         ELSE has_tool_calls END AS has_tool_calls,
    coalesce(logged_tool_history, messages_tool_history,
             CASE WHEN tool_results_count > 0 THEN true END,
             coalesce(earlier_tool_turns, false)) AS tool_history,
    has_reasoning,
    CASE WHEN first_attempt IS NOT NULL THEN CAST(first_attempt ->> 'completion_tokens' AS BIGINT)
         ELSE completion_tokens END AS completion_tokens,
    max_tokens,
    CASE WHEN answered THEN parsed_error_kind END AS error_kind,
    -- a 200 with no usable answer: the proxy writes no has_* field and no error
    CASE WHEN first_attempt IS NOT NULL THEN CAST(first_attempt ->> 'no_answer' AS BOOLEAN)
         WHEN answered AND error IS NULL AND has_content IS NULL AND has_tool_calls IS NULL
              AND has_reasoning IS NULL THEN true END AS no_answer,
    -- slower than the caller's deadline (analyzer.online.is_late)
    latency_ms > 1000 * (SELECT CAST(value AS DOUBLE) FROM settings WHERE name = 'caller_deadline_s') AS late,
    -- a ladder record's original answer says these itself (log_fields 4; unknown in older ones)
    CASE WHEN first_attempt IS NOT NULL THEN CAST(first_attempt ->> 'has_reasoning_text' AS BOOLEAN)
         ELSE has_reasoning_text END AS has_reasoning_text,
    CASE WHEN first_attempt IS NOT NULL
         THEN coalesce(CAST(first_attempt ->> 'reasoning_leaked' AS BOOLEAN), reasoning_leaked)
         ELSE reasoning_leaked END AS reasoning_leaked,
    CASE WHEN first_attempt IS NULL THEN reasoning_at_cap END AS reasoning_at_cap,
    coalesce(reasoning_repaired, false) AS reasoning_repaired,
    -- which features were reconstructed rather than logged, as decide() expects
    concat_ws(',',
        CASE WHEN log_fields_version IS NULL AND error IS NOT NULL AND parsed_status IS NOT NULL
             THEN 'status' END,
        CASE WHEN logged_tool_history IS NULL AND messages_tool_history IS NULL
                  AND NOT coalesce(tool_results_count > 0, false)
             THEN 'tool_history' END) AS inferred,
    CASE WHEN logged_tool_history IS NOT NULL THEN 'logged'
         WHEN messages_tool_history IS NOT NULL THEN 'messages'
         WHEN tool_results_count > 0 THEN 'this_turn'
         WHEN earlier_tool_turns THEN 'earlier_turns'
         ELSE 'none' END AS tool_history_source,
    logged_class,
    final_class,
    ladder,
    -- the proxy ran the ladder for this request: log_fields 3 says so (null when the
    -- proxy had no ladder result to say it with: a transport error on the original
    -- call, a request refused first); a log_fields 2 record came from a proxy that
    -- ran it for every model; null without log fields
    CASE WHEN log_fields_version < 3 THEN true ELSE ladder_armed END AS ladder_armed,
    ladder ->> 'trigger' AS ladder_trigger_logged,
    ladder ->> 'outcome' AS ladder_outcome,
    ladder ->> 'recovered_at' AS recovered_at,
    proxy_pod
FROM evidence
