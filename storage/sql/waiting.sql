-- "Why isn't it running?" (SPEC §8): the reason a pending or failed task is
-- not running now, computed on demand for the API, the CLI and the console.
-- Every read is bounded: the task by its key, nodes and type settings are
-- small tables, running tasks are counted through their partial index (the
-- running set is bounded by the limits), and the due work ahead of the task
-- is probed once per priority level.

-- The first of the reasons that holds, in the order a claim meets them:
-- parents to wait for (the first 100 of them in parents); not due yet; no node
-- that could claim it; a full limit (its type's, its key's, the global one)
-- or its key's rate; due work ahead.
-- p_lease_ms and p_heartbeat_ms are the asking node's lease and heartbeat
-- interval (every node of a cluster has the same); p_global_limit its global
-- running limit (0: none) and p_weights the priority weights, levels 1..5.
-- No row for a task in any other status, or no task.
CREATE FUNCTION taskmill.waiting_reason(p_id bigint, p_lease_ms bigint, p_heartbeat_ms bigint,
                                        p_global_limit integer, p_weights integer[])
RETURNS TABLE (reason text, message text, until timestamptz, parents bigint[])
LANGUAGE plpgsql STABLE AS $$
DECLARE
  t taskmill.tasks;
  v_live_since timestamptz := now() - p_lease_ms * interval '1 ms';
  v_renewed_since timestamptz := now() - (p_lease_ms - p_heartbeat_ms) * interval '1 ms';
  v_nodes text[];
  v_claiming text[];
  v_limit integer;
  v_running bigint;
  v_types text[];
  v_levels integer[];
  v_share numeric;
  v_space taskmill.key_spaces;
  v_rate_room integer;
  v_opens_at timestamptz;
BEGIN
  SELECT * INTO t FROM taskmill.task_by_id(p_id);
  IF NOT FOUND OR t.status NOT IN ('pending', 'failed') THEN
    RETURN;
  END IF;

  IF t.execute_at = 'infinity' THEN
    RETURN QUERY
      SELECT 'waiting_for_parents',
             format('waits for %s unfinished parent%s: %s%s; due %s after them', p.total,
                    CASE WHEN p.total = 1 THEN '' ELSE 's' END,
                    array_to_string(p.ids[1:10], ', '),
                    CASE WHEN p.total > 10 THEN format(' and %s more', p.total - 10) ELSE '' END,
                    CASE WHEN w.execute_at <= now() THEN 'at once' ELSE 'at ' || w.execute_at END),
             NULL::timestamptz, p.ids
        FROM taskmill.unfinished_parents(t.id, 100) p
        LEFT JOIN taskmill.task_waits w ON w.task_id = t.id;
    RETURN;
  END IF;

  IF t.execute_at > now() THEN
    IF t.status = 'failed' THEN
      RETURN QUERY SELECT 'retry_backoff', format(
        'attempt %s failed (%s); retry %s of %s waits for its backoff until %s',
        t.attempt, coalesce(t.error, 'no error given'), t.retry_count, t.max_retries,
        t.execute_at), t.execute_at, NULL::bigint[];
    ELSE
      RETURN QUERY SELECT 'due_later', format('due later, at %s', t.execute_at), t.execute_at,
        NULL::bigint[];
    END IF;
    RETURN;
  END IF;

  IF t.pinned_node IS NOT NULL AND NOT EXISTS (
       SELECT 1 FROM taskmill.nodes n
        WHERE n.name = t.pinned_node AND n.stopped_at IS NULL AND n.heartbeat_at >= v_live_since) THEN
    RETURN QUERY SELECT 'pinned_node_down', format(
      'shard %s of %s is pinned to node %s, which is down; the leader pins it to a live node',
      t.shard_index, t.shard_total, t.pinned_node), NULL::timestamptz, NULL::bigint[];
    RETURN;
  END IF;

  SELECT coalesce(array_agg(n.name ORDER BY n.name), '{}'),
         coalesce(array_agg(n.name ORDER BY n.name) FILTER (WHERE n.heartbeat_at >= v_renewed_since), '{}')
    INTO v_nodes, v_claiming
    FROM taskmill.nodes n
   WHERE n.stopped_at IS NULL AND n.heartbeat_at >= v_live_since
     AND (n.types IS NULL OR t.type = ANY (n.types))
     AND (t.pinned_node IS NULL OR n.name = t.pinned_node);
  IF cardinality(v_nodes) = 0 THEN
    RETURN QUERY SELECT 'no_node_for_type',
      format('no live node runs type %s', t.type), NULL::timestamptz, NULL::bigint[];
    RETURN;
  END IF;
  IF cardinality(v_claiming) = 0 THEN
    RETURN QUERY SELECT 'claiming_paused', format(
      'claiming is paused on %s: the lease is in doubt (no heartbeat stored for over %s ms)',
      array_to_string(v_nodes, ', '), p_lease_ms - p_heartbeat_ms), NULL::timestamptz,
      NULL::bigint[];
    RETURN;
  END IF;

  SELECT s.running_limit INTO v_limit FROM taskmill.type_settings(t.type) s;
  IF v_limit IS NOT NULL THEN
    SELECT count(*) INTO v_running FROM taskmill.tasks r WHERE r.status = 'running' AND r.type = t.type;
    IF v_running >= v_limit THEN
      RETURN QUERY SELECT 'limit_full', format(
        'the running limit of type %s is full: %s of %s running', t.type, v_running, v_limit),
        NULL::timestamptz, NULL::bigint[];
      RETURN;
    END IF;
  END IF;
  IF t.key_space IS NOT NULL THEN
    SELECT * INTO v_space FROM taskmill.key_spaces k WHERE k.name = t.key_space;
    v_limit := taskmill.key_limit(v_space, t.concurrency_key, t.key_class);
    SELECT count(*) INTO v_running FROM taskmill.tasks r
     WHERE r.key_space = t.key_space AND r.concurrency_key = t.concurrency_key
       AND r.status = 'running';
    IF v_running >= v_limit THEN
      RETURN QUERY SELECT 'key_limit_full', format(
        'key %s of key space %s is full: %s of %s running', t.concurrency_key, t.key_space,
        v_running, v_limit), NULL::timestamptz, NULL::bigint[];
      RETURN;
    END IF;
    -- As a claim counts it: in starts of the space's dearest type.
    v_rate_room := taskmill.key_rate_room(v_space, t.concurrency_key);
    IF v_rate_room < taskmill.key_rate_units(v_space) THEN
      v_opens_at := taskmill.key_rate_opens_at(v_space, t.concurrency_key);
      RETURN QUERY SELECT 'rate_limited', format(
        'key %s of key space %s is at its rate: %s units started in the last %s ms; the next '
        'may start at %s', t.concurrency_key, t.key_space, v_space.rate - v_rate_room,
        v_space.rate_period_ms, v_opens_at), v_opens_at, NULL::bigint[];
      RETURN;
    END IF;
  END IF;
  IF p_global_limit > 0 THEN
    SELECT count(*) INTO v_running FROM taskmill.tasks r WHERE r.status = 'running';
    IF v_running >= p_global_limit THEN
      RETURN QUERY SELECT 'limit_full', format(
        'the global running limit is full: %s of %s running', v_running, p_global_limit),
        NULL::timestamptz, NULL::bigint[];
      RETURN;
    END IF;
  END IF;

  -- The levels with due work that the claiming nodes run, as their claims'
  -- own probe sees them.
  SELECT CASE WHEN bool_or(n.types IS NULL) THEN NULL
              ELSE (SELECT array_agg(DISTINCT x) FROM taskmill.nodes m, unnest(m.types) x
                     WHERE m.name = ANY (v_claiming)) END
    INTO v_types
    FROM taskmill.nodes n WHERE n.name = ANY (v_claiming);
  v_levels := taskmill.due_levels(v_types, t.pinned_node);
  IF EXISTS (SELECT 1 FROM unnest(v_levels) l WHERE l < t.priority) THEN
    SELECT p_weights[t.priority]::numeric / sum(p_weights[l]) INTO v_share
      FROM (SELECT DISTINCT l FROM unnest(array_append(v_levels, t.priority::integer)) l) levels;
    RETURN QUERY SELECT 'behind_priorities', format(
      'due work of higher priority (%s) goes first; priority %s gets %s%% of each claim round',
      (SELECT string_agg(l::text, ', ') FROM unnest(v_levels) l WHERE l < t.priority),
      t.priority, round(100 * v_share)), NULL::timestamptz, NULL::bigint[];
    RETURN;
  END IF;

  RETURN QUERY SELECT 'due_now', format(
    'due since %s; the next claim round on %s takes it', t.execute_at,
    array_to_string(v_claiming, ', ')), NULL::timestamptz, NULL::bigint[];
END
$$;
