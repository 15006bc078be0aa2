-- Nodes, their heartbeats and leases, and leadership (SPEC §4, §7).

-- A node starts: it takes its name unless a live node holds it, and the
-- running tasks of its earlier incarnations, which can no longer finish, end
-- as failed attempts.
CREATE FUNCTION taskmill.register_node(p_name text, p_incarnation text, p_address text,
                                       p_lease_ms bigint, p_types text[]) RETURNS integer
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
                                   stopped_at, types)
  VALUES (p_name, p_incarnation, p_address, now(), now(), false, NULL, p_types)
  ON CONFLICT (name) DO UPDATE
     SET incarnation = excluded.incarnation, address = excluded.address,
         started_at = now(), heartbeat_at = now(), leader = false, stopped_at = NULL,
         types = excluded.types;
  PERFORM taskmill.drop_offer(p_name);
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
  -- First, so that no submit hands it a task once its tasks are released.
  PERFORM taskmill.drop_offer(p_name);
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

-- The lead (taskmill.leadership): p_node's incarnation takes it if it has
-- expired, or keeps it, for p_lease_ms from now; or, not wanting it, lets
-- it expire now. Answers the term it leads under (0: it does not lead).
CREATE FUNCTION taskmill.lead(p_node text, p_incarnation text, p_want boolean, p_lease_ms bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_term bigint;
BEGIN
  IF NOT p_want THEN
    UPDATE taskmill.leadership l SET expires_at = now()
     WHERE l.node = p_node AND l.incarnation = p_incarnation AND l.expires_at > now();
    RETURN 0;
  END IF;
  UPDATE taskmill.leadership l
     SET term = CASE WHEN l.node = p_node AND l.incarnation = p_incarnation
                     THEN l.term ELSE l.term + 1 END,
         node = p_node, incarnation = p_incarnation,
         expires_at = now() + p_lease_ms * interval '1 ms'
   WHERE (l.node = p_node AND l.incarnation = p_incarnation) OR l.expires_at <= now()
  RETURNING l.term INTO v_term;
  RETURN coalesce(v_term, 0);
END
$$;

-- Every duty of the leader calls this first, in its own transaction: it
-- fails unless p_term is the current term and unexpired. The row stays
-- share-locked until that transaction ends, so a new leader's taking over
-- waits for it: a deposed leader's statement that reaches the database late
-- changes nothing, and none overlaps a new leader's.
CREATE FUNCTION taskmill.fence(p_term bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  cur taskmill.leadership;
BEGIN
  PERFORM 1 FROM taskmill.leadership l
   WHERE l.term = p_term AND l.expires_at > clock_timestamp() FOR SHARE;
  IF NOT FOUND THEN
    SELECT * INTO cur FROM taskmill.leadership;
    RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
      MESSAGE = format('not the leader: term %s is over (the lead is term %s of node %s, '
                       'expiring %s)', coalesce(p_term::text, 'none'), cur.term,
                       coalesce(cur.node, 'none'), cur.expires_at);
  END IF;
END
$$;

-- The live nodes that run p_type, by name: where broadcast shards go.
CREATE FUNCTION taskmill.nodes_running(p_type text, p_lease_ms bigint) RETURNS text[]
LANGUAGE sql STABLE AS $$
  SELECT coalesce(array_agg(n.name ORDER BY n.name), '{}')
    FROM taskmill.nodes n
   WHERE n.stopped_at IS NULL AND n.heartbeat_at >= now() - p_lease_ms * interval '1 ms'
     AND (n.types IS NULL OR p_type = ANY (n.types))
$$;
