-- question: thinking_points
-- title: Completion tokens against reasoning size of answered thinking turns (a sample)
-- params: since, until, model, models, limit
-- The Spark version of queries/thinking_points.sql: the same turns, and with no
-- `limit` the same rows. The sample is ordered by a hash of the request id and
-- time as there, but DuckDB's hash() is not Spark's: Spark orders by xxhash64, so
-- with a `limit` it draws a different (also fixed) sample of the same turns.
SELECT completion_tokens, reasoning_chars
FROM turns
WHERE incident_class = 'ok' AND has_reasoning AND completion_tokens IS NOT NULL
  AND in_scope(ts, model, :since, :until, :model, :models)
ORDER BY xxhash64(request_id, ts)
LIMIT CAST(coalesce(:limit, 2147483647) AS INT)
