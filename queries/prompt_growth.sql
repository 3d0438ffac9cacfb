-- question: prompt_growth
-- title: Prompt tokens by turn in tool sessions, thinking on vs off (what clear_thinking would save)
-- params: since, until, model, models
-- The number to choose `clear_thinking` with: GLM's chat template replays earlier
-- turns' reasoning into the prompt unless `clear_thinking: true`, so a tool
-- session's prompt grows faster with thinking on. Per thinking mode of the request
-- (`on`, `off`: the client's `enable_thinking`; `default`: not sent, the model's
-- default) and turn of the session (`turn_index`, 1 first; 30 and later together
-- as 30), the turns of tool sessions (`sessions.tool_session`) with logged prompt
-- tokens: how many, their median and mean prompt tokens, and, per thinking mode,
-- `tokens_per_turn`, the least-squares slope of prompt tokens over the turn index
-- (how much each turn adds), and `mode_turns`, how many turns it rests on.
-- `since`/`until` bound the request time (ISO 8601, UTC), `model` is a name or a
-- LIKE pattern (`glm%`), `models` a list of exact names (from Python; NULL: every model).
WITH t AS (
    SELECT CASE WHEN t.enable_thinking THEN 'on' WHEN NOT t.enable_thinking THEN 'off' ELSE 'default' END
               AS thinking,
           t.turn_index, t.prompt_tokens
    FROM turns t
    JOIN sessions s ON s.session_id = t.session_id
    WHERE s.tool_session AND t.prompt_tokens IS NOT NULL AND t.turn_index IS NOT NULL
      AND in_scope(t.ts, t.model, $since, $until, $model, $models)
),
slopes AS (
    -- no slope when every turn has the same index (regr_slope would say NaN)
    SELECT thinking,
           CASE WHEN var_pop(turn_index) > 0 THEN regr_slope(prompt_tokens, turn_index) END AS tokens_per_turn,
           count(*) AS mode_turns
    FROM t GROUP BY thinking
)
SELECT t.thinking, least(t.turn_index, 30) AS turn_index, count(*) AS turns,
       median(t.prompt_tokens) AS median_prompt_tokens, round(avg(t.prompt_tokens)) AS mean_prompt_tokens,
       round(any_value(s.tokens_per_turn)) AS tokens_per_turn, any_value(s.mode_turns) AS mode_turns
FROM t JOIN slopes s USING (thinking)
GROUP BY t.thinking, least(t.turn_index, 30)
ORDER BY t.thinking, turn_index
