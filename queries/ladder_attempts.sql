-- view: ladder_attempts
-- title: Every call the fallback ladder made
-- One row per attempt of every ladder run logged by a proxy using
-- analyzer.online (the `ladder` field of its response records): the original call
-- (rung `original`, attempt_no 1) and each retry rung, with its status, class,
-- latency and tokens. `source` is `proxy` for production logs, `replay` for the
-- attempts `analyze replay` made (table replay_attempts). `refused`: the upstream
-- answered the rung 400/422, it will not take that shape (log_fields 3; false in
-- older records): the ladder went on, and a refused rung is not counted as reached;
-- `refused_reason` is what the upstream said (log_fields 4; NULL before). `recovered`:
-- this attempt's answer is the one the ladder passed on as recovered (an ok answer,
-- or one whose leaked think block the ladder split out).
WITH runs AS (
    SELECT request_id, session_id, ts, model, in_wedged_window, in_down_window,
           ladder ->> 'trigger' AS trigger,
           ladder ->> 'outcome' AS outcome,
           ladder ->> 'recovered_at' AS recovered_at,
           json_transform(ladder -> '$.attempts',
               '[{"rung": "VARCHAR", "status": "INTEGER", "incident_class": "VARCHAR",
                  "latency_ms": "BIGINT", "finish_reason": "VARCHAR", "prompt_tokens": "BIGINT",
                  "completion_tokens": "BIGINT", "error": "VARCHAR", "refused": "BOOLEAN",
                  "refused_reason": "VARCHAR"}]') AS attempts
    FROM turns
    WHERE ladder IS NOT NULL AND json_type(ladder) = 'OBJECT'
)
SELECT request_id, session_id, ts, model, trigger, outcome, recovered_at,
       in_wedged_window, in_down_window,
       i AS attempt_no,
       attempts[i].rung AS rung,
       attempts[i].status AS status,
       attempts[i].incident_class AS incident_class,
       attempts[i].latency_ms AS latency_ms,
       attempts[i].finish_reason AS finish_reason,
       attempts[i].prompt_tokens AS prompt_tokens,
       attempts[i].completion_tokens AS completion_tokens,
       attempts[i].error AS error,
       coalesce(attempts[i].refused, false) AS refused,
       attempts[i].refused_reason AS refused_reason,
       coalesce(attempts[i].incident_class = 'ok' OR attempts[i].rung = recovered_at, false) AS recovered,
       'proxy' AS source
FROM runs, range(1, len(attempts) + 1) AS r(i)
UNION ALL
SELECT a.request_id, a.session_id, a.ts, a.model, a.trigger, a.outcome, a.recovered_at,
       coalesce(t.in_wedged_window, false), coalesce(t.in_down_window, false),
       a.attempt_no, a.rung, a.status, a.incident_class, a.latency_ms, a.finish_reason,
       a.prompt_tokens, a.completion_tokens, a.error, coalesce(a.refused, false), a.refused_reason,
       coalesce(a.incident_class = 'ok' OR a.rung = a.recovered_at, false), 'replay' AS source
FROM replay_attempts a
LEFT JOIN turns t ON t.request_id = a.request_id AND t.ts = a.ts
