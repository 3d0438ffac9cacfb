-- question: classes_by_bucket
-- title: Turns per time bucket and incident class (the report's timeline)
-- params: since, until, model, models, width
-- How many turns of each class started in each bucket of `width` (an INTERVAL,
-- default 1 day; buckets align on midnight, hours on the hour, as time_bucket
-- does). `since`/`until` bound the request time (ISO 8601, UTC), `model` is a name
-- or a LIKE pattern (`glm%`), `models` a list of exact names (from Python; NULL:
-- every model).
SELECT time_bucket(coalesce(CAST($width AS INTERVAL), INTERVAL 1 DAY), ts) AS bucket, incident_class, count(*) AS n
FROM turns
WHERE in_scope(ts, model, $since, $until, $model, $models)
GROUP BY ALL
ORDER BY bucket, incident_class
