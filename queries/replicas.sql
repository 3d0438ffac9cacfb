-- question: replicas
-- title: Turns, failures, slow warnings and lost records per proxy replica
-- params: since, until, model, models, kinds
-- Per proxy replica (`proxy_pod`, NULL: not said): the turns in scope, the failed
-- ones (class not `ok`), the turns of those flagged by a slow-completion warning
-- (`slow_turns`), and the records the replica's own lines say were lost in the
-- period, from its lines of the kinds in `kinds` (a list; NULL: every kind; the
-- summary passes those of lost_records_by_kind) (every model: the lines do not
-- say which model a lost record was for; lines without a time count only when
-- the period is open). `since`/`until`
-- bound the time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`),
-- `models` a list of exact names (from Python; NULL: every model); both filter
-- the turns only.
WITH t AS (
    SELECT * FROM turns WHERE in_scope(ts, model, $since, $until, $model, $models)
),
per_pod AS (
    SELECT proxy_pod, count(*) AS turns, count(*) FILTER (WHERE incident_class <> 'ok') AS failed,
           0 AS slow_warnings, 0 AS lost_records
    FROM t GROUP BY ALL
    UNION ALL
    SELECT s.proxy_pod, 0, 0, count(*), 0
    FROM slow_turns s
    SEMI JOIN t ON t.request_id = s.request_id AND t.ts = s.ts AND t.session_id IS NOT DISTINCT FROM s.session_id
    WHERE s.slow_warning GROUP BY ALL
    UNION ALL
    SELECT proxy_pod, 0, 0, 0, coalesce(sum(lost), 0)::BIGINT
    FROM proxy_events_once()
    WHERE ($kinds IS NULL OR list_contains(CAST($kinds AS VARCHAR[]), kind))
      AND in_event_scope(ts, NULL, $since, $until, NULL, NULL)
    GROUP BY ALL
)
SELECT proxy_pod, sum(turns)::BIGINT AS turns, sum(failed)::BIGINT AS failed,
       sum(slow_warnings)::BIGINT AS slow_warnings, sum(lost_records)::BIGINT AS lost_records
FROM per_pod
GROUP BY proxy_pod
ORDER BY proxy_pod NULLS LAST
