-- question: scope_totals
-- title: The turns in scope: how many, their sessions, time range, inferred, ladder-addressable, logged classes
-- params: since, until, model, models
-- The summary's headline counts: turns, distinct sessions, the first and last
-- request time, the turns classified on inferred evidence (legacy records
-- without log_fields), the ladder-addressable ones (`ladder_trigger` set) and
-- those whose class the proxy logged (`class_source` 'logged'). No
-- row when nothing is in scope. `since`/`until` bound the request time (ISO 8601,
-- UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list of exact
-- names (from Python; NULL: every model).
SELECT count(*) AS turns, count(DISTINCT session_id) AS sessions, min(ts) AS first_ts, max(ts) AS last_ts,
       count(*) FILTER (WHERE evidence = 'inferred') AS inferred_turns,
       count(*) FILTER (WHERE ladder_trigger IS NOT NULL) AS ladder_addressable,
       count(*) FILTER (WHERE class_source = 'logged') AS logged_class_turns
FROM turns
WHERE in_scope(ts, model, $since, $until, $model, $models)
HAVING count(*) > 0
