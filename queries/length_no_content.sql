-- question: length_no_content
-- title: Turns whose reasoning used up the output budget
-- params: since, until, model, models
-- Every `length-with-no-content` turn (a 200 with no content and no tool calls,
-- stopped by the length limit): the completion cap `max_tokens` (logged by
-- analyzer.online.log_fields, null in older records), the completion tokens spent
-- and their share of the cap, the thinking budget, and the reasoning size
-- (`reasoning_chars`; with no content, completion tokens are nearly all
-- reasoning). Shows whether a bigger cap or a `thinking_token_budget` would have
-- left room for an answer. `evidence` is `inferred` where the length verdict rests
-- on token counts rather than a logged finish reason. `since`/`until` bound the
-- request time (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`),
-- `models` a list of exact names (from Python; NULL: every model).
SELECT ts, request_id, session_id, model, client, evidence, finish_reason,
       max_tokens, completion_tokens,
       CASE WHEN max_tokens > 0 THEN round(completion_tokens / max_tokens, 3) END AS share_of_cap,
       thinking_token_budget, enable_thinking, has_reasoning, reasoning_chars, content_chars,
       prompt_tokens, latency_ms, tool_history, recovered_at, recovered_class
FROM turns
WHERE incident_class = 'length-with-no-content'
  AND in_scope(ts, model, $since, $until, $model, $models)
ORDER BY ts, request_id
