-- question: session_turns
-- title: The turns of given sessions, with the question asked and the tool calls made
-- params: since, until, model, sessions
-- Every turn of the sessions named in `sessions` (a list of session ids, e.g.
-- `--param "sessions=[s-1, s-2]"`; NULL: none), in order, with what the log says
-- besides the classification: the user's question (from the request record) and
-- the tool calls of the answer (from the response record, JSON). Log text: shown
-- as text, redacted by whoever prints it. `since`/`until` bound the request time
-- (ISO 8601, UTC; NULL: the whole session), `model` is a name or a LIKE pattern.
SELECT t.session_id, t.turn_index, t.request_id, t.ts, t.model, t.incident_class, t.evidence, t.status,
       t.recovered_at, t.latency_ms, t.error,
       coalesce(q.raw ->> '$.user_message_this_turn', q.raw ->> '$.user_question') AS question,
       p.raw -> '$.tool_calls' AS tool_calls
FROM turns t
LEFT JOIN records q ON q.type = 'request' AND q.request_id = t.request_id AND q.ts = t.ts
LEFT JOIN records p ON p.type = 'response' AND p.request_id = t.request_id AND p.ts = t.response_ts
WHERE list_contains(CAST($sessions AS VARCHAR[]), t.session_id)
  AND in_scope(t.ts, t.model, $since, $until, $model, NULL)
ORDER BY t.session_id, t.turn_index
