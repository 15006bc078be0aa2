-- The rules of SPEC §3 and §4, once: submit, reschedule, cancel, claim and
-- complete. Nodes call these functions; a business service may call submit,
-- reschedule and cancel inside its own transaction (READ COMMITTED), and the
-- nodes hear of the commit through NOTIFY on channel taskmill_tasks.

-- Submits, reschedules and cancels of one (type, key) take turns on this lock
-- until their transaction ends. Claims and outcomes use row locks only.
CREATE FUNCTION taskmill.lock_unit(p_type text, p_key text) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(hashtextextended(p_type || E'\x1f' || p_key, 7345))
$$;

CREATE FUNCTION taskmill.wake_nodes() RETURNS void
LANGUAGE sql AS $$
  SELECT pg_notify('taskmill_tasks', '')
$$;

CREATE FUNCTION taskmill.type_settings(p_type text) RETURNS taskmill.task_types
LANGUAGE plpgsql STABLE AS $$
DECLARE
  s taskmill.task_types;
BEGIN
  SELECT * INTO s FROM taskmill.task_types t
   WHERE t.type IN (p_type, '') ORDER BY t.type = p_type DESC LIMIT 1;
  IF NOT FOUND THEN
    s := ROW(p_type, 5000, 3, 'exponential', 1000, 3600000, 0.1, NULL, NULL, now());
  END IF;
  RETURN s;
END
$$;

CREATE FUNCTION taskmill.bad_argument(p_message text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = p_message;
END
$$;

CREATE FUNCTION taskmill.check_unit(p_type text, p_key text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_type IS NULL OR p_type = '' OR length(p_type) > 200 THEN
    PERFORM taskmill.bad_argument('type must be a non-empty string of at most 200 characters');
  END IF;
  IF p_key IS NULL OR p_key = '' OR length(p_key) > 500 THEN
    PERFORM taskmill.bad_argument('key must be a non-empty string of at most 500 characters');
  END IF;
END
$$;

-- The wait before retry number p_retry_count + 1.
CREATE FUNCTION taskmill.backoff_delay(p_kind text, p_base_ms integer, p_cap_ms integer,
                                       p_jitter real, p_retry_count integer) RETURNS interval
LANGUAGE sql VOLATILE AS $$
  SELECT make_interval(secs => greatest(0, least(p_cap_ms::float8,
           CASE WHEN p_kind = 'fixed' THEN p_base_ms::float8
                ELSE p_base_ms * power(2::float8, least(p_retry_count, 40)) END
           * (1 + p_jitter * (2 * random() - 1)))) / 1000.0)
$$;

CREATE FUNCTION taskmill.deadline_after(p_execute_at timestamptz, p_type text) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
  SELECT p_execute_at + s.pending_deadline_ms * interval '1 millisecond'
    FROM taskmill.type_settings(p_type) s
$$;

-- The highest non-cancelled version of (type, key): its current task.
CREATE FUNCTION taskmill.current_task(p_type text, p_key text) RETURNS taskmill.tasks
LANGUAGE sql STABLE AS $$
  SELECT t.* FROM taskmill.tasks t
   WHERE t.type = p_type AND t.key = p_key AND t.status <> 'cancelled'
   ORDER BY t.version DESC LIMIT 1
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
  OUT outcome text, OUT task taskmill.tasks)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
  s taskmill.task_types := taskmill.type_settings(type);
  cur taskmill.tasks;
  v_version bigint := coalesce(version, 0);
  v_payload jsonb := coalesce(payload, '{}'::jsonb);
  v_execute_at timestamptz := coalesce(execute_at, now());
  v_priority integer := coalesce(priority, 3);
  v_max_retries integer := coalesce(max_retries, s.max_retries);
  v_timeout_ms integer := coalesce(timeout_ms, s.timeout_ms);
  v_kind text := coalesce(backoff_kind, s.backoff_kind);
  v_base integer := coalesce(backoff_base_ms, s.backoff_base_ms);
  v_cap integer := coalesce(backoff_cap_ms, s.backoff_cap_ms);
  v_jitter real := coalesce(backoff_jitter, s.backoff_jitter);
  v_deadline timestamptz;
  v_trace text := coalesce(nullif(trace_id, ''), replace(gen_random_uuid()::text, '-', ''));
BEGIN
  PERFORM taskmill.check_unit(type, key);
  IF v_version < 0 THEN
    PERFORM taskmill.bad_argument(format('version must be 0 or more, got %s', v_version));
  END IF;
  IF v_priority NOT BETWEEN 1 AND 5 THEN
    PERFORM taskmill.bad_argument(format('priority must be between 1 and 5, got %s', v_priority));
  END IF;
  IF v_max_retries NOT BETWEEN 0 AND 1000 THEN
    PERFORM taskmill.bad_argument(format('max_retries must be between 0 and 1000, got %s', v_max_retries));
  END IF;
  IF v_timeout_ms <= 0 THEN
    PERFORM taskmill.bad_argument(format('timeout_ms must be positive, got %s', v_timeout_ms));
  END IF;
  IF v_kind NOT IN ('fixed', 'exponential') THEN
    PERFORM taskmill.bad_argument(format('backoff kind must be fixed or exponential, got %s', v_kind));
  END IF;
  IF v_base <= 0 OR v_cap <= 0 THEN
    PERFORM taskmill.bad_argument('backoff base_ms and cap_ms must be positive');
  END IF;
  IF v_jitter NOT BETWEEN 0 AND 1 THEN
    PERFORM taskmill.bad_argument(format('backoff jitter must be between 0 and 1, got %s', v_jitter));
  END IF;
  IF (shard_index IS NULL) <> (shard_total IS NULL)
     OR shard_total < 1 OR shard_index < 0 OR shard_index >= shard_total THEN
    PERFORM taskmill.bad_argument('shard_index and shard_total go together, with 0 <= shard_index < shard_total');
  END IF;
  v_deadline := v_execute_at + s.pending_deadline_ms * interval '1 millisecond';

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
      UPDATE taskmill.tasks t
         SET status = 'pending', payload = v_payload, execute_at = v_execute_at,
             priority = v_priority, max_retries = v_max_retries, timeout_ms = v_timeout_ms,
             backoff_kind = v_kind, backoff_base_ms = v_base, backoff_cap_ms = v_cap,
             backoff_jitter = v_jitter, deadline_at = v_deadline, batch = submit.batch,
             trace_id = v_trace, shard_index = submit.shard_index,
             shard_total = submit.shard_total, retry_count = 0, result = NULL,
             heartbeat_at = NULL, updated_at = now()
       WHERE t.id = cur.id AND t.status IN ('pending', 'failed', 'dead', 'stopped')
      RETURNING t.* INTO task;
      IF FOUND THEN
        outcome := 'replaced';
        PERFORM taskmill.wake_nodes();
        RETURN;
      END IF;
      -- Claimed between reading and writing: decide again.
      CONTINUE;
    END IF;
    IF cur.id IS NOT NULL THEN
      UPDATE taskmill.tasks t
         SET status = 'cancelled', error = format('superseded by version %s', v_version),
             updated_at = now()
       WHERE t.type = type AND t.key = key AND t.version < v_version
         AND t.status IN ('pending', 'failed');
    END IF;
    INSERT INTO taskmill.tasks (type, key, version, payload, execute_at, priority, max_retries,
                                timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms,
                                backoff_jitter, deadline_at, batch, trace_id, shard_index,
                                shard_total)
    VALUES (type, key, v_version, v_payload, v_execute_at, v_priority, v_max_retries,
            v_timeout_ms, v_kind, v_base, v_cap, v_jitter, v_deadline, batch, v_trace,
            shard_index, shard_total)
    RETURNING * INTO task;
    outcome := 'created';
    PERFORM taskmill.wake_nodes();
    RETURN;
  END LOOP;
END
$$;

-- Submitting a batch costs a handful of set-based statements instead of one
-- function call (and several queries) per task. New units, the common case,
-- are inserted together; a unit that already has a live task, appears twice in the
-- batch or is invalid goes through taskmill.submit one by one, so the rules of
-- SPEC §3 and their error messages stay in one place. Every unit of the batch
-- is locked first, in hash order, so the check for existing tasks holds until
-- commit and concurrent batches cannot deadlock.
CREATE FUNCTION taskmill.submit_many(
  p_types text[], p_keys text[], p_versions bigint[], p_payloads jsonb[],
  p_execute_ats timestamptz[], p_priorities integer[], p_max_retries integer[],
  p_timeouts integer[], p_backoff_kinds text[], p_backoff_bases integer[],
  p_backoff_caps integer[], p_backoff_jitters real[], p_batches text[], p_trace_ids text[],
  p_shard_indexes integer[], p_shard_totals integer[])
RETURNS TABLE (ordinal bigint, outcome text, task taskmill.tasks)
LANGUAGE plpgsql
-- A plan cached while the table was empty scans it in full for every row
-- once it is not; planned for each call, it uses the index.
SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  r record;
  res record;
  v_ords bigint[];
  v_tasks taskmill.tasks[];
BEGIN
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT hashtextextended(coalesce(k.type, '') || E'\x1f' || coalesce(k.key, ''),
                                            7345) AS h
             FROM unnest(p_types, p_keys) AS k(type, key)
            ORDER BY 1) l;

  WITH input AS (
    SELECT u.*, count(*) OVER (PARTITION BY u.type, u.key) AS copies
      FROM unnest(p_types, p_keys, p_versions, p_payloads, p_execute_ats, p_priorities,
                  p_max_retries, p_timeouts, p_backoff_kinds, p_backoff_bases,
                  p_backoff_caps, p_backoff_jitters, p_batches, p_trace_ids,
                  p_shard_indexes, p_shard_totals)
        WITH ORDINALITY AS u(type, key, version, payload, execute_at, priority, max_retries,
                             timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms,
                             backoff_jitter, batch, trace_id, shard_index, shard_total, ord)
  ),
  settings AS MATERIALIZED (
    SELECT ty.type AS for_type, s.max_retries, s.timeout_ms, s.backoff_kind, s.backoff_base_ms,
           s.backoff_cap_ms, s.backoff_jitter, s.pending_deadline_ms
      FROM (SELECT DISTINCT i.type FROM input i) ty,
           LATERAL taskmill.type_settings(ty.type) s
  ),
  prepared AS (
    SELECT i.ord, i.type, i.key, coalesce(i.version, 0) AS version,
           coalesce(i.payload, '{}'::jsonb) AS payload,
           coalesce(i.execute_at, now()) AS execute_at, coalesce(i.priority, 3) AS priority,
           coalesce(i.max_retries, s.max_retries) AS max_retries,
           coalesce(i.timeout_ms, s.timeout_ms) AS timeout_ms,
           coalesce(i.backoff_kind, s.backoff_kind) AS backoff_kind,
           coalesce(i.backoff_base_ms, s.backoff_base_ms) AS backoff_base_ms,
           coalesce(i.backoff_cap_ms, s.backoff_cap_ms) AS backoff_cap_ms,
           coalesce(i.backoff_jitter, s.backoff_jitter) AS backoff_jitter,
           s.pending_deadline_ms, i.batch,
           coalesce(nullif(i.trace_id, ''), replace(gen_random_uuid()::text, '-', '')) AS trace_id,
           i.shard_index, i.shard_total
      FROM input i JOIN settings s ON s.for_type = i.type
     WHERE i.copies = 1
       AND i.type <> '' AND length(i.type) <= 200 AND i.key <> '' AND length(i.key) <= 500
       -- Cancelled tasks do not count for submit (see taskmill.current_task).
       AND NOT EXISTS (SELECT 1 FROM taskmill.tasks t
                        WHERE t.type = i.type AND t.key = i.key AND t.status <> 'cancelled')
  ),
  fresh AS (
    SELECT p.* FROM prepared p
     WHERE p.version >= 0 AND p.priority BETWEEN 1 AND 5 AND p.max_retries BETWEEN 0 AND 1000
       AND p.timeout_ms > 0 AND p.backoff_kind IN ('fixed', 'exponential')
       AND p.backoff_base_ms > 0 AND p.backoff_cap_ms > 0 AND p.backoff_jitter BETWEEN 0 AND 1
       AND (p.shard_index IS NULL) = (p.shard_total IS NULL)
       AND (p.shard_total IS NULL
            OR (p.shard_total >= 1 AND p.shard_index >= 0 AND p.shard_index < p.shard_total))
  ),
  inserted AS (
    INSERT INTO taskmill.tasks AS t (type, key, version, payload, execute_at, priority,
                                     max_retries, timeout_ms, backoff_kind, backoff_base_ms,
                                     backoff_cap_ms, backoff_jitter, deadline_at, batch,
                                     trace_id, shard_index, shard_total)
    SELECT f.type, f.key, f.version, f.payload, f.execute_at, f.priority, f.max_retries,
           f.timeout_ms, f.backoff_kind, f.backoff_base_ms, f.backoff_cap_ms, f.backoff_jitter,
           f.execute_at + f.pending_deadline_ms * interval '1 millisecond', f.batch,
           f.trace_id, f.shard_index, f.shard_total
      FROM fresh f ORDER BY f.ord
    RETURNING t.type, t.key, t AS whole
  )
  -- Units are unique among fresh rows and each one was inserted, so both
  -- sides in unit order line up without a join.
  SELECT (SELECT array_agg(f.ord ORDER BY f.type, f.key) FROM fresh f),
         (SELECT array_agg(ins.whole ORDER BY ins.type, ins.key) FROM inserted ins)
    INTO v_ords, v_tasks;

  IF v_ords IS NOT NULL THEN
    PERFORM taskmill.wake_nodes();
    RETURN QUERY SELECT v_ords[g.i], 'created'::text, v_tasks[g.i]
                   FROM generate_subscripts(v_ords, 1) AS g(i);
  END IF;

  FOR r IN
    SELECT u.* FROM unnest(p_types, p_keys, p_versions, p_payloads, p_execute_ats, p_priorities,
                           p_max_retries, p_timeouts, p_backoff_kinds, p_backoff_bases,
                           p_backoff_caps, p_backoff_jitters, p_batches, p_trace_ids,
                           p_shard_indexes, p_shard_totals)
        WITH ORDINALITY AS u(type, key, version, payload, execute_at, priority, max_retries,
                             timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms,
                             backoff_jitter, batch, trace_id, shard_index, shard_total, ord)
      LEFT JOIN unnest(v_ords) AS done(ord) ON done.ord = u.ord
     WHERE done.ord IS NULL
     ORDER BY hashtextextended(coalesce(u.type, '') || E'\x1f' || coalesce(u.key, ''), 7345), u.ord
  LOOP
    SELECT * INTO res FROM taskmill.submit(r.type, r.key, r.version, r.payload, r.execute_at,
      r.priority, r.max_retries, r.timeout_ms, r.backoff_kind, r.backoff_base_ms,
      r.backoff_cap_ms, r.backoff_jitter, r.batch, r.trace_id, r.shard_index, r.shard_total);
    ordinal := r.ord;
    outcome := res.outcome;
    task := res.task;
    RETURN NEXT;
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
BEGIN
  PERFORM taskmill.check_unit(type, key);
  IF execute_at IS NULL THEN
    PERFORM taskmill.bad_argument('execute_at is required');
  END IF;
  PERFORM taskmill.lock_unit(type, key);
  LOOP
    cur := taskmill.current_task(type, key);
    IF cur.id IS NULL THEN
      SELECT t.* INTO prev FROM taskmill.tasks t
       WHERE t.type = type AND t.key = key AND t.status = 'cancelled'
       ORDER BY t.id DESC LIMIT 1;
      IF prev.id IS NULL THEN
        s := taskmill.type_settings(type);
        INSERT INTO taskmill.tasks (type, key, payload, execute_at, max_retries, timeout_ms,
                                    backoff_kind, backoff_base_ms, backoff_cap_ms,
                                    backoff_jitter, deadline_at, trace_id)
        VALUES (type, key, coalesce(payload, '{}'::jsonb), execute_at, s.max_retries,
                s.timeout_ms, s.backoff_kind, s.backoff_base_ms, s.backoff_cap_ms,
                s.backoff_jitter, taskmill.deadline_after(execute_at, type),
                replace(gen_random_uuid()::text, '-', ''))
        RETURNING * INTO task;
      ELSE
        INSERT INTO taskmill.tasks (type, key, version, payload, execute_at, priority,
                                    max_retries, timeout_ms, backoff_kind, backoff_base_ms,
                                    backoff_cap_ms, backoff_jitter, deadline_at, batch,
                                    trace_id, shard_index, shard_total)
        VALUES (type, key, prev.version, coalesce(payload, prev.payload), execute_at,
                prev.priority, prev.max_retries, prev.timeout_ms, prev.backoff_kind,
                prev.backoff_base_ms, prev.backoff_cap_ms, prev.backoff_jitter,
                taskmill.deadline_after(execute_at, type), prev.batch, prev.trace_id,
                prev.shard_index, prev.shard_total)
        RETURNING * INTO task;
      END IF;
      outcome := 'created';
      PERFORM taskmill.wake_nodes();
      RETURN;
    END IF;

    IF cur.status IN ('succeeded', 'stopped') THEN
      outcome := 'ignored';
      task := cur;
      RETURN;
    END IF;

    IF cur.status IN ('pending', 'failed') THEN
      UPDATE taskmill.tasks t
         SET execute_at = reschedule.execute_at, payload = coalesce(payload, t.payload),
             deadline_at = taskmill.deadline_after(reschedule.execute_at, type),
             updated_at = now()
       WHERE t.id = cur.id AND t.status IN ('pending', 'failed')
      RETURNING t.* INTO task;
      IF FOUND THEN
        outcome := 'updated';
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
        PERFORM taskmill.wake_nodes();
        RETURN;
      END IF;
    ELSIF cur.status = 'running' THEN
      UPDATE taskmill.tasks t
         SET status = 'cancelled',
             error = format('rescheduled to %s while running', reschedule.execute_at),
             updated_at = now()
       WHERE t.id = cur.id AND t.status = 'running' AND t.attempt = cur.attempt;
      IF FOUND THEN
        INSERT INTO taskmill.tasks (type, key, version, payload, execute_at, priority,
                                    max_retries, timeout_ms, backoff_kind, backoff_base_ms,
                                    backoff_cap_ms, backoff_jitter, deadline_at, batch,
                                    trace_id, shard_index, shard_total)
        VALUES (type, key, cur.version, coalesce(payload, cur.payload), execute_at,
                cur.priority, cur.max_retries, cur.timeout_ms, cur.backoff_kind,
                cur.backoff_base_ms, cur.backoff_cap_ms, cur.backoff_jitter,
                taskmill.deadline_after(execute_at, type), cur.batch, cur.trace_id,
                cur.shard_index, cur.shard_total)
        RETURNING * INTO task;
        outcome := 'recreated';
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
  WITH cancelled AS (
    UPDATE taskmill.tasks t
       SET status = 'cancelled', error = 'cancelled', updated_at = now()
     WHERE t.type = type AND t.key = key AND t.status IN ('pending', 'failed', 'running')
    RETURNING t.*)
  SELECT c.* INTO task FROM cancelled c ORDER BY c.version DESC LIMIT 1;
  IF task.id IS NOT NULL THEN
    outcome := 'cancelled';
    RETURN;
  END IF;
  task := taskmill.current_task(type, key);
  IF task.id IS NULL THEN
    SELECT t.* INTO task FROM taskmill.tasks t
     WHERE t.type = type AND t.key = key ORDER BY t.id DESC LIMIT 1;
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

-- Claims up to p_limit due tasks in claim order (priority, execute_at, id)
-- with SKIP LOCKED and makes them running in the same statement, so a task is
-- claimed once across any number of nodes. p_priority NULL: any level;
-- p_type NULL: any type but the capped ones. Custom plans fold the NULL tests
-- away, so each form uses the claim index as if written out.
CREATE FUNCTION taskmill.claim_rows(p_node text, p_limit integer, p_priority integer,
                                    p_type text, p_types text[], p_capped text[])
RETURNS SETOF taskmill.tasks
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan AS $$
BEGIN
  RETURN QUERY
    WITH picked AS (
      SELECT t.id FROM taskmill.tasks t
       WHERE t.status IN ('pending', 'failed') AND t.execute_at <= now()
         AND (p_priority IS NULL OR t.priority = p_priority)
         AND (CASE WHEN p_type IS NULL THEN t.type <> ALL (p_capped) ELSE t.type = p_type END)
         AND (p_types IS NULL OR t.type = ANY (p_types))
       ORDER BY t.priority, t.execute_at, t.id
       LIMIT p_limit
       FOR UPDATE SKIP LOCKED)
    UPDATE taskmill.tasks t
       SET status = 'running', attempt = t.attempt + 1, picked_by = p_node,
           heartbeat_at = now(), started_at = now(), updated_at = now()
      FROM picked WHERE t.id = picked.id
    RETURNING t.*;
END
$$;

-- The priority levels that have due work a node of p_types may run; one
-- cheap probe per level instead of a claim statement per level. A probe in
-- claim order with LIMIT 1 reads the claim index from its start (an EXISTS
-- becomes a semi-join that may read every due task).
CREATE FUNCTION taskmill.due_levels(p_types text[]) RETURNS integer[]
LANGUAGE sql STABLE AS $$
  SELECT coalesce(array_agg(l.p ORDER BY l.p), '{}')
    FROM generate_series(1, 5) AS l(p)
   CROSS JOIN LATERAL (
     SELECT 1 FROM taskmill.tasks t
      WHERE t.status IN ('pending', 'failed') AND t.priority = l.p AND t.execute_at <= now()
        AND (p_types IS NULL OR t.type = ANY (p_types))
      ORDER BY t.execute_at, t.id LIMIT 1) AS first_due
$$;

-- When the next task not yet due becomes due, and the database's now, so the
-- pusher can set its timer without trusting its own clock. It runs after
-- every claim, so its plan is made once and kept; with sequential scans and
-- sorts ruled out that plan reads the claim index, whatever the statistics
-- said when it was made.
CREATE FUNCTION taskmill.next_due(p_types text[], OUT next_due_at timestamptz,
                                  OUT db_now timestamptz)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET enable_sort = off AS $$
BEGIN
  SELECT min(n.execute_at), now() INTO next_due_at, db_now
    FROM generate_series(1, 5) AS lvl(p)
   CROSS JOIN LATERAL (
     SELECT t.execute_at FROM taskmill.tasks t
      WHERE t.status IN ('pending', 'failed') AND t.priority = lvl.p
        AND t.execute_at > now()
        AND (p_types IS NULL OR t.type = ANY (p_types))
      ORDER BY t.execute_at LIMIT 1) n;
END
$$;

-- SPEC §4, outcomes. Each applies only while the task is running under the
-- attempt that produced it; anything else is stale and changes nothing but
-- the attempt history. Outcome: succeeded | retry | fail. Three statements,
-- planned for each call: a plan made once for any array assumes ten rows, and
-- a join with the rows an UPDATE returns is estimated at one row; both end in
-- nested loops, quadratic in the batch.
CREATE FUNCTION taskmill.complete_many(p_ids bigint[], p_attempts integer[],
                                                  p_outcomes text[], p_results jsonb[],
                                                  p_errors text[], p_node text)
RETURNS TABLE (task_id bigint, attempt integer, applied boolean, status taskmill.task_status)
LANGUAGE plpgsql
SET plan_cache_mode = force_custom_plan AS $$
DECLARE
  v_ids bigint[];
  v_statuses taskmill.task_status[];
BEGIN
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
           updated_at = now()
      FROM unnest(p_ids, p_attempts, p_outcomes, p_results, p_errors)
             AS i(id, attempt, outcome, result, error)
     WHERE t.id = i.id AND t.status = 'running' AND t.attempt = i.attempt
    RETURNING t.id, t.status
  )
  SELECT array_agg(u.id), array_agg(u.status) INTO v_ids, v_statuses FROM updated u;

  INSERT INTO taskmill.attempts AS a (task_id, attempt, node, started_at, finished_at, outcome,
                                      error)
  SELECT i.id, i.attempt, coalesce(p_node, t.picked_by),
         CASE WHEN t.attempt = i.attempt THEN t.started_at END, now(), i.outcome, i.error
    FROM unnest(p_ids, p_attempts, p_outcomes, p_errors) AS i(id, attempt, outcome, error)
    JOIN taskmill.tasks t ON t.id = i.id
   WHERE i.attempt BETWEEN 1 AND t.attempt
  ON CONFLICT ON CONSTRAINT attempts_pkey DO NOTHING;

  RETURN QUERY
  SELECT i.id, i.attempt, u.id IS NOT NULL, coalesce(u.status, t.status)
    FROM unnest(p_ids, p_attempts) WITH ORDINALITY AS i(id, attempt, ord)
    LEFT JOIN unnest(v_ids, v_statuses) AS u(id, status) ON u.id = i.id
    LEFT JOIN taskmill.tasks t ON t.id = i.id
   ORDER BY i.ord;
END
$$;

-- Per-type settings from a node's configuration (the empty type: defaults).
CREATE FUNCTION taskmill.put_type_settings(p_types text[], p_timeouts integer[],
                                           p_max_retries integer[], p_backoff_kinds text[],
                                           p_backoff_bases integer[], p_backoff_caps integer[],
                                           p_backoff_jitters real[], p_deadlines bigint[],
                                           p_limits integer[]) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO taskmill.task_types AS s (type, timeout_ms, max_retries, backoff_kind,
                                        backoff_base_ms, backoff_cap_ms, backoff_jitter,
                                        pending_deadline_ms, running_limit, updated_at)
  SELECT u.*, now() FROM unnest(p_types, p_timeouts, p_max_retries, p_backoff_kinds,
                                p_backoff_bases, p_backoff_caps, p_backoff_jitters,
                                p_deadlines, p_limits) AS u
  ON CONFLICT (type) DO UPDATE
     SET timeout_ms = excluded.timeout_ms, max_retries = excluded.max_retries,
         backoff_kind = excluded.backoff_kind, backoff_base_ms = excluded.backoff_base_ms,
         backoff_cap_ms = excluded.backoff_cap_ms, backoff_jitter = excluded.backoff_jitter,
         pending_deadline_ms = excluded.pending_deadline_ms,
         running_limit = excluded.running_limit, updated_at = now()
$$;
