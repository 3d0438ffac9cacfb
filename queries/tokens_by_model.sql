-- question: tokens_by_model
-- title: Tokens per model
-- params: since, until, model, models
-- How much each model was asked to read and write: per model, the turns, the
-- turns whose response carried the provider's usage object, and over those the
-- sums of prompt, completion and cached prompt tokens (BIGINT-safe sums: a
-- production week is billions of tokens), the mean prompt and completion tokens
-- per turn, and the 95th percentile of completion tokens. Providers that the
-- model was served by are listed. `since`/`until` bound the request time
-- (ISO 8601, UTC), `model` is a name or a LIKE pattern (`glm%`), `models` a
-- list of exact names (from Python; NULL: every model).
SELECT model,
       string_agg(DISTINCT provider, ', ' ORDER BY provider) AS providers,
       count(*) AS turns,
       count(*) FILTER (WHERE prompt_tokens IS NOT NULL OR completion_tokens IS NOT NULL) AS turns_with_usage,
       CAST(coalesce(sum(prompt_tokens), 0) AS HUGEINT) AS prompt_tokens,
       CAST(coalesce(sum(completion_tokens), 0) AS HUGEINT) AS completion_tokens,
       CAST(coalesce(sum(cached_tokens), 0) AS HUGEINT) AS cached_tokens,
       CAST(coalesce(sum(prompt_tokens), 0) + coalesce(sum(completion_tokens), 0) AS HUGEINT) AS total_tokens,
       round(avg(prompt_tokens)) AS mean_prompt_tokens,
       round(avg(completion_tokens)) AS mean_completion_tokens,
       round(quantile_cont(completion_tokens, 0.95)) AS p95_completion_tokens
FROM turns
WHERE in_scope(ts, model, $since, $until, $model, $models)
GROUP BY model
ORDER BY total_tokens DESC, turns DESC, model
