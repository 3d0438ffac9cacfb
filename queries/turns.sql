-- table: turns
-- title: Every turn with its incident class
-- One row per turn (a request record joined to its response by request_id).
-- A materialized table: rebuilt from this query by analyzer.classification.turns.refresh_turns
-- whenever records, labels, metric windows or this file changed, so reports and
-- notebooks read it without recomputing the pairing.
-- incident_class: the class the proxy logged (`log_fields`' incident_class) when
-- the record carries one analyzer.online knows: the proxy saw the exception and
-- the status, so what it logged is the truth for that turn (`class_source`
-- 'logged'). Records without log fields get analyzer.online.decide over the
-- turn's features (looked up in feature_labels; `class_source` 'derived').
-- `rule_class` is the derived class either way, and `class_disagrees` marks a
-- logged class the rule would not have given (a data-quality count, not an
-- override). Then the window classes from the metrics, which no proxy can see: an
-- upstream failure inside a wedged window of its model's pod is `wedged-pod`,
-- inside a down window `pod-down`; a request with no response is `unanswered`.
-- `evidence` says whether the class rests on logged fields or on inference.
-- NOT MATERIALIZED: `labelled` is read once; materialized, its wide rows spilled
-- (measured on a week: 400 MB spilled at a 640 MB bound, against 60 MB).
WITH labelled AS NOT MATERIALIZED (
    SELECT f.*, l.incident_class AS rule_class,
           coalesce(c.incident_class, l.incident_class) AS base_class,
           CASE WHEN c.incident_class IS NOT NULL THEN 'logged' ELSE l.decision_evidence END AS decision_evidence,
           CASE WHEN c.incident_class IS NOT NULL THEN c.upstream_failure ELSE l.upstream_failure END
               AS upstream_failure,
           CASE WHEN c.incident_class IS NOT NULL THEN c.ladder_trigger ELSE l.ladder_trigger END AS rule_trigger,
           CASE WHEN c.incident_class IS NOT NULL THEN 'logged' ELSE 'derived' END AS class_source,
           f.has_log_fields AND f.logged_class IS DISTINCT FROM l.incident_class AS class_disagrees,
           coalesce(m.model_name, f.model) AS metric_model,
           coalesce(f.response_ts, f.ts) AS window_ts  -- the time a pod window must hold
    FROM turn_features f
    LEFT JOIN feature_labels l
      ON  l.status IS NOT DISTINCT FROM f.status
      AND l.finish_reason IS NOT DISTINCT FROM f.finish_reason
      AND l.has_content IS NOT DISTINCT FROM f.has_content
      AND l.has_tool_calls IS NOT DISTINCT FROM f.has_tool_calls
      AND l.tool_history IS NOT DISTINCT FROM f.tool_history
      AND l.has_reasoning IS NOT DISTINCT FROM f.has_reasoning
      AND l.completion_tokens IS NOT DISTINCT FROM f.completion_tokens
      AND l.max_tokens IS NOT DISTINCT FROM f.max_tokens
      AND l.error_kind IS NOT DISTINCT FROM f.error_kind
      AND l.inferred IS NOT DISTINCT FROM f.inferred
      AND l.no_answer IS NOT DISTINCT FROM f.no_answer
      AND l.late IS NOT DISTINCT FROM f.late
      AND l.has_reasoning_text IS NOT DISTINCT FROM f.has_reasoning_text
      AND l.reasoning_leaked IS NOT DISTINCT FROM f.reasoning_leaked
      AND l.reasoning_at_cap IS NOT DISTINCT FROM f.reasoning_at_cap
    LEFT JOIN class_labels c
      ON f.has_log_fields AND c.incident_class = f.logged_class AND c.tool_history = coalesce(f.tool_history, false)
    LEFT JOIN model_map m ON m.log_model = f.model
),
ordered AS (
    -- Position in the session, numbered over four narrow columns and joined back
    -- (a window over the wide rows costs several times more).
    SELECT session_id AS o_session, ts AS o_ts, request_id AS o_request, response_ts AS o_response_ts,
           row_number() OVER (PARTITION BY session_id ORDER BY ts, request_id) AS turn_index
    FROM turn_features
    WHERE session_id IS NOT NULL
),
window_days AS (
    -- Each model's pod windows listed per day they touch: a turn looks only at the
    -- windows of its model and day, found by an equality join. (A correlated EXISTS
    -- per window kind made DuckDB copy every wide turn row into a buffer to join
    -- them back: measured on a week, 0.9 of the statement's 1.7 s, and 320 MB
    -- spilled, with no window at all.)
    SELECT model_name, day,
           list({'kind': kind, 'start_ts': start_ts, 'end_ts': end_ts, 'inferred': inferred}) AS windows
    FROM (SELECT model_name, kind, start_ts, end_ts, coalesce(inferred, false) AS inferred,
                 unnest(generate_series(CAST(start_ts AS DATE), CAST(end_ts AS DATE), INTERVAL 1 DAY))::DATE AS day
          FROM pod_windows)
    GROUP BY model_name, day
),
windowed AS (
    SELECT t.*,
           coalesce(list_bool_or(list_transform(d.windows, lambda w:
               w.kind = 'wedged' AND t.window_ts BETWEEN w.start_ts AND w.end_ts)), false) AS in_wedged_window,
           coalesce(list_bool_or(list_transform(d.windows, lambda w:
               w.kind = 'down' AND t.window_ts BETWEEN w.start_ts AND w.end_ts)), false) AS in_down_window,
           -- inside wedged windows only the logs infer (frozen gauges), none the metrics show
           coalesce(list_bool_or(list_transform(d.windows, lambda w:
               w.kind = 'wedged' AND t.window_ts BETWEEN w.start_ts AND w.end_ts)), false)
           AND NOT coalesce(list_bool_or(list_transform(d.windows, lambda w:
               w.kind = 'wedged' AND NOT w.inferred AND t.window_ts BETWEEN w.start_ts AND w.end_ts)), false)
               AS wedge_inferred
    FROM labelled t
    LEFT JOIN window_days d ON d.model_name = t.metric_model AND d.day = CAST(t.window_ts AS DATE)
)
SELECT
    request_id, session_id, ts, response_ts, model, provider, origin, client,
    status, finish_reason, has_content, has_tool_calls, tool_history, has_reasoning,
    latency_ms, prompt_tokens, completion_tokens, max_tokens, error, error_kind,
    CASE
        WHEN NOT answered THEN 'unanswered'
        WHEN upstream_failure AND in_down_window
             AND (base_class IN ('connection-error', 'connect-timeout') OR NOT in_wedged_window) THEN 'pod-down'
        WHEN upstream_failure AND in_wedged_window THEN 'wedged-pod'
        ELSE base_class
    END AS incident_class,
    CASE WHEN NOT answered THEN 'logged'
         -- a wedge the logs infer (the gauges read 0) is inferred evidence, never silently ok
         WHEN upstream_failure AND in_wedged_window AND wedge_inferred
              AND NOT (in_down_window AND base_class IN ('connection-error', 'connect-timeout')) THEN 'inferred'
         ELSE decision_evidence END AS evidence,
    rule_class,
    class_source,
    coalesce(class_disagrees, false) AS class_disagrees,
    -- The ladder cannot fix a wedged or down pod: such turns are not eligible.
    CASE WHEN answered AND NOT (upstream_failure AND (in_wedged_window OR in_down_window))
         THEN rule_trigger END AS ladder_trigger,
    ladder_outcome,
    recovered_at,
    -- what the client got when it was not the original answer: a rung's (recovered), or the
    -- original with its leaked think block split out (repaired)
    CASE WHEN recovered_at IS NOT NULL OR reasoning_repaired THEN coalesce(final_class, 'ok') END AS recovered_class,
    in_wedged_window,
    in_down_window,
    enable_thinking, message_count, tools_count, tool_results_count, tool_history_source,
    inferred, prompt_md5, has_messages, content_chars, reasoning_chars, reasoning_cut, reasoning_tokens, late,
    has_reasoning_text, reasoning_leaked, reasoning_repaired,
    tool_call_count,
    cached_tokens, thinking_token_budget, truncated, has_log_fields, logged_class, ladder, ladder_armed,
    metric_model,
    proxy_pod,
    o.turn_index
FROM windowed
LEFT JOIN ordered o
  ON o.o_session = session_id AND o.o_ts = ts AND o.o_request IS NOT DISTINCT FROM request_id
 AND o.o_response_ts IS NOT DISTINCT FROM response_ts
