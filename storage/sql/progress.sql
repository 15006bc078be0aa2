-- Progress of running attempts: how far each got and how many records it
-- processed and failed, reported through the API or by CAF and remote
-- executors, coalesced by the node (the latest report of each task a round,
-- actors/progress.cpp) and stored in one statement. A report is also the
-- attempt's heartbeat (sweep_silent) and may move its deadline; one with
-- failed records has its batch judged when it finishes.

-- The latest an attempt may move its deadline to: its type's max timeout
-- after its start, never less than its own timeout.
CREATE FUNCTION taskmill.latest_deadline(p_type text, p_started_at timestamptz,
                                         p_timeout_ms integer) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
  SELECT p_started_at + greatest(p_timeout_ms, s.max_timeout_ms) * interval '1 ms'
    FROM taskmill.type_settings(p_type) s
$$;

-- Stores the reports of attempts still running (fenced by attempt; a task
-- that ended, or runs again under a later attempt, changes nothing).
-- Answers, per report, whether it applied. A NULL progress or message keeps
-- the one reported before in the same attempt; processed and failed only
-- grow within an attempt (NULL: as before). A deadline asked for
-- (p_deadlines_in_ms from now) only moves it later, up to latest_deadline.
-- The tasks' rows are locked first (taskmill.lock_tasks), so that an
-- outcome either comes after the report or is seen ended by it.
CREATE FUNCTION taskmill.report_progress(p_ids bigint[], p_attempts integer[],
                                         p_progress real[], p_processed bigint[],
                                         p_failed bigint[], p_messages text[],
                                         p_deadlines_in_ms bigint[] DEFAULT NULL)
RETURNS TABLE (task_id bigint, applied boolean)
LANGUAGE sql AS $$
  SELECT taskmill.lock_tasks(ARRAY(SELECT DISTINCT x FROM unnest(p_ids) x ORDER BY x), true);
  WITH running AS (
    SELECT t.id, t.type, t.batch, t.started_at, t.timeout_ms
      FROM taskmill.tasks t
      JOIN unnest(p_ids, p_attempts) AS u(id, attempt) ON u.id = t.id AND u.attempt = t.attempt
     WHERE t.id = ANY (p_ids) AND t.status = 'running'
  ),
  stored AS (
    INSERT INTO taskmill.task_progress AS p (task_id, attempt, progress, processed, failed,
                                             message, reported_at, deadline_at)
    SELECT u.id, u.attempt, u.progress, coalesce(u.processed, 0), coalesce(u.failed, 0),
           u.message, now(),
           CASE WHEN u.deadline_in_ms IS NOT NULL
                THEN least(now() + u.deadline_in_ms * interval '1 ms',
                           taskmill.latest_deadline(r.type, r.started_at, r.timeout_ms)) END
      FROM unnest(p_ids, p_attempts, p_progress, p_processed, p_failed, p_messages,
                  p_deadlines_in_ms)
           AS u(id, attempt, progress, processed, failed, message, deadline_in_ms)
      JOIN running r ON r.id = u.id
    -- Merged with the row as it is now (another node's report may have
    -- changed it since this statement began).
    ON CONFLICT (task_id) DO UPDATE
       SET progress = CASE WHEN p.attempt = excluded.attempt
                           THEN coalesce(excluded.progress, p.progress) ELSE excluded.progress END,
           processed = CASE WHEN p.attempt = excluded.attempt
                            THEN greatest(p.processed, excluded.processed)
                            ELSE excluded.processed END,
           failed = CASE WHEN p.attempt = excluded.attempt
                         THEN greatest(p.failed, excluded.failed) ELSE excluded.failed END,
           message = CASE WHEN p.attempt = excluded.attempt
                          THEN coalesce(excluded.message, p.message) ELSE excluded.message END,
           deadline_at = CASE WHEN p.attempt = excluded.attempt
                              THEN greatest(p.deadline_at, excluded.deadline_at)
                              ELSE excluded.deadline_at END,
           attempt = excluded.attempt, reported_at = excluded.reported_at
    RETURNING p.task_id, p.failed
  ),
  -- A batch with failed records is judged once it finished
  -- (raise_failure_rate_alerts).
  watched AS (
    INSERT INTO taskmill.alert_batches (batch, type, created_at)
    SELECT DISTINCT ON (r.batch) r.batch, r.type, now()
      FROM stored s JOIN running r ON r.id = s.task_id
     WHERE s.failed > 0 AND r.batch IS NOT NULL
    ON CONFLICT (batch) DO NOTHING
  )
  SELECT u.id, u.id IN (SELECT s.task_id FROM stored s) FROM unnest(p_ids) AS u(id)
$$;

-- When the running attempt p_attempt of task p_id is to end, in ms from now
-- (negative once past); NULL if it is not running under that attempt.
CREATE FUNCTION taskmill.attempt_deadline(p_id bigint, p_attempt integer) RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT (extract(epoch FROM greatest(t.started_at + t.timeout_ms * interval '1 ms',
                                      p.deadline_at) - now()) * 1000)::bigint
    FROM taskmill.tasks t
    LEFT JOIN taskmill.task_progress p ON p.task_id = t.id AND p.attempt = t.attempt
   WHERE t.id = p_id AND t.attempt = p_attempt AND t.status = 'running'
$$;
