-- question: truncated_turns
-- title: How many turns rest on a truncated stdout copy of their records
-- params: since, until, model, models
-- Turns in scope whose records were read from the proxy's stdout, where the proxy
-- cuts long strings (`turns.truncated`): their lengths and counts are lower
-- bounds. No row when nothing is in scope. `since`/`until` bound the request time
-- (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list
-- of exact names (from Python; NULL: every model).
SELECT count(*) FILTER (WHERE truncated) AS truncated_turns, count(*) AS turns
FROM turns
WHERE in_scope(ts, model, $since, $until, $model, $models)
HAVING count(*) > 0
