-- question: input_folders
-- title: The folders the input files came from, with how many files each
-- params: since, until, model
-- Per folder of `source_files.path` (`/` separated): the files ingested from it
-- and the first path, one row per folder (a database of 10,000 chunks has a few
-- folders). The summary's database part names each file's source from it (the
-- folder above a `YYYY-MM-DD` day folder, analyzer.store.holdings.source_of). A file
-- has no single time or model, so files are counted only when `since`, `until`
-- and `model` are all NULL.
SELECT parse_dirpath(path, 'forward_slash') AS folder, count(*) AS files, min(path) AS example
FROM source_files
WHERE $since IS NULL AND $until IS NULL AND $model IS NULL
GROUP BY 1
ORDER BY 1
