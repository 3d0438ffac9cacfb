-- table: ladder_baseline
-- title: What happened after each ladder-eligible failure, without a ladder
-- For every ladder-eligible turn (ladder_trigger set) that no ladder handled: the
-- next turn of the same session, read as the client's retry of the same turn (the
-- same user message and message count) that worked (`retried-ok`) or failed again
-- (`retried-failed`), a new question (`moved-on`), or nothing at all
-- (`session-ended`). This is the baseline the ladder must beat.
WITH ordered AS (
    SELECT t.*,
           lead(request_id) OVER w AS next_request_id,
           lead(ts) OVER w AS next_ts,
           lead(prompt_md5) OVER w AS next_prompt_md5,
           lead(message_count) OVER w AS next_message_count,
           lead(coalesce(recovered_class, incident_class)) OVER w AS next_class
    FROM turns t
    WHERE session_id IS NOT NULL
    WINDOW w AS (PARTITION BY session_id ORDER BY ts, request_id)
)
SELECT request_id, session_id, ts, model, ladder_trigger, incident_class, evidence, turn_index,
       next_request_id, next_class,
       date_diff('millisecond', ts, next_ts) AS ms_to_next_turn,
       CASE WHEN next_request_id IS NULL THEN 'session-ended'
            -- `=`, not IS NOT DISTINCT FROM: two unknown messages are not the same turn
            WHEN next_prompt_md5 = prompt_md5
                 AND next_message_count IS NOT DISTINCT FROM message_count
                 THEN CASE WHEN next_class = 'ok' THEN 'retried-ok' ELSE 'retried-failed' END
            ELSE 'moved-on'
       END AS next_step
FROM ordered
WHERE ladder_trigger IS NOT NULL AND ladder_outcome IS NULL
