-- question: input_file_examples
-- title: The first input files by path
-- params: since, until, model, limit
-- The first `limit` paths of `source_files` (NULL: all) in path order: the
-- report's methods footer shows five as examples of what was read. A file has no
-- single time or model, so files are listed only when `since`, `until` and
-- `model` are all NULL.
SELECT path
FROM source_files
WHERE $since IS NULL AND $until IS NULL AND $model IS NULL
ORDER BY path
LIMIT $limit
