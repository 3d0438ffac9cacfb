-- question: error_groups
-- title: Error texts grouped, numbers normalised, engine crashes flagged
-- params: since, until, model, models
-- The proxy's error texts with what varies between occurrences taken out, so one
-- failure mode is one row: numbers become `<n>` (`Request timed out after <n>ms`),
-- ISO times `<time>`, UUIDs `<id>`, hex addresses `<addr>`; the status of
-- `Provider returned NNN:` is kept, as are digits inside names (`glm-4.6`,
-- `qwen3`) and after a `%` (URL escapes such as `%3D` stay whole, so the redactor
-- still sees `access_token%3D...`). The pattern is read from the first 200 characters. Per pattern: the
-- turns, the models and providers, the most frequent class, first and last seen,
-- and the earliest example (its request id; `records.raw` has the whole record).
-- `engine_crash` flags the texts of a vLLM engine that died, anywhere in the
-- error: `EngineCore` (vLLM's engine process), `EngineDeadError`, "engine loop
-- has died", "background loop has errored", `CUDA error`, `CUDA out of memory`,
-- `OutOfMemoryError`, `NCCL error`, "illegal memory access", "device-side
-- assert": no retry fixes these; the pod needs a restart. Crashes sort first.
-- `since`/`until` bound the request time (ISO 8601, UTC), `model` is a name or a
-- LIKE pattern (`glm%`), `models` a list of exact names (from Python; NULL: every model).
-- Each distinct text is read once (texts repeat: a month holds few of them), then
-- joined back to its turns.
WITH e AS (
    SELECT model, provider, incident_class, ts, request_id, error
    FROM turns
    WHERE error IS NOT NULL
      AND in_scope(ts, model, $since, $until, $model, $models)
),
texts AS (
    SELECT error, left(error, 200) AS head,
           regexp_matches(error, 'EngineCore|EngineDead|engine loop (has )?(died|errored|is dead)'
                                 || '|background loop (has )?errored|CUDA error|CUDA out of memory'
                                 || '|OutOfMemoryError|NCCL error|illegal memory access|device-side assert', 'i')
               AS engine_crash
    FROM (SELECT DISTINCT error FROM e)
),
patterns AS (
    SELECT head,
           CASE WHEN regexp_matches(head, '^Provider returned [0-9]{3}') THEN left(head, 21) ELSE '' END
           || regexp_replace(regexp_replace(regexp_replace(regexp_replace(
                  CASE WHEN regexp_matches(head, '^Provider returned [0-9]{3}') THEN substr(head, 22) ELSE head END,
                  '[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]+)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?',
                  '<time>', 'g'),
                  '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<id>', 'g'),
                  '0x[0-9a-fA-F]+', '<addr>', 'g'),
                  '(^|[^A-Za-z0-9_.%-])[0-9]+([.][0-9]+)?', '\1<n>', 'g') AS pattern
    FROM (SELECT DISTINCT head FROM texts)
),
p AS (
    SELECT e.model, e.provider, e.incident_class, e.ts, e.request_id, t.head, t.engine_crash, pt.pattern
    FROM e
    JOIN texts t ON t.error = e.error
    JOIN patterns pt ON pt.head = t.head
)
SELECT pattern,
       count(*) AS turns,
       count(DISTINCT head) AS distinct_texts,
       string_agg(DISTINCT model, ', ' ORDER BY model) AS models,
       string_agg(DISTINCT provider, ', ' ORDER BY provider) AS providers,
       most_frequent(histogram(incident_class)) AS main_class,
       bool_or(engine_crash) AS engine_crash,
       min(ts) AS first_ts,
       max(ts) AS last_ts,
       arg_min(request_id, ts) AS example_request_id,
       arg_min(head, ts) AS example_error
FROM p
GROUP BY pattern
ORDER BY engine_crash DESC, turns DESC, pattern
