-- question: latency_by_class
-- title: Latency and tokens per model and class
-- params: since, until, model
-- How long each kind of turn kept the client waiting: per model and class, the
-- median, 95th percentile and maximum of the proxy's measured latency, and the
-- median prompt and completion tokens. Slow failures (timeouts, wedged pods)
-- cost the user far more than fast ones. Unanswered turns have no latency.
-- `since`/`until` bound the request time (ISO 8601, UTC), `model` is a name or a
-- LIKE pattern (`glm%`).
SELECT model, incident_class,
       count(*) AS turns,
       count(latency_ms) AS timed_turns,
       round(quantile_cont(latency_ms, 0.5)) AS p50_latency_ms,
       round(quantile_cont(latency_ms, 0.95)) AS p95_latency_ms,
       max(latency_ms) AS max_latency_ms,
       round(quantile_cont(prompt_tokens, 0.5)) AS p50_prompt_tokens,
       round(quantile_cont(completion_tokens, 0.5)) AS p50_completion_tokens
FROM turns
WHERE in_scope(ts, model, $since, $until, $model, NULL)
GROUP BY model, incident_class
ORDER BY model, turns DESC, incident_class
