-- question: sizing_ladder_rungs
-- title: Ladder runs per trigger and rung, outside wedged windows, every model together
-- params: since, until, model, models, source
-- From `ladder_attempts` of one `source` (`proxy`: logged by a proxy running the
-- ladder; `replay`: `analyze replay`; NULL: both), ladders started outside wedged
-- windows (no rung is expected to fix a wedged pod): per trigger and rung, in the
-- ladder's order, the ladders started with that trigger, how many reached the
-- rung and how many recovered there, and how many the upstream refused (400/422:
-- not counted as reached). The summary's sizing block turns these into
-- conditional and cumulative rates (`ladder_recovery` answers per model, also
-- leaving out down windows). `since`/`until` bound the original request time (ISO
-- 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list of
-- exact names (from Python; with neither model bound: the GLM models, as the summary's sizing; -p model=% for every model).
WITH a AS (
    SELECT * FROM ladder_attempts
    WHERE ($source IS NULL OR source = $source) AND NOT in_wedged_window
      AND in_sizing_scope(ts, model, $since, $until, $model, $models)
),
started AS (
    SELECT trigger, count(*) AS ladders FROM a WHERE rung = 'original' GROUP BY trigger
),
rungs AS (
    SELECT trigger, rung, min(attempt_no) AS rung_order, count(*) FILTER (WHERE NOT refused) AS reached,
           count(*) FILTER (WHERE recovered AND NOT refused) AS recovered,
           count(*) FILTER (WHERE refused) AS refused
    FROM a WHERE rung <> 'original'
    GROUP BY trigger, rung
)
SELECT r.trigger, r.rung, coalesce(s.ladders, 0) AS ladders, r.reached, r.recovered, r.refused
FROM rungs r
LEFT JOIN started s ON s.trigger IS NOT DISTINCT FROM r.trigger
ORDER BY r.trigger, r.rung_order, r.rung
