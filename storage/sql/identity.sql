-- The identity of tasks: a live task is named by (type, key, version), kept in
-- taskmill.task_keys by the triggers below, so that claims and outcomes never
-- write into an index spread over every key. Units are locked by key for the
-- rules in submit.sql.

CREATE FUNCTION taskmill.bad_argument(p_message text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = p_message;
END
$$;

-- What is wrong with a (type, key), in the words of the API, or NULL.
-- STABLE, not IMMUTABLE: only then is it inlined (format() is stable), which
-- makes a check all but free.
CREATE FUNCTION taskmill.unit_problem(p_type text, p_key text) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN p_type IS NULL OR p_type = '' THEN 'type is required'
    WHEN length(p_type) > 200 THEN 'type must be at most 200 characters'
    WHEN p_key IS NULL OR p_key = '' THEN 'key is required'
    WHEN length(p_key) > 500 THEN 'key must be at most 500 characters'
  END
$$;

CREATE FUNCTION taskmill.check_unit(p_type text, p_key text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  problem text := taskmill.unit_problem(p_type, p_key);
BEGIN
  IF problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(problem);
  END IF;
END
$$;

-- The advisory lock of a (type, key). Batches take theirs in this order, so
-- that concurrent batches cannot deadlock. Inlined where it is called.
CREATE FUNCTION taskmill.unit_lock_key(p_type text, p_key text) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
  SELECT hashtextextended(p_type || E'\x1f' || p_key, 7345)
$$;

-- Submits, reschedules and cancels of one (type, key) take turns on this lock
-- until their transaction ends. Claims and outcomes use row locks only.
CREATE FUNCTION taskmill.lock_unit(p_type text, p_key text) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(taskmill.unit_lock_key(p_type, p_key))
$$;

-- The highest non-cancelled version of (type, key): its current task. In
-- PL/pgSQL its plan is kept for the session: as a SQL function it was planned
-- at every call, half of a one-task submit; made while the tables were
-- empty, it could scan them at every call once they are not, hence no
-- sequential scans. Cancelled tasks hold no key, so it is the task of the
-- unit's newest key, read by id among the live tasks first
-- (taskmill.task_by_id): a kept plan that reads the days' tables locks each
-- of them at every call.
CREATE FUNCTION taskmill.current_task(p_type text, p_key text) RETURNS taskmill.tasks
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
DECLARE
  v_task taskmill.tasks;
  v_id bigint := (SELECT k.task_id FROM taskmill.task_keys k
                   WHERE k.type = p_type AND k.key = p_key
                   ORDER BY k.version DESC LIMIT 1);
BEGIN
  IF v_id IS NOT NULL THEN
    SELECT * INTO v_task FROM taskmill.task_by_id(v_id);
  END IF;
  RETURN v_task;
END
$$;

CREATE FUNCTION taskmill.add_task_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO taskmill.task_keys (type, key, version, task_id)
  SELECT n.type, n.key, n.version, n.id FROM created n WHERE n.status <> 'cancelled';
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_created AFTER INSERT ON taskmill.tasks
  REFERENCING NEW TABLE AS created
  FOR EACH STATEMENT EXECUTE FUNCTION taskmill.add_task_keys();

CREATE FUNCTION taskmill.drop_task_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM taskmill.task_keys k USING deleted d
   WHERE k.type = d.type AND k.key = d.key AND k.version = d.version AND k.task_id = d.id;
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_deleted AFTER DELETE ON taskmill.tasks
  REFERENCING OLD TABLE AS deleted
  FOR EACH STATEMENT EXECUTE FUNCTION taskmill.drop_task_keys();

-- Cancelled tasks hold no key; a cancelled task that runs again (retry by
-- id) takes it back. Checked per row, queued only for those few rows.
CREATE FUNCTION taskmill.follow_cancel_in_task_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status = 'cancelled' THEN
    DELETE FROM taskmill.task_keys k
     WHERE k.type = OLD.type AND k.key = OLD.key AND k.version = OLD.version
       AND k.task_id = OLD.id;
  ELSE
    INSERT INTO taskmill.task_keys (type, key, version, task_id)
    VALUES (NEW.type, NEW.key, NEW.version, NEW.id);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_cancelled_or_revived AFTER UPDATE OF status ON taskmill.tasks
  FOR EACH ROW
  WHEN ((OLD.status = 'cancelled') IS DISTINCT FROM (NEW.status = 'cancelled'))
  EXECUTE FUNCTION taskmill.follow_cancel_in_task_keys();
