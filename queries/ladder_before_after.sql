-- question: ladder_before_after
-- title: Tool sessions lost per 100, without the ladder and with it, per class, and the change
-- params: since, until, model, models
-- "Did the ladder work?": tool sessions that started in [since, until) with the
-- model of their last turn in scope, split by what their records say
-- (`sessions.ladder_era`: `without-ladder`, no log fields; `with-ladder`, log
-- fields of a proxy that ran the ladder; sessions of models the ladder was off
-- for, and those whose records do not say, are left out), never by a date. Per class of the last turn (`all`: every
-- lost session), sessions lost per 100 tool sessions in each era with its 95%
-- Wilson interval, and the change (with - without, per 100) with Newcombe's
-- hybrid score interval for a difference of two proportions. One row per class
-- lost in either era, `all` first. `since`/`until` bound the session's first turn
-- (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list of exact names (from Python); with neither, the GLM models, as the summary's sizing (`-p model=%` for every model).
WITH s AS (
    SELECT ladder_era, ended_on_failure, last_class
    FROM sessions
    WHERE tool_session AND ladder_era IN ('without-ladder', 'with-ladder')
      AND in_sizing_scope(first_ts, model, $since, $until, $model, $models)
),
eras AS (
    SELECT count(*) FILTER (WHERE ladder_era = 'without-ladder') AS n0,
           count(*) FILTER (WHERE ladder_era = 'with-ladder') AS n1
    FROM s
),
lost AS (
    SELECT 'all' AS lost_class,
           count(*) FILTER (WHERE ladder_era = 'without-ladder') AS k0,
           count(*) FILTER (WHERE ladder_era = 'with-ladder') AS k1
    FROM s WHERE ended_on_failure
    UNION ALL
    SELECT last_class,
           count(*) FILTER (WHERE ladder_era = 'without-ladder'),
           count(*) FILTER (WHERE ladder_era = 'with-ladder')
    FROM s WHERE ended_on_failure
    GROUP BY last_class
),
rates AS (
    SELECT l.lost_class, e.n0, l.k0, e.n1, l.k1,
           CASE WHEN e.n0 > 0 THEN l.k0 / e.n0 END AS p0, wilson_low(l.k0, e.n0) AS lo0, wilson_high(l.k0, e.n0) AS hi0,
           CASE WHEN e.n1 > 0 THEN l.k1 / e.n1 END AS p1, wilson_low(l.k1, e.n1) AS lo1, wilson_high(l.k1, e.n1) AS hi1
    FROM lost l, eras e
    WHERE e.n0 + e.n1 > 0
)
SELECT lost_class,
       n0 AS tool_sessions_without, k0 AS lost_without, round(100 * p0, 2) AS per_100_without,
       round(100 * lo0, 2) AS per_100_without_low, round(100 * hi0, 2) AS per_100_without_high,
       n1 AS tool_sessions_with, k1 AS lost_with, round(100 * p1, 2) AS per_100_with,
       round(100 * lo1, 2) AS per_100_with_low, round(100 * hi1, 2) AS per_100_with_high,
       round(100 * (p1 - p0), 2) AS change_per_100,
       round(100 * (p1 - p0 - sqrt((p1 - lo1) ** 2 + (hi0 - p0) ** 2)), 2) AS change_low,
       round(100 * (p1 - p0 + sqrt((hi1 - p1) ** 2 + (p0 - lo0) ** 2)), 2) AS change_high
FROM rates
WHERE lost_class = 'all' OR k0 + k1 > 0
ORDER BY lost_class <> 'all', k0 + k1 DESC, lost_class
