-- question: models_in_scope
-- title: The models with turns in the scope, the focus (GLM) models flagged
-- params: since, until, model, models
-- Every model (turns without a model left out) with turns in [since, until), how
-- many, and `glm`: whether it is a focus model (is_glm, queries/scope.sql). The
-- report's focus is the GLM models of its period, else every model; the sizing
-- sizes the GLM models. `since`/`until` bound the request time (ISO 8601, UTC),
-- `model` is a name or a LIKE pattern (`glm%`), `models` a list of exact names
-- (from Python; NULL: every model).
SELECT model, is_glm(model) AS glm, count(*) AS turns
FROM turns
WHERE model IS NOT NULL AND in_scope(ts, model, $since, $until, $model, $models)
GROUP BY model
ORDER BY model
