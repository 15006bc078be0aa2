-- Retries by hand (SPEC §3, §8): a task, or the failed and dead tasks of a
-- batch, run again now from a fresh retry count.

-- POST /v1/tasks/{id}/retry brings back only the current version of a unit:
-- a task that a higher version superseded stays finished, or the old work
-- would run again beside (or after) the new one. A task brought back is its
-- unit's highest version again: like a submit of that version, it supersedes
-- the lower versions that have not run (one submitted after it was
-- cancelled, say). Retrying a batch re-arms only tasks no higher version has
-- superseded, taking the unit locks first, in key order as submit_batch does.
CREATE FUNCTION taskmill.retry(id bigint, OUT task taskmill.tasks)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
  cur taskmill.tasks;
  live taskmill.tasks;
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
  IF cur.status = 'pending' AND cur.execute_at = 'infinity' THEN
    RAISE EXCEPTION USING ERRCODE = 'object_in_use',
      MESSAGE = format('task %s waits for its parents; it runs when they finish', id);
  END IF;
  live := taskmill.current_task(cur.type, cur.key);
  IF live.id IS NOT NULL AND live.version > cur.version THEN
    RAISE EXCEPTION USING ERRCODE = 'object_in_use',
      MESSAGE = format('task %s was superseded by version %s (task %s)', id, live.version, live.id);
  END IF;
  IF cur.status = 'cancelled' AND live.id IS NOT NULL AND live.version = cur.version THEN
    RAISE EXCEPTION USING ERRCODE = 'object_in_use',
      MESSAGE = format('task %s was replaced by a live task of the same version (task %s)', id,
                       live.id);
  END IF;
  UPDATE taskmill.tasks t
     SET status = 'cancelled', error = format('superseded by version %s', cur.version),
         updated_at = now()
   WHERE t.id IN (SELECT k.task_id FROM taskmill.task_keys k
                   WHERE k.type = cur.type AND k.key = cur.key AND k.version < cur.version)
     AND t.status IN ('pending', 'failed');
  UPDATE taskmill.tasks t
     SET status = 'pending', execute_at = now(), retry_count = 0,
         deadline_at = taskmill.deadline_after(now(), t.type), heartbeat_at = NULL,
         updated_at = now()
   WHERE t.id = id;
  -- As the trigger left it: waiting again, if parents have not finished.
  SELECT t.* INTO task FROM taskmill.tasks t WHERE t.id = id;
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
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT taskmill.unit_lock_key(t.type, t.key) AS h
             FROM taskmill.tasks t
            WHERE t.batch = p_batch AND t.status IN ('failed', 'dead')
            ORDER BY 1) l;
  UPDATE taskmill.tasks t
     SET status = 'pending', execute_at = now(), retry_count = 0,
         deadline_at = taskmill.deadline_after(now(), t.type), updated_at = now()
   WHERE t.batch = p_batch AND t.status IN ('failed', 'dead')
     AND NOT EXISTS (SELECT 1 FROM taskmill.task_keys k
                      WHERE k.type = t.type AND k.key = t.key AND k.version > t.version);
  GET DIAGNOSTICS v_count = ROW_COUNT;
  IF v_count > 0 THEN
    PERFORM taskmill.wake_nodes();
  END IF;
  RETURN v_count;
END
$$;
