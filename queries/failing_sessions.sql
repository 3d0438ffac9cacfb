-- question: failing_sessions
-- title: The sessions with the most failed turns
-- params: since, until, model, models, limit
-- Sessions (`sessions`) with at least one failed turn and a turn in scope, most
-- failed turns first (then those that ended on a failure, then the longest), at
-- most `limit` (default: all). `session_turns` lists their turns. `since`/`until`
-- bound the request time of a turn (ISO 8601, UTC), `model` is a name or a LIKE
-- pattern (`glm%`), `models` a list of exact names (from Python; NULL: every model).
SELECT session_id, model, origin, client, first_ts, last_ts, turns, failed_turns, recovered_turns,
       last_class, ended_on_failure
FROM sessions
WHERE failed_turns > 0
  AND session_id IN (SELECT session_id FROM turns WHERE in_scope(ts, model, $since, $until, $model, $models))
ORDER BY failed_turns DESC, ended_on_failure DESC, turns DESC, session_id
LIMIT $limit
