-- question: wedged_episodes
-- title: Every wedged, down or sleeping window with the failed turns it explains
-- params: since, until, model, models
-- One row per pod window (`pod_windows`), in order of start: the pod, its
-- metric `model_name`, the kind (`wedged`, `down`, `sleeping`), the bounds, the
-- length in seconds, `failed_turns` (the turns classed `wedged-pod` for a wedged
-- window or `pod-down` for a down one whose response time, or request time when
-- unanswered, falls in it; each such turn counted in one window only, the
-- earliest-starting one of its kind and model, so the episodes add up to the
-- classes; a sleeping window explains none), the detail the rule wrote, and
-- `alert_at`: when the live alert would have fired (alert_fires_at,
-- queries/pod_alert_onset.sql; NULL for a sleeping window or one too short to
-- page), and `inferred`: a wedge the logs infer because the pod's gauges read 0
-- while its model's requests failed (frozen gauges), not one the metrics show
-- (the live alert, gated on those gauges, cannot see it: `alert_at` is NULL). The
-- summary's episodes (analyzer.ingestion.metrics.wedged_episodes) are these
-- rows. `since`/`until` select the windows overlapping [since, until) (naive UTC
-- timestamps, or ISO 8601 text), `model` matches the window's `model_name` (a
-- name or a LIKE pattern), `models` is a list of logged model names, mapped to
-- metric names through `model_map` (from Python; NULL: every model).
WITH w AS (
    SELECT row_number() OVER (ORDER BY start_ts, kind, pod NULLS FIRST, model_name, end_ts) AS wid, *
    FROM pod_windows
),
hit AS (
    SELECT w.wid, row_number() OVER (PARTITION BY t.request_id, t.ts ORDER BY w.wid) AS k
    FROM turns t
    JOIN w ON w.model_name = t.metric_model
          AND w.kind = CASE t.incident_class WHEN 'wedged-pod' THEN 'wedged' ELSE 'down' END
          AND coalesce(t.response_ts, t.ts) BETWEEN w.start_ts AND w.end_ts
    WHERE t.incident_class IN ('wedged-pod', 'pod-down')
),
n AS (SELECT wid, count(*) AS failed FROM hit WHERE k = 1 GROUP BY wid)
SELECT w.pod, w.model_name, w.kind, w.start_ts, w.end_ts,
       (epoch_us(w.end_ts) - epoch_us(w.start_ts)) / 1e6 AS duration_s,
       coalesce(n.failed, 0) AS failed_turns, w.detail,
       CASE WHEN w.kind IN ('wedged', 'down') AND NOT coalesce(w.inferred, false)
            THEN alert_fires_at(w.start_ts, w.end_ts) END AS alert_at,
       coalesce(w.inferred, false) AS inferred
FROM w LEFT JOIN n USING (wid)
WHERE ($models IS NULL OR w.model_name IN (
          SELECT coalesce(m.model_name, x.model)
          FROM (SELECT unnest($models) AS model) x LEFT JOIN model_map m ON m.log_model = x.model))
  AND ($model IS NULL OR w.model_name ILIKE $model)
  AND ($since IS NULL OR w.end_ts >= $since)
  AND ($until IS NULL OR w.start_ts < $until)
ORDER BY w.wid
