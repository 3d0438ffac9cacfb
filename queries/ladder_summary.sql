-- view: ladder_summary
-- title: Ladder recovery per trigger and rung
-- Per model, trigger class, inside/outside wedged windows, and rung: how many
-- ladders reached the rung, how many recovered there, the conditional recovery
-- rate (recovered / reached) and the cumulative rate (recovered at this rung or
-- before / ladders started), each with a 95% Wilson score interval so small counts
-- do not read as certain, and the extra latency and tokens the rung attempts cost.
-- A rung the upstream refused (400/422, `ladder_attempts.refused`) is counted in
-- `refused`, not in `reached`: the shape was not accepted, the idea not tried.
WITH attempts AS (
    SELECT * FROM ladder_attempts WHERE rung <> 'original'
),
started AS (
    SELECT model, trigger, in_wedged_window, source, count(DISTINCT (request_id, ts)) AS ladders
    FROM ladder_attempts WHERE rung = 'original'
    GROUP BY ALL
),
per_rung AS (
    SELECT model, trigger, in_wedged_window, source, rung,
           min(attempt_no) AS rung_order,
           count(*) FILTER (WHERE NOT refused) AS reached,
           count(*) FILTER (WHERE refused) AS refused,
           count(*) FILTER (WHERE recovered AND NOT refused) AS recovered,
           sum(latency_ms) AS extra_latency_ms,
           sum(coalesce(prompt_tokens, 0) + coalesce(completion_tokens, 0)) AS extra_tokens
    FROM attempts
    GROUP BY ALL
),
cumulative AS (
    SELECT p.*, s.ladders,
           sum(p.recovered) OVER (PARTITION BY p.model, p.trigger, p.in_wedged_window, p.source
                                  ORDER BY p.rung_order) AS recovered_so_far
    FROM per_rung p JOIN started s USING (model, trigger, in_wedged_window, source)
),
rates AS (
    SELECT *, CASE WHEN reached > 0 THEN recovered::DOUBLE / reached END AS p_cond,
           recovered_so_far::DOUBLE / ladders AS p_cum
    FROM cumulative
)
SELECT model, trigger, in_wedged_window, source, rung, rung_order, ladders, reached, recovered, refused,
       round(p_cond, 4) AS conditional_rate,
       round(wilson_low(recovered, reached), 4) AS conditional_low,
       round(wilson_high(recovered, reached), 4) AS conditional_high,
       recovered_so_far,
       round(p_cum, 4) AS cumulative_rate,
       round(wilson_low(recovered_so_far, ladders), 4) AS cumulative_low,
       round(wilson_high(recovered_so_far, ladders), 4) AS cumulative_high,
       extra_latency_ms,
       extra_tokens
FROM rates
ORDER BY model, trigger, in_wedged_window, source, rung_order
