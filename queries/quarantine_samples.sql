-- question: quarantine_samples
-- title: The first quarantined lines, with the file, line number and reason
-- params: since, until, model, limit
-- The first `limit` lines of `quarantine` (NULL: all) in file and line order:
-- the path of the file, the line number and why the line was set aside. The
-- summary, the ingest report and the report's methods footer show five. A
-- quarantined line has no time or model, so lines are listed only when `since`,
-- `until` and `model` are all NULL. quarantined_lines counts them.
SELECT path, line_no, reason
FROM quarantine
WHERE $since IS NULL AND $until IS NULL AND $model IS NULL
ORDER BY path, line_no
LIMIT $limit
