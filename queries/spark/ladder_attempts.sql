-- view: ladder_attempts
-- title: Every call the fallback ladder made
-- The Spark version of queries/ladder_attempts.sql (the same rows): DuckDB reads
-- the ladder's JSON list of attempts with json_transform and numbers them with
-- range() over list indexes; Spark reads it with from_json and numbers it with
-- posexplode. json_type(ladder) = 'OBJECT' is json_object_keys(ladder) IS NOT NULL
-- (NULL for any JSON that is not an object). Keep the two in step.
WITH runs AS (
    SELECT request_id, session_id, ts, model, in_wedged_window, in_down_window,
           get_json_object(ladder, '$.trigger') AS trigger,
           get_json_object(ladder, '$.outcome') AS outcome,
           get_json_object(ladder, '$.recovered_at') AS recovered_at,
           from_json(get_json_object(ladder, '$.attempts'),
               'ARRAY<STRUCT<rung: STRING, status: INT, incident_class: STRING, latency_ms: BIGINT,
                             finish_reason: STRING, prompt_tokens: BIGINT, completion_tokens: BIGINT,
                             error: STRING, refused: BOOLEAN, refused_reason: STRING>>') AS attempts
    FROM turns
    WHERE ladder IS NOT NULL AND json_object_keys(ladder) IS NOT NULL
)
SELECT r.request_id, r.session_id, r.ts, r.model, r.trigger, r.outcome, r.recovered_at,
       r.in_wedged_window, r.in_down_window,
       a.i + 1 AS attempt_no,
       a.attempt.rung AS rung,
       a.attempt.status AS status,
       a.attempt.incident_class AS incident_class,
       a.attempt.latency_ms AS latency_ms,
       a.attempt.finish_reason AS finish_reason,
       a.attempt.prompt_tokens AS prompt_tokens,
       a.attempt.completion_tokens AS completion_tokens,
       a.attempt.error AS error,
       coalesce(a.attempt.refused, false) AS refused,
       a.attempt.refused_reason AS refused_reason,
       coalesce(a.attempt.incident_class = 'ok' OR a.attempt.rung = r.recovered_at, false) AS recovered,
       'proxy' AS source
FROM runs r
LATERAL VIEW posexplode(r.attempts) a AS i, attempt
UNION ALL
SELECT a.request_id, a.session_id, a.ts, a.model, a.trigger, a.outcome, a.recovered_at,
       coalesce(t.in_wedged_window, false), coalesce(t.in_down_window, false),
       a.attempt_no, a.rung, a.status, a.incident_class, a.latency_ms, a.finish_reason,
       a.prompt_tokens, a.completion_tokens, a.error, coalesce(a.refused, false), a.refused_reason,
       coalesce(a.incident_class = 'ok' OR a.rung = a.recovered_at, false), 'replay' AS source
FROM replay_attempts a
LEFT JOIN turns t ON t.request_id = a.request_id AND t.ts = a.ts
