-- question: thinking_answers
-- title: What answered thinking turns needed: completion and answer tokens
-- params: since, until, model, models
-- Over the turns in scope: how many thinked (enable_thinking or a reasoning trace),
-- and of the answered ones (class `ok` with both reasoning and content) how many,
-- the median and 95th percentile of their completion tokens, and the 95th
-- percentile of the tokens the visible answer took (the completion tokens split
-- by the content's share of the characters). The report sizes its answer reserve
-- (and so a thinking_token_budget) from it. No row when nothing is in scope.
-- `since`/`until` bound the request time (ISO 8601, UTC), `model` is a name or a
-- LIKE pattern (`glm%`), `models` a list of exact names (from Python; NULL: every model).
WITH t AS (
    SELECT *,
           incident_class = 'ok' AND has_reasoning AND has_content
               AND completion_tokens > 0 AND content_chars > 0 AND reasoning_chars > 0 AS answered
    FROM turns
    WHERE in_scope(ts, model, $since, $until, $model, $models)
),
a AS (
    SELECT *,
           -- BIGINT: two INTEGER character counts must not add up in INT32
           CASE WHEN answered
                THEN completion_tokens * content_chars / (content_chars::BIGINT + reasoning_chars) END AS answer_tokens
    FROM t
)
SELECT count(*) FILTER (WHERE coalesce(enable_thinking, false) OR coalesce(has_reasoning, false)) AS thinking_turns,
       count(*) FILTER (WHERE answered) AS answered_turns,
       quantile_disc(completion_tokens, 0.5) FILTER (WHERE answered) AS answered_completion_p50,
       quantile_disc(completion_tokens, 0.95) FILTER (WHERE answered) AS answered_completion_p95,
       ceil(quantile_cont(answer_tokens, 0.95) FILTER (WHERE answered)) AS answer_tokens_p95
FROM a
HAVING count(*) > 0
