-- question: failures_by_dimension
-- title: Failure rate by origin, client version, thinking on/off or model (the report's breakdowns)
-- params: since, until, model, models, dimension
-- One breakdown of the turns in scope by `dimension`: `origin` (the app: scheme and
-- host of the Origin, without the path), `client` (the client version string),
-- `thinking` (enable_thinking on, off or not set) or `model` (the default). Per
-- key: turns, sessions, failed turns (class not `ok`), ladder-eligible turns, the
-- most frequent failure class and the 95% Wilson interval of the failure rate.
-- `since`/`until` bound the request time (ISO 8601, UTC), `model` is a name or a
-- LIKE pattern (`glm%`), `models` a list of exact names (from Python; NULL: every model).
WITH t AS (
    SELECT *,
           CASE coalesce($dimension, 'model')
               WHEN 'model' THEN coalesce(model, '(none)')
               WHEN 'origin' THEN coalesce(nullif(regexp_extract(origin, '^([A-Za-z][A-Za-z0-9+.-]*://[^/?#]+)', 1), ''),
                                           origin, '(none)')
               WHEN 'client' THEN coalesce(client, '(not sent)')
               WHEN 'thinking' THEN CASE enable_thinking WHEN true THEN 'thinking on'
                                                         WHEN false THEN 'thinking off' ELSE 'not set' END
           END AS key
    FROM turns
    WHERE in_scope(ts, model, $since, $until, $model, $models)
),
g AS (
    SELECT key, count(*) AS turns, count(DISTINCT session_id) AS sessions,
           count(*) FILTER (WHERE incident_class <> 'ok') AS failed,
           count(*) FILTER (WHERE ladder_trigger IS NOT NULL) AS eligible,
           most_frequent(histogram(incident_class) FILTER (WHERE incident_class <> 'ok')) AS top_failure
    FROM t GROUP BY key
)
SELECT key, turns, sessions, failed, eligible, top_failure,
       wilson_low(failed, turns) AS failure_low, wilson_high(failed, turns) AS failure_high
FROM g
ORDER BY turns DESC, key
