-- question: failures_by_day
-- title: Failures per day, model and class
-- params: since, until, model
-- Every turn that did not end `ok`, counted per day (UTC), model and incident
-- class, with the model's turns that day and the failure's rate among them; how
-- many of those turns the ladder recovered (the client still got an answer), and
-- how many were classified on inferred evidence (legacy records).
-- `since`/`until` bound the request time (ISO 8601, UTC), `model` is a model name
-- or a LIKE pattern (`glm%`). Portable SQL (runs on Spark SQL over the export).
WITH t AS (
    SELECT CAST(ts AS DATE) AS day, model, incident_class, evidence, recovered_at
    FROM turns
    WHERE ($since IS NULL OR ts >= CAST($since AS TIMESTAMP))
      AND ($until IS NULL OR ts < CAST($until AS TIMESTAMP))
      AND ($model IS NULL OR model ILIKE $model)
),
totals AS (
    SELECT day, model, count(*) AS model_turns
    FROM t
    GROUP BY day, model
)
SELECT f.day, f.model, f.incident_class,
       count(*) AS failed_turns,
       count(f.recovered_at) AS recovered_by_ladder,
       count(*) FILTER (WHERE f.evidence = 'inferred') AS inferred,
       max(x.model_turns) AS model_turns,
       round(count(*) / max(x.model_turns), 4) AS rate
FROM t f
JOIN totals x ON x.day = f.day AND x.model IS NOT DISTINCT FROM f.model
WHERE f.incident_class <> 'ok'
GROUP BY f.day, f.model, f.incident_class
ORDER BY f.day, f.model, failed_turns DESC, f.incident_class
