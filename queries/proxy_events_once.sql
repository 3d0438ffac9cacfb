-- macro: proxy_events_once
-- title: The proxy's own log lines (proxy_events), each event once
-- proxy_events_once(): a table macro, `SELECT * FROM proxy_events_once()`. A stdout
-- file read again after it grew holds the same (file, line); the same stamped line
-- in two files (two copies of one pod's stdout) is the same event. Lines without a
-- time are kept per (file, line).
CREATE OR REPLACE MACRO proxy_events_once() AS TABLE
WITH by_line AS (
    SELECT * FROM proxy_events
    QUALIFY row_number() OVER (PARTITION BY file_id, line_no ORDER BY kind) = 1
)
SELECT * FROM by_line
QUALIFY ts IS NULL
     OR row_number() OVER (PARTITION BY kind, ts, proxy_pod, text ORDER BY file_id, line_no) = 1;
