-- A node needs the next due time only within its poll interval: it looks
-- again then anyway. Looking no further keeps the probe from walking past
-- every far-future task of types the node does not run, which it did after
-- each claim.

CREATE FUNCTION taskmill.next_due(p_types text[], p_horizon_ms bigint,
                                  OUT next_due_at timestamptz, OUT db_now timestamptz)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET enable_sort = off AS $$
BEGIN
  SELECT min(n.execute_at), now() INTO next_due_at, db_now
    FROM generate_series(1, 5) AS lvl(p)
   CROSS JOIN LATERAL (
     SELECT t.execute_at FROM taskmill.tasks t
      WHERE t.status IN ('pending', 'failed') AND t.priority = lvl.p
        AND t.execute_at > now() AND t.execute_at <= now() + p_horizon_ms * interval '1 ms'
        AND (p_types IS NULL OR t.type = ANY (p_types))
      ORDER BY t.execute_at LIMIT 1) n;
END
$$;

-- Nodes of the release before this one ask without a horizon until they are
-- restarted on this one.
CREATE OR REPLACE FUNCTION taskmill.next_due(p_types text[], OUT next_due_at timestamptz,
                                             OUT db_now timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT n.next_due_at, n.db_now FROM taskmill.next_due(p_types, 3600000) n
$$;
