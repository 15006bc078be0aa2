-- Outcomes of executions, fenced by attempt (SPEC §2), and the attempt
-- history.

-- The wait before retry number p_retry_count + 1.
CREATE FUNCTION taskmill.backoff_delay(p_kind text, p_base_ms integer, p_cap_ms integer,
                                       p_jitter real, p_retry_count integer) RETURNS interval
LANGUAGE sql VOLATILE AS $$
  SELECT make_interval(secs => greatest(0, least(p_cap_ms::float8,
           CASE WHEN p_kind = 'fixed' THEN p_base_ms::float8
                ELSE p_base_ms * power(2::float8, least(p_retry_count, 40)) END
           * (1 + p_jitter * (2 * random() - 1)))) / 1000.0)
$$;

-- SPEC §4, outcomes, as before, with the history written as above. Outcomes
-- that apply are written from the rows the update returns; only stale ones
-- (rare) read the task again. Outcomes that leave a retry for later wake the
-- nodes, which otherwise would not look before their next poll.
--
-- The plans are kept for the session: planned at every call, a batch spent
-- more time planning than writing. A kept plan does not know the batch's size, so the tasks
-- are read by id through the primary key (t.id = ANY) and joined to the
-- batch by hash: each side is read once whatever its size, where a nested
-- loop chosen for a small guess would read the batch once per task. The
-- status is named, which keeps the stopped days out of the plan; a plan
-- kept from statistics that count no task running still reads by primary
-- key, not the index of running tasks (tests/test_storage.cpp, kept_plans).
CREATE FUNCTION taskmill.complete_many(p_ids bigint[], p_attempts integer[],
                                                  p_outcomes text[], p_results jsonb[],
                                                  p_errors text[], p_node text)
RETURNS TABLE (task_id bigint, attempt integer, applied boolean, status taskmill.task_status)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_nestloop = off AS $$
DECLARE
  -- The tasks it changed: ids, attempts, statuses.
  v_ids bigint[];
  v_attempts integer[];
  v_statuses taskmill.task_status[];
  -- What the tally of running tasks gains: tasks ended, by type.
  v_tallying boolean;
  v_types text[];
  v_ended bigint[];
  -- The tasks with children that finished, and whether each ended dead.
  v_parents bigint[];
  v_parents_dead boolean[];
  -- The batch's tasks as they are after it, read when some did not change.
  v_current_ids bigint[];
  v_current_statuses taskmill.task_status[];
BEGIN
  -- Their children are settled below, once for the whole batch, not by the
  -- finish trigger a task at a time (storage/sql/dependencies.sql): the
  -- children of a fan-in would count off one row a parent.
  PERFORM set_config('taskmill.settling', 'on', true);
  -- Read first: a scope tallied later counted these tasks as running until
  -- the leader's next recount, which errs on the safe side.
  v_tallying := EXISTS (SELECT 1 FROM taskmill.running_tally);
  PERFORM set_config('taskmill.tallied', 'on', true);
  WITH updated AS (
    UPDATE taskmill.tasks t
       SET status = CASE
             WHEN i.outcome = 'succeeded' THEN 'succeeded'::taskmill.task_status
             WHEN i.outcome = 'retry' AND t.retry_count < t.max_retries THEN 'failed'
             ELSE 'dead' END,
           retry_count = t.retry_count + CASE WHEN i.outcome = 'succeeded' THEN 0 ELSE 1 END,
           error = CASE WHEN i.outcome = 'succeeded' THEN NULL ELSE i.error END,
           result = i.result,
           execute_at = CASE
             WHEN i.outcome = 'retry' AND t.retry_count < t.max_retries
               THEN now() + taskmill.backoff_delay(t.backoff_kind, t.backoff_base_ms,
                                                   t.backoff_cap_ms, t.backoff_jitter,
                                                   t.retry_count)
             ELSE t.execute_at END,
           heartbeat_at = NULL,
           finished_at = CASE WHEN i.outcome = 'succeeded' THEN now() END,
           updated_at = now()
      FROM unnest(p_ids, p_attempts, p_outcomes, p_results, p_errors)
             AS i(id, attempt, outcome, result, error)
     WHERE t.id = ANY (p_ids) AND t.id = i.id AND t.status = 'running' AND t.attempt = i.attempt
    RETURNING t.id, t.type, t.status, i.attempt, i.outcome, i.error, t.picked_by,
              t.started_at, t.has_children
  ),
  history AS (
    INSERT INTO taskmill.attempts AS a (task_id, attempt, node, started_at, finished_at,
                                        outcome, error)
    SELECT u.id, u.attempt, u.picked_by, u.started_at, now(), u.outcome, u.error
      FROM updated u WHERE u.outcome <> 'succeeded'
    ON CONFLICT ON CONSTRAINT attempts_pkey DO NOTHING
  ),
  by_type AS (
    SELECT u.type, count(*) AS n FROM updated u WHERE v_tallying GROUP BY u.type
  )
  SELECT array_agg(u.id), array_agg(u.attempt), array_agg(u.status),
         array_agg(u.id) FILTER (WHERE u.has_children AND u.status <> 'failed'),
         array_agg(u.status = 'dead') FILTER (WHERE u.has_children AND u.status <> 'failed'),
         (SELECT array_agg(b.type ORDER BY b.type) FROM by_type b),
         (SELECT array_agg(b.n ORDER BY b.type) FROM by_type b)
    INTO v_ids, v_attempts, v_statuses, v_parents, v_parents_dead, v_types, v_ended
    FROM updated u;
  PERFORM set_config('taskmill.settling', '', true);
  PERFORM set_config('taskmill.tallied', '', true);
  IF v_parents IS NOT NULL THEN
    PERFORM taskmill.settle_children(v_parents, v_parents_dead);
  END IF;
  -- A retry is due again after its backoff: the nodes set their timers anew.
  IF 'failed' = ANY (v_statuses) THEN
    PERFORM taskmill.wake_nodes();
  END IF;
  IF 'dead' = ANY (v_statuses) THEN
    PERFORM taskmill.note_dead_tasks(
      ARRAY(SELECT u.id FROM unnest(v_ids, v_statuses) AS u(id, status) WHERE u.status = 'dead'));
  END IF;

  IF coalesce(cardinality(v_ids), 0) < cardinality(p_ids) THEN
    INSERT INTO taskmill.attempts AS a (task_id, attempt, node, started_at, finished_at,
                                        outcome, error)
    SELECT i.id, i.attempt, coalesce(p_node, t.picked_by),
           CASE WHEN t.attempt = i.attempt THEN t.started_at END, now(), i.outcome, i.error
      FROM unnest(p_ids, p_attempts, p_outcomes, p_errors) AS i(id, attempt, outcome, error)
      JOIN taskmill.tasks t ON t.id = i.id AND t.id = ANY (p_ids)
     WHERE i.attempt BETWEEN 1 AND t.attempt
       -- The attempt that succeeded is in the history already, as its task.
       AND NOT (i.attempt = t.attempt AND t.finished_at IS NOT NULL)
    ON CONFLICT ON CONSTRAINT attempts_pkey DO NOTHING;
    -- What became of them is read only here: by id alone, a statement plans
    -- every day of stopped tasks, and a kept plan locks each of them and its
    -- indexes at every call, whether it reads them or not.
    SELECT array_agg(t.id), array_agg(t.status) INTO v_current_ids, v_current_statuses
      FROM taskmill.tasks t WHERE t.id = ANY (p_ids);
  END IF;
  -- Last: tally rows are taken once every task this takes is locked
  -- (storage/sql/running_tally.sql).
  IF v_tallying THEN
    PERFORM taskmill.tally_running(v_types, v_ended, true);
  END IF;

  -- An outcome of an earlier attempt beside one of the current attempt of
  -- the same task did not apply.
  RETURN QUERY
  SELECT i.id, i.attempt, u.id IS NOT NULL, coalesce(u.status, o.status)
    FROM unnest(p_ids, p_attempts) WITH ORDINALITY AS i(id, attempt, ord)
    LEFT JOIN unnest(v_ids, v_attempts, v_statuses) AS u(id, attempt, status)
      ON u.id = i.id AND u.attempt = i.attempt
    LEFT JOIN unnest(v_current_ids, v_current_statuses) AS o(id, status) ON o.id = i.id
   ORDER BY i.ord;
END
$$;

-- Executions that will not report (their node died, their time ran out) end
-- as failed attempts: failed with backoff while retries remain, else dead.
-- Answers how many changed.
CREATE FUNCTION taskmill.lose_attempts(p_ids bigint[], p_attempts integer[], p_outcome text,
                                       p_error text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_lost integer;
  v_dead bigint[];
BEGIN
  WITH input AS (
    SELECT * FROM unnest(p_ids, p_attempts) AS u(id, attempt)
  ),
  lost AS (
    UPDATE taskmill.tasks t
       SET status = CASE WHEN t.retry_count < t.max_retries THEN 'failed'::taskmill.task_status
                         ELSE 'dead' END,
           retry_count = t.retry_count + 1,
           error = p_error,
           execute_at = CASE WHEN t.retry_count < t.max_retries
                             THEN now() + taskmill.backoff_delay(t.backoff_kind, t.backoff_base_ms,
                                                                 t.backoff_cap_ms, t.backoff_jitter,
                                                                 t.retry_count)
                             ELSE t.execute_at END,
           heartbeat_at = NULL,
           updated_at = now()
      FROM input i
     WHERE t.id = i.id AND t.status = 'running' AND t.attempt = i.attempt
    RETURNING t.id, t.attempt, t.picked_by, t.started_at, t.status
  ),
  history AS (
    INSERT INTO taskmill.attempts (task_id, attempt, node, started_at, finished_at, outcome, error)
    SELECT l.id, l.attempt, l.picked_by, l.started_at, now(), p_outcome, p_error FROM lost l
    ON CONFLICT ON CONSTRAINT attempts_pkey DO NOTHING
  )
  SELECT count(*)::integer, array_agg(l.id) FILTER (WHERE l.status = 'dead')
    INTO v_lost, v_dead FROM lost l;
  IF v_dead IS NOT NULL THEN
    PERFORM taskmill.note_dead_tasks(v_dead);
  END IF;
  RETURN v_lost;
END
$$;

-- Reconciler: of these executions, the ones that are over by the database
-- (no longer running under that attempt).
CREATE FUNCTION taskmill.finished_executions(p_ids bigint[], p_attempts integer[])
RETURNS TABLE (task_id bigint, attempt integer)
LANGUAGE sql STABLE AS $$
  SELECT i.id, i.attempt FROM unnest(p_ids, p_attempts) AS i(id, attempt)
   WHERE NOT EXISTS (SELECT 1 FROM taskmill.tasks t
                      WHERE t.id = i.id AND t.status = 'running' AND t.attempt = i.attempt)
$$;

CREATE VIEW taskmill.attempt_history AS
SELECT a.task_id, a.attempt, a.node, a.started_at, a.finished_at, a.outcome, a.error
  FROM taskmill.attempts a
UNION ALL
SELECT t.id, t.attempt, t.picked_by, t.started_at, t.finished_at, 'succeeded', NULL
  FROM taskmill.tasks t
 WHERE t.status IN ('succeeded', 'stopped') AND t.finished_at IS NOT NULL;

-- A task that runs again after its success (a replacing submit, a retry by
-- id) keeps that success in the history.
CREATE FUNCTION taskmill.keep_success_in_history() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO taskmill.attempts (task_id, attempt, node, started_at, finished_at, outcome)
  VALUES (OLD.id, OLD.attempt, OLD.picked_by, OLD.started_at, OLD.finished_at, 'succeeded')
  ON CONFLICT ON CONSTRAINT attempts_pkey DO NOTHING;
  NEW.finished_at := NULL;
  RETURN NEW;
END
$$;

CREATE TRIGGER tasks_success_leaves BEFORE UPDATE ON taskmill.tasks
  FOR EACH ROW
  WHEN (OLD.finished_at IS NOT NULL AND NEW.status NOT IN ('succeeded', 'stopped'))
  EXECUTE FUNCTION taskmill.keep_success_in_history();
