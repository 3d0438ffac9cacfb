-- question: gateway_attempts
-- title: The calls a gateway retried or fell back on (LiteLLM), each one turn
-- params: since, until, model
-- LiteLLM logs a call's failed first attempt and the answer of its retry or
-- fallback under one call id; the turn is the call (its first request, its last
-- answer: `turns`), and its earlier attempts are here: per call that logged more
-- than one answer, how many, the first one's error and deployment, the deployment
-- that answered last, and the turn's class (what the client got). A failure a
-- blind resend fixed shows here, not as a failed turn. No row for the proxy's own
-- records. `since`/`until` bound the request time (ISO 8601, UTC), `model` is a
-- name or a LIKE pattern (`glm%`).
WITH calls AS (
    SELECT request_id, session_id, count(*) AS attempts,
           arg_min(error, ts) AS first_error, arg_min(proxy_pod, ts) AS first_pod,
           arg_max(proxy_pod, ts) AS last_pod
    FROM records
    WHERE type = 'response' AND gateway IS NOT NULL
    GROUP BY request_id, session_id
    HAVING count(*) > 1
)
SELECT t.request_id, t.session_id, t.ts, t.model, c.attempts, c.first_error, c.first_pod,
       c.last_pod AS answered_by, t.incident_class
FROM calls c
JOIN turns t ON t.request_id = c.request_id AND t.session_id IS NOT DISTINCT FROM c.session_id
WHERE in_scope(t.ts, t.model, $since, $until, $model, NULL)
ORDER BY t.ts, t.request_id
