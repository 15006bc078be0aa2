-- Attempt logs (SPEC §4, talking back): lines an execution sends for its
-- attempt, through the API or by CAF and remote executors, and the body of
-- a failed answer of an HTTP executor. The node gathers the lines of many
-- tasks and stores them in one call (actors/progress.cpp). Each attempt
-- keeps its last 1,000 lines, each cut at 4,096 characters; they go with
-- their task when it is purged.

-- Appends the lines (p_ids, p_attempts, p_lines: one entry a line, in order)
-- of attempts that are their task's latest, running or ended: lines may
-- trail their outcome, not come from an earlier attempt. Appends to one
-- task take turns, so that its lines commit in the order of their ids and
-- a reader following them (attempt_log after the last id read) misses none.
-- Answers the attempts whose lines were taken.
CREATE FUNCTION taskmill.append_logs(p_ids bigint[], p_attempts integer[], p_lines text[])
RETURNS TABLE (task_id bigint, attempt integer)
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
  v_attempts integer[];
BEGIN
  PERFORM pg_advisory_xact_lock(taskmill.unit_lock_key('taskmill.logs', u.id::text))
     FROM (SELECT DISTINCT x.id FROM unnest(p_ids) AS x(id) ORDER BY x.id) u;
  WITH taken AS (
    INSERT INTO taskmill.attempt_logs AS l (task_id, attempt, logged_at, line)
    SELECT u.id, u.attempt, now(), left(u.line, 4096)
      FROM unnest(p_ids, p_attempts, p_lines) WITH ORDINALITY AS u(id, attempt, line, n)
      JOIN taskmill.tasks t ON t.id = u.id AND t.attempt = u.attempt
     WHERE t.id = ANY (p_ids) AND t.status <> 'stopped'
     ORDER BY u.n
    RETURNING l.task_id, l.attempt
  )
  SELECT array_agg(d.task_id), array_agg(d.attempt) INTO v_ids, v_attempts
    FROM (SELECT DISTINCT k.task_id, k.attempt FROM taken k) d;
  DELETE FROM taskmill.attempt_logs l
   USING unnest(v_ids, v_attempts) AS a(task_id, attempt)
   WHERE l.task_id = a.task_id AND l.attempt = a.attempt
     AND l.id <= (SELECT x.id FROM taskmill.attempt_logs x
                   WHERE x.task_id = a.task_id AND x.attempt = a.attempt
                   ORDER BY x.id DESC OFFSET 1000 LIMIT 1);
  RETURN QUERY SELECT u.id, u.attempt FROM unnest(v_ids, v_attempts) AS u(id, attempt);
END
$$;

-- The lines of task p_id's attempts after line p_after, oldest first, at
-- most p_limit.
CREATE FUNCTION taskmill.attempt_log(p_id bigint, p_after bigint, p_limit integer)
RETURNS TABLE (id bigint, attempt integer, logged_at timestamptz, line text)
LANGUAGE sql STABLE AS $$
  SELECT l.id, l.attempt, l.logged_at, l.line FROM taskmill.attempt_logs l
   WHERE l.task_id = p_id AND l.id > p_after
   ORDER BY l.id LIMIT p_limit
$$;
