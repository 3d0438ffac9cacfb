-- question: sessions_ended_by_model
-- title: Sessions started in the period, and those that ended on a failure, by model
-- params: since, until, model, models
-- Sessions that started in [since, until) (as the sizing counts them), per model
-- of their last turn: how many, and how many ended on a failure for the client
-- (`sessions.ended_on_failure`). `since`/`until` bound the session's first turn
-- (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list
-- of exact names (from Python; NULL: every model).
SELECT model, count(*) AS sessions, count(*) FILTER (WHERE ended_on_failure) AS ended_on_failure
FROM sessions
WHERE in_scope(first_ts, model, $since, $until, $model, $models)
GROUP BY ALL
ORDER BY model
