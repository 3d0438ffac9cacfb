-- question: scope_models
-- title: Turns, sessions and tool sessions per model in scope
-- params: since, until, model, models
-- Per model (NULL: turns without one): turns, distinct sessions, and the sessions
-- with tool history in a turn of that model. `since`/`until` bound the request
-- time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a
-- list of exact names (from Python; NULL: every model).
SELECT model, count(*) AS turns, count(DISTINCT session_id) AS sessions,
       count(DISTINCT session_id) FILTER (WHERE tool_history) AS tool_sessions
FROM turns
WHERE in_scope(ts, model, $since, $until, $model, $models)
GROUP BY model
ORDER BY model
