-- question: reasoning_findings
-- title: Answers filed as reasoning and reasoning leaked into the content, per model
-- params: since, until, model, models
-- Per model with any such turn: `answer_in_reasoning` (a 200 whose answer the
-- reasoning parser filed as reasoning: no content, the answer in
-- `reasoning_content`, sgl-project/sglang#37645), how many of those had tool
-- history (the ladder retries them) and how many a ladder recovered; the fix is the
-- deployment's reasoning parser, not a retry. `reasoning_leaked` (a think block in
-- the content the client got or would have got, vllm-project/vllm#54744), how many
-- followed a request asking for thinking off (`enable_thinking` false: the
-- template of a GLM-5.3 has no off switch, and vLLM's parser then stops
-- extracting), and `repaired`: answers whose leaked block the proxy split out
-- before passing them on (log_fields 4). `since`/`until` bound the request time
-- (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list of
-- exact names (from Python; NULL: every model). GLM models first.
SELECT model,
       count(*) FILTER (WHERE incident_class = 'answer-in-reasoning') AS answer_in_reasoning,
       count(*) FILTER (WHERE incident_class = 'answer-in-reasoning' AND tool_history) AS answer_in_reasoning_tool_history,
       count(*) FILTER (WHERE incident_class = 'answer-in-reasoning' AND recovered_at IS NOT NULL)
           AS answer_in_reasoning_recovered,
       count(*) FILTER (WHERE incident_class = 'reasoning-leaked') AS reasoning_leaked,
       count(*) FILTER (WHERE incident_class = 'reasoning-leaked' AND enable_thinking = false)
           AS leaked_after_thinking_off,
       count(*) FILTER (WHERE reasoning_repaired) AS repaired
FROM turns
WHERE in_scope(ts, model, $since, $until, $model, $models)
GROUP BY model
HAVING count(*) FILTER (WHERE incident_class IN ('answer-in-reasoning', 'reasoning-leaked') OR reasoning_repaired) > 0
ORDER BY is_glm(model) DESC, model
