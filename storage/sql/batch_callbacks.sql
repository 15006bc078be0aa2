-- Batch callbacks (SPEC §10): a batch submit may carry on_finish, a task due
-- once every task of the batch finished, however it ended, and on_success,
-- one due once every one succeeded (cancelled, as a child of a failed
-- parent, if one ended dead or cancelled). Each is submitted after those
-- tasks (storage/sql/dependencies.sql runs them), in the batch's
-- transaction, and given the batch and its counts per status in its payload
-- when it becomes due. A job's firing has the same callbacks, and one more,
-- the task that fires its child jobs (storage/sql/child_jobs.sql).

-- A batch submit (as taskmill.submit_batch takes it) with its callbacks,
-- task objects {type, key, payload, priority, max_retries, timeout_ms}; a
-- callback's key defaults to "<batch>:on_finish" (":on_success"). The tasks
-- of the request must share one batch, which has no callback of that kind
-- yet; the callbacks wait for the current task of each unit of the request.
-- Answers submit_batch's rows, then on_finish's (ordinal n + 1) and
-- on_success's (n + 2).
CREATE FUNCTION taskmill.submit_batch_with_callbacks(
  p_types text[], p_keys text[], p_versions bigint[], p_payloads jsonb[],
  p_execute_ats timestamptz[], p_priorities integer[], p_max_retries integer[],
  p_timeouts integer[], p_backoff_kinds text[], p_backoff_bases integer[],
  p_backoff_caps integer[], p_backoff_jitters real[], p_batches text[], p_trace_ids text[],
  p_shard_indexes integer[], p_shard_totals integer[], p_afters jsonb[],
  p_on_parent_failures text[], p_on_finish jsonb, p_on_success jsonb,
  p_concurrency_keys text[] DEFAULT NULL)
RETURNS TABLE (ordinal bigint, outcome text, id bigint, type text, key text, version bigint,
               status taskmill.task_status, priority smallint, execute_at timestamptz,
               payload jsonb, result jsonb, error text, attempt integer, retry_count integer,
               max_retries integer, timeout_ms integer, backoff_kind text,
               backoff_base_ms integer, backoff_cap_ms integer, backoff_jitter real,
               deadline_at timestamptz, batch text, shard_index integer, shard_total integer,
               trace_id text, picked_by text, heartbeat_at timestamptz, started_at timestamptz,
               created_at timestamptz, updated_at timestamptz, finished_at timestamptz,
               pinned_node text, has_children boolean, parent_results jsonb, key_space text,
               concurrency_key text, key_class text)
LANGUAGE plpgsql AS $$
DECLARE
  v_batch text := p_batches[1];
  v_count bigint := cardinality(p_types);
  v_place bigint;
  v_parents jsonb;
BEGIN
  SELECT min(b.ord) INTO v_place FROM unnest(p_batches) WITH ORDINALITY AS b(batch, ord)
   WHERE b.batch IS DISTINCT FROM v_batch OR b.batch IS NULL;
  IF v_place IS NOT NULL THEN
    PERFORM taskmill.bad_argument(format(
      'tasks[%s].batch: on_finish and on_success need every task of the request in one batch',
      v_place - 1));
  END IF;
  RETURN QUERY
  SELECT * FROM taskmill.submit_batch(p_types, p_keys, p_versions, p_payloads, p_execute_ats,
                                      p_priorities, p_max_retries, p_timeouts, p_backoff_kinds,
                                      p_backoff_bases, p_backoff_caps, p_backoff_jitters,
                                      p_batches, p_trace_ids, p_shard_indexes, p_shard_totals,
                                      p_afters, p_on_parent_failures, p_concurrency_keys);
  SELECT jsonb_agg(c.id) INTO v_parents
    FROM (SELECT DISTINCT (taskmill.current_task(u.type, u.key)).id
            FROM unnest(p_types, p_keys) AS u(type, key)) c
   WHERE c.id IS NOT NULL;
  IF p_on_finish IS NOT NULL THEN
    RETURN QUERY SELECT v_count + 1, c.outcome, (c.task).*
      FROM taskmill.submit_callback(v_batch, 'on_finish', p_on_finish, v_parents) c;
  END IF;
  IF p_on_success IS NOT NULL THEN
    RETURN QUERY SELECT v_count + 2, c.outcome, (c.task).*
      FROM taskmill.submit_callback(v_batch, 'on_success', p_on_success, v_parents) c;
  END IF;
END
$$;

-- What is wrong with a callback (p_kind) given as p_spec, or NULL: a task
-- object {type, key, payload, priority, max_retries, timeout_ms}, without
-- key unless p_keyed (a firing's are keyed by the firing), NULL for none.
CREATE FUNCTION taskmill.callback_problem(p_kind text, p_spec jsonb, p_keyed boolean)
RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN p_spec IS NULL THEN NULL
    WHEN jsonb_typeof(p_spec) <> 'object' THEN format('%s must be a task object', p_kind)
    WHEN p_spec ? 'key' AND NOT p_keyed
      THEN format('%s.key: a firing''s %s is keyed by its firing (<batch>:%s)', p_kind, p_kind,
                  p_kind)
    ELSE coalesce(
      (SELECT format('%s may have only type, key, payload, priority, max_retries and '
                     'timeout_ms (not %s)', p_kind, k)
         FROM jsonb_object_keys(p_spec) k
        WHERE k NOT IN ('type', 'key', 'payload', 'priority', 'max_retries', 'timeout_ms')
        LIMIT 1),
      -- Before they are read as integers.
      (SELECT format('%s.%s must be an integer (got %s)', p_kind, f, p_spec -> f)
         FROM unnest(ARRAY['priority', 'max_retries', 'timeout_ms']) f
        WHERE p_spec ? f AND (p_spec ->> f) !~ '^-?[0-9]{1,9}$'
        LIMIT 1),
      CASE WHEN p_spec ? 'payload' AND jsonb_typeof(p_spec -> 'payload') <> 'object'
           THEN format('%s.payload must be a JSON object: the batch and its counts are added '
                       'to it', p_kind) END,
      p_kind || '.' || taskmill.task_problem(p_spec ->> 'type', coalesce(p_spec ->> 'key', 'key'),
                                             NULL, NULL, (p_spec ->> 'priority')::integer,
                                             (p_spec ->> 'max_retries')::integer,
                                             (p_spec ->> 'timeout_ms')::integer, NULL, NULL,
                                             NULL, NULL, NULL, NULL, NULL, NULL))
  END
$$;

-- One callback (p_kind) of batch p_batch, after the tasks p_parents (a JSON
-- array of ids): due once they all finished (on_finish, child_jobs), or all
-- succeeded (on_success: cancelled if one ended dead or cancelled).
CREATE FUNCTION taskmill.submit_callback(p_batch text, p_kind text, p_spec jsonb,
                                         p_parents jsonb, OUT outcome text,
                                         OUT task taskmill.tasks)
LANGUAGE plpgsql AS $$
DECLARE
  v_key text := coalesce(p_spec ->> 'key', p_batch || ':' || p_kind);
  v_problem text := taskmill.callback_problem(p_kind, p_spec, true);
  v_taken bigint;
  v_submitted record;
BEGIN
  IF p_spec IS NULL THEN
    PERFORM taskmill.bad_argument(format('%s must be a task object', p_kind));
  END IF;
  v_problem := coalesce(v_problem, CASE WHEN length(v_key) > 500
                                        THEN p_kind || '.key must be at most 500 characters' END);
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;
  PERFORM pg_advisory_xact_lock(taskmill.unit_lock_key(p_kind, p_batch));
  SELECT c.task_id INTO v_taken FROM taskmill.batch_callbacks c
   WHERE c.batch = p_batch AND c.kind = p_kind;
  IF v_taken IS NOT NULL THEN
    PERFORM taskmill.bad_argument(format('%s: batch %s has one already (task %s)', p_kind,
                                         p_batch, v_taken));
  END IF;
  SELECT s.outcome, s.task INTO v_submitted
    FROM taskmill.submit(p_spec ->> 'type', v_key, payload => coalesce(p_spec -> 'payload', '{}'),
                         priority => (p_spec ->> 'priority')::integer,
                         max_retries => (p_spec ->> 'max_retries')::integer,
                         timeout_ms => (p_spec ->> 'timeout_ms')::integer,
                         after => coalesce(p_parents, '[]'),
                         on_parent_failure => CASE WHEN p_kind = 'on_success' THEN 'fail'
                                                   ELSE 'run' END) s;
  outcome := v_submitted.outcome;
  task := v_submitted.task;
  IF outcome <> 'created' THEN
    PERFORM taskmill.bad_argument(format(
      '%s.key: task %s of type %s has the key %s already; a callback is a new task', p_kind,
      task.id, task.type, task.key));
  END IF;
  INSERT INTO taskmill.batch_callbacks (batch, kind, task_id) VALUES (p_batch, p_kind, task.id);
  -- Due at its parents' finish (taskmill.give_parent_results), or now.
  IF task.execute_at = 'infinity' THEN
    UPDATE taskmill.tasks t SET parent_results = '{}' WHERE t.id = task.id;
  ELSIF task.status = 'pending' THEN
    PERFORM taskmill.settle_callbacks(ARRAY[task.id]);
  END IF;
  SELECT t.* INTO task FROM taskmill.tasks t WHERE t.id = task.id;
END
$$;

-- The callbacks among p_ids, due now: each gets its batch and the counts of
-- its parents per status in its payload ({"batch": ..., "counts":
-- {"succeeded": n, ...}}); a child-jobs task then fires its jobs there and
-- then (taskmill.fire_child_jobs).
CREATE FUNCTION taskmill.settle_callbacks(p_ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE taskmill.tasks t
     SET payload = t.payload || jsonb_build_object('batch', c.batch, 'counts', coalesce(
           (SELECT jsonb_object_agg(n.status, n.tasks)
              FROM (SELECT p.status, count(*) AS tasks
                      FROM taskmill.task_edges e JOIN taskmill.tasks p ON p.id = e.parent_id
                     WHERE e.child_id = t.id GROUP BY p.status) n), '{}')),
         parent_results = NULL
    FROM taskmill.batch_callbacks c
   WHERE t.id = ANY (p_ids) AND c.task_id = t.id;
  PERFORM taskmill.fire_child_jobs(p_ids);
END
$$;
