-- What is due to a claim, by level, and the quotas its turns give each
-- level (taskmill.claim_by_turns, storage/sql/claim.sql).

-- The priority levels that have due work a node of p_types may run (due),
-- and the levels whose oldest or newest due task is of a type it does not
-- run (foreign_ends); one cheap probe per level and end instead of a claim
-- statement per level. A probe with an order and LIMIT 1 reads the claim
-- index from one end (an EXISTS becomes a semi-join that may read every due
-- task). Whether a level is due is probed from the newest due task
-- backwards, because claims take the oldest first and leave the entries of
-- the tasks they took at that end until a vacuum: read from there, a drain's
-- probes stepped over them at every claim. The oldest end is probed too,
-- for nodes that run only some types while tasks of others are queued, and
-- pays that cost; the claim's search in claim order, which the probe of
-- that end decides on, pays it as well.
--
-- The probes take a task of any type: filtered by the node's types, they
-- read through every due task of the others on the way to one of its own, a
-- backlog of a type no node runs perhaps. Only in levels whose newest due
-- task is of another type are the node's types probed one by one, in the
-- index led by the type. The claim's search in claim order would read
-- through the others' tasks at either end of a level, so in levels with a
-- foreign end it searches type by type instead. The oldest end is probed in
-- this statement, which costs less than a statement of the claim's own.
-- Tasks pinned to other nodes do not count.
--
-- A type is matched as `= ANY (ARRAY[...])` and named in the order, so that
-- only the index led by the type can serve the search: with an equality it
-- drops out of the order, the claim index can serve it too, and on a small
-- table the planner chose that, reading every due task of the level. Row
-- comparisons ruled that out as well, but PostgreSQL 15 ends a scan only on
-- their first column: they read the type's tasks of other levels.
--
-- PL/pgSQL keeps its plans for the session: as a SQL function it was planned
-- at every claim, most of the cost of claiming one task.
CREATE FUNCTION taskmill.probe_levels(p_types text[], p_node text, OUT due integer[],
                                      OUT foreign_ends integer[])
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_sort = off
-- With sorts ruled out a sort costs a plan enough for JIT, should one come.
SET jit = off AS $$
DECLARE
  v_foreign_newest integer[];
  -- Only where tasks of types this node does not run are queued can an
  -- end be foreign, and the oldest ends are probed.
  v_others boolean := p_types IS NOT NULL AND taskmill.others_queued(p_types);
BEGIN
  SELECT coalesce(array_agg(l.p ORDER BY l.p)
                    FILTER (WHERE p_types IS NULL OR newest_due.type = ANY (p_types)), '{}'),
         coalesce(array_agg(l.p ORDER BY l.p)
                    FILTER (WHERE newest_due.type <> ALL (p_types)), '{}'),
         coalesce(array_agg(l.p ORDER BY l.p)
                    FILTER (WHERE newest_due.type <> ALL (p_types)
                               OR oldest_due.type <> ALL (p_types)), '{}')
    INTO due, v_foreign_newest, foreign_ends
    FROM generate_series(1, 5) AS l(p)
   CROSS JOIN LATERAL (
     SELECT t.type FROM taskmill.tasks t
      WHERE t.status IN ('pending', 'failed') AND t.priority = l.p
        AND t.execute_at <= now()
        AND (t.pinned_node IS NULL OR t.pinned_node = p_node)
      ORDER BY t.execute_at DESC, t.id DESC LIMIT 1) AS newest_due
   LEFT JOIN LATERAL (
     SELECT t.type FROM taskmill.tasks t
      WHERE v_others
        AND t.status IN ('pending', 'failed') AND t.priority = l.p
        AND t.execute_at <= now()
        AND (t.pinned_node IS NULL OR t.pinned_node = p_node)
      ORDER BY t.execute_at, t.id LIMIT 1) AS oldest_due ON true;
  IF cardinality(v_foreign_newest) = 0 THEN
    RETURN;
  END IF;
  due := (SELECT coalesce(array_agg(l.p ORDER BY l.p), '{}')
            FROM generate_series(1, 5) AS l(p)
           WHERE l.p = ANY (due) OR (l.p = ANY (v_foreign_newest) AND EXISTS (
             SELECT 1 FROM unnest(p_types) AS u(type)
             CROSS JOIN LATERAL (
               SELECT 1 FROM taskmill.tasks d
                WHERE d.status IN ('pending', 'failed') AND d.type = ANY (ARRAY[u.type])
                  AND d.priority = l.p AND d.execute_at <= now()
                  AND (d.pinned_node IS NULL OR d.pinned_node = p_node)
                ORDER BY d.type DESC, d.priority DESC, d.execute_at DESC, d.id DESC
                LIMIT 1) AS newest_of_type)));
END
$$;

-- The priority levels that have due work a node of p_types may run.
CREATE FUNCTION taskmill.due_levels(p_types text[], p_node text) RETURNS integer[]
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (taskmill.probe_levels(p_types, p_node)).due;
END
$$;

-- The quotas per level of the first p_room turns after turn p_after whose
-- level is one of p_levels, and the turn they reach: the last turn taken,
-- or every turn when the room is more than they fill.
CREATE FUNCTION taskmill.quotas_of_turns(p_turns integer[], p_after integer,
                                         p_levels integer[], p_room integer,
                                         OUT quotas integer[], OUT taken integer)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  SELECT ARRAY[count(*) FILTER (WHERE t.level = 1), count(*) FILTER (WHERE t.level = 2),
               count(*) FILTER (WHERE t.level = 3), count(*) FILTER (WHERE t.level = 4),
               count(*) FILTER (WHERE t.level = 5)]::integer[],
         CASE WHEN count(*) < p_room THEN coalesce(cardinality(p_turns), 0)
              ELSE coalesce(max(t.turn), p_after)::integer END
    INTO quotas, taken
    FROM (SELECT u.level, u.turn FROM unnest(p_turns) WITH ORDINALITY AS u(level, turn)
           WHERE u.turn > p_after AND u.level = ANY (p_levels)
           ORDER BY u.turn LIMIT greatest(p_room, 0)) t;
END
$$;

-- The quotas per level of a claim's first walk over its turns: those of
-- taskmill.quotas_of_turns, but with one level due and room for all its
-- turns, the whole room for that level, without a pass over the turns.
CREATE FUNCTION taskmill.first_quotas(p_turns integer[], p_levels integer[], p_room integer,
                                      OUT quotas integer[], OUT taken integer)
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF cardinality(p_levels) = 1
     AND p_room >= cardinality(array_positions(coalesce(p_turns, '{}'), p_levels[1])) THEN
    quotas := '{0,0,0,0,0}';
    quotas[p_levels[1]] := p_room;
    taken := coalesce(cardinality(p_turns), 0);
    RETURN;
  END IF;
  SELECT q.quotas, q.taken INTO quotas, taken
    FROM taskmill.quotas_of_turns(p_turns, 0, p_levels, p_room) q;
END
$$;

-- Whether tasks of types other than p_types are due or waiting for their
-- time: one probe in the index led by the type for each gap between
-- p_types in order, and past the last. For more than 16 types, taken as so
-- without a probe.
CREATE FUNCTION taskmill.others_queued(p_types text[]) RETURNS boolean
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
BEGIN
  IF cardinality(p_types) > 16 THEN
    RETURN true;
  END IF;
  RETURN EXISTS (SELECT 1
                   FROM (SELECT lag(u.type, 1, '') OVER (ORDER BY u.type) AS low, u.type AS high
                           FROM (SELECT DISTINCT t.type FROM unnest(p_types) AS t(type)) u) g
                  CROSS JOIN LATERAL (
                    SELECT 1 FROM taskmill.tasks d
                     WHERE d.status IN ('pending', 'failed') AND d.type > g.low
                       AND d.type < g.high
                     ORDER BY d.type LIMIT 1) x)
         -- Not EXISTS: over partitions, that is planned to read every entry.
         OR (SELECT d.type FROM taskmill.tasks d
              WHERE d.status IN ('pending', 'failed')
                AND d.type > (SELECT max(t.type) FROM unnest(p_types) AS t(type))
              ORDER BY d.type LIMIT 1) IS NOT NULL;
END
$$;

-- The types that have tasks due or waiting for their time, but p_except,
-- up to p_most of them (NULL: all), one probe a type in the index led by the
-- type. Read from the end of each type's range: its start holds the entries
-- of the tasks claimed first, until a vacuum.
CREATE FUNCTION taskmill.queued_types(p_except text[] DEFAULT '{}',
                                      p_most integer DEFAULT NULL) RETURNS SETOF text
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
BEGIN
  RETURN QUERY
  WITH RECURSIVE q(type) AS (
    (SELECT d.type FROM taskmill.tasks d WHERE d.status IN ('pending', 'failed')
      ORDER BY d.type DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT d.type FROM taskmill.tasks d
             WHERE d.status IN ('pending', 'failed') AND d.type < q.type
             ORDER BY d.type DESC LIMIT 1)
      FROM q WHERE q.type IS NOT NULL)
  SELECT q.type FROM q WHERE q.type IS NOT NULL AND q.type <> ALL (p_except)
   LIMIT p_most;
END
$$;
