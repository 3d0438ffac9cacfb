-- question: provider_incidents
-- title: Providers and models that failed every call
-- params: since, until, model, models, min_calls
-- A provider (or one model of a provider) whose every call in the period failed
-- for the client is an incident, not noise: "nimbus unreachable: 14 of 14 calls".
-- A call failed when its outcome for the client was not `ok` (a turn the ladder
-- recovered counts as ok). At least `min_calls` calls (default 3) are needed.
-- When the whole provider failed it is named once (scope `provider`, its models
-- listed); otherwise each failing model is (scope `model`). The symptom is the
-- most frequent reading of the failures: `unreachable` (connection failures),
-- `timing out`, `not answering` (no response record), `rate-limiting every call`
-- (429), `rejecting our credentials` (401/403), `out of credits` (402),
-- `not configured on the proxy` (a missing key), `dropping connections` (resets),
-- `failing with 5xx`, `refusing requests (4xx)`, `wedged`, `down`, `answering with
-- nothing usable`, `too slow for the callers` (callers hung up) or `failing`.
-- Requests the proxy refused before routing (providers `unrouted`,
-- `streaming-unsupported`) are the client's doing and left out.
-- `since`/`until` bound the request time (ISO 8601, UTC), `model` is a name or a
-- LIKE pattern (`glm%`), `models` a list of exact names (from Python; NULL: every model).
WITH t AS (
    SELECT provider, model, ts, status, error_kind,
           coalesce(recovered_class, incident_class) AS outcome
    FROM turns
    WHERE in_scope(ts, model, $since, $until, $model, $models)
      AND coalesce(provider, '') NOT IN ('unrouted', 'streaming-unsupported')
),
read AS (
    SELECT *,
           CASE WHEN outcome = 'ok' THEN NULL
                WHEN outcome = 'unanswered' THEN 'not answering'
                WHEN outcome = 'wedged-pod' THEN 'wedged'
                WHEN outcome = 'pod-down' THEN 'down'
                WHEN error_kind = 'connect' THEN 'unreachable'
                WHEN error_kind = 'timeout' OR outcome = 'timeout' THEN 'timing out'
                WHEN error_kind = 'reset' THEN 'dropping connections'
                WHEN error_kind = 'config' THEN 'not configured on the proxy'
                WHEN status = 429 THEN 'rate-limiting every call'
                WHEN status IN (401, 403) THEN 'rejecting our credentials'
                WHEN status = 402 THEN 'out of credits'
                WHEN status >= 500 THEN 'failing with 5xx'
                WHEN status >= 400 THEN 'refusing requests (4xx)'
                WHEN outcome = 'client-cancelled' THEN 'too slow for the callers'
                WHEN outcome IN ('empty-200-stop', 'length-with-no-content', 'tool-call-stop-mismatch')
                     THEN 'answering with nothing usable'
                ELSE 'failing'
           END AS symptom
    FROM t
),
-- Calls counted once per provider, model and symptom; everything below reads
-- these few rows, not the turns again.
counts AS (
    SELECT provider, model, symptom, count(*) AS n, min(ts) AS first_ts, max(ts) AS last_ts
    FROM read
    GROUP BY ALL
),
provider_symptoms AS (
    SELECT provider, symptom, sum(n) AS n FROM counts WHERE symptom IS NOT NULL GROUP BY ALL
),
per_provider AS (
    SELECT 'provider' AS scope, c.provider, NULL::VARCHAR AS model,
           string_agg(DISTINCT c.model, ', ' ORDER BY c.model) AS models,
           sum(c.n)::BIGINT AS calls, coalesce(sum(c.n) FILTER (WHERE c.symptom IS NOT NULL), 0)::BIGINT AS failed_calls,
           -- the most frequent symptom (ties: the first by name)
           any_value(m.symptom) AS symptom, coalesce(any_value(m.symptom_calls), 0)::BIGINT AS symptom_calls,
           min(c.first_ts) AS first_ts, max(c.last_ts) AS last_ts
    FROM counts c
    LEFT JOIN (SELECT provider, first(symptom ORDER BY n DESC, symptom) AS symptom, max(n) AS symptom_calls
               FROM provider_symptoms GROUP BY provider) m
      ON m.provider IS NOT DISTINCT FROM c.provider
    GROUP BY c.provider
),
per_model AS (
    SELECT 'model' AS scope, provider, model, model AS models,
           sum(n)::BIGINT AS calls, coalesce(sum(n) FILTER (WHERE symptom IS NOT NULL), 0)::BIGINT AS failed_calls,
           first(symptom ORDER BY n DESC, symptom) FILTER (WHERE symptom IS NOT NULL) AS symptom,
           coalesce(max(n) FILTER (WHERE symptom IS NOT NULL), 0)::BIGINT AS symptom_calls,
           min(first_ts) AS first_ts, max(last_ts) AS last_ts
    FROM counts
    GROUP BY provider, model
),
whole_providers AS (
    SELECT * FROM per_provider
    WHERE failed_calls = calls AND calls >= coalesce(CAST($min_calls AS BIGINT), 3)
),
incidents AS (
    SELECT * FROM whole_providers
    UNION ALL
    SELECT * FROM per_model m
    WHERE failed_calls = calls AND calls >= coalesce(CAST($min_calls AS BIGINT), 3)
      AND NOT EXISTS (SELECT 1 FROM whole_providers w WHERE w.provider IS NOT DISTINCT FROM m.provider)
)
SELECT scope, provider, model, models,
       CASE WHEN scope = 'provider' THEN coalesce(provider, '(no provider)')
            ELSE coalesce(model, '(no model)') || ' on ' || coalesce(provider, '(no provider)') END
           || ' ' || symptom || ': ' || failed_calls || ' of ' || calls || ' calls' AS incident,
       calls, failed_calls, symptom, symptom_calls, first_ts, last_ts
FROM incidents
ORDER BY calls DESC, provider, model
