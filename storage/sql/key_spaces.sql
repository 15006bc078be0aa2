-- Key spaces as the API reads and changes them (SPEC §4 Keyed limits;
-- GET|PUT|DELETE /v1/key-spaces/{name}, GET /v1/key-spaces/{name}/keys/{key}).
-- Every count here goes through the keys' partial indexes: a space's
-- running tasks through tasks_running_by_key, its waiting ones through
-- tasks_due_by_key, never through finished tasks.

-- The key spaces (p_name NULL: all of them), each with the types keyed in
-- it, its running tasks and the keys they run under.
CREATE FUNCTION taskmill.key_space_views(p_name text)
RETURNS TABLE (name text, key_limit integer, key_limits jsonb, class_path text,
               class_limits jsonb, rate integer, rate_period_ms integer,
               updated_at timestamptz, types jsonb, running bigint, keys_running bigint)
LANGUAGE sql STABLE AS $$
  SELECT k.name, k.key_limit, k.key_limits, k.class_path, k.class_limits, k.rate,
         k.rate_period_ms, k.updated_at,
         coalesce((SELECT jsonb_agg(s.type ORDER BY s.type) FROM taskmill.task_types s
                    WHERE s.key_space = k.name), '[]'),
         coalesce(r.running, 0), coalesce(r.keys, 0)
    FROM taskmill.key_spaces k
    LEFT JOIN LATERAL (SELECT count(*) AS running, count(DISTINCT t.concurrency_key) AS keys
                         FROM taskmill.tasks t
                        WHERE t.status = 'running' AND t.key_space = k.name) r ON true
   WHERE p_name IS NULL OR k.name = p_name
   ORDER BY k.name
$$;

-- Where a key's limit comes from: its own, its class's, or the space's.
CREATE FUNCTION taskmill.key_limit_source(p_space taskmill.key_spaces, p_key text, p_class text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_space.key_limits ? p_key THEN 'key'
              WHEN p_class IS NOT NULL AND p_space.class_limits ? p_class THEN 'class'
              ELSE 'space' END
$$;

-- The p_top keys of space p_name running most (ranked_by 'running') and
-- the p_top with most due tasks ('due'), each with its class, limit and
-- counts. Due tasks are counted among the first p_due_scan of the space's
-- waiting tasks (by level and key); due_capped says there were more.
CREATE FUNCTION taskmill.top_keys(p_name text, p_top integer, p_due_scan integer)
RETURNS TABLE (ranked_by text, key text, key_class text, key_limit integer, limit_from text,
               running bigint, due bigint, due_capped boolean)
LANGUAGE sql STABLE AS $$
  WITH space AS (SELECT * FROM taskmill.key_spaces k WHERE k.name = p_name),
  scanned AS (
    SELECT t.concurrency_key, t.key_class, t.execute_at <= now() AS is_due
      FROM taskmill.tasks t
     WHERE t.key_space = p_name AND t.status IN ('pending', 'failed')
     ORDER BY t.priority, t.concurrency_key
     LIMIT p_due_scan + 1),
  due AS (
    SELECT s.concurrency_key AS key, max(s.key_class) AS key_class,
           count(*) FILTER (WHERE s.is_due) AS n
      FROM scanned s GROUP BY s.concurrency_key),
  running AS (
    SELECT t.concurrency_key AS key, max(t.key_class) AS key_class, count(*) AS n
      FROM taskmill.tasks t
     WHERE t.status = 'running' AND t.key_space = p_name
     GROUP BY t.concurrency_key),
  ranked AS (
    (SELECT 'running' AS ranked_by, r.key, r.key_class FROM running r
      ORDER BY r.n DESC, r.key LIMIT p_top)
    UNION ALL
    (SELECT 'due', d.key, d.key_class FROM due d WHERE d.n > 0
      ORDER BY d.n DESC, d.key LIMIT p_top))
  SELECT x.ranked_by, x.key, x.key_class, taskmill.key_limit(sp, x.key, x.key_class),
         taskmill.key_limit_source(sp, x.key, x.key_class), coalesce(r.n, 0),
         coalesce(d.n, 0), (SELECT count(*) > p_due_scan FROM scanned)
    FROM ranked x CROSS JOIN space sp
    LEFT JOIN running r ON r.key = x.key
    LEFT JOIN due d ON d.key = x.key
   ORDER BY x.ranked_by DESC, CASE x.ranked_by WHEN 'running' THEN r.n ELSE d.n END DESC, x.key
$$;

-- Key p_key of space p_name now: its class, limit, running, due and later
-- tasks, and within its rate the units started in the period now ending
-- and when the oldest of them leaves it. No row when there is no space.
CREATE FUNCTION taskmill.key_view(p_name text, p_key text)
RETURNS TABLE (key_class text, key_limit integer, limit_from text, running bigint, due bigint,
               later bigint, rate_used integer, rate_opens_at timestamptz)
LANGUAGE sql STABLE AS $$
  WITH waiting AS (
    SELECT w.key_class, w.execute_at <= now() AS is_due
      FROM generate_series(1, 5) l(p),
           LATERAL (SELECT t.key_class, t.execute_at FROM taskmill.tasks t
                     WHERE t.key_space = p_name AND t.priority = l.p
                       AND t.concurrency_key = p_key COLLATE "C"
                       AND t.status IN ('pending', 'failed')) w),
  running AS (
    SELECT t.key_class FROM taskmill.tasks t
     WHERE t.status = 'running' AND t.key_space = p_name
       AND t.concurrency_key = p_key COLLATE "C"),
  class AS (
    SELECT coalesce((SELECT max(r.key_class) FROM running r),
                    (SELECT max(w.key_class) FROM waiting w)) AS key_class)
  SELECT c.key_class, taskmill.key_limit(k, p_key, c.key_class),
         taskmill.key_limit_source(k, p_key, c.key_class), (SELECT count(*) FROM running),
         (SELECT count(*) FILTER (WHERE w.is_due) FROM waiting w),
         (SELECT count(*) FILTER (WHERE NOT w.is_due) FROM waiting w),
         CASE WHEN k.rate IS NOT NULL
              THEN (SELECT u.units FROM taskmill.key_units_started(k, p_key) u) END,
         taskmill.key_rate_opens_at(k, p_key)
    FROM taskmill.key_spaces k CROSS JOIN class c
   WHERE k.name = p_name
$$;

-- Key p_key's tasks of space p_name: its running ones, then its waiting
-- ones in the order a claim takes them, p_limit of each at most.
CREATE FUNCTION taskmill.key_tasks(p_name text, p_key text, p_limit integer)
RETURNS SETOF taskmill.tasks
LANGUAGE sql STABLE AS $$
  (SELECT t.* FROM taskmill.tasks t
    WHERE t.status = 'running' AND t.key_space = p_name
      AND t.concurrency_key = p_key COLLATE "C"
    ORDER BY t.started_at, t.id LIMIT p_limit)
  UNION ALL
  (SELECT w.* FROM generate_series(1, 5) l(p),
          LATERAL (SELECT t.* FROM taskmill.tasks t
                    WHERE t.key_space = p_name AND t.priority = l.p
                      AND t.concurrency_key = p_key COLLATE "C"
                      AND t.status IN ('pending', 'failed')
                    ORDER BY t.execute_at, t.id LIMIT p_limit) w
    ORDER BY w.priority, w.execute_at, w.id LIMIT p_limit)
$$;

-- Puts key space p_space (as put_key_spaces takes one) from the API, each
-- value refused naming the field; answers whether it is new. Claims read
-- the limits each time, and the nodes are woken to claim at once, so that a
-- limit raised holds as the change commits. A node whose config names the
-- space writes the config's settings again as it starts.
CREATE FUNCTION taskmill.put_key_space(p_space jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_existed boolean :=
    EXISTS (SELECT 1 FROM taskmill.key_spaces k WHERE k.name = p_space ->> 'name');
BEGIN
  PERFORM taskmill.put_key_spaces(jsonb_build_array(p_space));
  PERFORM taskmill.wake_nodes();
  RETURN NOT v_existed;
END
$$;

-- Deletes key space p_name and its keys' turns and rate slots, unless a
-- type is keyed in it: answers whether there was one, and the types that
-- keep it (then nothing is deleted).
CREATE FUNCTION taskmill.delete_key_space(p_name text, OUT deleted boolean, OUT types text[])
LANGUAGE plpgsql AS $$
BEGIN
  types := ARRAY(SELECT s.type FROM taskmill.task_types s WHERE s.key_space = p_name
                  ORDER BY s.type);
  deleted := false;
  IF cardinality(types) > 0 THEN
    RETURN;
  END IF;
  DELETE FROM taskmill.key_turns WHERE space = p_name;
  DELETE FROM taskmill.key_starts WHERE space = p_name;
  DELETE FROM taskmill.key_spaces WHERE name = p_name;
  deleted := FOUND;
END
$$;
