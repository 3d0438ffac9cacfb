-- view: slow_turns
-- title: Turns the proxy warned were slow
-- One row per turn of `turns`, with `slow_warning` true when the proxy printed
-- `⚠️  Slow completion: <ms>ms exceeds the <s>s client-side warning threshold
-- (model=<m>, request_id=<id>)` for it (proxy_events kind `slow-completion`).
-- The warning says the deployment's threshold was passed, so the caller may have
-- given up already; it is a flag, not a failure class. Request ids are 8 hex
-- characters and collide over months, so a warning names the turn with that id
-- on the same replica (when both say) whose request came before the warning and
-- whose response came at most 5 minutes after it; a warning without a time (stdout
-- read without --timestamps) prefers the turn whose record stands earlier in the
-- same file, nearest first. Each warning flags at most one turn.
WITH warnings AS (
    -- A stdout file read again (it grew) or the same lines in two files: one warning.
    SELECT file_id, line_no, ts, proxy_pod, request_id, value
    FROM proxy_events
    WHERE kind = 'slow-completion' AND request_id IS NOT NULL
    QUALIFY row_number() OVER (
        PARTITION BY request_id, coalesce(proxy_pod, ''),
                     coalesce(strftime(ts, '%Y-%m-%dT%H:%M:%S.%f'), file_id || ':' || line_no)
        ORDER BY file_id, line_no) = 1
),
candidates AS (
    SELECT w.file_id AS w_file, w.line_no AS w_line, w.value AS slow_ms, w.ts AS warned_at,
           t.request_id, t.session_id, t.ts,
           -- the nearest line of the turn's records above the warning in its file
           (SELECT max(r.line_no) FROM records r
            WHERE r.file_id = w.file_id AND r.line_no < w.line_no AND r.request_id = t.request_id
              AND r.session_id IS NOT DISTINCT FROM t.session_id
              AND (r.ts = t.ts OR r.ts = t.response_ts)) AS line_above
    FROM warnings w
    JOIN turns t
      ON t.request_id = w.request_id
     AND (w.proxy_pod IS NULL OR t.proxy_pod IS NULL OR w.proxy_pod = t.proxy_pod)
     AND (w.ts IS NULL OR (w.ts >= t.ts - INTERVAL 1 MINUTE
                           AND w.ts <= coalesce(t.response_ts, t.ts + INTERVAL 1 HOUR) + INTERVAL 5 MINUTE))
),
chosen AS (
    SELECT *, row_number() OVER (
        PARTITION BY w_file, w_line
        ORDER BY line_above IS NULL, w_line - line_above, ts DESC, session_id) AS pick
    FROM candidates
),
flagged AS (
    SELECT request_id, session_id, ts, max(slow_ms) AS slow_ms, min(warned_at) AS warned_at, count(*) AS warnings
    FROM chosen
    WHERE pick = 1
    GROUP BY ALL
)
SELECT t.request_id, t.session_id, t.ts, t.response_ts, t.model, t.provider, t.proxy_pod,
       t.incident_class, t.latency_ms,
       f.request_id IS NOT NULL AS slow_warning,
       f.slow_ms,
       f.warned_at,
       coalesce(f.warnings, 0) AS slow_warnings
FROM turns t
LEFT JOIN flagged f
  ON f.request_id = t.request_id AND f.ts = t.ts AND f.session_id IS NOT DISTINCT FROM t.session_id
