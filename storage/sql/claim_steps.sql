-- The steps of a claim (taskmill.claim_by_turns). They run under its
-- settings (kept generic plans, no sequential scans, no sorts, no JIT),
-- which hold for the functions it calls; the searches lock what they find
-- with SKIP LOCKED, and the claim makes those running in one update a level.

-- Up to p_want due tasks of p_types at level p_level that p_node may run,
-- oldest first over all of them, locked for the caller's claim: each type's
-- oldest are read from the index led by the type, where a search in claim
-- order over the level would read every due task of the other types on the
-- way to tell its type. One type needs no merge: its oldest are locked as
-- they are read, each read once. Several are merged in two steps
-- (taskmill.lock_oldest_merged). Types are matched as in
-- taskmill.probe_levels, so that only the index led by the type serves the
-- searches.
CREATE FUNCTION taskmill.lock_oldest_of_types(p_types text[], p_level integer, p_node text,
                                              p_want integer) RETURNS bigint[]
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_sort = off AS $$
DECLARE
  v_ids bigint[];
  v_first record;
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
  IF coalesce(cardinality(p_types), 0) = 0 THEN
    RETURN '{}';
  END IF;
  -- First each type's share, twice over, as far as the oldest of the last
  -- ones read: every task older than that was read. Most often that is all
  -- the claim wants, at a read of about twice that.
  v_first := taskmill.lock_oldest_merged(p_types, p_level, p_node, p_want,
                                          2 * p_want / cardinality(p_types) + 1,
                                          '-infinity', 0);
  v_ids := v_first.ids;
  -- Short with a bound: the oldest were of few types, and every task up to
  -- the bound was read (those not taken were locked by other claims). Past
  -- it, as many of each type as the rest wants. Short without one, every
  -- due task of the types was read.
  IF cardinality(v_ids) < p_want AND v_first.bound_at IS NOT NULL THEN
    v_ids := v_ids || (taskmill.lock_oldest_merged(p_types, p_level, p_node,
                                                    p_want - cardinality(v_ids),
                                                    p_want - cardinality(v_ids),
                                                    v_first.bound_at, v_first.bound_id)).ids;
  END IF;
  RETURN v_ids;
END
$$;

-- Of the first p_per due tasks of each type of p_types at level p_level
-- after (p_after_at, p_after_id) in claim order, those up to the oldest of
-- the types' last ones read (the bound; all, and no bound, when no type had
-- p_per), up to p_want, oldest first, locked: every task older than the
-- last one kept was read, so they are the oldest over all the types. Twice
-- a type's share is read, so that a claim running beside this one and
-- taking the same oldest tasks leaves it the next ones rather than none;
-- those taken meanwhile, or changed, are left alone.
CREATE FUNCTION taskmill.lock_oldest_merged(p_types text[], p_level integer, p_node text,
                                            p_want integer, p_per integer,
                                            p_after_at timestamptz, p_after_id bigint,
                                            OUT ids bigint[], OUT bound_at timestamptz,
                                            OUT bound_id bigint)
LANGUAGE plpgsql AS $$
BEGIN
  WITH read AS (
    SELECT o.type, n.id, n.execute_at FROM unnest(p_types) AS o(type)
    CROSS JOIN LATERAL (
      SELECT d.id, d.execute_at FROM taskmill.tasks d
       WHERE d.status IN ('pending', 'failed') AND d.type = ANY (ARRAY[o.type])
         AND d.priority = p_level AND d.execute_at <= now()
         AND (d.execute_at, d.id) > (p_after_at, p_after_id)
         AND (d.pinned_node IS NULL OR d.pinned_node = p_node)
       ORDER BY d.type, d.priority, d.execute_at, d.id
       LIMIT p_per) n
  ),
  -- Each type that had as many as asked: the last one read.
  last_read AS (
    SELECT r.type, max(r.execute_at) AS execute_at FROM read r
     GROUP BY r.type HAVING count(*) >= p_per
  ),
  bound AS (
    SELECT l.execute_at, (SELECT max(r.id) FROM read r
                           WHERE r.type = l.type AND r.execute_at = l.execute_at) AS id
      FROM last_read l ORDER BY 1, 2 LIMIT 1
  ),
  kept AS (
    SELECT r.id, r.execute_at FROM read r
     WHERE NOT EXISTS (SELECT 1 FROM bound b WHERE (r.execute_at, r.id) > (b.execute_at, b.id))
     ORDER BY r.execute_at, r.id
  ),
  locked AS (
    SELECT c.id FROM kept k JOIN taskmill.tasks c ON c.id = k.id
     WHERE c.status IN ('pending', 'failed') AND c.execute_at <= now()
       AND c.priority = p_level
       AND (c.pinned_node IS NULL OR c.pinned_node = p_node)
       -- A task moved past the bound since it was read (a reschedule, a
       -- retry) is the next read's.
       AND NOT EXISTS (SELECT 1 FROM bound b
                        WHERE (c.execute_at, c.id) > (b.execute_at, b.id))
     ORDER BY k.execute_at, k.id
     LIMIT p_want
     FOR UPDATE OF c SKIP LOCKED
  )
  SELECT ARRAY(SELECT l.id FROM locked l), b.execute_at, b.id INTO ids, bound_at, bound_id
    FROM (SELECT) AS one LEFT JOIN bound b ON true;
END
$$;

-- Each limited type's room (p_capped, room) less the tasks of it that a
-- search found (p_types, one a task).
CREATE FUNCTION taskmill.rooms_after(p_types text[], p_capped text[], room integer[])
RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  FOR j IN 1..cardinality(p_capped) LOOP
    room[j] := room[j] - coalesce(cardinality(array_positions(p_types, p_capped[j])), 0);
  END LOOP;
  RETURN room;
END
$$;

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
-- meanwhile are left, and their status is tested again after the lock.
-- The plan is kept: under claim_by_turns' settings (no sequential scan) one
-- made on a small table still reads the tasks by primary key beside 200,000
-- waiting (90 buffers for 5 tasks); naming the statuses in the lock keeps
-- the stopped days out of it.
CREATE FUNCTION taskmill.claim_ids(p_node text, p_ids bigint[], p_turns_taken integer)
RETURNS SETOF taskmill.running_task
LANGUAGE plpgsql AS $$
BEGIN
  IF cardinality(p_ids) = 0 OR NOT taskmill.may_claim(p_node) THEN
    RETURN;
  END IF;
  PERFORM set_config('taskmill.tallied', 'on', true);
  RETURN QUERY
    WITH locked AS (
      SELECT c.id, c.status, c.execute_at FROM taskmill.tasks c
       WHERE c.id = ANY (p_ids) AND c.status IN ('pending', 'failed')
       FOR UPDATE SKIP LOCKED)
    UPDATE taskmill.tasks t
       SET status = 'running', attempt = t.attempt + 1, picked_by = p_node,
           heartbeat_at = now(), started_at = now(), updated_at = now()
      FROM locked
     WHERE t.id = locked.id AND t.status IN ('pending', 'failed')
       AND locked.status IN ('pending', 'failed')
       AND locked.execute_at <= now()
    RETURNING (taskmill.as_running(t, p_turns_taken)).*;
  PERFORM set_config('taskmill.tallied', '', true);
  IF EXISTS (SELECT 1 FROM taskmill.running_tally) THEN
    PERFORM taskmill.tally_running(ARRAY(SELECT t.type FROM taskmill.tasks t
                                          WHERE t.id = ANY (p_ids) AND t.picked_by = p_node
                                            AND t.status = 'running'
                                            AND t.started_at = now()), false);
  END IF;
END
$$;

-- The room a claim has under the running limits: p_limit less what the
-- global limit leaves (left), and each limited type's room (capped, room):
-- its limit less its running tasks, 0 for a type this node does not run,
-- and for a type it runs on executors of limited capacity (p_local_types,
-- p_local_room) at most what they have left. Running tasks are read from
-- their tally (storage/sql/running_tally.sql), or counted where a scope is
-- not tallied yet, under the limits' lock, held until the claim commits, so
-- that claims that check limits take turns and never count the same room
-- twice.
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
  v_tallied record;
  v_at integer;
BEGIN
  left_in_claim := p_limit;
  capped := coalesce(p_capped_types, '{}');
  room := '{}';
  IF p_global_limit > 0 OR cardinality(capped) > 0 THEN
    PERFORM pg_advisory_xact_lock(7345, 3);
    v_tallied := taskmill.tallied_running(capped);
    IF array_position(v_tallied.capped_running, NULL) IS NULL
       AND (p_global_limit <= 0 OR v_tallied.all_running IS NOT NULL) THEN
      v_running_types := capped;
      v_running_counts := v_tallied.capped_running;
      v_running := v_tallied.all_running;
    ELSE
      SELECT coalesce(array_agg(r.type), '{}'), coalesce(array_agg(r.n), '{}'),
             coalesce(sum(r.n), 0)
        INTO v_running_types, v_running_counts, v_running
        FROM (SELECT t.type, count(*)::integer AS n FROM taskmill.tasks t
               WHERE t.status = 'running' GROUP BY t.type) r;
    END IF;
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
-- (taskmill.lock_oldest_of_types), locked; or, beside the types p_beside
-- (limited ones, or ones this node does not run), past their backlogs where
-- those wait ahead of p_types' tasks (taskmill.lock_oldest_beside).
CREATE FUNCTION taskmill.lock_oldest_by_level(p_types text[], p_levels integer[],
                                              p_node text, p_want integer,
                                              p_beside text[] DEFAULT NULL) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[] := '{}';
  v_level integer;
BEGIN
  FOREACH v_level IN ARRAY p_levels LOOP
    EXIT WHEN cardinality(v_ids) >= p_want;
    v_ids := v_ids || CASE WHEN p_beside IS NULL
                           THEN taskmill.lock_oldest_of_types(p_types, v_level, p_node,
                                                              p_want - cardinality(v_ids))
                           ELSE taskmill.lock_oldest_beside(p_types, p_beside, v_level, p_node,
                                                            p_want - cardinality(v_ids)) END;
  END LOOP;
  RETURN v_ids;
END
$$;

-- Up to p_want due tasks of p_types at level p_level that p_node may run,
-- oldest first, locked, beside the types p_beside (limited ones, or ones
-- this node does not run), whose due tasks a search in claim order would
-- read through. Where none of p_types' due tasks comes before the newest of
-- theirs (a backlog held back by its limit, or one no node here runs,
-- waiting ahead of the rest), one search in claim order past it reads none
-- of them, each task once; telling so costs a descent of each type's index
-- that stops at its first entry, as the entries of tasks claimed since the
-- last vacuum lie past it too. Otherwise each type is read from the index
-- led by it (taskmill.lock_oldest_of_types).
CREATE FUNCTION taskmill.lock_oldest_beside(p_types text[], p_beside text[], p_level integer,
                                            p_node text, p_want integer) RETURNS bigint[]
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_sort = off AS $$
DECLARE
  v_past_at timestamptz := '-infinity';
  v_past_id bigint := 0;
BEGIN
  SELECT n.execute_at, n.id INTO v_past_at, v_past_id
    FROM unnest(p_beside) AS b(type)
   CROSS JOIN LATERAL (
     SELECT d.execute_at, d.id FROM taskmill.tasks d
      WHERE d.status IN ('pending', 'failed') AND d.type = ANY (ARRAY[b.type])
        AND d.priority = p_level AND d.execute_at <= now()
      ORDER BY d.type DESC, d.priority DESC, d.execute_at DESC, d.id DESC
      LIMIT 1) n
   ORDER BY n.execute_at DESC, n.id DESC
   LIMIT 1;
  IF NOT FOUND THEN
    v_past_at := '-infinity';
    v_past_id := 0;
  ELSIF EXISTS (SELECT 1 FROM unnest(p_types) AS t(type)
                 CROSS JOIN LATERAL (
                   SELECT d.id FROM taskmill.tasks d
                    WHERE d.status IN ('pending', 'failed') AND d.type = ANY (ARRAY[t.type])
                      AND d.priority = p_level
                      AND (d.execute_at, d.id) < (v_past_at, v_past_id)
                    ORDER BY d.type, d.priority, d.execute_at, d.id
                    LIMIT 1) o) THEN
    RETURN taskmill.lock_oldest_of_types(p_types, p_level, p_node, p_want);
  END IF;
  RETURN ARRAY(
    SELECT d.id FROM taskmill.tasks d
     WHERE d.status IN ('pending', 'failed') AND d.priority = p_level
       AND d.execute_at <= now() AND (d.execute_at, d.id) > (v_past_at, v_past_id)
       AND d.type = ANY (p_types)
       AND (d.pinned_node IS NULL OR d.pinned_node = p_node)
     ORDER BY d.priority, d.execute_at, d.id
     LIMIT p_want
     FOR UPDATE SKIP LOCKED);
END
$$;

-- The types whose due tasks a search in claim order over this node's
-- (p_types; NULL: any) would read through: the limited ones (p_capped) and,
-- in levels p_levels with a task of a type the node does not run at an end
-- (p_foreign_ends), the queued types it does not run. NULL where those are
-- more than 16: each costs the claim a descent of its own
-- (taskmill.lock_oldest_beside), and the merge of the node's types is
-- cheaper then.
CREATE FUNCTION taskmill.types_beside(p_types text[], p_capped text[], p_levels integer[],
                                      p_foreign_ends integer[]) RETURNS text[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_others text[];
BEGIN
  IF p_types IS NULL OR NOT p_levels && p_foreign_ends THEN
    RETURN p_capped;
  END IF;
  v_others := ARRAY(SELECT taskmill.queued_types(p_types, 17));
  RETURN CASE WHEN cardinality(v_others) <= 16 THEN p_capped || v_others END;
END
$$;

-- Whether every type with a running limit that this node runs (p_types;
-- NULL: any) has room for p_quota tasks: a search in claim order for that
-- many cannot find more of it than its room.
CREATE FUNCTION taskmill.rooms_hold(p_capped text[], p_room integer[], p_types text[],
                                    p_quota integer) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  FOR k IN 1..cardinality(p_capped) LOOP
    IF p_room[k] < p_quota AND p_capped[k] = ANY (coalesce(p_types, p_capped)) THEN
      RETURN false;
    END IF;
  END LOOP;
  RETURN true;
END
$$;

-- The steps of one level in a pass of taskmill.claim_by_turns: the types
-- with a running limit first, each to its room, then (a step past them) the
-- others; or, p_together (every limited type has room for the quota), every
-- type in one search in claim order. Where a limited
-- type may have due tasks left, or the level has a task of a type this
-- node does not run at an end (a backlog no node runs, perhaps), a search in
-- claim order would read through those: there the types without a limit
-- are searched one by one, as each type with a limit always is (its room is
-- its own). Answers the ids it locked, what is left of each room, of the
-- level's quota and of the claim's room, and whether more may be due.
CREATE FUNCTION taskmill.lock_level(p_node text, p_types text[], p_level integer,
                                    p_levels integer[], p_foreign_ends integer[],
                                    p_capped text[], p_uncapped boolean, p_together boolean,
                                    p_keyed text[], p_key_spaces text[], INOUT room integer[], INOUT quota integer,
                                    INOUT left_in_claim integer, INOUT more boolean,
                                    INOUT unlimited_types text[], OUT ids bigint[])
LANGUAGE plpgsql AS $$
DECLARE
  -- Whether a limited type may still have due tasks in the level: one at
  -- its limit, or one that took all it asked for.
  v_capped_may_wait boolean := false;
  v_type text;
  v_step integer;
  v_ids bigint[];
  v_found record;
  -- How many a step's search found, each locked for the claim's update.
  v_locked integer;
  v_space text;
  v_want integer;
  v_keyed record;
  -- The keys of the tasks a space's searches locked so far, and how many.
  v_held_keys text[];
  v_held integer[];
  -- A space's types with room.
  v_space_types text[];
BEGIN
  ids := '{}';
  -- Each key space first, its keys in turns, for its types with room, as
  -- far as the least room among them allows (that of a type with a limit of
  -- its own; the others have the claim's).
  FOR v_space IN SELECT DISTINCT s.space FROM unnest(p_key_spaces) AS s(space) ORDER BY 1 LOOP
    v_held_keys := '{}';
    v_held := '{}';
    FOREACH v_step IN ARRAY p_levels LOOP
      SELECT least(quota, min(room[array_position(p_capped, k.type)])),
             array_agg(k.type) INTO v_want, v_space_types
        FROM unnest(p_keyed, p_key_spaces) AS k(type, space)
       WHERE k.space = v_space AND room[array_position(p_capped, k.type)] > 0;
      EXIT WHEN coalesce(v_want, 0) <= 0;
      v_keyed := taskmill.lock_keyed(v_space, v_space_types, v_step, p_node, v_want,
                                     v_held_keys, v_held);
      SELECT coalesce(array_agg(h.key), '{}'), coalesce(array_agg(h.n), '{}')
        INTO v_held_keys, v_held
        FROM (SELECT a.key, sum(a.n)::integer AS n
                FROM (SELECT * FROM unnest(v_held_keys, v_held) AS u(key, n)
                      UNION ALL SELECT k, 1 FROM unnest(v_keyed.keys) AS k) a
               GROUP BY a.key) h;
      v_locked := cardinality(v_keyed.ids);
      ids := ids || v_keyed.ids;
      more := more OR v_keyed.more;
      room := taskmill.rooms_after(v_keyed.types, p_capped, room);
      quota := quota - v_locked;
      left_in_claim := left_in_claim - v_locked;
    END LOOP;
  END LOOP;
  FOR i IN 1..cardinality(p_capped) + 1 LOOP
    v_type := p_capped[i];
    CONTINUE WHEN p_together AND v_type IS NOT NULL;
    -- Searched by key above; its tasks beyond its keys' rooms may be due.
    IF v_type = ANY (p_keyed) THEN
      v_capped_may_wait := v_capped_may_wait OR taskmill.may_have_due(v_type, p_levels);
      CONTINUE;
    END IF;
    v_step := CASE WHEN v_type IS NOT NULL THEN least(quota, room[i])
                   WHEN p_uncapped OR p_together THEN quota ELSE 0 END;
    IF v_type IS NOT NULL AND v_step <= 0 AND p_uncapped AND NOT v_capped_may_wait THEN
      v_capped_may_wait := taskmill.may_have_due(v_type, p_levels);
    END IF;
    CONTINUE WHEN v_step <= 0;
    IF v_type IS NULL AND p_together THEN
      v_found := taskmill.lock_oldest_due(
                   CASE WHEN p_level <= 5 THEN ARRAY[p_level] ELSE '{1,2,3,4,5}'::integer[] END,
                   p_types, '{}', p_node, v_step, true);
      v_ids := v_found.ids;
      room := taskmill.rooms_after(v_found.types, p_capped, room);
    ELSIF v_type IS NULL AND NOT (v_capped_may_wait OR p_levels && p_foreign_ends) THEN
      v_found := taskmill.lock_oldest_due(
                   CASE WHEN p_level <= 5 THEN ARRAY[p_level] ELSE '{1,2,3,4,5}'::integer[] END,
                   p_types, p_capped, p_node, v_step, false);
      v_ids := v_found.ids;
    ELSE
      IF v_type IS NULL AND unlimited_types IS NULL THEN
        unlimited_types := ARRAY(
          SELECT DISTINCT o.type
            FROM unnest(coalesce(p_types, ARRAY(SELECT taskmill.queued_types()))) AS o(type)
           WHERE o.type <> ALL (p_capped));
      END IF;
      v_ids := taskmill.lock_oldest_by_level(
                 CASE WHEN v_type IS NOT NULL THEN ARRAY[v_type] ELSE unlimited_types END,
                 p_levels, p_node, v_step,
                 CASE WHEN v_type IS NULL
                      THEN taskmill.types_beside(p_types, p_capped, p_levels, p_foreign_ends) END);
    END IF;
    v_locked := cardinality(v_ids);
    ids := ids || v_ids;
    more := more OR v_locked >= v_step;
    IF v_type IS NOT NULL THEN
      room[i] := room[i] - v_locked;
      v_capped_may_wait := v_capped_may_wait OR v_locked >= v_step;
    END IF;
    quota := quota - v_locked;
    left_in_claim := left_in_claim - v_locked;
  END LOOP;
END
$$;
