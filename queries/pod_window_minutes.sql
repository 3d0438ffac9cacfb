-- question: pod_window_minutes
-- title: Minutes each pod spent wedged, down or asleep in the period
-- params: since, until, model
-- Per pod and kind of window (`pod_windows`: wedged, down, sleeping), the minutes
-- of its windows inside [since, until) (a window crossing a bound counts the part
-- inside). `since`/`until` bound the time (ISO 8601, UTC; NULL: the windows
-- whole), `model` matches the windows' `model_name` (a name or a LIKE pattern).
SELECT coalesce(pod, '') AS pod, kind,
       sum(epoch(least(end_ts, coalesce(CAST($until AS TIMESTAMP), end_ts)))
           - epoch(greatest(start_ts, coalesce(CAST($since AS TIMESTAMP), start_ts)))) / 60.0 AS minutes
FROM pod_windows
WHERE ($since IS NULL OR end_ts >= CAST($since AS TIMESTAMP))
  AND ($until IS NULL OR start_ts < CAST($until AS TIMESTAMP))
  AND ($model IS NULL OR model_name ILIKE $model)
GROUP BY ALL
ORDER BY pod, kind
