-- question: quarantined_lines
-- title: How many input lines the database keeps in quarantine
-- params: since, until, model
-- The lines of the ingested files that could not be read as records
-- (`quarantine`: malformed JSON, a record without its fields, ...), counted over
-- the whole database: the summary's "quarantined lines". A malformed line has no
-- time or model, so it is counted only when `since`, `until` and `model` are all
-- NULL (no row otherwise, and none when nothing is quarantined).
-- quarantine_samples lists the first of them.
SELECT count(*) AS quarantined_lines
FROM quarantine
WHERE $since IS NULL AND $until IS NULL AND $model IS NULL
HAVING count(*) > 0
