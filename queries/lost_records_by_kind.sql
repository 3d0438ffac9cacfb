-- question: lost_records_by_kind
-- title: Records the proxy itself says it lost, by kind of log line
-- params: since, until, model, kinds
-- The proxy's own lines (`proxy_events`, each event once) of the kinds in `kinds`
-- (a list; NULL: every kind; the summary passes buffer-dropped,
-- logging-imbalance, log-response-failed, log-request-failed, flush-failed,
-- log-failures): per kind, the lines in the period and the records they say were
-- lost, and how many such lines carry no time (stdout read without --timestamps),
-- whatever the period: those count only when the period is open. `since`/`until`
-- bound the line's time (ISO 8601, UTC), `model` (a name or a LIKE pattern) the
-- model the line names (lines about lost records name none, so a model leaves
-- them all out).
WITH e AS (
    SELECT *, in_event_scope(ts, model, $since, $until, $model, NULL) AS in_period
    FROM proxy_events_once()
    WHERE ($kinds IS NULL OR list_contains(CAST($kinds AS VARCHAR[]), kind))
)
SELECT kind,
       count(*) FILTER (WHERE in_period) AS events,
       coalesce(sum(lost) FILTER (WHERE in_period), 0)::BIGINT AS lost,
       count(*) FILTER (WHERE ts IS NULL) AS untimed_events
FROM e
GROUP BY kind
ORDER BY kind
