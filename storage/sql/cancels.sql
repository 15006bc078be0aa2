-- A running attempt that is cancelled (by id, by key, with its workflow,
-- replaced by a later firing, superseded by a higher version) is fenced at
-- once: its outcome, if it comes, changes nothing. Its executor is told
-- too: every such cancel leaves a request here, in its transaction, and
-- wakes the nodes (NOTIFY taskmill_cancels); the node that runs the attempt
-- takes it and stops the execution (actors/dispatcher.cpp).

CREATE FUNCTION taskmill.running_task_cancelled() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO taskmill.cancel_requests (task_id, attempt, node, type, key, created_at)
  VALUES (NEW.id, OLD.attempt, OLD.picked_by, OLD.type, OLD.key, now())
  ON CONFLICT DO NOTHING;
  PERFORM pg_notify('taskmill_cancels', OLD.picked_by);
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_running_cancelled AFTER UPDATE ON taskmill.tasks
  FOR EACH ROW
  WHEN (OLD.status = 'running' AND NEW.status = 'cancelled' AND OLD.picked_by IS NOT NULL)
  EXECUTE FUNCTION taskmill.running_task_cancelled();

-- Whether node p_name is alive: not stopped, and its lease of p_lease_ms
-- has not run out.
CREATE FUNCTION taskmill.node_alive(p_name text, p_lease_ms bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (SELECT FROM taskmill.nodes n
                  WHERE n.name = p_name AND n.stopped_at IS NULL
                    AND n.heartbeat_at >= now() - p_lease_ms * interval '1 ms')
$$;

-- The cancels node p_node is to deliver, taken: its own, and those of types
-- whose executor it can reach itself (p_reachable_types: HTTP) left by
-- nodes whose lease of p_lease_ms has run out. A cancel stays until its
-- delivery is told (taskmill.cancels_told): one taken but not told of is
-- taken again once its taker is gone, or after p_retry_ms (the node's
-- lease), doubled at each try up to five minutes; after ten tries it is
-- given up (and purged with the finished tasks, taskmill.sweep_purge).
CREATE FUNCTION taskmill.take_cancels(p_node text, p_reachable_types text[], p_lease_ms bigint,
                                      p_retry_ms bigint)
RETURNS TABLE (task_id bigint, attempt integer, type text, key text, node text)
LANGUAGE sql AS $$
  UPDATE taskmill.cancel_requests c
     SET taken_by = p_node, taken_at = now(), tries = c.tries + 1
   WHERE (c.node = p_node
          OR (c.type = ANY (p_reachable_types) AND NOT taskmill.node_alive(c.node, p_lease_ms)))
     AND c.tries < 10
     AND (c.taken_at IS NULL
          OR c.taken_at < now() - least(p_retry_ms * 2 ^ (c.tries - 1), 300000) * interval '1 ms'
          OR NOT taskmill.node_alive(c.taken_by, p_lease_ms))
  RETURNING c.task_id, c.attempt, c.type, c.key, c.node
$$;

-- The cancels (p_task_ids, p_attempts) whose executors were told: done.
CREATE FUNCTION taskmill.cancels_told(p_task_ids bigint[], p_attempts integer[])
RETURNS integer
LANGUAGE sql AS $$
  WITH told AS (
    DELETE FROM taskmill.cancel_requests c
     USING unnest(p_task_ids, p_attempts) AS u(task_id, attempt)
     WHERE c.task_id = u.task_id AND c.attempt = u.attempt
    RETURNING 1
  )
  SELECT count(*)::integer FROM told
$$;
