-- question: records_held
-- title: How many records the database holds, and the time of the first and last
-- params: since, until, model
-- One row: the log records (`records`: requests, responses, system prompts) in
-- scope, and the time of the first and last (UTC). The summary's database part
-- and the report's methods footer read it. No row when there is none.
-- `since`/`until` bound the record time (ISO 8601, UTC), `model` is a name or a
-- LIKE pattern (`glm%`; records without a model are left out when it is given).
SELECT min(ts) AS first, max(ts) AS last, count(*) AS records
FROM records
WHERE in_scope(ts, model, $since, $until, $model, NULL)
HAVING count(*) > 0
