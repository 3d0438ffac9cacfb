-- question: window_signals
-- title: What the other vLLM signals of one pod and model did inside a window
-- params: since, until, model, pod, model_name, metrics
-- Per metric and series (`labels`) of the samples strictly inside (since, until)
-- (the samples at both ends show the change, not the window): the first and last
-- value, the lowest and highest, and `increase`, the counter's increase across
-- resets (counter_increase, queries/counter_rules.sql: each drop restarts from
-- 0). The summary corroborates each wedged window with it
-- (analyzer.classification.evidence): running stuck, waiting growing, KV cache full,
-- success counter flat. `pod` is the pod (NULL: samples without a pod),
-- `model_name` the metric model name, exactly; `model` matches it as a name or a
-- LIKE pattern (NULL: every model); `metrics` a list of metric names (NULL: every
-- metric); `since`/`until` are naive UTC timestamps or ISO 8601 text.
SELECT metric, labels::VARCHAR AS labels, arg_min(value, ts) AS first, arg_max(value, ts) AS last,
       min(value) AS lowest, max(value) AS highest,
       -- a counter's increase across resets (queries/counter_rules.sql): each drop restarts from 0
       sum(d) AS increase
FROM (
    SELECT metric, labels, ts, value,
           counter_increase(lag(value) OVER (PARTITION BY metric, labels ORDER BY ts), value) AS d
    FROM metric_samples
    WHERE pod IS NOT DISTINCT FROM $pod AND model_name = $model_name
      AND ($model IS NULL OR model_name ILIKE $model)
      AND ($metrics IS NULL OR list_contains($metrics, metric))
      -- the samples at both ends show the change (the last increase, the next one)
      AND ts > $since AND ts < $until AND isfinite(value)
)
GROUP BY ALL
