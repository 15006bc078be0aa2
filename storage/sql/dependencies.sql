-- Task dependencies (SPEC §10). A task submitted `after` others is pending
-- with execute_at 'infinity' while it waits (taskmill.task_waits keeps when
-- it is due after them), and becomes due in the transaction in which its last
-- parent finishes: a trigger on that finish, one home for every way a task
-- ends (a sweep, a cancel, a supersede); outcomes, the common way, settle
-- their whole batch at once (taskmill.complete_many).

-- Whether a status is final for the graph: the task will not run again of
-- itself.
CREATE FUNCTION taskmill.is_finished(p_status taskmill.task_status) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_status IN ('succeeded', 'dead', 'cancelled', 'stopped')
$$;

-- Locks tasks p_ids, in that order, for changes later in the transaction;
-- with p_unfinished_only, only those waiting or running (the only ones
-- that can move under the lock, read without the stopped days' tables). A
-- success's outcome moves its task into the successes' partition: a lock
-- that waited for that outcome fails then (40001, "already moved to another
-- partition") instead of following it, and is taken again, the moved
-- task's new row seen. A task moves at most twice (its success, its
-- retention).
CREATE FUNCTION taskmill.lock_tasks(p_ids bigint[], p_unfinished_only boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
SET jit = off AS $$
BEGIN
  FOR v_try IN 1..3 LOOP
    BEGIN
      IF p_unfinished_only THEN
        PERFORM 1 FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
                  JOIN taskmill.tasks t ON t.id = u.id
         WHERE t.status IN ('pending', 'failed', 'running')
         ORDER BY u.ord FOR NO KEY UPDATE OF t;
      ELSE
        PERFORM 1 FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
                  JOIN taskmill.tasks t ON t.id = u.id
         ORDER BY u.ord FOR NO KEY UPDATE OF t;
      END IF;
      RETURN;
    EXCEPTION WHEN serialization_failure THEN
      IF v_try = 3 THEN
        RAISE;
      END IF;
    END;
  END LOOP;
END
$$;

-- The parents named by a submit's `after`: a JSON array of task ids, or of
-- objects {"id"} or {"type", "key"} (the unit's current task), each with an
-- optional "on_failure" overriding p_on_failure. Refuses, naming the field,
-- anything else, a task that does not exist, and a parent named twice;
-- p_where leads the field names (a batch names the task: "tasks[3].").
CREATE FUNCTION taskmill.parent_refs(p_after jsonb, p_on_failure text, p_where text DEFAULT '')
RETURNS TABLE (parent_id bigint, on_failure text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_ref jsonb;
  v_at text;
  v_policy text;
  v_ids bigint[] := '{}';
  v_policies text[] := '{}';
  v_twice text;
BEGIN
  IF p_on_failure NOT IN ('fail', 'run', 'skip') THEN
    PERFORM taskmill.bad_argument(format(
      '%son_parent_failure must be one of fail, run, skip (got "%s")', p_where, p_on_failure));
  END IF;
  IF jsonb_typeof(p_after) IS DISTINCT FROM 'array' THEN
    PERFORM taskmill.bad_argument(format(
      '%safter must be an array of task ids or {"type", "key"} references', p_where));
  END IF;
  IF jsonb_array_length(p_after) > 10000 THEN
    PERFORM taskmill.bad_argument(format('%safter may name at most 10000 tasks', p_where));
  END IF;
  FOR i IN 0 .. jsonb_array_length(p_after) - 1 LOOP
    v_ref := p_after -> i;
    v_at := format('%safter[%s]', p_where, i);
    v_policy := taskmill.edge_policy(v_ref, '{id,type,key}', p_on_failure, v_at);
    v_ids := v_ids || taskmill.parent_id(v_ref, v_at);
    v_policies := v_policies || v_policy;
  END LOOP;
  -- Once, after the loop: a search of the ids so far at each reference cost
  -- a fan-in of 10,000 parents seconds.
  SELECT format('%safter[%s] names task %s a second time', p_where, d.second - 1, d.id)
    INTO v_twice
    FROM (SELECT u.id, (array_agg(u.n ORDER BY u.n))[2] AS second
            FROM unnest(v_ids) WITH ORDINALITY AS u(id, n)
           GROUP BY u.id HAVING count(*) > 1) d
   ORDER BY d.second LIMIT 1;
  IF v_twice IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_twice);
  END IF;
  RETURN QUERY SELECT * FROM unnest(v_ids, v_policies);
END
$$;

-- The policy of one reference of `after` (at p_at): its "on_failure" if it
-- is an object that has one, else p_default. An object may have only the
-- fields p_fields and on_failure.
CREATE FUNCTION taskmill.edge_policy(p_ref jsonb, p_fields text[], p_default text, p_at text)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF jsonb_typeof(p_ref) <> 'object' THEN
    RETURN p_default;
  END IF;
  IF EXISTS (SELECT FROM jsonb_object_keys(p_ref) k WHERE k <> ALL (p_fields || 'on_failure'::text)) THEN
    PERFORM taskmill.bad_argument(format('%s may have only %s and on_failure', p_at,
                                         array_to_string(p_fields, ', ')));
  END IF;
  IF NOT p_ref ? 'on_failure' THEN
    RETURN p_default;
  END IF;
  IF p_ref ->> 'on_failure' IS NULL OR p_ref ->> 'on_failure' NOT IN ('fail', 'run', 'skip') THEN
    PERFORM taskmill.bad_argument(format(
      '%s.on_failure must be one of fail, run, skip (got %s)', p_at, p_ref -> 'on_failure'));
  END IF;
  RETURN p_ref ->> 'on_failure';
END
$$;

-- The task one reference of `after` names (its place: p_at).
CREATE FUNCTION taskmill.parent_id(p_ref jsonb, p_at text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_id bigint;
BEGIN
  IF jsonb_typeof(p_ref) = 'object' AND p_ref ? 'id' THEN
    IF p_ref ? 'type' OR p_ref ? 'key' THEN
      PERFORM taskmill.bad_argument(format('%s names a task by id or by type and key, not both', p_at));
    END IF;
    p_ref := p_ref -> 'id';
    p_at := p_at || '.id';
  END IF;
  IF jsonb_typeof(p_ref) = 'number' THEN
    IF p_ref::text !~ '^[0-9]{1,18}$' THEN
      PERFORM taskmill.bad_argument(format('%s must be a task id (got %s)', p_at, p_ref));
    END IF;
    SELECT t.id INTO v_id FROM taskmill.tasks t WHERE t.id = p_ref::text::bigint;
    IF v_id IS NULL THEN
      PERFORM taskmill.bad_argument(format('%s: no task %s', p_at, p_ref));
    END IF;
    RETURN v_id;
  END IF;
  IF jsonb_typeof(p_ref) <> 'object' OR jsonb_typeof(p_ref -> 'type') IS DISTINCT FROM 'string'
     OR jsonb_typeof(p_ref -> 'key') IS DISTINCT FROM 'string' THEN
    PERFORM taskmill.bad_argument(format(
      '%s must be a task id or {"type", "key"} (got %s)', p_at, p_ref));
  END IF;
  v_id := (taskmill.current_task(p_ref ->> 'type', p_ref ->> 'key')).id;
  IF v_id IS NULL THEN
    PERFORM taskmill.bad_argument(format('%s: no task of type %s with key %s', p_at,
                                         p_ref -> 'type', p_ref -> 'key'));
  END IF;
  RETURN v_id;
END
$$;

-- Locks the parents of a task being submitted, in id order (two submits of
-- children cannot deadlock), and reads their statuses as they are once
-- locked: a parent that finishes meanwhile is seen finished, one that has
-- not cannot finish before this transaction ends, and by then its children
-- are marked. Answers the parents in id order with their statuses and
-- policies, and how the task begins among them: cancelled by a failed
-- parent (fail), stopped without running (skip), or pending, waiting for
-- parents_left of them.
CREATE FUNCTION taskmill.lock_parents(p_ids bigint[], p_policies text[], OUT ids bigint[],
                                      OUT statuses taskmill.task_status[], OUT policies text[],
                                      OUT status taskmill.task_status, OUT error text,
                                      OUT parents_left integer)
LANGUAGE plpgsql AS $$
DECLARE
  -- The first parent that ended dead or cancelled on an edge that fails the
  -- task, and on one that skips it.
  v_failed bigint;
  v_skipped bigint;
BEGIN
  PERFORM taskmill.lock_tasks(ARRAY(SELECT x FROM unnest(p_ids) x ORDER BY x));
  SELECT array_agg(l.id ORDER BY l.id), array_agg(l.status ORDER BY l.id),
         array_agg(r.policy ORDER BY l.id)
    INTO ids, statuses, policies
    FROM (SELECT t.id, t.status FROM taskmill.tasks t WHERE t.id = ANY (p_ids)) l
    JOIN unnest(p_ids, p_policies) AS r(id, policy) ON r.id = l.id;
  IF coalesce(cardinality(ids), 0) < cardinality(p_ids) THEN
    PERFORM taskmill.bad_argument(format('after: task %s no longer exists',
      (SELECT min(x) FROM unnest(p_ids) x WHERE x <> ALL (coalesce(ids, '{}')))));
  END IF;
  SELECT min(u.id) FILTER (WHERE u.policy = 'fail'), min(u.id) FILTER (WHERE u.policy = 'skip')
    INTO v_failed, v_skipped
    FROM unnest(ids, statuses, policies) AS u(id, status, policy)
   WHERE u.status IN ('dead', 'cancelled');
  status := CASE WHEN v_failed IS NOT NULL THEN 'cancelled'
                 WHEN v_skipped IS NOT NULL THEN 'stopped' ELSE 'pending' END;
  IF v_failed IS NOT NULL THEN
    error := format('parent %s ended %s', v_failed, statuses[array_position(ids, v_failed)]);
  ELSIF v_skipped IS NOT NULL THEN
    error := format('skipped: parent %s ended %s', v_skipped,
                    statuses[array_position(ids, v_skipped)]);
  END IF;
  SELECT count(*) INTO parents_left FROM unnest(statuses) s WHERE NOT taskmill.is_finished(s);
END
$$;

-- Records the edges of a task just submitted after its (locked) parents,
-- and, while it waits, when it is due after them.
CREATE FUNCTION taskmill.link_parents(p_child bigint, p_ids bigint[],
                                      p_statuses taskmill.task_status[], p_policies text[],
                                      p_parents_left integer, p_execute_at timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO taskmill.task_edges (parent_id, child_id, on_failure, done)
  SELECT u.id, p_child, u.policy, taskmill.is_finished(u.status)
    FROM unnest(p_ids, p_statuses, p_policies) AS u(id, status, policy);
  UPDATE taskmill.tasks t SET has_children = true
   WHERE t.id = ANY (p_ids) AND NOT t.has_children AND NOT taskmill.is_finished(t.status);
  IF p_parents_left > 0 THEN
    INSERT INTO taskmill.task_waits (task_id, parents_left, execute_at)
    VALUES (p_child, p_parents_left, p_execute_at);
  END IF;
END
$$;

-- Ends the waiting children a failed parent fails (cancelled) or skips
-- (stopped), with the parent named; answers those with children of their
-- own, and whether each ended failed, for the next round of the walk. Rows
-- are found by id (= ANY): the tables' sizes are not known to the plan.
CREATE FUNCTION taskmill.end_children(p_children bigint[], p_fail bigint[], p_skip bigint[],
                                      OUT ids bigint[], OUT failed boolean[])
LANGUAGE plpgsql AS $$
BEGIN
  WITH ended AS (
    UPDATE taskmill.tasks t
       SET status = CASE WHEN s.fail IS NOT NULL THEN 'cancelled'
                         ELSE 'stopped' END::taskmill.task_status,
           error = format(CASE WHEN s.fail IS NOT NULL THEN 'parent %s ended %s'
                               ELSE 'skipped: parent %s ended %s' END,
                          p.id, p.status),
           execute_at = w.execute_at, updated_at = now()
      FROM unnest(p_children, p_fail, p_skip) AS s(child_id, fail, skip)
      JOIN taskmill.tasks p ON p.id = coalesce(s.fail, s.skip)
      JOIN taskmill.task_waits w ON w.task_id = s.child_id
     WHERE t.id = ANY (p_children) AND w.task_id = ANY (p_children)
       AND p.id = ANY (p_fail || p_skip) AND t.id = s.child_id
       AND t.status = 'pending' AND t.execute_at = 'infinity'
    RETURNING t.id, t.status, t.has_children
  )
  SELECT coalesce(array_agg(e.id), '{}'), coalesce(array_agg(e.status = 'cancelled'), '{}')
    INTO ids, failed
    FROM ended e WHERE e.has_children;
  DELETE FROM taskmill.task_waits w
   WHERE w.task_id = ANY (p_children)
     AND w.task_id IN (SELECT s.child_id
                         FROM unnest(p_children, p_fail, p_skip) AS s(child_id, fail, skip)
                        WHERE s.fail IS NOT NULL OR s.skip IS NOT NULL);
END
$$;

-- Counts parents off the other children's waits (p_counted each); a child
-- with none left is due (at the time it was submitted with, or now), and a
-- workflow step is given its parents' results. Answers how many became due
-- now, and the steps that ended dead instead (taskmill.give_parent_results).
CREATE FUNCTION taskmill.count_off_parents(p_children bigint[], p_counted integer[],
                                           OUT due integer, OUT ended bigint[])
LANGUAGE plpgsql AS $$
DECLARE
  -- Waits with no parent left: their tasks are due (or were brought back
  -- by hand meanwhile, and are not waiting).
  v_over bigint[];
  v_steps bigint[];
BEGIN
  WITH counted AS (
    UPDATE taskmill.task_waits w SET parents_left = w.parents_left - s.counted
      FROM unnest(p_children, p_counted) AS s(child_id, counted)
     WHERE w.task_id = ANY (p_children) AND w.task_id = s.child_id AND s.counted > 0
    RETURNING w.task_id, w.parents_left, w.execute_at
  ),
  none_left AS (
    SELECT c.task_id FROM counted c WHERE c.parents_left = 0
  ),
  released AS (
    UPDATE taskmill.tasks t
       SET execute_at = greatest(c.execute_at, now()),
           deadline_at = taskmill.deadline_after(greatest(c.execute_at, now()), t.type),
           updated_at = now()
      FROM counted c
     WHERE t.id = ANY (p_children) AND t.id = c.task_id AND c.parents_left = 0
       AND t.status = 'pending' AND t.execute_at = 'infinity'
    RETURNING t.id, t.execute_at, t.parent_results IS NOT NULL AS step
  )
  SELECT (SELECT coalesce(array_agg(n.task_id), '{}') FROM none_left n),
         (SELECT count(*) FILTER (WHERE r.execute_at <= now()) FROM released r),
         (SELECT coalesce(array_agg(r.id) FILTER (WHERE r.step), '{}') FROM released r)
    INTO v_over, due, v_steps;
  IF cardinality(v_over) > 0 THEN
    DELETE FROM taskmill.task_waits w WHERE w.task_id = ANY (v_over);
  END IF;
  ended := '{}';
  IF cardinality(v_steps) > 0 THEN
    ended := taskmill.give_parent_results(v_steps);
  END IF;
END
$$;

-- Counts the finish of the parents p_ids (p_failed: ended dead or cancelled)
-- for their children, and so on down the graph: a child whose last parent
-- finished becomes due; one a failed parent fails is cancelled, one it skips
-- is stopped, each in turn a finished parent. Each edge counts once. The
-- tasks it ends fire the finish trigger, which leaves them to this walk.
CREATE FUNCTION taskmill.settle_children(p_ids bigint[], p_failed boolean[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[] := p_ids;
  v_failed boolean[] := p_failed;
  -- Per child of this round: parents counted, and the first parent that
  -- fails it or skips it.
  v_children bigint[];
  v_counted integer[];
  v_fail bigint[];
  v_skip bigint[];
  -- Whether a failed parent ends any of them.
  v_some_end boolean;
  v_due integer;
  v_ended bigint[];
  -- A walk may start within another's (taskmill.fire_child_jobs).
  v_outer text := current_setting('taskmill.settling', true);
BEGIN
  -- A snapshot older than the statement would miss children submitted since.
  IF current_setting('transaction_isolation') <> 'read committed' THEN
    RAISE EXCEPTION USING ERRCODE = 'feature_not_supported', MESSAGE =
      'a task with children finishes only in a read committed transaction';
  END IF;
  PERFORM set_config('taskmill.settling', 'on', true);
  WHILE cardinality(v_ids) > 0 LOOP
    WITH counted AS (
      UPDATE taskmill.task_edges e SET done = true
        FROM unnest(v_ids, v_failed) AS p(id, failed)
       WHERE e.parent_id = ANY (v_ids) AND e.parent_id = p.id AND NOT e.done
      RETURNING e.child_id, p.id AS parent_id, p.failed, e.on_failure
    )
    SELECT coalesce(array_agg(c.child_id), '{}'), array_agg(c.counted), array_agg(c.fail),
           array_agg(c.skip), coalesce(bool_or(c.fail IS NOT NULL OR c.skip IS NOT NULL), false)
      INTO v_children, v_counted, v_fail, v_skip, v_some_end
      FROM (SELECT e.child_id,
                   count(*) FILTER (WHERE NOT e.failed OR e.on_failure = 'run') AS counted,
                   min(e.parent_id) FILTER (WHERE e.failed AND e.on_failure = 'fail') AS fail,
                   min(e.parent_id) FILTER (WHERE e.failed AND e.on_failure = 'skip') AS skip
              FROM counted e GROUP BY e.child_id) c;
    EXIT WHEN cardinality(v_children) = 0;
    v_ids := '{}';
    v_failed := '{}';
    IF v_some_end THEN
      SELECT e.ids, e.failed INTO v_ids, v_failed
        FROM taskmill.end_children(v_children, v_fail, v_skip) e;
    END IF;
    SELECT c.due, c.ended INTO v_due, v_ended
      FROM taskmill.count_off_parents(v_children, v_counted) c;
    IF v_due > 0 THEN
      PERFORM taskmill.wake_nodes();
    END IF;
    v_ids := v_ids || v_ended;
    v_failed := v_failed || array_fill(true, ARRAY[cardinality(v_ended)]);
  END LOOP;
  PERFORM set_config('taskmill.settling', coalesce(v_outer, ''), true);
END
$$;

-- A task finished: its children are settled, and, if it was waiting for
-- parents itself (cancelled, say), its wait is over and it shows the time it
-- was to be due. A success arrives among the successes as an insert there
-- (its update is a delete among the live tasks), which fires no update
-- trigger; it waited for no parent.
CREATE FUNCTION taskmill.task_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('taskmill.settling', true) = 'on' THEN
    RETURN NULL;
  END IF;
  IF TG_OP = 'UPDATE' AND OLD.execute_at = 'infinity' THEN
    WITH waited AS (
      DELETE FROM taskmill.task_waits w WHERE w.task_id = NEW.id RETURNING w.execute_at
    )
    UPDATE taskmill.tasks t SET execute_at = waited.execute_at
      FROM waited WHERE t.id = NEW.id;
  END IF;
  IF NEW.has_children THEN
    PERFORM taskmill.settle_children(ARRAY[NEW.id], ARRAY[NEW.status IN ('dead', 'cancelled')]);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_finished AFTER UPDATE ON taskmill.tasks
  FOR EACH ROW
  WHEN (NEW.status IN ('succeeded', 'dead', 'cancelled', 'stopped')
        AND OLD.status NOT IN ('succeeded', 'dead', 'cancelled', 'stopped')
        AND (NEW.has_children OR OLD.execute_at = 'infinity'))
  EXECUTE FUNCTION taskmill.task_finished();

CREATE TRIGGER succeeded_tasks_finished AFTER INSERT ON taskmill.succeeded_tasks
  FOR EACH ROW WHEN (NEW.has_children)
  EXECUTE FUNCTION taskmill.task_finished();

-- A finished task brought back (a retry, a replacing submit, a reschedule of
-- a dead task) waits again for those of its parents that have not finished,
-- locked as a submit locks them; its children still waiting for others wait
-- for it again too. A step is given its parents' results here unless the
-- caller brings back several at once (taskmill.rearming), and gives them once
-- all are waiting (taskmill.retry_workflow).
CREATE FUNCTION taskmill.rearm_task(p_task taskmill.tasks) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_left integer;
BEGIN
  IF p_task.has_children THEN
    WITH reopened AS (
      UPDATE taskmill.task_edges e SET done = false
        FROM taskmill.task_waits w
       WHERE e.parent_id = p_task.id AND e.done AND w.task_id = e.child_id
      RETURNING e.child_id
    )
    UPDATE taskmill.task_waits w SET parents_left = w.parents_left + 1
      FROM reopened r WHERE w.task_id = r.child_id;
  END IF;
  PERFORM taskmill.lock_tasks(ARRAY(SELECT e.parent_id FROM taskmill.task_edges e
                                     WHERE e.child_id = p_task.id AND NOT e.done
                                     ORDER BY e.parent_id));
  SELECT count(*) INTO v_left FROM taskmill.task_edges e WHERE e.child_id = p_task.id AND NOT e.done;
  IF v_left > 0 THEN
    INSERT INTO taskmill.task_waits (task_id, parents_left, execute_at)
    VALUES (p_task.id, v_left, p_task.execute_at)
    ON CONFLICT (task_id) DO UPDATE
      SET parents_left = EXCLUDED.parents_left, execute_at = EXCLUDED.execute_at;
    UPDATE taskmill.tasks t SET execute_at = 'infinity', deadline_at = NULL WHERE t.id = p_task.id;
  ELSIF p_task.parent_results IS NOT NULL
        AND current_setting('taskmill.rearming', true) IS DISTINCT FROM 'on' THEN
    PERFORM taskmill.give_parent_results(ARRAY[p_task.id]);
  END IF;
END
$$;

CREATE FUNCTION taskmill.task_rearmed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM taskmill.rearm_task(NEW);
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_rearmed AFTER UPDATE ON taskmill.tasks
  FOR EACH ROW
  WHEN (OLD.status IN ('succeeded', 'dead', 'cancelled') AND NEW.status = 'pending')
  EXECUTE FUNCTION taskmill.task_rearmed();

-- A success or a stopped task brought back leaves its partition: its
-- update is a delete there and an insert among the live tasks, which fire
-- no update trigger. Not where the transaction set taskmill.not_brought_back:
-- the purge's deletes (taskmill.sweep_purge) and the successes the
-- retention moves on (taskmill.sweep_succeeded).
CREATE FUNCTION taskmill.finished_task_left() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_task taskmill.tasks;
BEGIN
  SELECT t.* INTO v_task FROM taskmill.live_tasks t WHERE t.id = OLD.id AND t.status = 'pending';
  IF FOUND THEN
    PERFORM taskmill.rearm_task(v_task);
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER stopped_tasks_left AFTER DELETE ON taskmill.stopped_tasks
  FOR EACH ROW WHEN (current_setting('taskmill.not_brought_back', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION taskmill.finished_task_left();

CREATE TRIGGER succeeded_tasks_left AFTER DELETE ON taskmill.succeeded_tasks
  FOR EACH ROW WHEN (current_setting('taskmill.not_brought_back', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION taskmill.finished_task_left();

-- The parents a waiting task still waits for (at most p_limit of them), and
-- how many there are.
CREATE FUNCTION taskmill.unfinished_parents(p_id bigint, p_limit integer,
                                            OUT ids bigint[], OUT total integer)
LANGUAGE sql STABLE AS $$
  SELECT (array_agg(e.parent_id ORDER BY e.parent_id))[1:p_limit], count(*)::integer
    FROM taskmill.task_edges e WHERE e.child_id = p_id AND NOT e.done
$$;
