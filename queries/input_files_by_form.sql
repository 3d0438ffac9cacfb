-- question: input_files_by_form
-- title: The input files the database holds, per form, with their records and bytes
-- params: since, until, model
-- Per form of input (`source_files.form`: S3 chunks, stdout, Parquet, ...): the
-- files ingested, the records and quarantined lines read from them, and their
-- size in bytes. The database part of the summary (analyzer.store.holdings) and the
-- report's methods footer read it. A file has no single time or model, so files
-- are counted only when `since`, `until` and `model` are all NULL (the whole
-- database).
SELECT form, count(*) AS files, sum(records) AS records, sum(quarantined) AS quarantined,
       coalesce(sum(size_bytes), 0) AS bytes
FROM source_files
WHERE $since IS NULL AND $until IS NULL AND $model IS NULL
GROUP BY form
ORDER BY form
