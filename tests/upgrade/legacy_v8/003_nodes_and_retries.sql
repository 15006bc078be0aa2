-- Nodes of the cluster (SPEC §7) and manual retries (SPEC §8).

CREATE TABLE taskmill.nodes (
  name         text PRIMARY KEY,
  -- Changes at every start: a node that restarts under the same name is a new
  -- incarnation, and only the newest may renew the heartbeat.
  incarnation  text NOT NULL,
  address      text NOT NULL DEFAULT '',
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  leader       boolean NOT NULL DEFAULT false,
  stopped_at   timestamptz
);

-- POST /v1/tasks/{id}/retry: the task becomes pending and due now, with its
-- retries counted afresh. A running task is refused (409); so is a cancelled
-- one whose (type, key, version) has a live task again.
CREATE FUNCTION taskmill.retry(id bigint, OUT task taskmill.tasks)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
  cur taskmill.tasks;
BEGIN
  SELECT t.* INTO cur FROM taskmill.tasks t WHERE t.id = id;
  IF cur.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'no_data_found', MESSAGE = format('no task with id %s', id);
  END IF;
  PERFORM taskmill.lock_unit(cur.type, cur.key);
  SELECT t.* INTO cur FROM taskmill.tasks t WHERE t.id = id;
  IF cur.status = 'running' THEN
    RAISE EXCEPTION USING ERRCODE = 'object_in_use',
      MESSAGE = format('task %s is running; cancel it first', id);
  END IF;
  IF cur.status = 'cancelled' AND EXISTS (
       SELECT 1 FROM taskmill.tasks t
        WHERE t.type = cur.type AND t.key = cur.key AND t.version = cur.version
          AND t.status <> 'cancelled') THEN
    RAISE EXCEPTION USING ERRCODE = 'object_in_use',
      MESSAGE = format('task %s was replaced by a live task of the same version', id);
  END IF;
  UPDATE taskmill.tasks t
     SET status = 'pending', execute_at = now(), retry_count = 0,
         deadline_at = taskmill.deadline_after(now(), t.type), heartbeat_at = NULL,
         updated_at = now()
   WHERE t.id = id
  RETURNING t.* INTO task;
  PERFORM taskmill.wake_nodes();
END
$$;

-- POST /v1/batches/{batch}/retry-failed: failed and dead tasks of a batch run
-- again now. Answers how many.
CREATE FUNCTION taskmill.retry_batch(p_batch text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
BEGIN
  UPDATE taskmill.tasks t
     SET status = 'pending', execute_at = now(), retry_count = 0,
         deadline_at = taskmill.deadline_after(now(), t.type), updated_at = now()
   WHERE t.batch = p_batch AND t.status IN ('failed', 'dead');
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN
    PERFORM taskmill.wake_nodes();
  END IF;
  RETURN v_count;
END
$$;
