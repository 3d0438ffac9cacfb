-- question: sizing_turns
-- title: The sizing's turn counts: ladder-eligible, wedged or down, late, no answer
-- params: since, until, model, models
-- Over the turns in scope (the summary's sizing block: the GLM models): the
-- ladder-eligible failures (`ladder_trigger` set) in all and per trigger (a MAP),
-- the failures inside wedged or down windows (no retry fixes those), answers that
-- came after the callers' deadline (`late-200`), 200s without a usable answer
-- (`no-answer-200`), and the sessions with at least one eligible failure. No row
-- when nothing is in scope. `since`/`until` bound the request time (ISO 8601,
-- UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list of exact
-- names (from Python; with neither model bound: the GLM models, as the summary's sizing; -p model=% for every model).
SELECT count(*) FILTER (WHERE ladder_trigger IS NOT NULL) AS eligible,
       count(*) FILTER (WHERE incident_class IN ('wedged-pod', 'pod-down')) AS wedged_or_down,
       histogram(ladder_trigger) FILTER (WHERE ladder_trigger IS NOT NULL) AS eligible_by_trigger,
       count(*) FILTER (WHERE incident_class = 'late-200') AS late_answers,
       count(*) FILTER (WHERE incident_class = 'no-answer-200') AS no_answer_200,
       count(DISTINCT session_id) FILTER (WHERE ladder_trigger IS NOT NULL AND session_id IS NOT NULL)
           AS sessions_affected
FROM turns
WHERE in_sizing_scope(ts, model, $since, $until, $model, $models)
HAVING count(*) > 0
