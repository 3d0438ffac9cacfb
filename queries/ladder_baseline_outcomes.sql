-- question: ladder_baseline_outcomes
-- title: What clients did after a ladder-eligible failure, without a ladder
-- params: since, until, model, models
-- From `ladder_baseline`: per model and trigger, how the ladder-eligible failures
-- that no ladder handled went on (`retried-ok`, `retried-failed`, `moved-on`,
-- `session-ended`), with counts, shares and the median time to the next turn.
-- The share the client recovered by retrying itself is the bar the ladder must
-- beat. `since`/`until` bound the failed turn's time (ISO 8601, UTC), `model` is
-- a name or a LIKE pattern (`glm%`), `models` a list of exact names (from
-- Python; with neither model bound: the GLM models, as the summary's sizing; -p model=% for every model).
WITH b AS (
    SELECT * FROM ladder_baseline
    WHERE in_sizing_scope(ts, model, $since, $until, $model, $models)
)
SELECT model, ladder_trigger, next_step,
       count(*) AS failures,
       round(count(*) / sum(count(*)) OVER (PARTITION BY model, ladder_trigger), 4) AS share,
       round(median(ms_to_next_turn)) AS median_ms_to_next_turn
FROM b
GROUP BY model, ladder_trigger, next_step
ORDER BY model, ladder_trigger, failures DESC, next_step
