-- question: thinking_points
-- title: Completion tokens against reasoning size of answered thinking turns (a sample)
-- params: since, until, model, models, limit
-- Up to `limit` (default: all) answered turns with a reasoning trace, as
-- (completion tokens, reasoning characters) points: the report draws them under
-- the length failures. The sample is a fixed pseudo-random one (ordered by a hash
-- of the request id and time), so a re-run draws the same points. `since`/`until`
-- bound the request time (ISO 8601, UTC), `model` is a name or a LIKE pattern
-- (`glm%`), `models` a list of exact names (from Python; NULL: every model).
SELECT completion_tokens, reasoning_chars
FROM turns
WHERE incident_class = 'ok' AND has_reasoning AND completion_tokens IS NOT NULL
  AND in_scope(ts, model, $since, $until, $model, $models)
ORDER BY hash(request_id, ts)
LIMIT $limit
