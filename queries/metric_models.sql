-- question: metric_models
-- title: The metric model names the logged models in scope map to
-- params: since, until, model, models
-- The `model_name` label (`turns.metric_model`: `model_map`, else the logged name)
-- of the turns in scope, so the pods serving those models can be picked out of
-- the metrics (the report shades the focus models' windows on its timeline).
-- `since`/`until` bound the request time (ISO 8601, UTC), `model` is a name or a
-- LIKE pattern (`glm%`), `models` a list of exact names (from Python; NULL: every model).
SELECT DISTINCT metric_model
FROM turns
WHERE metric_model IS NOT NULL AND in_scope(ts, model, $since, $until, $model, $models)
ORDER BY metric_model
