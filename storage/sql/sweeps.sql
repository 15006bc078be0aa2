-- The leader's watcher (SPEC §5): lost leases, timeouts, pending deadlines,
-- retention and purge, each in bounded batches. Each turns JIT off for
-- itself: behind a transaction pooler the node cannot turn it off for its
-- sessions, and a plan estimated past jit_above_cost (statistics older than
-- a burst of tasks) was compiled at every call, a second each.

-- Watcher: running tasks of nodes that are not alive (silent longer than the
-- lease, stopped, or unknown) end as failed attempts.
CREATE FUNCTION taskmill.sweep_lost(p_lease_ms bigint, p_limit integer,
                                    p_term bigint DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
  v_lost text;
  v_ids bigint[];
  v_attempts integer[];
BEGIN
  PERFORM taskmill.fence(p_term);
  FOR v_lost IN
    UPDATE taskmill.nodes n SET stopped_at = now(), leader = false
     WHERE n.stopped_at IS NULL AND n.heartbeat_at < now() - p_lease_ms * interval '1 ms'
    RETURNING n.name
  LOOP
    PERFORM taskmill.drop_offer(v_lost);
  END LOOP;
  PERFORM taskmill.drop_stale_offer_slots();
  SELECT array_agg(c.id), array_agg(c.attempt) INTO v_ids, v_attempts FROM (
    SELECT t.id, t.attempt FROM taskmill.tasks t
     WHERE t.status = 'running'
       AND NOT EXISTS (SELECT 1 FROM taskmill.nodes n
                        WHERE n.name = t.picked_by AND n.stopped_at IS NULL)
     ORDER BY t.started_at LIMIT p_limit
       FOR UPDATE OF t SKIP LOCKED) c;
  RETURN coalesce(taskmill.lose_attempts(v_ids, v_attempts, 'lost',
                                          'the node running it lost its lease'), 0);
END
$$;

-- Watcher: running tasks past their timeout, or the later deadline they
-- moved themselves to (with grace for the node's own, earlier, timeout),
-- end as failed attempts.
CREATE FUNCTION taskmill.sweep_timeouts(p_grace_ms bigint, p_limit integer,
                                        p_term bigint DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
  v_ids bigint[];
  v_attempts integer[];
BEGIN
  PERFORM taskmill.fence(p_term);
  SELECT array_agg(c.id), array_agg(c.attempt) INTO v_ids, v_attempts FROM (
    SELECT t.id, t.attempt FROM taskmill.tasks t
     WHERE t.status = 'running'
       AND t.started_at + (t.timeout_ms + p_grace_ms) * interval '1 ms' < now()
       AND NOT EXISTS (SELECT 1 FROM taskmill.task_progress p
                        WHERE p.task_id = t.id AND p.attempt = t.attempt
                          AND p.deadline_at + p_grace_ms * interval '1 ms' >= now())
     ORDER BY t.started_at LIMIT p_limit
       FOR UPDATE OF t SKIP LOCKED) c;
  RETURN coalesce(taskmill.lose_attempts(v_ids, v_attempts, 'timeout',
                                          'timed out: no outcome within the task timeout'), 0);
END
$$;

-- Watcher: running attempts of types with a heartbeat timeout that said
-- nothing (no progress report, no heartbeat) for that long since they
-- started or last reported end as failed attempts, like a lost node's; the
-- node running one is told to stop it, as for a cancel.
CREATE FUNCTION taskmill.sweep_silent(p_limit integer, p_term bigint DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
  v_silent record;
  v_ids bigint[];
  v_attempts integer[];
  v_lost integer;
BEGIN
  PERFORM taskmill.fence(p_term);
  -- Without such types (the common case) it reads no running task.
  IF NOT EXISTS (SELECT FROM taskmill.task_types y WHERE y.heartbeat_timeout_ms IS NOT NULL) THEN
    RETURN 0;
  END IF;
  SELECT array_agg(c.id), array_agg(c.attempt) INTO v_ids, v_attempts FROM (
    SELECT t.id, t.attempt FROM taskmill.tasks t
      -- The type's own settings, else the defaults (the empty type).
      LEFT JOIN taskmill.task_types own ON own.type = t.type
      JOIN taskmill.task_types y ON y.type = coalesce(own.type, '')
      LEFT JOIN taskmill.task_progress p ON p.task_id = t.id AND p.attempt = t.attempt
     WHERE t.status = 'running' AND y.heartbeat_timeout_ms IS NOT NULL
       AND greatest(t.started_at, p.reported_at)
           + y.heartbeat_timeout_ms * interval '1 ms' < now()
     ORDER BY t.started_at LIMIT p_limit
       FOR UPDATE OF t SKIP LOCKED) c;
  IF v_ids IS NULL THEN
    RETURN 0;
  END IF;
  FOR v_silent IN
    INSERT INTO taskmill.cancel_requests (task_id, attempt, node, type, key, created_at)
    SELECT t.id, t.attempt, t.picked_by, t.type, t.key, now()
      FROM taskmill.tasks t JOIN unnest(v_ids, v_attempts) AS u(id, attempt)
        ON u.id = t.id AND u.attempt = t.attempt
     WHERE t.picked_by IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING node
  LOOP
    PERFORM pg_notify('taskmill_cancels', v_silent.node);
  END LOOP;
  v_lost := taskmill.lose_attempts(v_ids, v_attempts, 'silent',
                                   'silent: no progress or heartbeat within the heartbeat timeout');
  RETURN coalesce(v_lost, 0);
END
$$;

-- Watcher: tasks still waiting after their pending deadline are dead.
CREATE FUNCTION taskmill.sweep_deadlines(p_limit integer,
                                         p_term bigint DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
  v_dead bigint[];
BEGIN
  PERFORM taskmill.fence(p_term);
  WITH expired AS (
    UPDATE taskmill.tasks t SET status = 'dead', error = 'pending deadline passed', updated_at = now()
     WHERE t.id IN (SELECT x.id FROM taskmill.tasks x
                     WHERE x.status IN ('pending', 'failed') AND x.deadline_at < now()
                     ORDER BY x.deadline_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
    RETURNING t.id)
  SELECT array_agg(e.id) INTO v_dead FROM expired e;
  IF v_dead IS NOT NULL THEN
    PERFORM taskmill.note_dead_tasks(v_dead);
  END IF;
  RETURN coalesce(cardinality(v_dead), 0);
END
$$;

-- Watcher: succeeded tasks older than the success retention are stopped,
-- moved from the successes into today's stopped day. They are found in the
-- order of their success and updated by id among the successes alone,
-- locked as found; the plan is kept, and one made while the successes were
-- few must not read them all once they are not.
CREATE FUNCTION taskmill.sweep_succeeded(p_retention_ms bigint, p_limit integer,
                                         p_term bigint DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql
SET enable_seqscan = off
SET jit = off AS $$
DECLARE
  v_stopped integer;
BEGIN
  PERFORM taskmill.fence(p_term);
  -- Moved on, not brought back (taskmill.finished_task_left).
  PERFORM set_config('taskmill.not_brought_back', 'on', true);
  WITH stopped AS (
    UPDATE taskmill.tasks t SET status = 'stopped', updated_at = now()
     WHERE t.status = 'succeeded'
       AND t.id = ANY (ARRAY(SELECT x.id FROM taskmill.tasks x
                              WHERE x.status = 'succeeded'
                                AND x.updated_at < now() - p_retention_ms * interval '1 ms'
                              ORDER BY x.updated_at LIMIT p_limit FOR UPDATE SKIP LOCKED))
    RETURNING 1)
  SELECT count(*)::integer INTO v_stopped FROM stopped;
  PERFORM set_config('taskmill.not_brought_back', '', true);
  RETURN v_stopped;
END
$$;

-- Watcher: stopped, dead and cancelled tasks older than the purge retention
-- are deleted with their history, progress, logs, edges, workflow steps
-- (their workflow remembering a failed one) and callback slots; so are workflows left
-- without steps, long-dead nodes, cancels never taken, closed firings of
-- recurring jobs and alerts (with their deliveries), and keys' starts
-- past their rate's period. Stopped tasks in a day of their own go with
-- the whole day (storage/sql/stopped_days.sql): their rows stay, what
-- refers to them goes a batch at a time. Answers the most rows
-- any of them lost, so that a full batch sends the watcher on at once.
CREATE FUNCTION taskmill.sweep_purge(p_retention_ms bigint, p_limit integer,
                                     p_term bigint DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
  v_lost integer;
BEGIN
  PERFORM taskmill.fence(p_term);
  -- A statement of its own: a day is not dropped while a statement reads it.
  PERFORM taskmill.turn_stopped_days(p_retention_ms);
  -- Deleted, not brought back (taskmill.finished_task_left).
  PERFORM set_config('taskmill.not_brought_back', 'on', true);
  WITH picked AS (
    SELECT x.id FROM (
      SELECT l.id, l.updated_at FROM (
        SELECT l.id, l.updated_at FROM taskmill.live_tasks l
         WHERE l.status IN ('dead', 'cancelled')
           AND l.updated_at < now() - p_retention_ms * interval '1 ms'
         ORDER BY l.updated_at LIMIT p_limit FOR UPDATE SKIP LOCKED) l
      UNION ALL
      SELECT u.id, u.updated_at FROM (
        SELECT u.id, u.updated_at FROM taskmill.stopped_tasks_undated u
         WHERE taskmill.stopped_days_go_whole(p_retention_ms)
           AND u.updated_at < now() - p_retention_ms * interval '1 ms'
         ORDER BY u.updated_at LIMIT p_limit FOR UPDATE SKIP LOCKED) u
      UNION ALL
      SELECT s.id, s.updated_at FROM (
        SELECT s.id, s.updated_at FROM taskmill.stopped_tasks s
         WHERE NOT taskmill.stopped_days_go_whole(p_retention_ms)
           AND s.updated_at < now() - p_retention_ms * interval '1 ms'
         ORDER BY s.updated_at LIMIT p_limit FOR UPDATE SKIP LOCKED) s) x
     ORDER BY x.updated_at LIMIT p_limit
  ),
  -- By id alone: the picked tasks are locked.
  deleted AS (
    DELETE FROM taskmill.tasks t WHERE t.id = ANY (ARRAY(SELECT p.id FROM picked p))
    RETURNING t.id, t.status),
  day_batch AS (
    SELECT b.id, b.type, b.key, b.version FROM taskmill.stopped_day_batch(p_limit) b
  ),
  -- Their keys, as the delete of a task drops them (storage/sql/identity.sql).
  day_keys AS (
    DELETE FROM taskmill.task_keys k USING day_batch b
     WHERE k.type = b.type AND k.key = b.key AND k.version = b.version AND k.task_id = b.id
  ),
  gone AS (
    SELECT d.id, d.status FROM deleted d
    UNION ALL
    SELECT b.id, 'stopped'::taskmill.task_status FROM day_batch b
  ),
  history AS (
    DELETE FROM taskmill.attempts a USING gone g WHERE a.task_id = g.id
  ),
  progress AS (
    DELETE FROM taskmill.task_progress p USING gone g WHERE p.task_id = g.id
  ),
  logs AS (
    DELETE FROM taskmill.attempt_logs l USING gone g WHERE l.task_id = g.id
  ),
  edges_to_children AS (
    DELETE FROM taskmill.task_edges e USING gone g WHERE e.parent_id = g.id
  ),
  edges_to_parents AS (
    DELETE FROM taskmill.task_edges e USING gone g WHERE e.child_id = g.id
  ),
  steps AS (
    DELETE FROM taskmill.workflow_steps s USING gone g WHERE s.task_id = g.id
    RETURNING s.workflow_id, g.status
  ),
  failed_steps AS (
    UPDATE taskmill.workflows w SET failed_steps_purged = true
     WHERE w.id IN (SELECT s.workflow_id FROM steps s WHERE s.status IN ('dead', 'cancelled'))
       AND NOT w.failed_steps_purged
  ),
  callbacks AS (
    DELETE FROM taskmill.batch_callbacks c USING gone g WHERE c.task_id = g.id
  ),
  -- Seen as they were when the statement began: a workflow whose last steps
  -- go now goes at the next sweep.
  workflows AS (
    DELETE FROM taskmill.workflows w
     WHERE w.id IN (SELECT x.id FROM taskmill.workflows x
                     WHERE x.created_at < now() - p_retention_ms * interval '1 ms'
                       AND NOT EXISTS (SELECT 1 FROM taskmill.workflow_steps s
                                        WHERE s.workflow_id = x.id)
                     ORDER BY x.created_at LIMIT p_limit)
  ),
  nodes AS (
    DELETE FROM taskmill.nodes n
     WHERE n.stopped_at < now() - p_retention_ms * interval '1 ms'
  ),
  -- Of attempts on a node that never came back, run by an executor no other
  -- node reaches; and those given up after ten tries.
  cancels AS (
    DELETE FROM taskmill.cancel_requests c
     WHERE c.created_at < now() - p_retention_ms * interval '1 ms' OR c.tries >= 10
  ),
  -- Keys whose every slot is a period old (and a minute, for a claim that
  -- began before this and counts after it) start as keys never started
  -- (storage/sql/key_rates.sql).
  key_starts AS (
    DELETE FROM taskmill.key_starts k
     WHERE (k.space, k.key) IN (
             SELECT x.space, x.key FROM taskmill.key_starts x
               LEFT JOIN taskmill.key_spaces p ON p.name = x.space
              WHERE p.rate IS NULL
                 OR (SELECT max(s) FROM unnest(x.starts) s)
                    < now() - p.rate_period_ms * interval '1 ms' - interval '1 minute'
              LIMIT p_limit)
    RETURNING 1
  ),
  firings AS (
    DELETE FROM taskmill.job_firings f
     WHERE (f.job, f.fire_at) IN (
             SELECT x.job, x.fire_at FROM taskmill.job_firings x
              WHERE NOT x.open AND x.fire_at < now() - p_retention_ms * interval '1 ms'
              ORDER BY x.fire_at LIMIT p_limit)
    RETURNING 1
  ),
  alerts AS (
    DELETE FROM taskmill.alerts a
     WHERE a.id IN (SELECT x.id FROM taskmill.alerts x
                     WHERE x.raised_at < now() - p_retention_ms * interval '1 ms'
                     ORDER BY x.raised_at LIMIT p_limit)
    RETURNING 1
  )
  SELECT greatest((SELECT count(*) FROM gone), (SELECT count(*) FROM firings),
                  (SELECT count(*) FROM alerts), (SELECT count(*) FROM key_starts))::integer
    INTO v_lost;
  PERFORM set_config('taskmill.not_brought_back', '', true);
  RETURN v_lost;
END
$$;

-- Watcher: broadcast shards still waiting for a node that is no longer alive
-- go to a live node that runs their type, preferring one that holds no shard
-- of the same firing yet; with none alive, to any node.
CREATE FUNCTION taskmill.sweep_repin(p_lease_ms bigint, p_limit integer,
                                     p_term bigint DEFAULT NULL) RETURNS integer
LANGUAGE sql
SET jit = off AS $$
  SELECT taskmill.fence(p_term);
  WITH orphans AS (
    SELECT t.id, t.type, t.batch FROM taskmill.tasks t
     WHERE t.pinned_node IS NOT NULL AND t.status IN ('pending', 'failed')
       AND NOT EXISTS (SELECT 1 FROM taskmill.nodes n
                        WHERE n.name = t.pinned_node AND n.stopped_at IS NULL
                          AND n.heartbeat_at >= now() - p_lease_ms * interval '1 ms')
     LIMIT p_limit
       FOR UPDATE OF t SKIP LOCKED
  ),
  repinned AS (
    UPDATE taskmill.tasks t
       SET pinned_node = (
             SELECT l.name FROM unnest(taskmill.nodes_running(o.type, p_lease_ms)) AS l(name)
              ORDER BY (SELECT count(*) FROM taskmill.tasks s
                         WHERE s.batch = o.batch AND s.pinned_node = l.name), l.name
              LIMIT 1),
           updated_at = now()
      FROM orphans o WHERE t.id = o.id
    RETURNING 1
  )
  SELECT count(*)::integer FROM repinned
$$;
