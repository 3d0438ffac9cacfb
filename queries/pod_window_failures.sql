-- question: pod_window_failures
-- title: Each wedged or down window and the turns it hit
-- params: since, until, model
-- One row per pod window from the metrics (table pod_windows): the pod, the
-- model it serves, the kind (`wedged`, `down`), its bounds and length, the turns
-- of that model that fell inside it, how many failed, and the most common class
-- among the failures. Windows with no traffic are listed with zero turns.
-- `since`/`until` select the windows overlapping [since, until) (ISO 8601, UTC),
-- `model` matches the window's metric `model_name` (a name or a LIKE pattern).
-- `minutes` is the length to a tenth of a minute, halves rounded up: whole
-- seconds over 6, rounded, over 10 (rounding seconds / 60.0 to one place would
-- round the DOUBLE's binary value, which DuckDB and Spark take apart at a half:
-- 9 s is 0.1 minutes on one and 0.2 on the other).
WITH w AS (
    SELECT * FROM pod_windows
    WHERE ($since IS NULL OR end_ts >= CAST($since AS TIMESTAMP))
      AND ($until IS NULL OR start_ts < CAST($until AS TIMESTAMP))
      AND ($model IS NULL OR model_name ILIKE $model)
)
SELECT w.pod, w.model_name, w.kind, w.start_ts, w.end_ts,
       round(date_diff('second', w.start_ts, w.end_ts) / 6) / 10 AS minutes,
       count(t.request_id) AS turns,
       count(t.request_id) FILTER (WHERE t.incident_class <> 'ok') AS failed_turns,
       most_frequent(histogram(t.incident_class) FILTER (WHERE t.incident_class <> 'ok')) AS main_failure_class,
       w.detail
FROM w
LEFT JOIN turns t
  ON t.metric_model = w.model_name
 AND coalesce(t.response_ts, t.ts) >= w.start_ts
 AND coalesce(t.response_ts, t.ts) <= w.end_ts
GROUP BY w.pod, w.model_name, w.kind, w.start_ts, w.end_ts, w.detail
ORDER BY w.start_ts, w.pod, w.kind
