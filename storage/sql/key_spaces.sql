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

-- The class of key p_key of space p_name: that of one of its running or
-- waiting tasks (a class is taken as a task is submitted), through the
-- keys' indexes; NULL when it has none.
CREATE FUNCTION taskmill.class_of_key(p_name text, p_key text) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT coalesce(
    (SELECT t.key_class FROM taskmill.tasks t
      WHERE t.status = 'running' AND t.key_space = p_name
        AND t.concurrency_key = p_key COLLATE "C" LIMIT 1),
    (SELECT w.key_class
       FROM generate_series(1, 5) l(p),
            LATERAL (SELECT t.key_class FROM taskmill.tasks t
                      WHERE t.key_space = p_name AND t.priority = l.p
                        AND t.concurrency_key = p_key COLLATE "C"
                        AND t.status IN ('pending', 'failed') LIMIT 1) w
      LIMIT 1))
$$;

-- The p_top keys of space p_name running most (ranked_by 'running') and
-- the p_top with most due tasks ('due'), each with its class, limit and
-- counts; a row without a key when there are none. Due tasks are counted
-- among the first p_due_scan of the space's waiting tasks in level and key
-- order, read from the index alone; due_capped says there were more (keys
-- past them are then not counted).
CREATE FUNCTION taskmill.top_keys(p_name text, p_top integer, p_due_scan integer)
RETURNS TABLE (ranked_by text, key text, key_class text, key_limit integer, limit_from text,
               running bigint, due bigint, due_capped boolean)
LANGUAGE sql STABLE AS $$
  WITH scanned AS (
    SELECT t.concurrency_key, t.execute_at <= now() AS is_due
      FROM taskmill.tasks t
     WHERE t.key_space = p_name AND t.status IN ('pending', 'failed')
     ORDER BY t.priority, t.concurrency_key
     LIMIT p_due_scan + 1),
  due AS (
    SELECT s.concurrency_key AS key, count(*) FILTER (WHERE s.is_due) AS n
      FROM scanned s GROUP BY s.concurrency_key),
  running AS (
    SELECT t.concurrency_key AS key, count(*) AS n
      FROM taskmill.tasks t
     WHERE t.status = 'running' AND t.key_space = p_name
     GROUP BY t.concurrency_key),
  ranked AS (
    (SELECT 'running' AS ranked_by, r.key, r.n FROM running r ORDER BY r.n DESC, r.key LIMIT p_top)
    UNION ALL
    (SELECT 'due', d.key, d.n FROM due d WHERE d.n > 0 ORDER BY d.n DESC, d.key LIMIT p_top)),
  -- A class is read from one task of each key shown, not from each counted.
  shown AS (
    SELECT x.ranked_by, x.key, x.n, taskmill.class_of_key(p_name, x.key) AS key_class
      FROM ranked x)
  SELECT x.ranked_by, x.key, x.key_class, taskmill.key_limit(k, x.key, x.key_class),
         taskmill.key_limit_source(k, x.key, x.key_class), coalesce(r.n, 0), coalesce(d.n, 0),
         c.capped
    FROM (SELECT count(*) > p_due_scan AS capped FROM scanned) c
    JOIN taskmill.key_spaces k ON k.name = p_name
    LEFT JOIN shown x ON true
    LEFT JOIN running r ON r.key = x.key
    LEFT JOIN due d ON d.key = x.key
   ORDER BY x.ranked_by DESC, x.n DESC, x.key
$$;

-- Key p_key of space p_name now: its class, limit, running tasks, its due
-- and later ones (counted among its first p_scan waiting tasks, from the
-- index alone; capped says there were more), and within its rate the units
-- started in the period now ending and when the oldest of them leaves it.
-- No row when there is no such space.
CREATE FUNCTION taskmill.key_view(p_name text, p_key text, p_scan integer)
RETURNS TABLE (key_class text, key_limit integer, limit_from text, running bigint, due bigint,
               later bigint, capped boolean, rate_used integer, rate_opens_at timestamptz)
LANGUAGE sql STABLE AS $$
  WITH waiting AS (
    SELECT w.execute_at <= now() AS is_due
      FROM generate_series(1, 5) l(p),
           LATERAL (SELECT t.execute_at FROM taskmill.tasks t
                     WHERE t.key_space = p_name AND t.priority = l.p
                       AND t.concurrency_key = p_key COLLATE "C"
                       AND t.status IN ('pending', 'failed')
                     LIMIT p_scan + 1) w
     LIMIT p_scan + 1),
  counted AS (
    SELECT count(*) FILTER (WHERE w.is_due) AS due, count(*) FILTER (WHERE NOT w.is_due) AS later,
           count(*) > p_scan AS capped
      FROM waiting w),
  class AS (SELECT taskmill.class_of_key(p_name, p_key) AS key_class)
  SELECT c.key_class, taskmill.key_limit(k, p_key, c.key_class),
         taskmill.key_limit_source(k, p_key, c.key_class),
         (SELECT count(*) FROM taskmill.tasks t
           WHERE t.status = 'running' AND t.key_space = p_name
             AND t.concurrency_key = p_key COLLATE "C"),
         n.due, n.later, n.capped,
         CASE WHEN k.rate IS NOT NULL
              THEN (SELECT u.units FROM taskmill.key_units_started(k, p_key) u) END,
         taskmill.key_rate_opens_at(k, p_key)
    FROM taskmill.key_spaces k CROSS JOIN class c CROSS JOIN counted n
   WHERE k.name = p_name
$$;

-- Key p_key's tasks of space p_name: its running ones, then its waiting
-- ones in the order a claim takes them (due ones by level, then those due
-- later by when), p_limit of each at most.
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
    ORDER BY w.execute_at > now(), CASE WHEN w.execute_at <= now() THEN w.priority END,
             w.execute_at, w.id
    LIMIT p_limit)
$$;

-- Puts key space p_space (as put_key_spaces takes one) from the API, each
-- value refused naming the field, and a rate below what a start of a type
-- keyed in it costs (a node keying the type would then fail to start);
-- answers whether it is new. Claims read the limits each time, and the
-- nodes are woken to claim at once, so that a limit raised holds as the
-- change commits. A node whose config names the space writes the config's
-- settings again as it starts.
CREATE FUNCTION taskmill.put_key_space(p_space jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_name text := p_space ->> 'name';
  v_existed boolean;
  v_costly record;
BEGIN
  -- Puts of one name take turns, so that of two creating it one says so.
  PERFORM taskmill.lock_unit('taskmill.key_spaces', v_name);
  v_existed := EXISTS (SELECT 1 FROM taskmill.key_spaces k WHERE k.name = v_name);
  PERFORM taskmill.put_key_spaces(jsonb_build_array(p_space));
  SELECT s.type, s.rate_units INTO v_costly FROM taskmill.task_types s
   WHERE s.key_space = v_name AND p_space ? 'rate'
     AND s.rate_units > (p_space ->> 'rate')::numeric
   ORDER BY s.rate_units DESC, s.type LIMIT 1;
  IF FOUND THEN
    PERFORM taskmill.bad_argument(format(
      'key_spaces.%s.rate must be at least the rate_units of type %s keyed in it (%s)',
      v_name, v_costly.type, v_costly.rate_units));
  END IF;
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
  -- Held against a type being keyed in it meanwhile (put_type_settings
  -- holds the spaces it keys types in).
  PERFORM 1 FROM taskmill.key_spaces k WHERE k.name = p_name FOR UPDATE;
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
