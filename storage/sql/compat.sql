-- Calls of nodes of older releases, answered while such nodes may still run
-- beside these definitions in a rolling upgrade (storage/migrations.hpp: a
-- release's definitions answer every call of the previous release's nodes).
-- Each says which nodes call it and from which generation of the
-- definitions it may be dropped. Nothing of this release calls them but
-- tests of the old calls.
--
-- Also kept for older nodes, in a function of this release: taskmill.put_job's
-- p_dialect default (jobs.sql), for nodes of generation 3 and before. Drop
-- from generation 6 on.

-- Callers: nodes of generation 10 and before, which take their cancels once
-- and never tell whether the executor heard them: taken is done for them,
-- as they expect. Drop from generation 13 on.
CREATE FUNCTION taskmill.take_cancels(p_node text, p_reachable_types text[], p_lease_ms bigint)
RETURNS TABLE (task_id bigint, attempt integer, type text, key text, node text)
LANGUAGE sql AS $$
  DELETE FROM taskmill.cancel_requests c
   WHERE c.node = p_node
      OR (c.type = ANY (p_reachable_types) AND NOT taskmill.node_alive(c.node, p_lease_ms))
  RETURNING c.task_id, c.attempt, c.type, c.key, c.node
$$;

-- Callers: nodes of generation 0 (before definitions were counted), which
-- give quotas per level instead of turns, take them in priority order and
-- read whole task rows. Drop from generation 6 on. The rows are read after
-- the claim, which a statement calling it would not yet see. The tests use
-- it as the plain claim of one level.
CREATE FUNCTION taskmill.claim(p_node text, p_limit integer, p_level_quotas integer[],
                               p_capped_types text[], p_type_limits integer[],
                               p_global_limit integer, p_types text[], p_local_types text[],
                               p_local_room integer[])
RETURNS SETOF taskmill.tasks
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[] := ARRAY(
    SELECT c.id FROM taskmill.claim_by_turns(
      p_node, p_limit,
      ARRAY(SELECT l.p FROM generate_series(1, 5) AS l(p)
             CROSS JOIN generate_series(1, coalesce(p_level_quotas[l.p], 0))
             ORDER BY l.p),
      p_capped_types, p_type_limits, p_global_limit, p_types, p_local_types, p_local_room) c);
BEGIN
  RETURN QUERY SELECT t.* FROM unnest(v_ids) WITH ORDINALITY AS c(id, n)
                 JOIN taskmill.tasks t ON t.id = c.id AND t.status = 'running' ORDER BY c.n;
END
$$;



-- Callers: nodes of generation 20 and before, which ask for one time: a
-- time now or past while work came due untaken, else the next to come.
-- Drop from generation 23 on.
CREATE FUNCTION taskmill.next_due(p_types text[], p_horizon_ms bigint, p_node text,
                                  OUT next_due_at timestamptz, OUT db_now timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN n.due_now THEN n.db_now ELSE n.next_due_at END, n.db_now
    FROM taskmill.next_due_times(p_types, p_horizon_ms, p_node) n
$$;

-- Callers: nodes of generation 0, which ask without a horizon. Drop from
-- generation 6 on.
CREATE FUNCTION taskmill.next_due(p_types text[], OUT next_due_at timestamptz,
                                             OUT db_now timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT n.next_due_at, n.db_now FROM taskmill.next_due(p_types, 3600000, NULL) n
$$;

-- Callers: nodes of generation 0, which led by a session advisory lock:
-- they lead no more once these definitions stand (an upgrade hands the lead
-- to upgraded nodes). Drop from generation 6 on.
CREATE FUNCTION taskmill.lead(p_want boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_unlock(7345, 2)
     FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.granted
      AND l.classid = 7345 AND l.objid = 2 AND l.objsubid = 2;
  RETURN false;
END
$$;


-- Callers: nodes of generation 0, which read each task of a batch submit as
-- one composite column. Drop from generation 6 on.
CREATE FUNCTION taskmill.submit_many(
  p_types text[], p_keys text[], p_versions bigint[], p_payloads jsonb[],
  p_execute_ats timestamptz[], p_priorities integer[], p_max_retries integer[],
  p_timeouts integer[], p_backoff_kinds text[], p_backoff_bases integer[],
  p_backoff_caps integer[], p_backoff_jitters real[], p_batches text[], p_trace_ids text[],
  p_shard_indexes integer[], p_shard_totals integer[])
RETURNS TABLE (ordinal bigint, outcome text, task taskmill.tasks)
LANGUAGE sql AS $$
  SELECT s.ordinal, s.outcome,
         ROW(s.id, s.type, s.key, s.version, s.status, s.priority, s.execute_at, s.payload,
             s.result, s.error, s.attempt, s.retry_count, s.max_retries, s.timeout_ms,
             s.backoff_kind, s.backoff_base_ms, s.backoff_cap_ms, s.backoff_jitter,
             s.deadline_at, s.batch, s.shard_index, s.shard_total, s.trace_id, s.picked_by,
             s.heartbeat_at, s.started_at, s.created_at, s.updated_at, s.finished_at,
             s.pinned_node, s.has_children, s.parent_results, s.key_space, s.concurrency_key,
             s.key_class)::taskmill.tasks
    FROM taskmill.submit_batch(p_types, p_keys, p_versions, p_payloads, p_execute_ats,
                               p_priorities, p_max_retries, p_timeouts, p_backoff_kinds,
                               p_backoff_bases, p_backoff_caps, p_backoff_jitters, p_batches,
                               p_trace_ids, p_shard_indexes, p_shard_totals) s
$$;

-- Callers: nodes of generation 21 and before, which read every count in one
-- call and take a sample of a large table at each. Drop from generation 24
-- on.
CREATE FUNCTION taskmill.status_counts(p_exact_up_to bigint)
RETURNS TABLE (type text, status text, n bigint, estimated boolean)
LANGUAGE sql STABLE AS $$
  SELECT * FROM taskmill.live_counts(p_exact_up_to)
  UNION ALL
  SELECT * FROM taskmill.finished_counts(p_exact_up_to, true) f WHERE f.type IS NOT NULL
$$;

-- Callers: nodes of generation 23 and before, which list tasks oldest first
-- (a page after p_after; taskmill.tasks_before lists newest first). Drop
-- from generation 26 on, with taskmill.type_task_page and
-- taskmill.unit_task_page below.
CREATE FUNCTION taskmill.task_page(p_type text, p_key text, p_status taskmill.task_status,
                                   p_batch text, p_after bigint, p_limit integer, p_scan integer)
RETURNS TABLE (task taskmill.tasks, scan_last bigint, scan_rows bigint)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  c_waiting_read constant integer := 1000;
  v_waiting bigint[] := '{}';
BEGIN
  IF p_type IS NOT NULL AND p_key IS NULL AND p_batch IS NULL THEN
    IF p_status IS NULL OR p_status IN ('pending', 'failed') THEN
      v_waiting := taskmill.waiting_ids_of_type(p_type, c_waiting_read + 1);
    END IF;
    IF cardinality(v_waiting) <= c_waiting_read THEN
      RETURN QUERY SELECT p::taskmill.tasks, NULL::bigint, 0::bigint
                     FROM taskmill.type_task_page(p_type, p_status, v_waiting, p_after, p_limit) p;
      RETURN;
    END IF;
  END IF;
  RETURN QUERY
  WITH page AS (
    SELECT s.* FROM (SELECT * FROM taskmill.tasks t WHERE t.id > p_after
                      ORDER BY t.id LIMIT p_scan) s
     WHERE (p_type IS NULL OR s.type = p_type) AND (p_key IS NULL OR s.key = p_key)
       AND (p_status IS NULL OR s.status = p_status) AND (p_batch IS NULL OR s.batch = p_batch)
     ORDER BY s.id LIMIT p_limit
  ), scan AS (
    SELECT max(x.id) AS last_id, count(*) AS scanned
      FROM (SELECT t.id FROM taskmill.tasks t WHERE t.id > p_after ORDER BY t.id LIMIT p_scan) x
     WHERE (SELECT count(*) FROM page) < p_limit
  )
  SELECT m::taskmill.tasks, scan.last_id, scan.scanned FROM scan LEFT JOIN page m ON true
   ORDER BY m.id;
END
$$;

-- Called by taskmill.task_page above: a page of one type's tasks after
-- p_after.
CREATE FUNCTION taskmill.type_task_page(p_type text, p_status taskmill.task_status,
                                        p_waiting bigint[], p_after bigint, p_limit integer)
RETURNS SETOF taskmill.tasks
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_sort = off
SET jit = off AS $$
BEGIN
  RETURN QUERY
  SELECT u.* FROM (
    (SELECT t.* FROM taskmill.live_tasks t
      WHERE t.id = ANY (p_waiting) AND t.id > p_after AND t.status IN ('pending', 'failed')
        AND (p_status IS NULL OR t.status = p_status)
      ORDER BY t.id LIMIT p_limit)
    UNION ALL
    SELECT t.* FROM taskmill.live_tasks t
     WHERE t.status = 'running' AND t.type = p_type AND t.id > p_after
       AND (p_status IS NULL OR p_status = 'running')
    UNION ALL
    SELECT f.* FROM unnest('{dead,cancelled}'::taskmill.task_status[]) s (status),
           LATERAL (SELECT t.* FROM taskmill.live_tasks t
                     WHERE t.status = s.status AND t.status IN ('dead', 'cancelled')
                       AND (t.type, t.id) > (p_type, p_after) AND t.type <= p_type
                     ORDER BY t.type, t.id LIMIT p_limit) f
     WHERE p_status IS NULL OR s.status = p_status
    UNION ALL
    (SELECT t.* FROM taskmill.succeeded_tasks t
      WHERE (t.type, t.id) > (p_type, p_after) AND t.type <= p_type
        AND (p_status IS NULL OR p_status = 'succeeded')
      ORDER BY t.type, t.id LIMIT p_limit)
    UNION ALL
    (SELECT t.* FROM taskmill.stopped_tasks t
      WHERE (t.type, t.id) > (p_type, p_after) AND t.type <= p_type
        AND (p_status IS NULL OR p_status = 'stopped')
      ORDER BY t.type, t.id LIMIT p_limit)
  ) u ORDER BY u.id LIMIT p_limit;
END
$$;

-- Callers: nodes of generation 23 and before (see taskmill.task_page).
CREATE FUNCTION taskmill.unit_task_page(p_type text, p_key text, p_status taskmill.task_status,
                                        p_batch text, p_after bigint, p_limit integer)
RETURNS SETOF taskmill.tasks
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  RETURN QUERY
  SELECT t.* FROM (SELECT k.task_id FROM taskmill.task_keys k
                    WHERE k.type = p_type AND k.key = p_key AND k.task_id > p_after
                   UNION
                   SELECT c.id FROM taskmill.tasks c
                    WHERE c.status = 'cancelled' AND c.type = p_type AND c.key = p_key
                      AND c.id > p_after) u,
         LATERAL taskmill.task_by_id(u.task_id) t
   WHERE (p_status IS NULL OR t.status = p_status) AND (p_batch IS NULL OR t.batch = p_batch)
   ORDER BY t.id LIMIT p_limit;
END
$$;
