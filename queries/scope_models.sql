-- question: scope_models
-- title: Turns, sessions and tool sessions per model in scope
-- params: since, until, model, models
-- Per model (NULL: turns without one): turns, distinct sessions, and the sessions
-- with tool history in a turn of that model. `since`/`until` bound the request
-- time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a
-- list of exact names (from Python; NULL: every model).
-- (Grouped by model and session first: two DISTINCT counts over a month of turns
-- cost twice this.)
SELECT model, sum(turns)::BIGINT AS turns, count(session_id) AS sessions,
       count(session_id) FILTER (WHERE tool_history) AS tool_sessions
FROM (SELECT model, session_id, count(*) AS turns, bool_or(tool_history) AS tool_history
      FROM turns
      WHERE in_scope(ts, model, $since, $until, $model, $models)
      GROUP BY model, session_id)
GROUP BY model
ORDER BY model
