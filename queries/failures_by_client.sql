-- question: failures_by_client
-- title: Failures per client version and model
-- params: since, until, model
-- Per client (the `client` field, e.g. `geo-agent/v3.13.1`, split into name and
-- version) and model: turns, sessions, failed turns and the failure rate, the
-- GLM classes that matter most as columns, and the turns the ladder recovered.
-- Tells whether a client release changed the failure picture. Turns without a
-- client are grouped as `(none)`. `since`/`until` bound the request time
-- (ISO 8601, UTC), `model` is a model name or a LIKE pattern (`glm%`).
-- Portable SQL (runs on Spark SQL over the export).
WITH t AS (
    SELECT coalesce(client, '(none)') AS client, model, session_id, incident_class, recovered_at
    FROM turns
    WHERE ($since IS NULL OR ts >= CAST($since AS TIMESTAMP))
      AND ($until IS NULL OR ts < CAST($until AS TIMESTAMP))
      AND ($model IS NULL OR model ILIKE $model)
)
SELECT client,
       CASE WHEN client <> '(none)' THEN split_part(client, '/', 1) END AS client_name,
       CASE WHEN client <> '(none)' THEN nullif(split_part(client, '/', 2), '') END AS client_version,
       model,
       count(*) AS turns,
       count(DISTINCT session_id) AS sessions,
       count(*) FILTER (WHERE incident_class <> 'ok') AS failed_turns,
       round(count(*) FILTER (WHERE incident_class <> 'ok') / count(*), 4) AS failure_rate,
       count(*) FILTER (WHERE incident_class = 'tool-history-5xx') AS tool_history_5xx,
       count(*) FILTER (WHERE incident_class = 'empty-200-stop') AS empty_200_stop,
       count(*) FILTER (WHERE incident_class = 'length-with-no-content') AS length_with_no_content,
       count(*) FILTER (WHERE incident_class = 'tool-call-stop-mismatch') AS tool_call_stop_mismatch,
       count(*) FILTER (WHERE incident_class IN ('wedged-pod', 'pod-down')) AS wedged_or_down,
       count(*) FILTER (WHERE incident_class NOT IN ('ok', 'tool-history-5xx', 'empty-200-stop',
                        'length-with-no-content', 'tool-call-stop-mismatch', 'wedged-pod', 'pod-down')) AS other_failures,
       count(recovered_at) AS ladder_recovered
FROM t
GROUP BY client, model
ORDER BY client, model
