-- question: sizing_lost_sessions
-- title: Tool sessions, and those lost: to a ladder-eligible failure, to a wedged or down pod
-- params: since, until, model, models
-- Tool sessions (`sessions.tool_session`) that started in [since, until) with the
-- model of their last turn in scope: how many, how many ended on a failure for the
-- client, how many of those on a ladder-eligible failure (the ladder's target),
-- how many on a wedged or down pod (no retry fixes those), and the mean turns of a
-- lost session. No row when nothing is in scope. `since`/`until` bound the
-- session's first turn (ISO 8601, UTC), `model` is a name or a LIKE pattern
-- (`glm%`), `models` a list of exact names (from Python; NULL: every model).
WITH s AS (
    SELECT s.*, t.ladder_trigger AS last_trigger, t.incident_class AS last_incident
    FROM sessions s
    JOIN turns t ON t.session_id = s.session_id AND t.turn_index = s.turns
    WHERE s.tool_session AND in_scope(s.first_ts, s.model, $since, $until, $model, $models)
)
SELECT count(*) AS tool_sessions,
       count(*) FILTER (WHERE ended_on_failure) AS sessions_lost,
       count(*) FILTER (WHERE ended_on_failure AND last_trigger IS NOT NULL) AS sessions_lost_to_eligible,
       count(*) FILTER (WHERE ended_on_failure AND last_incident IN ('wedged-pod', 'pod-down'))
           AS sessions_lost_to_wedged_or_down,
       avg(turns) FILTER (WHERE ended_on_failure) AS turns_per_lost_session
FROM s
HAVING count(*) > 0
