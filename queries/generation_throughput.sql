-- question: generation_throughput
-- title: Tokens generated per second, per pod and time bucket (the report's throughput)
-- params: since, until, model, width
-- The rate of `vllm:generation_tokens_total` per pod (`namespace/pod`, else the
-- instance) and `model_name`, per bucket of `width` (an INTERVAL, default 30
-- minutes): the counter's increase over the bucket's samples divided by the time
-- they span. The counter rules are queries/counter_rules.sql: a counter that drops
-- was reset (its new value is the increase), duplicate samples (no time between
-- them) and scrape gaps longer than counter_gap_s() (the wedge window) are left
-- out rather than smeared into a rate. The sample before `since` (up to an hour
-- earlier) gives the first interval. `since`/`until` bound the sample time (ISO
-- 8601, UTC), `model` matches `model_name` (a name or a LIKE pattern, `glm%`).
WITH s AS (
    SELECT coalesce(pod, instance, '') AS pod, coalesce(model_name, '') AS model_name, ts, value,
           counter_increase(lag(value) OVER w, value) AS increase,
           epoch(ts) - epoch(lag(ts) OVER w) AS dt
    FROM metric_samples
    WHERE metric = 'vllm:generation_tokens_total'
      AND ($since IS NULL OR ts >= CAST($since AS TIMESTAMP) - INTERVAL 1 HOUR)
      AND ($until IS NULL OR ts < CAST($until AS TIMESTAMP))
      AND ($model IS NULL OR model_name ILIKE $model)
    WINDOW w AS (PARTITION BY coalesce(pod, instance, ''), coalesce(model_name, '') ORDER BY ts)
)
SELECT pod, model_name, time_bucket(coalesce(CAST($width AS INTERVAL), INTERVAL 30 MINUTE), ts) AS bucket,
       sum(increase) / sum(dt) AS tokens_per_s
FROM s
WHERE in_scope(ts, NULL, $since, $until, NULL, NULL) AND dt > 0 AND dt <= counter_gap_s()
GROUP BY ALL
ORDER BY pod, model_name, bucket
