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

-- The cancels node p_node is to deliver, taken: its own, and those of types
-- whose executor it can reach itself (p_reachable_types: HTTP) left by
-- nodes whose lease of p_lease_ms has run out.
CREATE FUNCTION taskmill.take_cancels(p_node text, p_reachable_types text[], p_lease_ms bigint)
RETURNS TABLE (task_id bigint, attempt integer, type text, key text, node text)
LANGUAGE sql AS $$
  DELETE FROM taskmill.cancel_requests c
   WHERE c.node = p_node
      OR (c.type = ANY (p_reachable_types)
          AND NOT EXISTS (SELECT FROM taskmill.nodes n
                           WHERE n.name = c.node AND n.stopped_at IS NULL
                             AND n.heartbeat_at >= now() - p_lease_ms * interval '1 ms'))
  RETURNING c.task_id, c.attempt, c.type, c.key, c.node
$$;
