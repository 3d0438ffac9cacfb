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
-- The attempts are the responses `turn_features` folds into the turn (its call id
-- and session, from its request to its last answer), so the two never disagree.
WITH calls AS (
    SELECT t.request_id, t.session_id, t.ts, count(*) AS attempts,
           arg_min(r.error, r.ts) AS first_error, arg_min(r.proxy_pod, r.ts) AS first_pod,
           arg_max(r.proxy_pod, r.ts) AS last_pod
    FROM turns t
    JOIN records r
      ON r.type = 'response' AND r.gateway IS NOT NULL
     AND r.request_id = t.request_id AND r.session_id IS NOT DISTINCT FROM t.session_id
     AND r.ts BETWEEN t.ts AND t.response_ts
    WHERE in_scope(t.ts, t.model, $since, $until, $model, NULL)
    GROUP BY t.request_id, t.session_id, t.ts
    HAVING count(*) > 1
)
SELECT t.request_id, t.session_id, t.ts, t.model, c.attempts, c.first_error, c.first_pod,
       c.last_pod AS answered_by, t.incident_class
FROM calls c
JOIN turns t ON t.request_id = c.request_id AND t.session_id IS NOT DISTINCT FROM c.session_id AND t.ts = c.ts
ORDER BY t.ts, t.request_id
