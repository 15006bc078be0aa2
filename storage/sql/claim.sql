-- Claiming due work (SPEC §4): weighted-fair levels, cluster-wide limits
-- counted in the claim, and the time of the next due task.

-- A node declared dead claims nothing until it has registered again.
-- (PL/pgSQL keeps the plan; a SQL function is planned at every claim.)
CREATE FUNCTION taskmill.may_claim(p_node text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN NOT EXISTS (SELECT 1 FROM taskmill.nodes n
                      WHERE n.name = p_node AND n.stopped_at IS NOT NULL);
END
$$;

-- The priority levels that have due work a node of p_types may run (due),
-- and the levels whose oldest or newest due task is of a type it does not
-- run (foreign_ends); one cheap probe per level and end instead of a claim
-- statement per level. A probe with an order and LIMIT 1 reads the claim
-- index from one end (an EXISTS becomes a semi-join that may read every due
-- task). Whether a level is due is probed from the newest due task
-- backwards, because claims take the oldest first and leave the entries of
-- the tasks they took at that end until a vacuum: read from there, a drain's
-- probes stepped over them at every claim. The oldest end is probed too,
-- for nodes that run only some types, and pays that cost; the claim's search
-- in claim order, which the probe of that end decides on, pays it as well.
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
      WHERE p_types IS NOT NULL
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

-- The types that have tasks due or waiting for their time, one probe a type
-- in the index led by the type. Read from the end of each type's range: its
-- start holds the entries of the tasks claimed first, until a vacuum.
CREATE FUNCTION taskmill.queued_types() RETURNS SETOF text
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
  SELECT q.type FROM q WHERE q.type IS NOT NULL;
END
$$;

-- Up to p_want due tasks of p_types at level p_level that p_node may run,
-- oldest first over all of them, locked for the caller's claim: each type's
-- oldest are read from the index led by the type, where a search in claim
-- order over the level would read every due task of the other types on the
-- way to tell its type. Twice as many are looked at as are wanted, so that a
-- claim running beside this one and taking the same oldest tasks leaves it
-- the next ones rather than none; those taken meanwhile, or changed, are
-- left alone. One type needs no merge: its oldest are locked as they are
-- read, each read once. Types are matched as in taskmill.probe_levels, so
-- that only the index led by the type serves the searches.
CREATE FUNCTION taskmill.lock_oldest_of_types(p_types text[], p_level integer, p_node text,
                                              p_want integer) RETURNS bigint[]
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_sort = off AS $$
BEGIN
  IF cardinality(p_types) = 1 THEN
    RETURN ARRAY(
      SELECT d.id FROM taskmill.tasks d
       WHERE d.status IN ('pending', 'failed') AND d.type = ANY (ARRAY[p_types[1]])
         AND d.priority = p_level AND d.execute_at <= now()
         AND (d.pinned_node IS NULL OR d.pinned_node = p_node)
       ORDER BY d.type, d.priority, d.execute_at, d.id
       LIMIT p_want
       FOR UPDATE SKIP LOCKED);
  END IF;
  RETURN ARRAY(
    SELECT c.id
      FROM unnest(ARRAY(
             SELECT n.id FROM unnest(p_types) AS o(type)
             CROSS JOIN LATERAL (
               SELECT d.id, d.execute_at FROM taskmill.tasks d
                WHERE d.status IN ('pending', 'failed') AND d.type = ANY (ARRAY[o.type])
                  AND d.priority = p_level AND d.execute_at <= now()
                  AND (d.pinned_node IS NULL OR d.pinned_node = p_node)
                ORDER BY d.type, d.priority, d.execute_at, d.id
                LIMIT 2 * p_want) n
             ORDER BY n.execute_at, n.id
             LIMIT 2 * p_want)) WITH ORDINALITY AS k(id, ord)
      JOIN taskmill.tasks c ON c.id = k.id
     WHERE c.status IN ('pending', 'failed') AND c.execute_at <= now()
       AND c.priority = p_level
       AND (c.pinned_node IS NULL OR c.pinned_node = p_node)
     ORDER BY k.ord
     LIMIT p_want
     FOR UPDATE OF c SKIP LOCKED);
END
$$;

-- Of the tasks a claim found in claim order (p_ids, of types p_types), those
-- within the room left to each type with a running limit (p_capped, room),
-- in that order, and the room each has left after them. Most often every
-- type found fits its room and the tasks are taken as found.
CREATE FUNCTION taskmill.within_rooms(p_ids bigint[], p_types text[], p_capped text[],
                                      INOUT room integer[], OUT ids bigint[])
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_took integer[] := array_fill(0, ARRAY[cardinality(p_capped)]);
  v_over boolean := false;
  k integer;
BEGIN
  FOR j IN 1..cardinality(p_capped) LOOP
    v_took[j] := coalesce(cardinality(array_positions(p_types, p_capped[j])), 0);
    v_over := v_over OR v_took[j] > room[j];
  END LOOP;
  ids := p_ids;
  IF v_over THEN
    ids := '{}';
    v_took := array_fill(0, ARRAY[cardinality(p_capped)]);
    FOR n IN 1..cardinality(p_ids) LOOP
      k := array_position(p_capped, p_types[n]);
      IF k IS NOT NULL THEN
        CONTINUE WHEN v_took[k] >= room[k];
        v_took[k] := v_took[k] + 1;
      END IF;
      ids := ids || p_ids[n];
    END LOOP;
  END IF;
  FOR j IN 1..cardinality(p_capped) LOOP
    room[j] := room[j] - v_took[j];
  END LOOP;
END
$$;

-- A task as a claim gives it to its node: what running it takes (its
-- timestamps and backoff settings aside), when it came due (for the pickup
-- latency), and how far into its turns the claim went. The one list of the
-- claim path: the claims return it, the node reads its columns by name
-- (storage/rows.cpp), and a claim sends no other column, each of which
-- costs the server its text form.
CREATE TYPE taskmill.running_task AS (
  id bigint, type text, key text, version bigint, status taskmill.task_status,
  priority smallint, payload jsonb, attempt integer, retry_count integer,
  max_retries integer, timeout_ms integer, error text, batch text, shard_index integer,
  shard_total integer, trace_id text, picked_by text, execute_at timestamptz,
  turns_taken integer);

-- A task's row as taskmill.running_task. Inlined where it is called: a
-- claim's RETURNING (taskmill.as_running(t, n)).* reads the columns alone.
CREATE FUNCTION taskmill.as_running(t taskmill.tasks, p_turns_taken integer)
RETURNS taskmill.running_task
LANGUAGE sql IMMUTABLE AS $$
  SELECT ROW(t.id, t.type, t.key, t.version, t.status, t.priority, t.payload, t.attempt,
             t.retry_count, t.max_retries, t.timeout_ms, t.error, t.batch, t.shard_index,
             t.shard_total, t.trace_id, t.picked_by, t.execute_at,
             p_turns_taken)::taskmill.running_task
$$;

-- The steps of a claim (taskmill.claim_by_turns). They run under its
-- settings (kept generic plans, no sequential scans, no sorts, no JIT),
-- which hold for the functions it calls; the searches lock what they find
-- with SKIP LOCKED, and the claim makes those running in one update a level.

-- The short-claim fast path: after a claim that took fewer tasks than it had
-- permits for, with no running limit or executor capacity applying, the
-- ids of every due task p_node may run when fewer than p_limit tasks of any
-- type are due (pinned ones included); NULL when more are, and the claim
-- goes by the turns. One bounded read, without a lock: the claim locks them
-- after. It takes tasks of any type and stops at p_limit, so that a backlog
-- of types this node does not run costs that many entries before the claim
-- goes on as any other.
CREATE FUNCTION taskmill.all_due_if_few(p_node text, p_limit integer, p_types text[])
RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_read integer;
  v_ids bigint[];
BEGIN
  SELECT count(*)::integer,
         coalesce(array_agg(d.id) FILTER (WHERE (p_types IS NULL OR d.type = ANY (p_types))
                                          AND (d.pinned_node IS NULL
                                               OR d.pinned_node = p_node)), '{}')
    INTO v_read, v_ids
    FROM (SELECT d.id, d.type, d.pinned_node FROM taskmill.tasks d
           WHERE d.status IN ('pending', 'failed') AND d.priority = ANY ('{1,2,3,4,5}')
             AND d.execute_at <= now()
           ORDER BY d.priority, d.execute_at, d.id
           LIMIT p_limit) d;
  RETURN CASE WHEN v_read < p_limit THEN v_ids END;
END
$$;

-- The fast path's claim: the tasks of p_ids that are still due, running
-- under p_node from now, refused to a node declared dead. Read without a
-- lock (taskmill.all_due_if_few): those another claim holds are skipped;
-- the rows locked are their latest versions, so those taken or moved
-- meanwhile are left. They are tested after the lock, so that only the
-- primary key can serve it: the plan is kept, and one made on a small table
-- read every due task through the claim index.
CREATE FUNCTION taskmill.claim_ids(p_node text, p_ids bigint[], p_turns_taken integer)
RETURNS SETOF taskmill.running_task
LANGUAGE plpgsql AS $$
BEGIN
  IF cardinality(p_ids) = 0 OR NOT taskmill.may_claim(p_node) THEN
    RETURN;
  END IF;
  RETURN QUERY
    WITH locked AS (
      SELECT c.id, c.status, c.execute_at FROM taskmill.tasks c
       WHERE c.id = ANY (p_ids)
       FOR UPDATE SKIP LOCKED)
    UPDATE taskmill.tasks t
       SET status = 'running', attempt = t.attempt + 1, picked_by = p_node,
           heartbeat_at = now(), started_at = now(), updated_at = now()
      FROM locked
     WHERE t.id = locked.id AND locked.status IN ('pending', 'failed')
       AND locked.execute_at <= now()
    RETURNING (taskmill.as_running(t, p_turns_taken)).*;
END
$$;

-- The room a claim has under the running limits: p_limit less what the
-- global limit leaves (left), and each limited type's room (capped, room):
-- its limit less its running tasks, 0 for a type this node does not run,
-- and for a type it runs on executors of limited capacity (p_local_types,
-- p_local_room) at most what they have left. Running tasks are counted
-- under the limits' lock, held until the claim commits, so that claims
-- that check limits take turns and never count the same room twice.
CREATE FUNCTION taskmill.claim_rooms(p_limit integer, p_types text[], p_capped_types text[],
                                     p_type_limits integer[], p_global_limit integer,
                                     p_local_types text[], p_local_room integer[],
                                     OUT left_in_claim integer, OUT capped text[],
                                     OUT room integer[])
LANGUAGE plpgsql AS $$
DECLARE
  v_running integer;
  v_running_types text[];
  v_running_counts integer[];
  v_at integer;
BEGIN
  left_in_claim := p_limit;
  capped := coalesce(p_capped_types, '{}');
  room := '{}';
  IF p_global_limit > 0 OR cardinality(capped) > 0 THEN
    PERFORM pg_advisory_xact_lock(7345, 3);
    SELECT coalesce(array_agg(r.type), '{}'), coalesce(array_agg(r.n), '{}'),
           coalesce(sum(r.n), 0)
      INTO v_running_types, v_running_counts, v_running
      FROM (SELECT t.type, count(*)::integer AS n FROM taskmill.tasks t
             WHERE t.status = 'running' GROUP BY t.type) r;
  END IF;
  IF p_global_limit > 0 THEN
    left_in_claim := least(left_in_claim, p_global_limit - v_running);
  END IF;
  FOR i IN 1..cardinality(capped) LOOP
    v_running := coalesce(v_running_counts[array_position(v_running_types, capped[i])], 0);
    room[i] := CASE WHEN p_types IS NULL OR capped[i] = ANY (p_types)
                    THEN greatest(0, p_type_limits[i] - v_running) ELSE 0 END;
  END LOOP;
  FOR j IN 1..coalesce(cardinality(p_local_types), 0) LOOP
    v_at := array_position(capped, p_local_types[j]);
    IF v_at IS NULL THEN
      capped := capped || p_local_types[j];
      room := room || greatest(0, p_local_room[j]);
    ELSE
      room[v_at] := least(room[v_at], greatest(0, p_local_room[j]));
    END IF;
  END LOOP;
END
$$;

-- Whether p_type may have due tasks at one of p_levels: one at its limit,
-- whose tasks may be ahead of the others'. One probe a level, from the
-- newest due task back (claims leave the entries of the tasks they took at
-- the oldest end until a vacuum).
CREATE FUNCTION taskmill.may_have_due(p_type text, p_levels integer[]) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_level integer;
BEGIN
  FOREACH v_level IN ARRAY p_levels LOOP
    IF (SELECT true FROM taskmill.tasks d
         WHERE d.status IN ('pending', 'failed') AND d.type = ANY (ARRAY[p_type])
           AND d.priority = v_level AND d.execute_at <= now()
         ORDER BY d.type DESC, d.priority DESC, d.execute_at DESC, d.id DESC LIMIT 1) THEN
      RETURN true;
    END IF;
  END LOOP;
  RETURN false;
END
$$;

-- Up to p_want due tasks at p_levels that p_node may run, of p_types (NULL:
-- any) but not of p_excluded, in claim order, locked: one search of the
-- claim index, which reads from the oldest due task until it has what it
-- wants or reaches now. Their types come along when p_with_types (to be
-- counted against rooms; collected for every search they cost more).
CREATE FUNCTION taskmill.lock_oldest_due(p_levels integer[], p_types text[],
                                         p_excluded text[], p_node text, p_want integer,
                                         p_with_types boolean, OUT ids bigint[],
                                         OUT types text[])
LANGUAGE plpgsql AS $$
BEGIN
  SELECT coalesce(array_agg(c.id), '{}'),
         coalesce(array_agg(c.type) FILTER (WHERE p_with_types), '{}')
    INTO ids, types
    FROM (SELECT d.id, d.type FROM taskmill.tasks d
           WHERE d.status IN ('pending', 'failed') AND d.priority = ANY (p_levels)
             AND d.execute_at <= now()
             AND d.type <> ALL (p_excluded)
             AND (p_types IS NULL OR d.type = ANY (p_types))
             -- A broadcast shard is for its node only.
             AND (d.pinned_node IS NULL OR d.pinned_node = p_node)
           ORDER BY d.priority, d.execute_at, d.id
           LIMIT p_want
           FOR UPDATE SKIP LOCKED) c;
END
$$;

-- Up to p_want due tasks of p_types at p_levels, level by level (so that
-- the index reads each only up to now; as one range of levels it read every
-- task due later on the way), each type in the index led by it
-- (taskmill.lock_oldest_of_types), locked.
CREATE FUNCTION taskmill.lock_oldest_by_level(p_types text[], p_levels integer[],
                                              p_node text, p_want integer) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[] := '{}';
  v_level integer;
BEGIN
  FOREACH v_level IN ARRAY p_levels LOOP
    EXIT WHEN cardinality(v_ids) >= p_want;
    v_ids := v_ids || taskmill.lock_oldest_of_types(p_types, v_level, p_node,
                                                    p_want - cardinality(v_ids));
  END LOOP;
  RETURN v_ids;
END
$$;

-- Whether every type with a running limit that this node runs
-- (p_types; NULL: any) has room left.
CREATE FUNCTION taskmill.rooms_left_for_all(p_capped text[], p_room integer[],
                                            p_types text[]) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  FOR k IN 1..cardinality(p_capped) LOOP
    IF p_room[k] <= 0 AND p_capped[k] = ANY (coalesce(p_types, p_capped)) THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END
$$;

-- The steps of one level in a pass of taskmill.claim_by_turns: the types
-- with a running limit first, each to its room, then (a step past them) the
-- others; or, p_together, every type in one search in claim order, each
-- keeping what its room allows (taskmill.within_rooms). Where a limited
-- type may have due tasks left, or the level has a task of a type this
-- node does not run at an end (a backlog no node runs, perhaps), a search in
-- claim order would read through those: there the types without a limit
-- are searched one by one, as each type with a limit always is (its room is
-- its own). Answers the ids it locked, what is left of each room, of the
-- level's quota and of the claim's room, whether more may be due, whether a
-- limited type may have due tasks left, and what the last search read and
-- kept (NULL: none ran).
CREATE FUNCTION taskmill.lock_level(p_node text, p_types text[], p_level integer,
                                    p_levels integer[], p_foreign_ends integer[],
                                    p_capped text[], p_uncapped boolean, p_together boolean,
                                    INOUT room integer[], INOUT quota integer,
                                    INOUT left_in_claim integer, INOUT more boolean,
                                    INOUT capped_may_wait boolean,
                                    INOUT unlimited_types text[], OUT ids bigint[],
                                    OUT read integer, OUT kept integer)
LANGUAGE plpgsql AS $$
DECLARE
  v_type text;
  v_step integer;
  v_ids bigint[];
  v_found record;
  v_within record;
BEGIN
  ids := '{}';
  FOR i IN 1..cardinality(p_capped) + 1 LOOP
    v_type := p_capped[i];
    CONTINUE WHEN p_together AND v_type IS NOT NULL;
    v_step := CASE WHEN v_type IS NOT NULL THEN least(quota, room[i])
                   WHEN p_uncapped OR p_together THEN quota ELSE 0 END;
    IF v_type IS NOT NULL AND v_step <= 0 AND p_uncapped AND NOT capped_may_wait THEN
      capped_may_wait := taskmill.may_have_due(v_type, p_levels);
    END IF;
    CONTINUE WHEN v_step <= 0;
    IF v_type IS NULL AND NOT (capped_may_wait OR p_levels && p_foreign_ends) THEN
      v_found := taskmill.lock_oldest_due(
                   CASE WHEN p_level <= 5 THEN ARRAY[p_level] ELSE '{1,2,3,4,5}'::integer[] END,
                   p_types, CASE WHEN p_together THEN '{}' ELSE p_capped END, p_node, v_step,
                   p_together);
      v_ids := v_found.ids;
      read := cardinality(v_ids);
      IF p_together THEN
        v_within := taskmill.within_rooms(v_ids, v_found.types, p_capped, room);
        room := v_within.room;
        v_ids := v_within.ids;
      END IF;
    ELSE
      IF v_type IS NULL AND unlimited_types IS NULL THEN
        unlimited_types := ARRAY(
          SELECT DISTINCT o.type
            FROM unnest(coalesce(p_types, ARRAY(SELECT taskmill.queued_types()))) AS o(type)
           WHERE o.type <> ALL (p_capped));
      END IF;
      v_ids := taskmill.lock_oldest_by_level(
                 CASE WHEN v_type IS NOT NULL THEN ARRAY[v_type] ELSE unlimited_types END,
                 p_levels, p_node, v_step);
      read := cardinality(v_ids);
    END IF;
    -- Locked: the claim's update takes them all.
    kept := cardinality(v_ids);
    ids := ids || v_ids;
    more := more OR read >= v_step;
    IF v_type IS NOT NULL THEN
      room[i] := room[i] - kept;
      capped_may_wait := capped_may_wait OR kept >= v_step;
    END IF;
    quota := quota - kept;
    left_in_claim := left_in_claim - kept;
  END LOOP;
END
$$;

-- SPEC §4, claim, refused to nodes declared dead, skipping levels without due
-- work: an idle claim costs one probe. p_turns holds the level of each claim
-- in turn (the pusher's weighted shares); the claim takes as many turns of
-- levels with due work as the limits leave it room for, from the first, so
-- that a claim cut short by a cluster-wide limit still shares its room by
-- weight, and each row tells how far into the turns it went (turns_taken),
-- so that the pusher tells a level that ran dry from one the room did not
-- reach. Whatever the turns leave of that room is filled in claim order.
-- While every type with a running limit has room, a level is claimed in
-- claim order over all types, each up to its room; where one has none (or
-- reached it), the types with a limit go first within the level, each as far
-- as its room allows, then the others. Running limits are counted here, in
-- the database, so they hold for the whole cluster. p_types lists the types
-- this node can run (NULL: any); p_local_types the types it runs on
-- executors of limited capacity, with the room p_local_room they have left.
--
-- The steps: the short-claim fast path (taskmill.all_due_if_few), the
-- limits' room (taskmill.claim_rooms), the turns' quotas per level
-- (taskmill.quotas_of_turns), then the passes: each level to its quota, the
-- room of levels that came up short to the turns after those taken, and
-- the fill in claim order over all levels. A pass locks what the steps of
-- its level take (taskmill.lock_level) and makes them running in one
-- update, by id: the searches give ids, and the rows
-- are updated and returned here, so that a claimed row is copied once. A
-- task is claimed once across any number of nodes; a row carries only what
-- running the task takes.
--
-- The plans are kept for the session (planned at every call, a claim spent
-- more planning than claiming). A kept plan cannot fold a NULL test away, so
-- a type with a running limit is searched apart, in the index led by the
-- type; with sequential scans and sorts ruled out, a plan made while the
-- table was small does not read it whole once it is not. The sort that
-- taskmill.lock_oldest_of_types cannot leave out costs its plan, with sorts
-- ruled out, enough to be compiled by JIT for a caller that has not turned
-- it off. tools/bench/BENCH.md has the measurements behind these choices.
CREATE FUNCTION taskmill.claim_by_turns(p_node text, p_limit integer, p_turns integer[],
                                        p_capped_types text[], p_type_limits integer[],
                                        p_global_limit integer, p_types text[],
                                        p_local_types text[], p_local_room integer[],
                                        p_after_short_claim boolean DEFAULT false)
RETURNS SETOF taskmill.running_task
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_sort = off
SET jit = off AS $$
#variable_conflict use_column
DECLARE
  v_left integer := p_limit;
  v_capped text[] := '{}';
  v_room integer[] := '{}';
  v_rooms record;
  v_quota integer;
  v_quotas integer[];
  v_turns_taken integer;
  -- Levels that came up short of their quota in this claim.
  v_short integer[] := '{}';
  v_second_walk boolean := false;
  lvl integer;
  v_ids bigint[];
  -- What the steps of a level locked, and what is left after them.
  v_lock record;
  -- The levels a pass reads: its own, or (the fill) every level due.
  v_levels integer[];
  v_probe record;
  v_due integer[];
  -- Levels whose oldest or newest due task is of a type this node does not
  -- run.
  v_foreign_ends integer[];
  v_more boolean := false;
  -- Whether this node runs a type without a limit. When it does not, the
  -- pass for such types could only read through every due task of the level
  -- to claim none, costing a scan of the backlog at each claim.
  v_uncapped boolean;
  -- Whether a limited type may still have due tasks in the level: one at
  -- its limit, or one that took all it asked for.
  v_capped_may_wait boolean;
  -- The types without a limit: the node's, or, when it runs any type, those
  -- with tasks queued.
  v_unlimited_types text[];
  -- Whether every limited type this node runs has room left: the level is
  -- then searched in claim order over all types, each keeping what its room
  -- allows (taskmill.within_rooms).
  v_together boolean;
  -- How many tasks the last search of a level found, and how many it kept.
  v_read integer;
  v_count integer;
BEGIN
  IF p_after_short_claim AND p_global_limit <= 0
     AND coalesce(cardinality(p_capped_types), 0) = 0
     AND coalesce(cardinality(p_local_types), 0) = 0 THEN
    v_ids := taskmill.all_due_if_few(p_node, p_limit, p_types);
    IF v_ids IS NOT NULL THEN
      RETURN QUERY SELECT * FROM taskmill.claim_ids(p_node, v_ids,
                                                    coalesce(cardinality(p_turns), 0));
      RETURN;
    END IF;
  END IF;
  -- Assigned rather than selected from, which cost more.
  v_probe := taskmill.probe_levels(p_types, p_node);
  v_due := v_probe.due;
  v_foreign_ends := v_probe.foreign_ends;
  IF cardinality(v_due) = 0 OR NOT taskmill.may_claim(p_node) THEN
    RETURN;
  END IF;
  IF p_global_limit > 0 OR cardinality(p_capped_types) > 0
     OR cardinality(p_local_types) > 0 THEN
    v_rooms := taskmill.claim_rooms(p_limit, p_types, p_capped_types, p_type_limits,
                                    p_global_limit, p_local_types, p_local_room);
    v_left := v_rooms.left_in_claim;
    v_capped := v_rooms.capped;
    v_room := v_rooms.room;
  END IF;
  SELECT q.quotas, q.taken INTO v_quotas, v_turns_taken
    FROM taskmill.first_quotas(p_turns, v_due, v_left) q;
  v_uncapped := p_types IS NULL OR EXISTS (SELECT FROM unnest(p_types) AS u(type)
                                             WHERE u.type <> ALL (v_capped));

  -- Level by level to its quota (passes 1..5). A level that came up short of
  -- it (a probe finding only work of a type at its limit, work locked by
  -- others) leaves its room to the turns after those taken, without it
  -- (passes 6..10), lest that room go to the top level whatever the shares;
  -- what is left then is filled in claim order over all levels (pass 11).
  -- Levels without due work are skipped, and so is the fill when every
  -- level with work ran dry within its quota.
  FOR v_pass IN 1..11 LOOP
    EXIT WHEN v_left <= 0;
    lvl := CASE WHEN v_pass <= 10 THEN (v_pass - 1) % 5 + 1 ELSE 6 END;
    IF v_pass = 6 THEN
      v_second_walk := cardinality(v_short) > 0
                       AND v_turns_taken < coalesce(cardinality(p_turns), 0);
      IF v_second_walk THEN
        SELECT q.quotas, q.taken INTO v_quotas, v_turns_taken
          FROM taskmill.quotas_of_turns(p_turns, v_turns_taken,
                                        ARRAY(SELECT d FROM unnest(v_due) d
                                               WHERE d <> ALL (v_short)), v_left) q;
      END IF;
    END IF;
    CONTINUE WHEN v_pass BETWEEN 6 AND 10 AND NOT v_second_walk;
    EXIT WHEN lvl = 6 AND NOT v_more;
    IF lvl <= 5 AND (NOT lvl = ANY (v_due) OR (v_pass > 5 AND lvl = ANY (v_short))) THEN
      CONTINUE;
    END IF;
    v_quota := CASE WHEN lvl <= 5 THEN least(v_quotas[lvl], v_left) ELSE v_left END;
    IF v_quota <= 0 THEN
      v_more := true;
      CONTINUE;
    END IF;
    v_levels := CASE WHEN lvl <= 5 THEN ARRAY[lvl] ELSE v_due END;
    -- While every limited type this node runs has room, the level is read
    -- in claim order over all its types, as without limits, and each type
    -- keeps as many as its room allows: a step per limited type took tasks
    -- scattered over the table, and the claim's updates, the outcomes' and
    -- the counts of running tasks read more pages a task.
    v_together := cardinality(v_capped) > 0 AND NOT (v_levels && v_foreign_ends)
                  AND taskmill.rooms_left_for_all(v_capped, v_room, p_types);
    v_capped_may_wait := false;
    LOOP
      v_lock := taskmill.lock_level(p_node, p_types, lvl, v_levels, v_foreign_ends, v_capped,
                                    v_uncapped, v_together, v_room, v_quota, v_left, v_more,
                                    v_capped_may_wait, v_unlimited_types);
      v_room := v_lock.room;
      v_quota := v_lock.quota;
      v_left := v_lock.left_in_claim;
      v_more := v_lock.more;
      v_capped_may_wait := v_lock.capped_may_wait;
      v_unlimited_types := v_lock.unlimited_types;
      IF v_lock.read IS NOT NULL THEN
        v_read := v_lock.read;
        v_count := v_lock.kept;
      END IF;
      -- One update for the steps of a level: the types' searches never find
      -- each other's tasks.
      IF cardinality(v_lock.ids) > 0 THEN
        RETURN QUERY
          UPDATE taskmill.tasks t
             SET status = 'running', attempt = t.attempt + 1, picked_by = p_node,
                 heartbeat_at = now(), started_at = now(), updated_at = now()
           WHERE t.id = ANY (v_lock.ids)
          RETURNING (taskmill.as_running(t, v_turns_taken)).*;
      END IF;
      -- A type that reached its room leaves the rest of the quota to the
      -- others, searched type by type; the tasks taken are running by now, so
      -- those searches do not find them again. The tasks it read beyond its
      -- room stay locked, unclaimed, until this claim commits.
      EXIT WHEN NOT v_together OR v_read <= v_count OR v_quota <= 0;
      v_together := false;
    END LOOP;
    IF v_quota <= 0 THEN
      v_more := true;
    ELSIF lvl <= 5 AND NOT lvl = ANY (v_short) THEN
      v_short := v_short || lvl;
    END IF;
  END LOOP;
END
$$;

CREATE FUNCTION taskmill.next_due(p_types text[], p_horizon_ms bigint, p_node text,
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
        -- The claim ran in a transaction of its own that started a moment
        -- earlier: a task that came due in between was neither claimed nor
        -- would it be told here, and waited for the poll. A second back
        -- covers that gap; the pusher waits at least a few milliseconds
        -- before it claims again, so due work it may not claim costs no spin.
        AND t.execute_at > now() - interval '1 second'
        AND t.execute_at <= now() + p_horizon_ms * interval '1 ms'
        AND (p_types IS NULL OR t.type = ANY (p_types))
        AND (t.pinned_node IS NULL OR t.pinned_node = p_node)
      ORDER BY t.execute_at LIMIT 1) n;
END
$$;
