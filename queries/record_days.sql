-- question: record_days
-- title: The days (UTC) the records cover
-- params: since, until, model
-- Each day with at least one record in scope, in order. The summary's database
-- part joins them into periods (days more than one day apart are separate
-- periods: a database that collects several weeks). `since`/`until` bound the
-- record time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`).
SELECT DISTINCT ts::DATE AS day
FROM records
WHERE in_scope(ts, model, $since, $until, $model, NULL)
ORDER BY day
