-- question: latency_by_model
-- title: Latency percentiles per model and provider
-- params: since, until, model, models
-- What on-call looks at first when users say "it is slow": per model and
-- provider, the turns, how many carry a measured latency (`latency_ms`, the
-- proxy's wall time; unanswered turns have none), the 50th, 95th and 99th
-- percentiles and the maximum of it, and the same median over the `ok` turns
-- alone (a fast failure pulls the overall median down). Requests the proxy
-- refused before routing (providers `unrouted`, `streaming-unsupported`) are
-- logged with 0 ms: no call was timed, so they count as turns with no latency
-- (NULL percentiles, not 0 ms), under their provider. `since`/`until` bound the
-- request time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`),
-- `models` a list of exact names (from Python; NULL: every model).
WITH t AS (
    SELECT model, provider, incident_class,
           CASE WHEN provider NOT IN ('unrouted', 'streaming-unsupported') THEN latency_ms END AS latency_ms
    FROM turns
    WHERE in_scope(ts, model, $since, $until, $model, $models)
)
SELECT model, provider,
       count(*) AS turns,
       count(latency_ms) AS timed_turns,
       count(*) FILTER (WHERE incident_class <> 'ok') AS failed_turns,
       round(quantile_cont(latency_ms, 0.5)) AS p50_latency_ms,
       round(quantile_cont(latency_ms, 0.95)) AS p95_latency_ms,
       round(quantile_cont(latency_ms, 0.99)) AS p99_latency_ms,
       max(latency_ms) AS max_latency_ms,
       round(quantile_cont(latency_ms, 0.5) FILTER (WHERE incident_class = 'ok')) AS p50_ok_latency_ms
FROM t
GROUP BY model, provider
ORDER BY turns DESC, model, provider
