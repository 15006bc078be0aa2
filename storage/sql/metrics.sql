-- What the console and /metrics read besides the tasks themselves (SPEC §8):
-- throughput over the last minutes, which nodes add to at each heartbeat from
-- their outcome counters, and the live tasks per type.

-- Adds a node's outcomes since its last heartbeat to the current minute, and
-- forgets minutes older than a day.
CREATE FUNCTION taskmill.add_outcomes(p_node text, p_succeeded bigint, p_retried bigint,
                                      p_failed bigint) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO taskmill.outcome_minutes AS m (minute, node, succeeded, retried, failed)
  VALUES (date_trunc('minute', now()), p_node, p_succeeded, p_retried, p_failed)
  ON CONFLICT (minute, node) DO UPDATE
    SET succeeded = m.succeeded + excluded.succeeded, retried = m.retried + excluded.retried,
        failed = m.failed + excluded.failed;
  DELETE FROM taskmill.outcome_minutes WHERE minute < now() - interval '1 day';
$$;

-- The last p_minutes minutes, the current one last, each summed over the
-- nodes; minutes without outcomes are zeros.
CREATE FUNCTION taskmill.recent_outcomes(p_minutes integer)
RETURNS TABLE (minute timestamptz, succeeded bigint, retried bigint, failed bigint)
LANGUAGE sql STABLE AS $$
  SELECT g.minute, coalesce(sum(m.succeeded), 0)::bigint, coalesce(sum(m.retried), 0)::bigint,
         coalesce(sum(m.failed), 0)::bigint
    FROM generate_series(date_trunc('minute', now()) - (p_minutes - 1) * interval '1 minute',
                         date_trunc('minute', now()), interval '1 minute') AS g(minute)
    LEFT JOIN taskmill.outcome_minutes m ON m.minute = g.minute
   GROUP BY g.minute
   ORDER BY g.minute
$$;

-- Pending, failed and running tasks per type for /metrics and the stats.
-- Running tasks are few (the nodes' capacity bounds them): always counted.
-- Pending and failed ones are counted exactly up to p_exact_up_to of them,
-- first counted through the claim index's entries alone; beyond that (a
-- calendar of millions due days later) they are estimated from a 1% sample
-- of the table's pages, so that a scrape costs the same however many wait.
CREATE FUNCTION taskmill.live_counts(p_exact_up_to bigint)
RETURNS TABLE (type text, status text, n bigint, estimated boolean)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  -- In the claim index's order, so that the planner reads that index alone
  -- rather than the table from its start, where finished tasks pile up.
  v_waiting bigint := (SELECT count(*) FROM (SELECT FROM taskmill.tasks t
                                              WHERE t.status IN ('pending', 'failed')
                                              ORDER BY t.priority, t.execute_at, t.id
                                              LIMIT p_exact_up_to + 1) w);
BEGIN
  RETURN QUERY SELECT t.type, 'running', count(*), false FROM taskmill.tasks t
                WHERE t.status = 'running' GROUP BY 1;
  IF v_waiting <= p_exact_up_to THEN
    RETURN QUERY SELECT t.type, t.status::text, count(*), false FROM taskmill.tasks t
                  WHERE t.status IN ('pending', 'failed') GROUP BY 1, 2;
  ELSE
    RETURN QUERY SELECT t.type, t.status::text, count(*) * 100, true
                   FROM taskmill.tasks t TABLESAMPLE SYSTEM (1)
                  WHERE t.status IN ('pending', 'failed') GROUP BY 1, 2;
  END IF;
END
$$;

-- Running tasks of the p_top keys running most in each key space, each
-- with its limit, and the rest of each space's running tasks as one row
-- without a key: /metrics shows a bounded number of keys however many run.
CREATE FUNCTION taskmill.key_use(p_top integer)
RETURNS TABLE (space text, key text, running bigint, key_limit integer)
LANGUAGE sql STABLE AS $$
  WITH used AS (
    SELECT t.key_space, t.concurrency_key, max(t.key_class) AS key_class, count(*) AS n,
           row_number() OVER (PARTITION BY t.key_space
                              ORDER BY count(*) DESC, t.concurrency_key) AS rank
      FROM taskmill.tasks t
     WHERE t.status = 'running' AND t.key_space IS NOT NULL
     GROUP BY t.key_space, t.concurrency_key)
  SELECT u.key_space, u.concurrency_key, u.n, taskmill.key_limit(k, u.concurrency_key, u.key_class)
    FROM used u JOIN taskmill.key_spaces k ON k.name = u.key_space
   WHERE u.rank <= p_top
  UNION ALL
  SELECT u.key_space, NULL, sum(u.n)::bigint, NULL
    FROM used u WHERE u.rank > p_top GROUP BY u.key_space
$$;

-- Finished tasks per type and status for GET /v1/stats and the console's
-- overview, which asks every few seconds: counted while the table holds fewer
-- than p_exact_up_to rows, and beyond that estimated from a sample of the
-- table's pages of about 20,000 rows, so that an estimate costs the same
-- with a hundred million finished tasks as with a million (a share of the
-- pages would grow with the table). Such a sample still reads pages
-- scattered over the table, so it is taken only when p_sample: past
-- p_exact_up_to rows, a row without a type comes first, and its estimated
-- says whether a sample follows or the caller answers with an estimate it
-- holds (storage/finished_estimate.hpp).
CREATE FUNCTION taskmill.finished_counts(p_exact_up_to bigint, p_sample boolean)
RETURNS TABLE (type text, status text, n bigint, estimated boolean)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  -- Each partition's -1 until it was first vacuumed or analyzed. The tree
  -- is walked through pg_inherits: pg_partition_tree also looks up each
  -- partition's ancestors, which beside a month of days cost most of a
  -- stats call (tools/bench/BENCH.md).
  v_rows real := (WITH RECURSIVE tree(oid) AS (
                    SELECT 'taskmill.tasks'::regclass::oid
                    UNION ALL
                    SELECT i.inhrelid FROM pg_inherits i JOIN tree ON i.inhparent = tree.oid)
                  SELECT sum(greatest(c.reltuples, 0))
                    FROM tree JOIN pg_class c ON c.oid = tree.oid WHERE c.relkind = 'r');
  v_percent real := least(100, 100 * 20000 / greatest(v_rows, 1));
BEGIN
  IF v_rows < p_exact_up_to THEN
    RETURN QUERY SELECT t.type, t.status::text, count(*), false FROM taskmill.tasks t
                  WHERE t.status IN ('succeeded', 'stopped', 'dead', 'cancelled') GROUP BY 1, 2;
    RETURN;
  END IF;
  RETURN QUERY SELECT NULL::text, NULL::text, NULL::bigint, p_sample;
  IF p_sample THEN
    RETURN QUERY SELECT t.type, t.status::text, round(count(*) * 100 / v_percent)::bigint, true
                   FROM taskmill.tasks t TABLESAMPLE SYSTEM (v_percent)
                  WHERE t.status IN ('succeeded', 'stopped', 'dead', 'cancelled') GROUP BY 1, 2;
  END IF;
END
$$;
