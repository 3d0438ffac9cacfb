-- macro: scope
-- title: The scope of a question (time range, models) and the focus models (GLM), defined once
-- in_scope(ts, model, since, until, model_pattern, models): true when the row is
-- inside the scope every question and the summary take: `ts` in [since, until)
-- (either bound NULL: open; ISO text or TIMESTAMP, compared as naive UTC),
-- `model` matching `model_pattern` (a name or a LIKE pattern such as `glm%`,
-- case-insensitive; NULL: every model) and one of the exact names of `models`
-- (a list, as the summary and the report pass it; NULL: every model). A row
-- without a model matches only when neither model bound is given. Call it as
-- `in_scope(ts, model, $since, $until, $model, $models)`, or with NULL for a
-- bound the question does not take.
-- is_glm(model): the focus models, listed first everywhere: the name contains
-- `glm` (any case). The same rule as analyzer.core.focus.is_glm in Python.
CREATE OR REPLACE MACRO in_scope(ts, model, since, until, model_pattern, models) AS
    (since IS NULL OR ts >= CAST(since AS TIMESTAMP))
    AND (until IS NULL OR ts < CAST(until AS TIMESTAMP))
    AND (model_pattern IS NULL OR model ILIKE model_pattern)
    AND (models IS NULL OR list_contains(CAST(models AS VARCHAR[]), model));
CREATE OR REPLACE MACRO is_glm(model) AS coalesce(contains(lower(model), 'glm'), false);
-- in_sizing_scope(ts, model, since, until, model_pattern, models): the scope of the
-- sizing questions (sizing_*, ladder_baseline_outcomes, ladder_before_after): as
-- in_scope, and with neither model bound given, the focus (GLM) models, which is
-- what the summary's and the report's sizing read; `-p model=%` asks for every
-- model.
CREATE OR REPLACE MACRO in_sizing_scope(ts, model, since, until, model_pattern, models) AS
    in_scope(ts, model, since, until, model_pattern, models)
    AND (model_pattern IS NOT NULL OR models IS NOT NULL OR is_glm(model));
-- in_event_scope(ts, model, since, until, model_pattern, models): the scope of a
-- proxy_events line. As in_scope, and a line without a time (stdout read without
-- --timestamps) counts only when the period is open: nothing places it in a
-- bounded one.
CREATE OR REPLACE MACRO in_event_scope(ts, model, since, until, model_pattern, models) AS
    (ts IS NOT NULL OR (since IS NULL AND until IS NULL))
    AND in_scope(ts, model, since, until, model_pattern, models);
