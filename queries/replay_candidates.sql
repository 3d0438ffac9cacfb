-- question: replay_candidates
-- title: The turns `analyze replay` may re-send: ladder-eligible failures, with their request record
-- params: since, until, model
-- Every turn with a `ladder_trigger` (a failure the fallback ladder addresses),
-- oldest first: its identity, session, model, origin, trigger, how many tools it
-- offered, its thinking switch, `max_tokens` and thinking budget, whether the
-- log kept its messages (`has_messages`), and `raw`, the request record as
-- logged (NULL when no request record was kept: not a full capture). `analyze
-- replay` rebuilds each payload from `raw` (analyzer.jobs.replay.plan_replay; its
-- --only-model picks the models, GLM by default). `since`/`until` bound the
-- request time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`).
SELECT t.request_id, t.ts, t.session_id, t.model, t.origin, t.ladder_trigger, t.tools_count,
       t.enable_thinking, t.max_tokens, t.thinking_token_budget, t.has_messages, r.raw
FROM turns t
LEFT JOIN records r
  ON r.type = 'request' AND r.request_id = t.request_id AND r.ts = t.ts
 AND r.session_id IS NOT DISTINCT FROM t.session_id
WHERE t.ladder_trigger IS NOT NULL
  AND in_scope(t.ts, t.model, $since, $until, $model, NULL)
ORDER BY t.ts, t.request_id
