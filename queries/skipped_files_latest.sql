-- question: skipped_files_latest
-- title: The files most recently skipped, with the reason and when
-- params: since, until, model, limit
-- The latest `limit` rows of `skipped_files` (NULL: all), newest first (files
-- without a time last, then by path): the path, why it was skipped and when it
-- was seen (`seen_at`, UTC). The summary shows five. A file has no request time
-- or model, so files are listed only when `since`, `until` and `model` are all
-- NULL. skipped_files_kept counts them.
SELECT path, reason, seen_at
FROM skipped_files
WHERE $since IS NULL AND $until IS NULL AND $model IS NULL
ORDER BY seen_at DESC NULLS LAST, path
LIMIT $limit
