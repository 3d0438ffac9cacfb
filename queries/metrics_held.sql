-- question: metrics_held
-- title: The metric samples and pod windows the database holds
-- params: since, until, model
-- One row: `samples`, how many metric samples (`metric_samples`) and the time of
-- the first and last (`first`, `last`), and `windows`, how many wedged, down or
-- sleeping windows (`pod_windows`). The summary's metrics line and the database
-- part (`analyze` without files) read it, over every pod. No row when the
-- database holds neither. `since`/`until` bound the samples' time and select the
-- windows overlapping [since, until) (ISO 8601, UTC), `model` matches the metric
-- `model_name` (a name or a LIKE pattern; `up` samples carry none, so a model
-- leaves them out).
WITH s AS (
    SELECT count(*) AS samples, min(ts) AS first, max(ts) AS last
    FROM metric_samples
    WHERE ($since IS NULL OR ts >= CAST($since AS TIMESTAMP))
      AND ($until IS NULL OR ts < CAST($until AS TIMESTAMP))
      AND ($model IS NULL OR model_name ILIKE $model)
), w AS (
    SELECT count(*) AS windows
    FROM pod_windows
    WHERE ($since IS NULL OR end_ts >= CAST($since AS TIMESTAMP))
      AND ($until IS NULL OR start_ts < CAST($until AS TIMESTAMP))
      AND ($model IS NULL OR model_name ILIKE $model)
)
SELECT samples, first, last, windows
FROM s, w
WHERE samples > 0 OR windows > 0
