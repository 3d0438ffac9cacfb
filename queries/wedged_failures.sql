-- question: wedged_failures
-- title: Turns that failed inside wedged windows
-- params: since, until, model
-- Every turn that did not end `ok` while a pod serving its model was wedged (`up`
-- 1, generation counter flat, demand; table pod_windows from the metrics), with
-- the wedged pod(s) and the window's bounds. `rule_class` is what the turn would
-- have been without the window (e.g. a `tool-history-5xx` the ladder cannot fix
-- here): the class the proxy logged, else the one analyzer.online derives. Empty when no metrics were loaded. `since`/`until` bound the request
-- time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`).
SELECT t.ts, t.request_id, t.session_id, t.model, t.metric_model,
       string_agg(DISTINCT w.pod, ', ') AS pods,
       min(w.start_ts) AS window_start,
       max(w.end_ts) AS window_end,
       t.incident_class,
       CASE WHEN t.class_source = 'logged' THEN t.logged_class ELSE t.rule_class END AS rule_class, t.status, t.error_kind, left(t.error, 160) AS error,
       t.tool_history, t.latency_ms
FROM turns t
JOIN pod_windows w
  ON w.kind = 'wedged' AND w.model_name = t.metric_model
 AND coalesce(t.response_ts, t.ts) >= w.start_ts
 AND coalesce(t.response_ts, t.ts) <= w.end_ts
WHERE t.in_wedged_window AND t.incident_class <> 'ok'
  AND in_scope(t.ts, t.model, $since, $until, $model, NULL)
GROUP BY t.ts, t.request_id, t.session_id, t.model, t.metric_model, t.incident_class, t.rule_class,
         t.class_source, t.logged_class,
         t.status, t.error_kind, t.error, t.tool_history, t.latency_ms
ORDER BY t.ts, t.request_id
