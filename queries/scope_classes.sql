-- question: scope_classes
-- title: Turns per model, incident class and ladder trigger in scope
-- params: since, until, model, models
-- Per model, class and ladder trigger (NULL: not ladder-addressable): turns. The
-- summary adds them up into its classes (per model and in all) and the
-- ladder-addressable counts per trigger. `since`/`until` bound the request time
-- (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list
-- of exact names (from Python; NULL: every model).
SELECT model, incident_class, ladder_trigger, count(*) AS turns
FROM turns
WHERE in_scope(ts, model, $since, $until, $model, $models)
GROUP BY ALL
ORDER BY model, incident_class, ladder_trigger
