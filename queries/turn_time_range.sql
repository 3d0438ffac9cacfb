-- question: turn_time_range
-- title: The time of the first and last turn
-- params: since, until, model, models
-- One row: the request time of the first and last turn in scope (UTC) and how
-- many turns. The report picks its default week from it (the last complete ISO
-- week in the data) and its methods footer says whether the period is partial.
-- No row when there is no turn. `since`/`until` bound the request time (ISO
-- 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list of
-- exact names (from Python; NULL: every model).
SELECT min(ts) AS first, max(ts) AS last, count(*) AS turns
FROM turns
WHERE in_scope(ts, model, $since, $until, $model, $models)
HAVING count(*) > 0
