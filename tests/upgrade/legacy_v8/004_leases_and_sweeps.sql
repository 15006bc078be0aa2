-- SPEC §4 heartbeats and leases, §5 watcher: every sweep works in bounded
-- batches, skips rows others hold, and is fenced by attempt.

-- Executions that will not report (their node died, their time ran out) end
-- as failed attempts: failed with backoff while retries remain, else dead.
-- Answers how many changed.
CREATE FUNCTION taskmill.lose_attempts(p_ids bigint[], p_attempts integer[], p_outcome text,
                                       p_error text) RETURNS integer
LANGUAGE sql AS $$
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
    RETURNING t.id, t.attempt, t.picked_by, t.started_at
  ),
  history AS (
    INSERT INTO taskmill.attempts (task_id, attempt, node, started_at, finished_at, outcome, error)
    SELECT l.id, l.attempt, l.picked_by, l.started_at, now(), p_outcome, p_error FROM lost l
    ON CONFLICT ON CONSTRAINT attempts_pkey DO NOTHING
  )
  SELECT count(*)::integer FROM lost
$$;

-- A node starts: it takes its name unless a live node holds it, and the
-- running tasks of its earlier incarnations, which can no longer finish, end
-- as failed attempts.
CREATE FUNCTION taskmill.register_node(p_name text, p_incarnation text, p_address text,
                                       p_lease_ms bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  cur taskmill.nodes;
  v_ids bigint[];
  v_attempts integer[];
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('node' || E'\x1f' || p_name, 7345));
  SELECT * INTO cur FROM taskmill.nodes n WHERE n.name = p_name;
  IF cur.name IS NOT NULL AND cur.incarnation <> p_incarnation AND cur.stopped_at IS NULL
     AND cur.heartbeat_at >= now() - p_lease_ms * interval '1 ms' THEN
    RAISE EXCEPTION USING ERRCODE = 'object_in_use',
      MESSAGE = format('node name %s is in use by a live node (last heartbeat %s); '
                       'give this node another node.name', p_name, cur.heartbeat_at);
  END IF;
  INSERT INTO taskmill.nodes AS n (name, incarnation, address, started_at, heartbeat_at, leader,
                                   stopped_at)
  VALUES (p_name, p_incarnation, p_address, now(), now(), false, NULL)
  ON CONFLICT (name) DO UPDATE
     SET incarnation = excluded.incarnation, address = excluded.address,
         started_at = now(), heartbeat_at = now(), leader = false, stopped_at = NULL;
  SELECT array_agg(t.id), array_agg(t.attempt) INTO v_ids, v_attempts
    FROM taskmill.tasks t WHERE t.status = 'running' AND t.picked_by = p_name;
  RETURN coalesce(taskmill.lose_attempts(v_ids, v_attempts, 'lost',
                                          format('node %s restarted', p_name)), 0);
END
$$;

-- The heartbeat of one incarnation. No row: the node was declared dead (or
-- its name taken over) and must register again before it claims.
CREATE FUNCTION taskmill.heartbeat(p_name text, p_incarnation text, p_leader boolean)
RETURNS boolean
LANGUAGE sql AS $$
  WITH beat AS (
    UPDATE taskmill.nodes n SET heartbeat_at = now(), leader = p_leader
     WHERE n.name = p_name AND n.incarnation = p_incarnation AND n.stopped_at IS NULL
    RETURNING 1)
  SELECT EXISTS (SELECT 1 FROM beat)
$$;

-- A node stops cleanly: what it still runs goes back to pending at once
-- (neither a failure nor a retry; the attempt counter keeps fencing any
-- late outcome), and the node is marked stopped.
CREATE FUNCTION taskmill.stop_node(p_name text, p_incarnation text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
BEGIN
  WITH released AS (
    UPDATE taskmill.tasks t
       SET status = 'pending', execute_at = now(), heartbeat_at = NULL, updated_at = now()
     WHERE t.status = 'running' AND t.picked_by = p_name
    RETURNING t.id, t.attempt, t.started_at
  ),
  history AS (
    INSERT INTO taskmill.attempts (task_id, attempt, node, started_at, finished_at, outcome, error)
    SELECT r.id, r.attempt, p_name, r.started_at, now(), 'released', 'node stopped' FROM released r
    ON CONFLICT ON CONSTRAINT attempts_pkey DO NOTHING
  )
  SELECT count(*) INTO v_count FROM released;
  UPDATE taskmill.nodes n SET stopped_at = now(), leader = false
   WHERE n.name = p_name AND n.incarnation = p_incarnation;
  IF v_count > 0 THEN
    PERFORM taskmill.wake_nodes();
  END IF;
  RETURN v_count;
END
$$;

-- Watcher: running tasks of nodes that are not alive (silent longer than the
-- lease, stopped, or unknown) end as failed attempts.
CREATE FUNCTION taskmill.sweep_lost(p_lease_ms bigint, p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
  v_attempts integer[];
BEGIN
  UPDATE taskmill.nodes n SET stopped_at = now(), leader = false
   WHERE n.stopped_at IS NULL AND n.heartbeat_at < now() - p_lease_ms * interval '1 ms';
  SELECT array_agg(c.id), array_agg(c.attempt) INTO v_ids, v_attempts FROM (
    SELECT t.id, t.attempt FROM taskmill.tasks t
     WHERE t.status = 'running'
       AND NOT EXISTS (SELECT 1 FROM taskmill.nodes n
                        WHERE n.name = t.picked_by AND n.stopped_at IS NULL)
     ORDER BY t.started_at LIMIT p_limit
       FOR UPDATE OF t SKIP LOCKED) c;
  RETURN coalesce(taskmill.lose_attempts(v_ids, v_attempts, 'lost',
                                          'the node running it lost its lease'), 0);
END
$$;

-- Watcher: running tasks past their timeout (with grace for the node's own,
-- earlier, timeout) end as failed attempts.
CREATE FUNCTION taskmill.sweep_timeouts(p_grace_ms bigint, p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
  v_attempts integer[];
BEGIN
  SELECT array_agg(c.id), array_agg(c.attempt) INTO v_ids, v_attempts FROM (
    SELECT t.id, t.attempt FROM taskmill.tasks t
     WHERE t.status = 'running'
       AND t.started_at + (t.timeout_ms + p_grace_ms) * interval '1 ms' < now()
     ORDER BY t.started_at LIMIT p_limit
       FOR UPDATE SKIP LOCKED) c;
  RETURN coalesce(taskmill.lose_attempts(v_ids, v_attempts, 'timeout',
                                          'timed out: no outcome within the task timeout'), 0);
END
$$;

-- Watcher: tasks still waiting after their pending deadline are dead.
CREATE FUNCTION taskmill.sweep_deadlines(p_limit integer) RETURNS integer
LANGUAGE sql AS $$
  WITH expired AS (
    UPDATE taskmill.tasks t SET status = 'dead', error = 'pending deadline passed', updated_at = now()
     WHERE t.id IN (SELECT x.id FROM taskmill.tasks x
                     WHERE x.status IN ('pending', 'failed') AND x.deadline_at < now()
                     ORDER BY x.deadline_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
    RETURNING 1)
  SELECT count(*)::integer FROM expired
$$;

-- Watcher: succeeded tasks older than the success retention are stopped.
CREATE FUNCTION taskmill.sweep_succeeded(p_retention_ms bigint, p_limit integer) RETURNS integer
LANGUAGE sql AS $$
  WITH stopped AS (
    UPDATE taskmill.tasks t SET status = 'stopped', updated_at = now()
     WHERE t.id IN (SELECT x.id FROM taskmill.tasks x
                     WHERE x.status = 'succeeded'
                       AND x.updated_at < now() - p_retention_ms * interval '1 ms'
                     ORDER BY x.updated_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
    RETURNING 1)
  SELECT count(*)::integer FROM stopped
$$;

-- Watcher: stopped, dead and cancelled tasks older than the purge retention
-- are deleted with their history; so are long-dead nodes.
CREATE FUNCTION taskmill.sweep_purge(p_retention_ms bigint, p_limit integer) RETURNS integer
LANGUAGE sql AS $$
  WITH gone AS (
    DELETE FROM taskmill.tasks t
     WHERE t.id IN (SELECT x.id FROM taskmill.tasks x
                     WHERE x.status IN ('stopped', 'dead', 'cancelled')
                       AND x.updated_at < now() - p_retention_ms * interval '1 ms'
                     ORDER BY x.updated_at LIMIT p_limit FOR UPDATE SKIP LOCKED)
    RETURNING t.id),
  history AS (
    DELETE FROM taskmill.attempts a USING gone g WHERE a.task_id = g.id
  ),
  nodes AS (
    DELETE FROM taskmill.nodes n
     WHERE n.stopped_at < now() - p_retention_ms * interval '1 ms'
  )
  SELECT count(*)::integer FROM gone
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

-- Leadership is a session advisory lock on the connection of the node's
-- storage: it goes when that connection goes. True if this session holds it
-- (taking it if it is free and wanted); gives it up when not wanted.
CREATE FUNCTION taskmill.lead(p_want boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_held boolean := EXISTS (
    SELECT 1 FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted
       AND l.classid = 7345 AND l.objid = 2 AND l.objsubid = 2);
BEGIN
  IF NOT p_want THEN
    IF v_held THEN
      PERFORM pg_advisory_unlock(7345, 2);
    END IF;
    RETURN false;
  END IF;
  RETURN v_held OR pg_try_advisory_lock(7345, 2);
END
$$;

-- A node declared dead claims nothing until it has registered again.
CREATE FUNCTION taskmill.may_claim(p_node text) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT NOT EXISTS (SELECT 1 FROM taskmill.nodes n WHERE n.name = p_node AND n.stopped_at IS NOT NULL)
$$;

-- SPEC §4, claim, refused to nodes declared dead, skipping levels without due
-- work: an idle claim costs one probe. p_level_quotas[l]
-- tasks of level l come first (the pusher's weighted shares), the rest of
-- p_limit is filled in claim order. Types with
-- a running limit go first within a level, as far as their room allows.
-- Running limits are counted here, in the database, so they hold for the
-- whole cluster; claims that check them take turns. p_types lists the types
-- this node can run (NULL: any); p_local_types the types it runs on executors
-- of limited capacity, with the room p_local_room they have left.
CREATE FUNCTION taskmill.claim(p_node text, p_limit integer, p_level_quotas integer[],
                               p_capped_types text[], p_type_limits integer[],
                               p_global_limit integer, p_types text[], p_local_types text[],
                               p_local_room integer[])
RETURNS SETOF taskmill.tasks
LANGUAGE plpgsql AS $$
DECLARE
  v_left integer := p_limit;
  v_quota integer;
  v_count integer;
  v_running integer;
  v_capped text[] := coalesce(p_capped_types, '{}');
  v_room integer[] := '{}';
  v_step integer;
  v_due integer[] := taskmill.due_levels(p_types);
  v_more boolean := false;
BEGIN
  IF cardinality(v_due) = 0 OR NOT taskmill.may_claim(p_node) THEN
    RETURN;
  END IF;
  IF p_global_limit > 0 OR cardinality(v_capped) > 0 THEN
    PERFORM pg_advisory_xact_lock(7345, 3);
  END IF;
  IF p_global_limit > 0 THEN
    SELECT count(*) INTO v_running FROM taskmill.tasks t WHERE t.status = 'running';
    v_left := least(v_left, p_global_limit - v_running);
  END IF;
  FOR i IN 1..cardinality(v_capped) LOOP
    SELECT count(*) INTO v_running FROM taskmill.tasks t
     WHERE t.status = 'running' AND t.type = v_capped[i];
    v_room[i] := CASE WHEN p_types IS NULL OR v_capped[i] = ANY (p_types)
                      THEN greatest(0, p_type_limits[i] - v_running) ELSE 0 END;
  END LOOP;
  FOR j IN 1..coalesce(cardinality(p_local_types), 0) LOOP
    v_step := array_position(v_capped, p_local_types[j]);
    IF v_step IS NULL THEN
      v_capped := v_capped || p_local_types[j];
      v_room := v_room || greatest(0, p_local_room[j]);
    ELSE
      v_room[v_step] := least(v_room[v_step], greatest(0, p_local_room[j]));
    END IF;
  END LOOP;

  -- Level by level (lvl 1..5), then once more over all levels (lvl 6).
  -- Levels without due work are skipped, and so is the last pass when every
  -- level with work ran dry within its quota.
  FOR lvl IN 1..6 LOOP
    EXIT WHEN v_left <= 0;
    EXIT WHEN lvl = 6 AND NOT v_more;
    IF lvl <= 5 AND NOT lvl = ANY (v_due) THEN
      CONTINUE;
    END IF;
    v_quota := CASE WHEN lvl <= 5 THEN least(coalesce(p_level_quotas[lvl], 0), v_left) ELSE v_left END;
    IF v_quota <= 0 THEN
      v_more := true;
      CONTINUE;
    END IF;
    FOR i IN 1..cardinality(v_capped) LOOP
      v_step := least(v_quota, v_room[i]);
      CONTINUE WHEN v_step <= 0;
      RETURN QUERY SELECT * FROM taskmill.claim_rows(p_node, v_step, nullif(lvl, 6), v_capped[i],
                                                     p_types, v_capped);
      GET DIAGNOSTICS v_count = ROW_COUNT;
      v_more := v_more OR v_count >= v_step;
      v_room[i] := v_room[i] - v_count;
      v_quota := v_quota - v_count;
      v_left := v_left - v_count;
    END LOOP;
    IF v_quota <= 0 THEN
      v_more := true;
      CONTINUE;
    END IF;
    RETURN QUERY SELECT * FROM taskmill.claim_rows(p_node, v_quota, nullif(lvl, 6), NULL,
                                                   p_types, v_capped);
    GET DIAGNOSTICS v_count = ROW_COUNT;
    v_left := v_left - v_count;
    v_more := v_more OR v_count >= v_quota;
  END LOOP;
END
$$;
