-- question: error_texts
-- title: What the failures said: the most frequent error texts
-- params: since, until, model
-- The proxy's error texts (first 160 characters) per model and class, most
-- frequent first, with the parsed status and error kind, when each was first and
-- last seen, and one request id to look at (`records.raw` has the full record).
-- A naked upstream 500 reads `Provider returned 500: ` with nothing after it.
-- `since`/`until` bound the request time (ISO 8601, UTC), `model` is a name or a
-- LIKE pattern (`glm%`).
SELECT model, incident_class, left(error, 160) AS error_head, status, error_kind,
       count(*) AS turns,
       min(ts) AS first_ts,
       max(ts) AS last_ts,
       arg_min(request_id, ts) AS example_request_id
FROM turns
WHERE error IS NOT NULL
  AND in_scope(ts, model, $since, $until, $model, NULL)
GROUP BY model, incident_class, left(error, 160), status, error_kind
ORDER BY turns DESC, model, incident_class, error_head
