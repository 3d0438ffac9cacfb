-- question: ladder_recovery
-- title: Ladder recovery by model and rung, healthy pods only
-- params: since, until, model
-- For ladders started outside wedged and down windows (no rung can fix a wedged
-- pod; `ladder_summary` keeps those apart), per model, trigger, source (`proxy`
-- or `replay`) and rung: ladders started, how many reached the rung, how many
-- recovered there (conditional rate), and how many were recovered by this rung or
-- an earlier one (cumulative rate), each with its 95% Wilson interval, plus the
-- median latency of the rung's calls. `since`/`until` bound the original request
-- time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`).
WITH a AS (
    SELECT *
    FROM ladder_attempts
    WHERE NOT in_wedged_window AND NOT in_down_window
      AND ($since IS NULL OR ts >= CAST($since AS TIMESTAMP))
      AND ($until IS NULL OR ts < CAST($until AS TIMESTAMP))
      AND ($model IS NULL OR model ILIKE $model)
),
started AS (
    SELECT model, trigger, source, count(DISTINCT (request_id, ts)) AS ladders
    FROM a WHERE rung = 'original'
    GROUP BY model, trigger, source
),
per_rung AS (
    SELECT model, trigger, source, rung,
           min(attempt_no) AS rung_order,
           count(*) AS reached,
           count(*) FILTER (WHERE recovered) AS recovered,
           median(latency_ms) AS median_latency_ms
    FROM a WHERE rung <> 'original'
    GROUP BY model, trigger, source, rung
),
cumulative AS (
    SELECT p.*, s.ladders,
           sum(p.recovered) OVER (PARTITION BY p.model, p.trigger, p.source ORDER BY p.rung_order) AS recovered_so_far
    FROM per_rung p
    JOIN started s ON s.model IS NOT DISTINCT FROM p.model AND s.trigger IS NOT DISTINCT FROM p.trigger
                  AND s.source = p.source
)
SELECT model, trigger, source, rung, rung_order, ladders, reached, recovered,
       round(recovered / reached, 4) AS conditional_rate,
       round(wilson_low(recovered, reached), 4) AS conditional_low,
       round(wilson_high(recovered, reached), 4) AS conditional_high,
       CAST(recovered_so_far AS BIGINT) AS recovered_so_far,
       round(recovered_so_far / ladders, 4) AS cumulative_rate,
       round(wilson_low(recovered_so_far, ladders), 4) AS cumulative_low,
       round(wilson_high(recovered_so_far, ladders), 4) AS cumulative_high,
       median_latency_ms
FROM cumulative
ORDER BY model, trigger, source, rung_order
