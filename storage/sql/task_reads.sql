-- Tasks read by id and pages of the task list: the API's and the console's
-- reads. Stopped tasks lie in a table a day (storage/sql/stopped_days.sql),
-- so a statement over taskmill.tasks that cannot name a status is planned
-- against every day's table and its indexes, and the planning grows with the
-- purge retention while the execution does not. Each read here is planned
-- once a session (a generic plan), in a function because the node's own
-- statements are planned at every call behind a transaction pooler, and
-- the list's would be anyway: its filters left NULL make a call's own plan
-- look cheaper than the shared one.

-- Task p_id: no row if there is none. A live task or a success is found
-- without the stopped days' tables. Submits call it
-- (taskmill.current_task): its plan, made once, must not be a scan.
CREATE FUNCTION taskmill.task_by_id(p_id bigint) RETURNS SETOF taskmill.tasks ROWS 1
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
  RETURN QUERY SELECT * FROM taskmill.tasks t WHERE t.id = p_id AND t.status <> 'stopped';
  IF NOT FOUND THEN
    RETURN QUERY SELECT * FROM taskmill.tasks t WHERE t.id = p_id AND t.status = 'stopped';
  END IF;
END
$$;

-- A page of tasks newest first, before p_before (NULL: from the newest): at
-- most p_limit of those among the p_scan tasks before it that match the
-- filters (a NULL filter matches every task), so that a filter matching few
-- of millions of tasks costs the same as any other: the page may then be
-- short, and scan_last says where the next one goes on. The read stops once
-- the page is full, so a page that fills costs its own rows, however many
-- the table holds; only a short page counts where its scan ended (scan_rows;
-- 0 otherwise). Without a match the scan is one row with only scan_last and
-- scan_rows. A page of one type is read through the type's own tasks
-- instead (taskmill.type_tasks_before), whole and without a scan, unless it
-- may hold waiting tasks and more of them wait than a page should read to
-- sort them by id. Newest first, because the retention moves and deletes
-- the oldest tasks: their index entries stay at the old end until a vacuum
-- of a table that may hold millions, and a first page from there would step
-- over all of them.
CREATE FUNCTION taskmill.tasks_before(p_type text, p_key text, p_status taskmill.task_status,
                                      p_batch text, p_before bigint, p_limit integer,
                                      p_scan integer)
RETURNS TABLE (task taskmill.tasks, scan_last bigint, scan_rows bigint)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  c_waiting_read constant integer := 1000;
  v_before bigint := coalesce(p_before, 9223372036854775807);
  v_waiting bigint[] := '{}';
BEGIN
  IF p_type IS NOT NULL AND p_key IS NULL AND p_batch IS NULL THEN
    IF p_status IS NULL OR p_status IN ('pending', 'failed') THEN
      v_waiting := taskmill.waiting_ids_of_type(p_type, c_waiting_read + 1);
    END IF;
    IF cardinality(v_waiting) <= c_waiting_read THEN
      RETURN QUERY SELECT p::taskmill.tasks, NULL::bigint, 0::bigint
                     FROM taskmill.type_tasks_before(p_type, p_status, v_waiting, v_before,
                                                     p_limit) p;
      RETURN;
    END IF;
  END IF;
  RETURN QUERY
  WITH page AS (
    SELECT s.* FROM (SELECT * FROM taskmill.tasks t WHERE t.id < v_before
                      ORDER BY t.id DESC LIMIT p_scan) s
     WHERE (p_type IS NULL OR s.type = p_type) AND (p_key IS NULL OR s.key = p_key)
       AND (p_status IS NULL OR s.status = p_status) AND (p_batch IS NULL OR s.batch = p_batch)
     ORDER BY s.id DESC LIMIT p_limit
  ), scan AS (
    SELECT min(x.id) AS last_id, count(*) AS scanned
      FROM (SELECT t.id FROM taskmill.tasks t WHERE t.id < v_before
             ORDER BY t.id DESC LIMIT p_scan) x
     WHERE (SELECT count(*) FROM page) < p_limit
  )
  SELECT m::taskmill.tasks, scan.last_id, scan.scanned FROM scan LEFT JOIN page m ON true
   ORDER BY m.id DESC;
END
$$;

-- The ids of up to p_limit of type p_type's waiting tasks, whatever their
-- ids, read from the claim's index by type alone: the type is a range and
-- the order that index's, as in taskmill.type_tasks_before below.
CREATE FUNCTION taskmill.waiting_ids_of_type(p_type text, p_limit integer) RETURNS bigint[]
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_sort = off AS $$
BEGIN
  RETURN ARRAY(SELECT t.id FROM taskmill.live_tasks t
                WHERE t.type >= p_type AND t.type <= p_type AND t.status IN ('pending', 'failed')
                ORDER BY t.type, t.priority, t.execute_at, t.id LIMIT p_limit);
END
$$;

-- The tasks of type p_type before p_before newest first, at most p_limit,
-- each read through an index that holds a type's tasks of its status, so
-- that a page costs the type's own tasks and not the history of others:
-- p_waiting are all its waiting tasks of either waiting status (their index
-- orders them for the claim, not by id), its running ones are read among
-- every running task (as many as the nodes run), and its finished ones
-- (succeeded, dead, cancelled, stopped) are indexed by type and id. The
-- plan is made once, for any type, so it takes each type to be as common as
-- any other: ordered by id alone, the finished tasks would be read in the
-- order of every type's ids until the page filled, or all read and sorted.
-- Their type is a range, not an equality the planner would fold into a
-- constant, so that the order by type and id is one only the type's index
-- gives, and that index's scan starts at the page and ends with the type.
-- Sorts ruled out put the plan's cost past every JIT threshold.
CREATE FUNCTION taskmill.type_tasks_before(p_type text, p_status taskmill.task_status,
                                           p_waiting bigint[], p_before bigint, p_limit integer)
RETURNS SETOF taskmill.tasks
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_sort = off
SET jit = off AS $$
BEGIN
  RETURN QUERY
  SELECT u.* FROM (
    (SELECT t.* FROM taskmill.live_tasks t
      WHERE t.id = ANY (p_waiting) AND t.id < p_before AND t.status IN ('pending', 'failed')
        AND (p_status IS NULL OR t.status = p_status)
      ORDER BY t.id DESC LIMIT p_limit)
    UNION ALL
    SELECT t.* FROM taskmill.live_tasks t
     WHERE t.status = 'running' AND t.type = p_type AND t.id < p_before
       AND (p_status IS NULL OR p_status = 'running')
    UNION ALL
    SELECT f.* FROM unnest('{dead,cancelled}'::taskmill.task_status[]) s (status),
           LATERAL (SELECT t.* FROM taskmill.live_tasks t
                     WHERE t.status = s.status AND t.status IN ('dead', 'cancelled')
                       AND (t.type, t.id) < (p_type, p_before) AND t.type >= p_type
                     ORDER BY t.type DESC, t.id DESC LIMIT p_limit) f
     WHERE p_status IS NULL OR s.status = p_status
    UNION ALL
    (SELECT t.* FROM taskmill.succeeded_tasks t
      WHERE (t.type, t.id) < (p_type, p_before) AND t.type >= p_type
        AND (p_status IS NULL OR p_status = 'succeeded')
      ORDER BY t.type DESC, t.id DESC LIMIT p_limit)
    UNION ALL
    (SELECT t.* FROM taskmill.stopped_tasks t
      WHERE (t.type, t.id) < (p_type, p_before) AND t.type >= p_type
        AND (p_status IS NULL OR p_status = 'stopped')
      ORDER BY t.type DESC, t.id DESC LIMIT p_limit)
  ) u ORDER BY u.id DESC LIMIT p_limit;
END
$$;

-- The tasks of one (type, key) before p_before (NULL: from the newest),
-- newest first, at most p_limit: those its keys name (live or stopped) and
-- the cancelled ones, which keep none.
CREATE FUNCTION taskmill.unit_tasks_before(p_type text, p_key text,
                                           p_status taskmill.task_status, p_batch text,
                                           p_before bigint, p_limit integer)
RETURNS SETOF taskmill.tasks
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_before bigint := coalesce(p_before, 9223372036854775807);
BEGIN
  RETURN QUERY
  SELECT t.* FROM (SELECT k.task_id FROM taskmill.task_keys k
                    WHERE k.type = p_type AND k.key = p_key AND k.task_id < v_before
                   UNION
                   SELECT c.id FROM taskmill.tasks c
                    WHERE c.status = 'cancelled' AND c.type = p_type AND c.key = p_key
                      AND c.id < v_before) u,
         LATERAL taskmill.task_by_id(u.task_id) t
   WHERE (p_status IS NULL OR t.status = p_status) AND (p_batch IS NULL OR t.batch = p_batch)
   ORDER BY t.id DESC LIMIT p_limit;
END
$$;

-- The statuses of a batch's tasks, with how many have each and the records
-- they reported processed and failed.
CREATE FUNCTION taskmill.batch_counts(p_batch text)
RETURNS TABLE (status text, n bigint, processed bigint, failed bigint)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
  RETURN QUERY
  SELECT t.status::text, count(*), coalesce(sum(p.processed), 0)::bigint,
         coalesce(sum(p.failed), 0)::bigint
    FROM taskmill.tasks t LEFT JOIN taskmill.task_progress p ON p.task_id = t.id
   WHERE t.batch = p_batch
   GROUP BY 1;
END
$$;

-- Task p_id's finished attempts and the one under way if it is running, in
-- order; a task without attempts yet is one row without one; no task, no
-- row.
CREATE FUNCTION taskmill.task_attempts(p_id bigint)
RETURNS TABLE (id bigint, attempt integer, node text, started_at timestamptz,
               finished_at timestamptz, outcome text, error text)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  t taskmill.tasks;
BEGIN
  SELECT * INTO t FROM taskmill.task_by_id(p_id);
  IF NOT FOUND THEN
    RETURN;
  END IF;
  RETURN QUERY
  SELECT p_id, h.attempt, h.node, h.started_at, h.finished_at, h.outcome, h.error
    FROM (SELECT) one LEFT JOIN taskmill.attempt_history h ON h.task_id = p_id
  UNION ALL
  SELECT p_id, t.attempt, t.picked_by, t.started_at, NULL, 'running', NULL
   WHERE t.status = 'running'
     AND NOT EXISTS (SELECT 1 FROM taskmill.attempts a
                      WHERE a.task_id = p_id AND a.attempt = t.attempt)
   ORDER BY 2 NULLS FIRST, 5 NULLS LAST;
END
$$;
