-- table: sessions
-- title: One row per client session
-- Turns grouped by session_id (turns without a session id are left out). A session
-- "ended on a failure" when its last turn's outcome for the client was not `ok`
-- (a turn the ladder recovered, or whose leaked think block the proxy split out,
-- counts as what the client got: `turns.recovered_class`). `tool_session` marks sessions with
-- tool history in any turn. `ladder_era` says what the records say of the ladder:
-- `with-ladder` when a turn's record says the proxy ran the ladder for it
-- (analyzer.online.log_fields, `ladder_armed`), `ladder-off` when the records say
-- the proxy's model gate left it off, `ladder-unknown` when records carry log
-- fields but none says either (only failed calls with no ladder result),
-- `without-ladder` when no record carries log fields (before it shipped).
WITH ordered AS (
    SELECT t.*,
           coalesce(recovered_class, incident_class) AS client_class,
           row_number() OVER (PARTITION BY session_id ORDER BY ts DESC, request_id DESC) AS from_end
    FROM turns t
    WHERE session_id IS NOT NULL
)
SELECT
    session_id,
    min(ts) AS first_ts,
    max(coalesce(response_ts, ts)) AS last_ts,
    arg_max(model, ts) AS model,
    arg_max(origin, ts) AS origin,
    arg_max(client, ts) AS client,
    count(*) AS turns,
    count(*) FILTER (WHERE incident_class <> 'ok') AS failed_turns,
    count(*) FILTER (WHERE recovered_at IS NOT NULL) AS recovered_turns,
    bool_or(coalesce(tool_history, false) OR coalesce(has_tool_calls, false)) AS tool_session,
    max(CASE WHEN from_end = 1 THEN client_class END) AS last_class,
    max(CASE WHEN from_end = 1 THEN client_class END) <> 'ok' AS ended_on_failure,
    CASE WHEN bool_or(coalesce(ladder_armed, false)) THEN 'with-ladder'
         WHEN bool_or(NOT ladder_armed) THEN 'ladder-off'
         WHEN bool_or(has_log_fields) THEN 'ladder-unknown'
         ELSE 'without-ladder' END AS ladder_era
FROM ordered
GROUP BY session_id
