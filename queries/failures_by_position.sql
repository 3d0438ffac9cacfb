-- question: failures_by_position
-- title: Failure rate by position in the session and by tool-history depth
-- params: since, until, model, models
-- Two axes over the turns in scope: `index` buckets the turn's place in its
-- session (`turn_index`: 1, 2, 3–4, 5–8, 9–16, 17–32, 33+ as buckets 1..7),
-- `depth` how many earlier turns of the session called tools (0, 1, 2–3, 4–7,
-- 8–15, 16+ as buckets 1..6). Windows run over whole sessions (turns before the
-- period count), then the period is selected. Per bucket: turns, failed turns,
-- ladder-eligible turns. Turns without a session are left out. `since`/`until`
-- bound the request time (ISO 8601, UTC), `model` is a name or a LIKE pattern
-- (`glm%`), `models` a list of exact names (from Python; NULL: every model).
WITH t AS (
    SELECT ts, model, incident_class, ladder_trigger, turn_index,
           count(*) FILTER (WHERE coalesce(has_tool_calls, false)) OVER (
               PARTITION BY session_id ORDER BY ts, request_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS tool_depth
    FROM turns
    WHERE session_id IS NOT NULL
),
b AS (
    SELECT *,
           CASE WHEN turn_index = 1 THEN 1 WHEN turn_index = 2 THEN 2 WHEN turn_index <= 4 THEN 3
                WHEN turn_index <= 8 THEN 4 WHEN turn_index <= 16 THEN 5 WHEN turn_index <= 32 THEN 6
                ELSE 7 END AS index_bucket,
           CASE WHEN tool_depth = 0 THEN 1 WHEN tool_depth = 1 THEN 2 WHEN tool_depth <= 3 THEN 3
                WHEN tool_depth <= 7 THEN 4 WHEN tool_depth <= 15 THEN 5 ELSE 6 END AS depth_bucket
    FROM t
    WHERE in_scope(ts, model, $since, $until, $model, $models)
)
SELECT 'index' AS axis, index_bucket AS bucket, count(*) AS turns,
       count(*) FILTER (WHERE incident_class <> 'ok') AS failed,
       count(*) FILTER (WHERE ladder_trigger IS NOT NULL) AS eligible
FROM b GROUP BY ALL
UNION ALL
SELECT 'depth', depth_bucket, count(*), count(*) FILTER (WHERE incident_class <> 'ok'),
       count(*) FILTER (WHERE ladder_trigger IS NOT NULL)
FROM b GROUP BY ALL
ORDER BY 1, 2
