-- question: skipped_files_kept
-- title: How many input files the database keeps as skipped
-- params: since, until, model
-- The files an ingest set aside without reading them (`skipped_files`: not a
-- log, unreadable, still being written, ...), counted over the whole database
-- (the summary's "skipped files"; the files skipped by one run are in its
-- ingest report). A file has no request time or model, so it is counted only
-- when `since`, `until` and `model` are all NULL (no row otherwise, and none when
-- no file was skipped). skipped_files_latest lists the latest.
SELECT count(*) AS skipped_files
FROM skipped_files
WHERE $since IS NULL AND $until IS NULL AND $model IS NULL
HAVING count(*) > 0
