-- question: slow_completions_by_model
-- title: The proxy's slow-completion warnings per model, and the turns they flag
-- params: since, until, model, models
-- Per model: the `slow-completion` lines of the proxy in the period (each event
-- once) and the longest completion they name (ms), and the turns in scope that
-- `slow_turns` flags, with how many of those failed. A warning says the
-- deployment's client-side threshold was passed (the caller may have given up): a
-- flag, not a failure. Lines without a time count only when the period is open.
-- `since`/`until` bound the time (ISO 8601, UTC), `model` is a name or a LIKE
-- pattern (`glm%`), `models` a list of exact names (from Python; NULL: every model).
SELECT model, sum(warnings) AS warnings, max(max_ms) AS max_ms,
       sum(turns_flagged) AS turns_flagged, sum(failed_flagged) AS failed_flagged
FROM (
    SELECT model, count(*) AS warnings, max(value) AS max_ms, 0 AS turns_flagged, 0 AS failed_flagged
    FROM proxy_events_once()
    WHERE kind = 'slow-completion' AND in_event_scope(ts, model, $since, $until, $model, $models)
    GROUP BY model
    UNION ALL
    SELECT model, 0, NULL, count(*), count(*) FILTER (WHERE incident_class <> 'ok')
    FROM slow_turns
    WHERE slow_warning AND in_scope(ts, model, $since, $until, $model, $models)
    GROUP BY model
)
GROUP BY model
ORDER BY model
