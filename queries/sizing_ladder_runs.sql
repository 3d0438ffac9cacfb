-- question: sizing_ladder_runs
-- title: Ladder runs of the tool-session triggers and how many recovered, inside and outside wedged windows
-- params: since, until, model, models, source, triggers
-- From `ladder_attempts` of one `source` (`proxy`, `replay`; NULL: both), each
-- ladder once: how many ran outside wedged windows and how many of those
-- recovered (the sizing's headline recovery rate), and the same inside wedged
-- windows (reported apart: no rung fixes a wedged pod). `triggers` is a list of
-- the triggers counted (the sizing passes the tool-session triggers; NULL: every
-- trigger). No row when no ladder is in scope. `since`/`until` bound the original
-- request time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`),
-- `models` a list of exact names (from Python); with neither, the GLM models, as the summary's sizing (`-p model=%` for every model).
SELECT count(*) FILTER (WHERE NOT in_wedged_window) AS ladders,
       count(*) FILTER (WHERE NOT in_wedged_window AND recovered_at IS NOT NULL) AS recovered,
       count(*) FILTER (WHERE in_wedged_window) AS ladders_in_wedged_windows,
       count(*) FILTER (WHERE in_wedged_window AND recovered_at IS NOT NULL) AS recovered_in_wedged_windows
FROM (SELECT DISTINCT request_id, ts, in_wedged_window, recovered_at, model, trigger
      FROM ladder_attempts WHERE ($source IS NULL OR source = $source))
WHERE in_sizing_scope(ts, model, $since, $until, $model, $models)
  AND ($triggers IS NULL OR list_contains(CAST($triggers AS VARCHAR[]), trigger))
HAVING count(*) > 0
