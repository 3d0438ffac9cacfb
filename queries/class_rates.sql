-- question: class_rates
-- title: Rate of each incident class per model, with confidence intervals
-- params: since, until, model
-- Per model and class over the period: turns, their share of the model's turns
-- with a 95% Wilson interval (so a rare class on few turns does not read as
-- certain), the sessions it touched, and the share classified on inferred
-- evidence (legacy records without log_fields). `since`/`until` bound the request
-- time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`).
WITH t AS (
    SELECT * FROM turns
    WHERE in_scope(ts, model, $since, $until, $model, NULL)
),
per_class AS (
    SELECT model, incident_class,
           count(*) AS turns,
           count(DISTINCT session_id) AS sessions,
           count(*) FILTER (WHERE evidence = 'inferred') AS inferred
    FROM t
    GROUP BY model, incident_class
),
totals AS (
    SELECT model, count(*) AS model_turns FROM t GROUP BY model
)
SELECT p.model, p.incident_class, p.turns, x.model_turns,
       round(p.turns / x.model_turns, 4) AS rate,
       round(wilson_low(p.turns, x.model_turns), 4) AS rate_low,
       round(wilson_high(p.turns, x.model_turns), 4) AS rate_high,
       p.sessions,
       round(p.inferred / p.turns, 4) AS inferred_share
FROM per_class p
JOIN totals x ON x.model IS NOT DISTINCT FROM p.model
ORDER BY p.model, p.turns DESC, p.incident_class
