-- question: sizing_lost_by_class
-- title: Lost tool sessions by the class of their last turn
-- params: since, until, model, models
-- Tool sessions that started in [since, until) and ended on a failure for the
-- client, per class of that last turn (`sessions.last_class`), most first.
-- `since`/`until` bound the session's first turn (ISO 8601, UTC), `model` (a name
-- or a LIKE pattern, `glm%`) and `models` (a list of exact names, from Python;
-- with neither model bound: the GLM models, as the summary's sizing; -p model=% for every model) the model of its last turn.
SELECT last_class, count(*) AS sessions
FROM sessions
WHERE ended_on_failure AND tool_session
  AND in_sizing_scope(first_ts, model, $since, $until, $model, $models)
GROUP BY ALL
ORDER BY sessions DESC, last_class
