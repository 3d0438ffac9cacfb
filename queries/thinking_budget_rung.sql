-- question: thinking_budget_rung
-- title: What the ladder's thinking-budget rung did per model, and budgets vLLM refused
-- params: since, until, model, models
-- Per model with any: `tries` (calls the ladder made on its `thinking_budget`
-- rung, logged by the proxy or made by `analyze replay`), how many `recovered`,
-- how many the upstream `refused` (400/422), and of those how many with vLLM's
-- text for a server started without a reasoning parser (`refused_no_parser`:
-- "thinking_token_budget is set but reasoning_config is not configured");
-- `client_budgets_refused`: client requests answered 400 with that text. A rung
-- that is tried and never recovers means the deployment ignores the budget (vLLM
-- does under MTP speculative decoding, vllm-project/vllm#39573, #54906) or refuses
-- it (no `--reasoning-parser`). `since`/`until` bound the request time (ISO 8601,
-- UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a list of exact
-- names (from Python; NULL: every model). GLM models first.
WITH rung AS (
    SELECT model,
           count(*) AS tries,
           count(*) FILTER (WHERE recovered AND NOT refused) AS recovered,
           count(*) FILTER (WHERE refused) AS refused,
           count(*) FILTER (WHERE refused AND starts_with(refused_reason,
               'thinking_token_budget is set but reasoning_config is not configured')) AS refused_no_parser
    FROM ladder_attempts
    WHERE rung = 'thinking_budget' AND in_scope(ts, model, $since, $until, $model, $models)
    GROUP BY model
),
clients AS (
    SELECT model, count(*) AS client_budgets_refused
    FROM turns
    WHERE status = 400 AND contains(error, 'thinking_token_budget is set but reasoning_config is not configured')
      AND in_scope(ts, model, $since, $until, $model, $models)
    GROUP BY model
)
SELECT coalesce(r.model, c.model) AS model,
       coalesce(r.tries, 0) AS tries,
       coalesce(r.recovered, 0) AS recovered,
       coalesce(r.refused, 0) AS refused,
       coalesce(r.refused_no_parser, 0) AS refused_no_parser,
       coalesce(c.client_budgets_refused, 0) AS client_budgets_refused
FROM rung r
FULL JOIN clients c ON c.model = r.model
ORDER BY is_glm(coalesce(r.model, c.model)) DESC, coalesce(r.model, c.model)
