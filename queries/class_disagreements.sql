-- question: class_disagreements
-- title: Turns whose logged class is not the class the analyzer would derive
-- params: since, until, model, models
-- A data-quality count for logs written by a proxy running analyzer.online: per
-- pair of the class the proxy logged (`log_fields`' incident_class, which the
-- analyzer keeps) and the class analyzer.online.decide derives from the record's
-- other fields, the turns where the two differ, most first. A difference means the
-- proxy saw something the record does not say (the exception behind a timeout
-- text, a caller deadline other than the analyzer's), or a proxy running another
-- version of the rule; a logged class the analyzer does not know is listed too
-- (the derived class is kept for it). `since`/`until` bound the request time (ISO
-- 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list of
-- exact names (from Python; NULL: every model).
SELECT logged_class, rule_class AS derived_class, class_source, count(*) AS turns
FROM turns
WHERE class_disagrees AND in_scope(ts, model, $since, $until, $model, $models)
GROUP BY ALL
ORDER BY turns DESC, logged_class, derived_class
