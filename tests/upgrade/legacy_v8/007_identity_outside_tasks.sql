-- The identity of a live task, (type, key, version), moves out of the tasks
-- table into taskmill.task_keys, kept by triggers. An index on tasks gets a
-- new entry at every update that is not HOT, and claims and outcomes never
-- are (status is in the claim index's predicate): with the identity index on
-- tasks, each claim and each outcome wrote an entry into an index spread over
-- every key there is, so with a large backlog each one touched a page of its
-- own, and after a checkpoint wrote that whole page to the WAL. Keys are
-- written when a task is created and when it is cancelled or revived, never
-- on the hot path. Submit, submit_many, cancel and current_task find units
-- through task_keys; their rules are unchanged.

CREATE TABLE taskmill.task_keys (
  type    text NOT NULL,
  key     text NOT NULL,
  version bigint NOT NULL,
  task_id bigint NOT NULL,
  PRIMARY KEY (type, key, version)
);

-- Nothing may create or cancel a task between the copy and the triggers
-- below (business transactions, nodes not yet upgraded): keys it made would
-- be missing. Reads go on; the lock holds until this migration commits.
LOCK TABLE taskmill.tasks IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO taskmill.task_keys (type, key, version, task_id)
SELECT t.type, t.key, t.version, t.id FROM taskmill.tasks t WHERE t.status <> 'cancelled';

DROP INDEX taskmill.tasks_identity;

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

CREATE OR REPLACE FUNCTION taskmill.current_task(p_type text, p_key text) RETURNS taskmill.tasks
LANGUAGE sql STABLE AS $$
  SELECT t.* FROM taskmill.task_keys k JOIN taskmill.tasks t ON t.id = k.task_id
   WHERE k.type = p_type AND k.key = p_key AND t.status <> 'cancelled'
   ORDER BY k.version DESC LIMIT 1
$$;

CREATE OR REPLACE FUNCTION taskmill.submit(
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
       WHERE t.id IN (SELECT k.task_id FROM taskmill.task_keys k
                       WHERE k.type = type AND k.key = key AND k.version < v_version)
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

CREATE OR REPLACE FUNCTION taskmill.submit_many(
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
       AND NOT EXISTS (SELECT 1 FROM taskmill.task_keys k
                        WHERE k.type = i.type AND k.key = i.key)
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

CREATE OR REPLACE FUNCTION taskmill.cancel(type text, key text, OUT outcome text, OUT task taskmill.tasks)
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
BEGIN
  PERFORM taskmill.check_unit(type, key);
  PERFORM taskmill.lock_unit(type, key);
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
