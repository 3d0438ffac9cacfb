-- question: dead_sessions
-- title: Sessions that died, with their last turns
-- params: since, until, model, last_turns
-- The sessions whose last turn ended badly for the client (`sessions.ended_on_failure`:
-- the last turn's class is not `ok`, a ladder-recovered turn counting as ok),
-- newest first, each with its last `last_turns` turns (default 3) so the way the
-- session went down can be read: class, status, error, tool history.
-- `from_end` is 1 for the last turn. `since`/`until` bound the session's last
-- activity (ISO 8601, UTC), `model` (a name or a LIKE pattern, `glm%`) the model
-- of its last turn.
WITH dead AS (
    SELECT *
    FROM sessions
    WHERE ended_on_failure
      AND in_scope(last_ts, model, $since, $until, $model, NULL)
),
last_turns AS (
    SELECT t.*,
           row_number() OVER (PARTITION BY t.session_id ORDER BY t.ts DESC, t.request_id DESC) AS from_end
    FROM turns t
    WHERE t.session_id IN (SELECT session_id FROM dead)
)
SELECT d.session_id, d.model AS session_model, d.client, d.origin, d.first_ts, d.last_ts,
       d.turns AS session_turns, d.failed_turns, d.tool_session, d.last_class,
       l.from_end, l.turn_index, l.request_id, l.ts, l.model, l.incident_class, l.evidence,
       l.recovered_class, l.status, l.finish_reason, l.error_kind, left(l.error, 160) AS error,
       l.tool_history, l.message_count, l.latency_ms
FROM dead d
JOIN last_turns l ON l.session_id = d.session_id
WHERE l.from_end <= coalesce(CAST($last_turns AS INTEGER), 3)
ORDER BY d.last_ts DESC, d.session_id, l.from_end
