-- Progress of running attempts: how far each got and how many records it
-- processed and failed, reported through the API or by CAF and remote
-- executors, coalesced by the node (the latest report of each task a round,
-- actors/progress.cpp) and stored in one statement.

-- Stores the reports of attempts still running (fenced by attempt; a task
-- that ended, or runs again under a later attempt, changes nothing).
-- Answers, per report, whether it applied. A NULL progress or message keeps
-- the one reported before in the same attempt. The task's row is locked to
-- share, so that an outcome either comes after the report or is seen ended
-- by it.
CREATE FUNCTION taskmill.report_progress(p_ids bigint[], p_attempts integer[],
                                         p_progress real[], p_processed bigint[],
                                         p_failed bigint[], p_messages text[])
RETURNS TABLE (task_id bigint, applied boolean)
LANGUAGE sql AS $$
  WITH running AS (
    SELECT t.id
      FROM taskmill.tasks t
      JOIN unnest(p_ids, p_attempts) AS u(id, attempt) ON u.id = t.id AND u.attempt = t.attempt
     WHERE t.id = ANY (p_ids) AND t.status = 'running'
     ORDER BY t.id
       FOR SHARE OF t
  ),
  stored AS (
    INSERT INTO taskmill.task_progress AS p (task_id, attempt, progress, processed, failed,
                                             message, reported_at)
    SELECT u.id, u.attempt, u.progress, u.processed, u.failed, u.message, now()
      FROM unnest(p_ids, p_attempts, p_progress, p_processed, p_failed, p_messages)
           AS u(id, attempt, progress, processed, failed, message)
     WHERE u.id IN (SELECT r.id FROM running r)
    ON CONFLICT (task_id) DO UPDATE
       SET progress = CASE WHEN p.attempt = excluded.attempt
                           THEN coalesce(excluded.progress, p.progress)
                           ELSE excluded.progress END,
           message = CASE WHEN p.attempt = excluded.attempt
                          THEN coalesce(excluded.message, p.message)
                          ELSE excluded.message END,
           attempt = excluded.attempt, processed = excluded.processed,
           failed = excluded.failed, reported_at = excluded.reported_at
    RETURNING p.task_id
  )
  SELECT u.id, u.id IN (SELECT s.task_id FROM stored s) FROM unnest(p_ids) AS u(id)
$$;
