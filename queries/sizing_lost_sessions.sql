-- question: sizing_lost_sessions
-- title: Tool sessions, and those lost (without a ladder, after the ladder ran out) or saved by the ladder
-- params: since, until, model, models
-- Tool sessions (`sessions.tool_session`) that started in [since, until) with the
-- model of their last turn in scope: how many, how many ended on a failure for the
-- client, how many of those on a ladder-eligible failure (the ladder's target),
-- split into those lost without a ladder (no ladder ran on the last turn: the only
-- ones a projection of the ladder's recovery applies to) and those lost after a
-- ladder ran on the last turn and every rung it could try failed (measured; a
-- failure inside a wedged or down window is never eligible, whatever the proxy's
-- ladder did, and counts with the wedged or down losses instead); how
-- many the ladder saved (measured: a turn recovered by the ladder, and the session
-- did not end on a failure); how many were lost on a wedged or down pod (no retry
-- fixes those), and the mean turns of a lost session. No row when nothing is in
-- scope. `since`/`until` bound the session's first turn (ISO 8601, UTC), `model`
-- is a name or a LIKE pattern (`glm%`), `models` a list of exact names (from
-- Python; with neither model bound: the GLM models, as the summary's sizing; -p model=% for every model).
WITH s AS (
    SELECT s.*, t.ladder_trigger AS last_trigger, t.incident_class AS last_incident,
           t.ladder_outcome AS last_ladder_outcome
    FROM sessions s
    JOIN turns t ON t.session_id = s.session_id AND t.turn_index = s.turns
    WHERE s.tool_session AND in_sizing_scope(s.first_ts, s.model, $since, $until, $model, $models)
)
SELECT count(*) AS tool_sessions,
       count(*) FILTER (WHERE ended_on_failure) AS sessions_lost,
       count(*) FILTER (WHERE ended_on_failure AND last_trigger IS NOT NULL) AS sessions_lost_to_eligible,
       count(*) FILTER (WHERE ended_on_failure AND last_incident IN ('wedged-pod', 'pod-down'))
           AS sessions_lost_to_wedged_or_down,
       avg(turns) FILTER (WHERE ended_on_failure) AS turns_per_lost_session,
       count(*) FILTER (WHERE ended_on_failure AND last_trigger IS NOT NULL AND last_ladder_outcome IS NULL)
           AS sessions_lost_without_ladder,
       -- eligible (so not on a wedged or down pod, which the proxy cannot see) and not
       -- recovered: a recovered turn lost for another reason is not the ladder's
       count(*) FILTER (WHERE ended_on_failure AND last_trigger IS NOT NULL
                          AND last_ladder_outcome IS NOT NULL AND last_ladder_outcome <> 'recovered')
           AS sessions_lost_after_ladder,
       count(*) FILTER (WHERE NOT ended_on_failure AND recovered_turns > 0) AS sessions_saved_by_ladder
FROM s
HAVING count(*) > 0
