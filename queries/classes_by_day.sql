-- question: classes_by_day
-- title: Turns per day, model and incident class
-- params: since, until, model
-- How many turns of each class each model had each day (UTC), and what share of
-- that model's turns that day they were; `ok` is included, so the shares of a day
-- and model add up to 1. `since`/`until` bound the request time (ISO 8601, UTC),
-- `model` is a model name or a LIKE pattern (`glm%`); each may be left out.
-- Portable SQL: it reads only `turns` and runs unchanged (parameters aside) on
-- Spark SQL over the Parquet that `analyze export` writes (tests/e2e/test_spark_gate.py).
WITH t AS (
    SELECT CAST(ts AS DATE) AS day, model, incident_class
    FROM turns
    WHERE ($since IS NULL OR ts >= CAST($since AS TIMESTAMP))
      AND ($until IS NULL OR ts < CAST($until AS TIMESTAMP))
      AND ($model IS NULL OR model ILIKE $model)
),
per_class AS (
    SELECT day, model, incident_class, count(*) AS turns
    FROM t
    GROUP BY day, model, incident_class
)
SELECT day, model, incident_class, turns,
       CAST(sum(turns) OVER (PARTITION BY day, model) AS BIGINT) AS model_turns,
       round(turns / sum(turns) OVER (PARTITION BY day, model), 4) AS share
FROM per_class
ORDER BY day, model, turns DESC, incident_class
