-- Submit, reschedule and cancel (SPEC §3): the rules a node and a business
-- transaction share, with their defaults from the types' settings
-- (type_settings.sql); retries are in retry.sql.

-- A W3C trace-id for a task submitted without one: 128 random bits as 32
-- lowercase hex digits, from random() (seeded from a strong source at its
-- first use in the session, unless the session chose a seed by setseed()).
-- A trace-id names a trace and guards nothing; gen_random_uuid() drew its
-- bits from OpenSSL, at more than twice the cost.
CREATE FUNCTION taskmill.new_trace_id() RETURNS text
LANGUAGE sql VOLATILE AS $$
  SELECT lpad(to_hex(floor(random() * 4294967296)::bigint), 8, '0')
         || lpad(to_hex(floor(random() * 4294967296)::bigint), 8, '0')
         || lpad(to_hex(floor(random() * 4294967296)::bigint), 8, '0')
         || lpad(to_hex(floor(random() * 4294967296)::bigint), 8, '0')
$$;

CREATE FUNCTION taskmill.wake_nodes() RETURNS void
LANGUAGE sql AS $$
  SELECT pg_notify('taskmill_tasks', '')
$$;

-- What is wrong with the fields of a task, in the words of the API, or NULL
-- (unset fields are NULL). The one home of these rules: taskmill.submit and
-- the node's batch submits, and so the HTTP API, accept and refuse the same.
CREATE FUNCTION taskmill.task_problem(
  p_type text, p_key text, p_version bigint, p_execute_at timestamptz, p_priority integer,
  p_max_retries integer, p_timeout_ms integer, p_backoff_kind text, p_backoff_base_ms integer,
  p_backoff_cap_ms integer, p_backoff_jitter real, p_batch text, p_trace_id text,
  p_shard_index integer, p_shard_total integer) RETURNS text
-- STABLE, so that it is inlined into the batch statement (see unit_problem).
LANGUAGE sql STABLE AS $$
  SELECT coalesce(taskmill.unit_problem(p_type, p_key), CASE
    -- taskmill's own tasks (storage/sql/child_jobs.sql) are submitted by it alone.
    WHEN p_type LIKE 'taskmill.%' AND current_setting('taskmill.own_task', true) IS DISTINCT FROM 'on'
      THEN 'type: names that start with "taskmill." are taskmill''s own'
    WHEN p_version < 0 THEN 'version must be 0 or more'
    WHEN p_execute_at < '0001-01-01 00:00:00+00' OR p_execute_at >= '10000-01-01 00:00:00+00'
      THEN 'execute_at must be a time between years 1 and 9999'
    WHEN p_priority NOT BETWEEN 1 AND 5
      THEN format('priority must be between 1 and 5 (got %s)', p_priority)
    WHEN p_max_retries NOT BETWEEN 0 AND 1000 THEN 'max_retries must be between 0 and 1000'
    WHEN p_timeout_ms NOT BETWEEN 1 AND 604800000 THEN 'timeout_ms must be between 1 and 604800000'
    WHEN p_backoff_kind NOT IN ('fixed', 'exponential')
      THEN format('backoff.kind must be one of fixed, exponential (got "%s")', p_backoff_kind)
    WHEN p_backoff_base_ms < 1 THEN 'backoff.base_ms must be positive'
    WHEN p_backoff_cap_ms < 1 THEN 'backoff.cap_ms must be positive'
    WHEN NOT p_backoff_jitter BETWEEN 0 AND 1 THEN 'backoff.jitter must be between 0 and 1'
    WHEN p_batch = '' OR length(p_batch) > 200 THEN 'batch must be 1 to 200 characters'
    WHEN p_trace_id !~ '^[0-9a-f]{32}$' OR p_trace_id = repeat('0', 32)
      THEN 'trace_id must be 32 lowercase hex digits, not all zero (W3C trace-id)'
    WHEN (p_shard_index IS NULL) <> (p_shard_total IS NULL)
      THEN 'shard_index and shard_total go together'
    WHEN p_shard_total NOT BETWEEN 1 AND 10000 THEN 'shard_total must be between 1 and 10000'
    WHEN p_shard_index < 0 OR p_shard_index >= p_shard_total
      THEN 'shard_index must be at least 0 and less than shard_total'
  END)
$$;

-- SPEC §3, submit. Outcome: created | replaced | duplicate | stale.
CREATE FUNCTION taskmill.submit(
  type text, key text, version bigint DEFAULT 0, payload jsonb DEFAULT NULL,
  execute_at timestamptz DEFAULT NULL, priority integer DEFAULT NULL,
  max_retries integer DEFAULT NULL, timeout_ms integer DEFAULT NULL,
  backoff_kind text DEFAULT NULL, backoff_base_ms integer DEFAULT NULL,
  backoff_cap_ms integer DEFAULT NULL, backoff_jitter real DEFAULT NULL,
  batch text DEFAULT NULL, trace_id text DEFAULT NULL,
  shard_index integer DEFAULT NULL, shard_total integer DEFAULT NULL,
  after jsonb DEFAULT NULL, on_parent_failure text DEFAULT NULL,
  concurrency_key text DEFAULT NULL, OUT outcome text, OUT task taskmill.tasks)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
  s taskmill.task_types := taskmill.type_settings(type);
  cur taskmill.tasks;
  v_version bigint := coalesce(version, 0);
  v_payload jsonb := coalesce(payload, '{}'::jsonb);
  v_execute_at timestamptz := coalesce(execute_at, now());
  v_priority integer := coalesce(priority, taskmill.default_priority());
  v_max_retries integer := coalesce(max_retries, s.max_retries);
  v_timeout_ms integer := coalesce(timeout_ms, s.timeout_ms);
  v_kind text := coalesce(backoff_kind, s.backoff_kind);
  v_base integer := coalesce(backoff_base_ms, s.backoff_base_ms);
  v_cap integer := coalesce(backoff_cap_ms, s.backoff_cap_ms);
  v_jitter real := coalesce(backoff_jitter, s.backoff_jitter);
  v_deadline timestamptz;
  v_trace text := coalesce(trace_id, taskmill.new_trace_id());
  v_problem text;
  -- The parents of `after`, their edges' policies and, once locked, their
  -- statuses; how the task begins among them (taskmill.lock_parents).
  v_parents bigint[];
  v_policies text[];
  v_statuses taskmill.task_status[];
  v_start_status taskmill.task_status;
  v_start_error text;
  v_parents_left integer;
  v_waiting boolean;
  -- The statuses a replaced task may hold: a stopped one apart, as a plan
  -- naming 'stopped' locks every day's table.
  v_replaced taskmill.task_status[];
  -- Of a type keyed (storage/sql/keys.sql): the task's key and class.
  v_concurrency_key text;
  v_key_class text;
BEGIN
  v_problem := taskmill.task_problem(type, key, version, execute_at, priority, max_retries,
                                     timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms,
                                     backoff_jitter, batch, trace_id, shard_index, shard_total);
  v_problem := coalesce(v_problem, taskmill.given_key_problem(type, s, concurrency_key));
  IF v_problem IS NULL AND s.key_space IS NOT NULL THEN
    v_problem := taskmill.task_key_problem(type, s.key_path, s.key_separator, key, v_payload);
    v_concurrency_key := taskmill.concurrency_key_of(s.key_path, s.key_separator, key, v_payload,
                                                     concurrency_key);
    v_key_class := taskmill.key_class_of(s.key_space, v_payload);
  END IF;
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;
  v_deadline := v_execute_at + s.pending_deadline_ms * interval '1 millisecond';
  IF after IS NOT NULL THEN
    SELECT array_agg(r.parent_id), array_agg(r.on_failure) INTO v_parents, v_policies
      FROM taskmill.parent_refs(after, coalesce(on_parent_failure, 'fail')) r;
  ELSIF on_parent_failure IS NOT NULL THEN
    PERFORM taskmill.bad_argument('on_parent_failure goes with after');
  END IF;

  PERFORM taskmill.lock_unit(type, key);
  LOOP
    cur := taskmill.current_task(type, key);
    IF cur.id IS NOT NULL AND cur.version > v_version THEN
      outcome := 'stale';
      task := cur;
      RETURN;
    END IF;
    IF cur.id IS NOT NULL AND cur.version = v_version THEN
      IF cur.status IN ('running', 'succeeded') THEN
        outcome := 'duplicate';
        task := cur;
        RETURN;
      END IF;
      -- A task waiting for parents waits on, due at the new time after them.
      v_waiting := cur.status = 'pending' AND cur.execute_at = 'infinity';
      IF v_waiting THEN
        UPDATE taskmill.task_waits w SET execute_at = v_execute_at WHERE w.task_id = cur.id;
      END IF;
      v_replaced := CASE WHEN cur.status = 'stopped' THEN '{stopped}'
                         ELSE '{pending,failed,dead}' END;
      UPDATE taskmill.tasks t
         SET status = 'pending', payload = v_payload,
             execute_at = CASE WHEN v_waiting THEN t.execute_at ELSE v_execute_at END,
             priority = v_priority, max_retries = v_max_retries, timeout_ms = v_timeout_ms,
             backoff_kind = v_kind, backoff_base_ms = v_base, backoff_cap_ms = v_cap,
             backoff_jitter = v_jitter, deadline_at = CASE WHEN NOT v_waiting THEN v_deadline END,
             batch = submit.batch,
             trace_id = v_trace, shard_index = submit.shard_index,
             shard_total = submit.shard_total, retry_count = 0, result = NULL,
             heartbeat_at = NULL, updated_at = now(), key_space = s.key_space,
             concurrency_key = v_concurrency_key, key_class = v_key_class
       WHERE t.id = cur.id AND t.status = ANY (v_replaced)
         AND (t.execute_at = 'infinity') = v_waiting
      RETURNING t.* INTO task;
      IF FOUND THEN
        outcome := 'replaced';
        -- As the trigger left it: a finished task brought back may wait again.
        IF cur.status IN ('dead', 'stopped') THEN
          SELECT t.* INTO task FROM taskmill.tasks t WHERE t.id = cur.id;
        END IF;
        PERFORM taskmill.wake_nodes();
        RETURN;
      END IF;
      -- Claimed between reading and writing: decide again.
      CONTINUE;
    END IF;
    -- Parents before the versions it supersedes, as a parent's finish
    -- locks its children after itself.
    IF cardinality(v_parents) > 0 THEN
      SELECT l.ids, l.statuses, l.policies, l.status, l.error, l.parents_left
        INTO v_parents, v_statuses, v_policies, v_start_status, v_start_error, v_parents_left
        FROM taskmill.lock_parents(v_parents, v_policies) l;
    END IF;
    IF cur.id IS NOT NULL THEN
      UPDATE taskmill.tasks t
         SET status = 'cancelled', error = format('superseded by version %s', v_version),
             updated_at = now()
       WHERE t.id IN (SELECT k.task_id FROM taskmill.task_keys k
                       WHERE k.type = type AND k.key = key AND k.version < v_version)
         AND t.status IN ('pending', 'failed');
    END IF;
    -- Waiting, or ended by a parent (below): out of the claims' reach.
    INSERT INTO taskmill.tasks (type, key, version, payload, execute_at, priority, max_retries,
                                timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms,
                                backoff_jitter, deadline_at, batch, trace_id, shard_index,
                                shard_total, key_space, concurrency_key, key_class)
    VALUES (type, key, v_version, v_payload,
            CASE WHEN v_start_status IS NULL
                      OR (v_start_status = 'pending' AND v_parents_left = 0)
                 THEN v_execute_at ELSE 'infinity' END,
            v_priority, v_max_retries, v_timeout_ms, v_kind, v_base, v_cap, v_jitter,
            CASE WHEN coalesce(v_parents_left, 0) = 0 THEN v_deadline END,
            batch, v_trace, shard_index, shard_total, s.key_space, v_concurrency_key,
            v_key_class)
    RETURNING * INTO task;
    outcome := 'created';
    IF v_start_status IS NOT NULL THEN
      PERFORM taskmill.link_parents(task.id, v_parents, v_statuses, v_policies,
                                    CASE WHEN v_start_status = 'pending' THEN v_parents_left
                                         ELSE 0 END,
                                    v_execute_at);
      IF v_start_status <> 'pending' THEN
        UPDATE taskmill.tasks t
           SET status = v_start_status, error = v_start_error, execute_at = v_execute_at,
               updated_at = now()
         WHERE t.id = task.id
        RETURNING * INTO task;
      END IF;
      IF task.execute_at > now() OR task.status <> 'pending' THEN
        RETURN;
      END IF;
    END IF;
    -- Due at once, it may go to an idle node as the transaction commits
    -- (storage/sql/offers.sql), which wakes the nodes if it does not.
    IF v_execute_at <= now() AND s.running_limit IS NULL AND s.key_space IS NULL THEN
      IF taskmill.ask_hand_off(task.id) THEN
        RETURN;
      END IF;
    END IF;
    PERFORM taskmill.wake_nodes();
    RETURN;
  END LOOP;
END
$$;

-- Submitting a batch costs a handful of set-based statements instead of one
-- function call (and several queries) per task. A batch with an invalid task
-- is refused whole, naming it. New units, the common case, are inserted
-- together; a unit that already has a live task or appears twice in the batch
-- goes through taskmill.submit one by one, so the rules of SPEC §3 stay in
-- one place, and so does a batch of one task due at once while a node offers
-- permits, which taskmill.submit may hand it (storage/sql/offers.sql). Every
-- unit of the batch is locked first, in hash order, so the check for existing
-- tasks holds until commit and concurrent batches cannot deadlock.
--
-- Each task comes back as columns of its own, not as one composite: the
-- columns of a composite are found again one by one from its start, and for
-- a batch of a thousand that was a tenth of what the submit cost PostgreSQL.
CREATE FUNCTION taskmill.submit_batch(
  p_types text[], p_keys text[], p_versions bigint[], p_payloads jsonb[],
  p_execute_ats timestamptz[], p_priorities integer[], p_max_retries integer[],
  p_timeouts integer[], p_backoff_kinds text[], p_backoff_bases integer[],
  p_backoff_caps integer[], p_backoff_jitters real[], p_batches text[], p_trace_ids text[],
  p_shard_indexes integer[], p_shard_totals integer[], p_afters jsonb[] DEFAULT NULL,
  p_on_parent_failures text[] DEFAULT NULL, p_concurrency_keys text[] DEFAULT NULL)
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
LANGUAGE plpgsql
-- The plans are kept for the session: planned at every call, a submit spent
-- more time planning than a task of a small batch costs to store. With
-- sequential scans ruled out, a plan made while the table was empty does not
-- scan it in full for every row once it is not; without nested loops, the
-- kept plan cannot pair the inserted tasks with their places in the batch
-- by comparing each with all. The nested loop it must keep (the settings of
-- each type) then costs the plan enough to be compiled by JIT at every call
-- for any caller that has not turned JIT off.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_nestloop = off
SET jit = off AS $$
#variable_conflict use_column
DECLARE
  v_problem text;
  -- Places in the batch (from 1) that go through taskmill.submit, in batch
  -- order (copies of a unit in the order given; every unit lock is held by
  -- then, so the order cannot deadlock).
  v_one_by_one bigint[];
  -- Places of units given more than once.
  v_copies bigint[] := '{}';
  v_locks integer;
  -- The parents of every task of the batch that has `after`.
  v_parents bigint[];
  v_ord bigint;
  v_created integer;
BEGIN
  -- The first task with a problem, named by its place in the request.
  SELECT CASE WHEN cardinality(p_types) = 1 THEN c.problem
              ELSE format('tasks[%s].%s', c.ord - 1, c.problem) END
    INTO v_problem
    FROM (SELECT u.ord,
                 taskmill.task_problem(u.type, u.key, u.version, u.execute_at, u.priority,
                                       u.max_retries, u.timeout_ms, u.backoff_kind,
                                       u.backoff_base_ms, u.backoff_cap_ms, u.backoff_jitter,
                                       u.batch, u.trace_id, u.shard_index, u.shard_total) AS problem
            FROM unnest(p_types, p_keys, p_versions, p_execute_ats, p_priorities, p_max_retries,
                        p_timeouts, p_backoff_kinds, p_backoff_bases, p_backoff_caps,
                        p_backoff_jitters, p_batches, p_trace_ids, p_shard_indexes, p_shard_totals)
                 WITH ORDINALITY AS u(type, key, version, execute_at, priority, max_retries,
                                      timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms,
                                      backoff_jitter, batch, trace_id, shard_index, shard_total,
                                      ord)) c
   WHERE c.problem IS NOT NULL
   ORDER BY c.ord
   LIMIT 1;
  IF v_problem IS NULL
     AND (EXISTS (SELECT 1 FROM taskmill.task_types s
                   WHERE s.key_space IS NOT NULL AND s.type = ANY (p_types))
          OR EXISTS (SELECT 1 FROM unnest(p_concurrency_keys) g WHERE g IS NOT NULL)) THEN
    SELECT CASE WHEN cardinality(p_types) = 1 THEN c.problem
                ELSE format('tasks[%s].%s', c.ord - 1, c.problem) END
      INTO v_problem
      FROM (SELECT u.ord,
                   coalesce(taskmill.given_key_problem(u.type, s, u.given),
                            CASE WHEN s.key_space IS NOT NULL
                                 THEN taskmill.task_key_problem(u.type, s.key_path,
                                                                s.key_separator, u.key,
                                                                coalesce(u.payload, '{}'))
                            END) AS problem
              FROM unnest(p_types, p_keys, p_payloads, p_concurrency_keys)
                     WITH ORDINALITY AS u(type, key, payload, given, ord),
                   LATERAL taskmill.type_settings(u.type) s
             WHERE s.key_space IS NOT NULL OR u.given IS NOT NULL) c
     WHERE c.problem IS NOT NULL
     ORDER BY c.ord
     LIMIT 1;
  END IF;
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;
  -- The parents of tasks with `after` are checked here to name the task in
  -- the batch, and all locked at once, in id order, as one submit locks its
  -- own: submits of children one after another would take them in any order.
  -- taskmill.submit finds them again.
  IF cardinality(p_types) > 1 AND (p_afters IS NOT NULL OR p_on_parent_failures IS NOT NULL) THEN
    SELECT format('tasks[%s].on_parent_failure goes with after', u.ord - 1) INTO v_problem
      FROM unnest(p_afters, p_on_parent_failures) WITH ORDINALITY AS u(after, on_parent_failure, ord)
     WHERE u.after IS NULL AND u.on_parent_failure IS NOT NULL
     ORDER BY u.ord LIMIT 1;
    IF v_problem IS NOT NULL THEN
      PERFORM taskmill.bad_argument(v_problem);
    END IF;
    v_parents := ARRAY(
      SELECT r.parent_id
        FROM unnest(p_afters, p_on_parent_failures)
             WITH ORDINALITY AS u(after, on_parent_failure, ord),
             LATERAL taskmill.parent_refs(u.after, coalesce(u.on_parent_failure, 'fail'),
                                          format('tasks[%s].', u.ord - 1)) r
       WHERE u.after IS NOT NULL
       ORDER BY u.ord);
    PERFORM taskmill.lock_tasks(ARRAY(SELECT DISTINCT p FROM unnest(v_parents) p ORDER BY p));
  END IF;

  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT taskmill.unit_lock_key(k.type, k.key) AS h
             FROM unnest(p_types, p_keys) AS k(type, key)
            ORDER BY 1) l;
  -- A lock per unit: only a batch with fewer locks than tasks can hold a
  -- unit twice (or two units that share a lock), and only such a batch pays
  -- for sorting its units to find the copies.
  GET DIAGNOSTICS v_locks = ROW_COUNT;
  IF v_locks < cardinality(p_types) THEN
    v_copies := ARRAY(
      SELECT u.ord
        FROM (SELECT k.ord, count(*) OVER (PARTITION BY k.type, k.key) AS copies
                FROM unnest(p_types, p_keys) WITH ORDINALITY AS k(type, key, ord)) u
       WHERE u.copies > 1);
  END IF;

  -- Cancelled tasks do not count for submit (see taskmill.current_task). A
  -- lookup per task by the key's index: joined instead, the plan kept from a
  -- call while the keys were few read all of them for each task (OFFSET 0
  -- keeps the planner from turning this into a join).
  v_one_by_one := ARRAY(
    SELECT u.ord
      FROM unnest(p_types, p_keys) WITH ORDINALITY AS u(type, key, ord)
     WHERE u.ord = ANY (v_copies)
        OR p_afters[u.ord] IS NOT NULL OR p_on_parent_failures[u.ord] IS NOT NULL
        OR EXISTS (SELECT 1 FROM taskmill.task_keys k
                    WHERE k.type = u.type AND k.key = u.key OFFSET 0)
        OR (cardinality(p_types) = 1 AND coalesce(p_execute_ats[1], now()) <= now()
            AND EXISTS (SELECT 1 FROM taskmill.offers o WHERE o.generation <> 0 OFFSET 0))
     ORDER BY u.ord);

  -- Units new to the table, once in the batch, with their defaults.
  RETURN QUERY
  WITH settings AS MATERIALIZED (
    SELECT ty.type AS for_type, s.max_retries, s.timeout_ms, s.backoff_kind, s.backoff_base_ms,
           s.backoff_cap_ms, s.backoff_jitter, s.pending_deadline_ms, s.key_space, s.key_path,
           s.key_separator
      FROM (SELECT DISTINCT t.type FROM unnest(p_types) AS t(type)) ty,
           LATERAL taskmill.type_settings(ty.type) s
  ),
  fresh AS (
    SELECT u.ord, u.type, u.key, coalesce(u.version, 0) AS version,
           coalesce(u.payload, '{}'::jsonb) AS payload,
           coalesce(u.execute_at, now()) AS execute_at,
           coalesce(u.priority, taskmill.default_priority()) AS priority,
           coalesce(u.max_retries, s.max_retries) AS max_retries,
           coalesce(u.timeout_ms, s.timeout_ms) AS timeout_ms,
           coalesce(u.backoff_kind, s.backoff_kind) AS backoff_kind,
           coalesce(u.backoff_base_ms, s.backoff_base_ms) AS backoff_base_ms,
           coalesce(u.backoff_cap_ms, s.backoff_cap_ms) AS backoff_cap_ms,
           coalesce(u.backoff_jitter, s.backoff_jitter) AS backoff_jitter,
           s.pending_deadline_ms, u.batch,
           coalesce(nullif(u.trace_id, ''), taskmill.new_trace_id()) AS trace_id,
           u.shard_index, u.shard_total, s.key_space,
           CASE WHEN s.key_space IS NOT NULL
                THEN taskmill.concurrency_key_of(s.key_path, s.key_separator, u.key,
                                                 coalesce(u.payload, '{}'), u.given)
           END AS concurrency_key,
           CASE WHEN s.key_space IS NOT NULL
                THEN taskmill.key_class_of(s.key_space, coalesce(u.payload, '{}')) END AS key_class
      FROM unnest(p_types, p_keys, p_versions, p_payloads, p_execute_ats, p_priorities,
                  p_max_retries, p_timeouts, p_backoff_kinds, p_backoff_bases,
                  p_backoff_caps, p_backoff_jitters, p_batches, p_trace_ids,
                  p_shard_indexes, p_shard_totals, p_concurrency_keys)
             WITH ORDINALITY AS u(type, key, version, payload, execute_at, priority, max_retries,
                                  timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms,
                                  backoff_jitter, batch, trace_id, shard_index, shard_total,
                                  given, ord)
      JOIN settings s ON s.for_type = u.type
     WHERE u.ord <> ALL (v_one_by_one)
  ),
  inserted AS (
    INSERT INTO taskmill.tasks AS t (type, key, version, payload, execute_at, priority,
                                     max_retries, timeout_ms, backoff_kind, backoff_base_ms,
                                     backoff_cap_ms, backoff_jitter, deadline_at, batch,
                                     trace_id, shard_index, shard_total, key_space,
                                     concurrency_key, key_class)
    SELECT f.type, f.key, f.version, f.payload, f.execute_at, f.priority, f.max_retries,
           f.timeout_ms, f.backoff_kind, f.backoff_base_ms, f.backoff_cap_ms, f.backoff_jitter,
           f.execute_at + f.pending_deadline_ms * interval '1 millisecond', f.batch,
           f.trace_id, f.shard_index, f.shard_total, f.key_space, f.concurrency_key, f.key_class
      FROM fresh f
    RETURNING t.*
  )
  SELECT f.ord, 'created'::text, ins.*
    FROM inserted ins JOIN fresh f ON f.type = ins.type AND f.key = ins.key;
  GET DIAGNOSTICS v_created = ROW_COUNT;
  IF v_created > 0 THEN
    PERFORM taskmill.wake_nodes();
  END IF;
  IF cardinality(v_one_by_one) = 0 THEN
    RETURN;
  END IF;

  -- PL/pgSQL holds array arguments expanded: a subscript costs the same
  -- wherever in the batch the task is.
  FOREACH v_ord IN ARRAY v_one_by_one LOOP
    RETURN QUERY
    SELECT v_ord, s.outcome, (s.task).*
      FROM taskmill.submit(p_types[v_ord], p_keys[v_ord], p_versions[v_ord], p_payloads[v_ord],
                           p_execute_ats[v_ord], p_priorities[v_ord], p_max_retries[v_ord],
                           p_timeouts[v_ord], p_backoff_kinds[v_ord], p_backoff_bases[v_ord],
                           p_backoff_caps[v_ord], p_backoff_jitters[v_ord], p_batches[v_ord],
                           p_trace_ids[v_ord], p_shard_indexes[v_ord], p_shard_totals[v_ord],
                           p_afters[v_ord], p_on_parent_failures[v_ord],
                           p_concurrency_keys[v_ord]) s;
  END LOOP;
END
$$;

-- SPEC §3, reschedule. Outcome: updated | recreated | ignored | created.
CREATE FUNCTION taskmill.reschedule(type text, key text, execute_at timestamptz,
                                    payload jsonb DEFAULT NULL,
                                    OUT outcome text, OUT task taskmill.tasks)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
  cur taskmill.tasks;
  prev taskmill.tasks;
  s taskmill.task_types;
  v_waiting boolean;
  problem text := coalesce(
    taskmill.task_problem(type, key, NULL, execute_at, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                          NULL, NULL, NULL, NULL),
    CASE WHEN execute_at IS NULL THEN 'execute_at is required' END);
BEGIN
  s := taskmill.type_settings(type);
  IF problem IS NULL AND s.key_space IS NOT NULL AND payload IS NOT NULL THEN
    problem := taskmill.task_key_problem(type, s.key_path, s.key_separator, key, payload);
  END IF;
  IF problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(problem);
  END IF;
  PERFORM taskmill.lock_unit(type, key);
  LOOP
    cur := taskmill.current_task(type, key);
    IF cur.id IS NULL THEN
      SELECT t.* INTO prev FROM taskmill.tasks t
       WHERE t.type = type AND t.key = key AND t.status = 'cancelled'
       ORDER BY t.id DESC LIMIT 1;
      IF prev.id IS NULL THEN
        INSERT INTO taskmill.tasks (type, key, payload, execute_at, priority, max_retries,
                                    timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms,
                                    backoff_jitter, deadline_at, trace_id)
        VALUES (type, key, coalesce(payload, '{}'::jsonb), execute_at,
                taskmill.default_priority(), s.max_retries,
                s.timeout_ms, s.backoff_kind, s.backoff_base_ms, s.backoff_cap_ms,
                s.backoff_jitter, taskmill.deadline_after(execute_at, type),
                taskmill.new_trace_id())
        RETURNING * INTO task;
      ELSE
        INSERT INTO taskmill.tasks (type, key, version, payload, execute_at, priority,
                                    max_retries, timeout_ms, backoff_kind, backoff_base_ms,
                                    backoff_cap_ms, backoff_jitter, deadline_at, batch,
                                    trace_id, shard_index, shard_total, concurrency_key)
        VALUES (type, key, prev.version, coalesce(payload, prev.payload), execute_at,
                prev.priority, prev.max_retries, prev.timeout_ms, prev.backoff_kind,
                prev.backoff_base_ms, prev.backoff_cap_ms, prev.backoff_jitter,
                taskmill.deadline_after(execute_at, type), prev.batch, prev.trace_id,
                prev.shard_index, prev.shard_total, prev.concurrency_key)
        RETURNING * INTO task;
      END IF;
      outcome := 'created';
      task := taskmill.keyed_as_typed(task);
      PERFORM taskmill.wake_nodes();
      RETURN;
    END IF;

    IF cur.status IN ('succeeded', 'stopped') THEN
      outcome := 'ignored';
      task := cur;
      RETURN;
    END IF;

    IF cur.status IN ('pending', 'failed') THEN
      -- A task waiting for parents waits on, due at the new time after them.
      v_waiting := cur.status = 'pending' AND cur.execute_at = 'infinity';
      IF v_waiting THEN
        UPDATE taskmill.task_waits w SET execute_at = reschedule.execute_at
         WHERE w.task_id = cur.id;
      END IF;
      UPDATE taskmill.tasks t
         SET execute_at = CASE WHEN v_waiting THEN t.execute_at ELSE reschedule.execute_at END,
             payload = coalesce(payload, t.payload),
             deadline_at = CASE WHEN NOT v_waiting
                                THEN taskmill.deadline_after(reschedule.execute_at, type) END,
             updated_at = now()
       WHERE t.id = cur.id AND t.status IN ('pending', 'failed')
         AND (t.execute_at = 'infinity') = v_waiting
      RETURNING t.* INTO task;
      IF FOUND THEN
        outcome := 'updated';
        task := taskmill.keyed_as_typed(task);
        PERFORM taskmill.wake_nodes();
        RETURN;
      END IF;
    ELSIF cur.status = 'dead' THEN
      UPDATE taskmill.tasks t
         SET status = 'pending', execute_at = reschedule.execute_at,
             payload = coalesce(payload, t.payload), retry_count = 0,
             deadline_at = taskmill.deadline_after(reschedule.execute_at, type),
             updated_at = now()
       WHERE t.id = cur.id AND t.status = 'dead'
      RETURNING t.* INTO task;
      IF FOUND THEN
        outcome := 'updated';
        task := taskmill.keyed_as_typed(task);
        -- As the trigger left it: waiting again, if parents have not finished.
        SELECT t.* INTO task FROM taskmill.tasks t WHERE t.id = cur.id;
        PERFORM taskmill.wake_nodes();
        RETURN;
      END IF;
    ELSIF cur.status = 'running' THEN
      UPDATE taskmill.tasks t
         SET status = 'cancelled',
             error = format('rescheduled to %s while running', reschedule.execute_at),
             has_children = false, updated_at = now()
       WHERE t.id = cur.id AND t.status = 'running' AND t.attempt = cur.attempt;
      IF FOUND THEN
        INSERT INTO taskmill.tasks (type, key, version, payload, execute_at, priority,
                                    max_retries, timeout_ms, backoff_kind, backoff_base_ms,
                                    backoff_cap_ms, backoff_jitter, deadline_at, batch,
                                    trace_id, shard_index, shard_total, has_children,
                                    parent_results, concurrency_key)
        VALUES (type, key, cur.version, coalesce(payload, cur.payload), execute_at,
                cur.priority, cur.max_retries, cur.timeout_ms, cur.backoff_kind,
                cur.backoff_base_ms, cur.backoff_cap_ms, cur.backoff_jitter,
                taskmill.deadline_after(execute_at, type), cur.batch, cur.trace_id,
                cur.shard_index, cur.shard_total, cur.has_children, cur.parent_results,
                cur.concurrency_key)
        RETURNING * INTO task;
        -- A workflow's step or a batch's callback is the copy now, after
        -- the same parents.
        UPDATE taskmill.workflow_steps w SET task_id = task.id WHERE w.task_id = cur.id;
        UPDATE taskmill.batch_callbacks c SET task_id = task.id WHERE c.task_id = cur.id;
        UPDATE taskmill.task_edges e SET child_id = task.id WHERE e.child_id = cur.id;
        -- The copy is the one its children wait for (a child submitted
        -- while this waited for the running task's lock included).
        UPDATE taskmill.task_edges e SET parent_id = task.id
         WHERE e.parent_id = cur.id AND NOT e.done;
        IF FOUND AND NOT task.has_children THEN
          UPDATE taskmill.tasks t SET has_children = true WHERE t.id = task.id
          RETURNING t.* INTO task;
        END IF;
        outcome := 'recreated';
        task := taskmill.keyed_as_typed(task);
        PERFORM taskmill.wake_nodes();
        RETURN;
      END IF;
    END IF;
    -- The task changed between reading and writing it: decide again.
  END LOOP;
END
$$;

-- SPEC §3, cancel by type and key: every live version of the unit. Outcome:
-- cancelled | unchanged; the task answered is the highest version cancelled,
-- else the current one.
CREATE FUNCTION taskmill.cancel(type text, key text, OUT outcome text, OUT task taskmill.tasks)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
BEGIN
  PERFORM taskmill.check_unit(type, key);
  PERFORM taskmill.lock_unit(type, key);
  PERFORM taskmill.lock_tasks(ARRAY(SELECT k.task_id FROM taskmill.task_keys k
                                     WHERE k.type = type AND k.key = key ORDER BY k.task_id),
                              true);
  WITH cancelled AS (
    UPDATE taskmill.tasks t
       SET status = 'cancelled', error = 'cancelled', updated_at = now()
     WHERE t.id IN (SELECT k.task_id FROM taskmill.task_keys k WHERE k.type = type AND k.key = key)
       AND t.status IN ('pending', 'failed', 'running')
    RETURNING t.*)
  SELECT c.* INTO task FROM cancelled c ORDER BY c.version DESC LIMIT 1;
  IF task.id IS NOT NULL THEN
    outcome := 'cancelled';
    RETURN;
  END IF;
  task := taskmill.current_task(type, key);
  IF task.id IS NULL THEN
    SELECT t.* INTO task FROM taskmill.tasks t
     WHERE t.type = type AND t.key = key AND t.status = 'cancelled' ORDER BY t.id DESC LIMIT 1;
  END IF;
  IF task.id IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'no_data_found',
      MESSAGE = format('no task with type %s and key %s', type, key);
  END IF;
  outcome := 'unchanged';
END
$$;

-- SPEC §3, cancel by id.
CREATE FUNCTION taskmill.cancel(id bigint, OUT outcome text, OUT task taskmill.tasks)
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
  PERFORM taskmill.lock_tasks(ARRAY[id], true);
  UPDATE taskmill.tasks t
     SET status = 'cancelled', error = 'cancelled', updated_at = now()
   WHERE t.id = id AND t.status IN ('pending', 'failed', 'running')
  RETURNING t.* INTO task;
  IF FOUND THEN
    outcome := 'cancelled';
    RETURN;
  END IF;
  SELECT t.* INTO task FROM taskmill.tasks t WHERE t.id = id;
  outcome := 'unchanged';
END
$$;
