-- Claiming due work (SPEC §4): weighted-fair levels, cluster-wide limits
-- counted in the claim, and the time of the next due task. What is due and
-- the turns' quotas are in claim_levels.sql, the claim's steps in
-- claim_steps.sql.

-- A node declared dead claims nothing until it has registered again.
-- (PL/pgSQL keeps the plan; a SQL function is planned at every claim.)
CREATE FUNCTION taskmill.may_claim(p_node text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN NOT EXISTS (SELECT 1 FROM taskmill.nodes n
                      WHERE n.name = p_node AND n.stopped_at IS NOT NULL);
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
  parent_results jsonb, turns_taken integer);

-- A task's row as taskmill.running_task. Inlined where it is called: a
-- claim's RETURNING (taskmill.as_running(t, n)).* reads the columns alone.
CREATE FUNCTION taskmill.as_running(t taskmill.tasks, p_turns_taken integer)
RETURNS taskmill.running_task
LANGUAGE sql IMMUTABLE AS $$
  SELECT ROW(t.id, t.type, t.key, t.version, t.status, t.priority, t.payload, t.attempt,
             t.retry_count, t.max_retries, t.timeout_ms, t.error, t.batch, t.shard_index,
             t.shard_total, t.trace_id, t.picked_by, t.execute_at, t.parent_results,
             p_turns_taken)::taskmill.running_task
$$;

-- SPEC §4, claim, refused to nodes declared dead, skipping levels without due
-- work: an idle claim costs one probe. p_turns holds the level of each claim
-- in turn (the pusher's weighted shares); the claim takes as many turns of
-- levels with due work as the limits leave it room for, from the first, so
-- that a claim cut short by a cluster-wide limit still shares its room by
-- weight, and each row tells how far into the turns it went (turns_taken),
-- so that the pusher tells a level that ran dry from one the room did not
-- reach. Whatever the turns leave of that room is filled in claim order.
-- While every type with a running limit has room for a level's quota, the
-- level is claimed in claim order over all types; where one has less, the
-- types with a limit go first within the level, each as far as its room
-- allows, then the others. Running limits are counted here, in
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
CREATE FUNCTION taskmill.claim_by_turns_once(p_node text, p_limit integer, p_turns integer[],
                                             p_capped_types text[], p_type_limits integer[],
                                             p_global_limit integer, p_types text[],
                                             p_local_types text[], p_local_room integer[],
                                             p_after_short_claim boolean)
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
  -- The types without a limit: the node's, or, when it runs any type, those
  -- with tasks queued.
  v_unlimited_types text[];
  -- Whether every limited type this node runs has room for the level's
  -- quota: the level is then searched in claim order over all types.
  v_together boolean;
  -- The tasks this claim made running, and each limited type's room before.
  v_claimed bigint[] := '{}';
  v_room_at_start integer[];
  -- The types this node runs whose tasks are keyed, and their key spaces.
  v_keyed record := taskmill.keyed_types(p_types);
BEGIN
  IF p_after_short_claim AND p_global_limit <= 0
     AND coalesce(cardinality(p_capped_types), 0) = 0
     AND coalesce(cardinality(p_local_types), 0) = 0
     AND cardinality(v_keyed.types) = 0 THEN
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
  -- A keyed type is limited by its keys' rooms, counted under the limits'
  -- lock as they are searched (taskmill.lock_keyed); as a type it has the
  -- claim's room unless it has a limit of its own.
  IF cardinality(v_keyed.types) > 0 THEN
    PERFORM pg_advisory_xact_lock(7345, 3);
    SELECT v_capped || coalesce(array_agg(k.type), '{}'), v_room || coalesce(array_agg(v_left), '{}')
      INTO v_capped, v_room
      FROM unnest(v_keyed.types) AS k(type) WHERE k.type <> ALL (v_capped);
  END IF;
  v_room_at_start := v_room;
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
  -- The claim tallies what it starts itself (storage/sql/running_tally.sql).
  PERFORM set_config('taskmill.tallied', 'on', true);
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
    -- While every limited type this node runs has room for the level's
    -- whole quota, the level is read in claim order over all its types, as
    -- without limits: no type can find more than its room, so nothing is
    -- locked that the claim cannot take. A step per limited type took tasks
    -- scattered over the table, and the claim's updates and the outcomes'
    -- read more pages a task.
    v_together := cardinality(v_capped) > 0 AND NOT (v_levels && v_foreign_ends)
                  AND cardinality(v_keyed.types) = 0
                  AND taskmill.rooms_hold(v_capped, v_room, p_types, v_quota);
    v_lock := taskmill.lock_level(p_node, p_types, lvl, v_levels, v_foreign_ends, v_capped,
                                  v_uncapped, v_together, v_keyed.types, v_keyed.spaces, v_room,
                                  v_quota, v_left, v_more, v_unlimited_types);
    v_room := v_lock.room;
    v_quota := v_lock.quota;
    v_left := v_lock.left_in_claim;
    v_more := v_lock.more;
    v_unlimited_types := v_lock.unlimited_types;
    -- One update for the steps of a level: the types' searches never find
    -- each other's tasks.
    IF cardinality(v_lock.ids) > 0 THEN
      RETURN QUERY
        UPDATE taskmill.tasks t
           SET status = 'running', attempt = t.attempt + 1, picked_by = p_node,
               heartbeat_at = now(), started_at = now(), updated_at = now()
         WHERE t.id = ANY (v_lock.ids) AND t.status IN ('pending', 'failed')
        RETURNING (taskmill.as_running(t, v_turns_taken)).*;
      v_claimed := v_claimed || v_lock.ids;
    END IF;
    IF v_quota <= 0 THEN
      v_more := true;
    ELSIF lvl <= 5 AND NOT lvl = ANY (v_short) THEN
      v_short := v_short || lvl;
    END IF;
  END LOOP;
  PERFORM set_config('taskmill.tallied', '', true);
  IF cardinality(v_claimed) > 0 THEN
    PERFORM taskmill.tally_claim(v_claimed, v_capped,
                                 ARRAY(SELECT x.before - x.after
                                         FROM unnest(v_room_at_start, v_room)
                                                WITH ORDINALITY AS x(before, after, i)
                                        ORDER BY x.i));
  END IF;
END
$$;

-- A claim (taskmill.claim_by_turns_once) that found a task due which
-- another claim took and whose success moved it to the successes' partition
-- before this one's lock fails (40001, "already moved to another
-- partition") instead of passing it over, and is made again: the task is
-- not due then. Each try's rows are returned only once it succeeded. Claims
-- racing nodes that finish their tasks at once meet a newly moved task at
-- one try after another; one that fails ten times is retried by the node
-- after 50 ms or more.
CREATE FUNCTION taskmill.claim_by_turns(p_node text, p_limit integer, p_turns integer[],
                                        p_capped_types text[], p_type_limits integer[],
                                        p_global_limit integer, p_types text[],
                                        p_local_types text[], p_local_room integer[],
                                        p_after_short_claim boolean DEFAULT false)
RETURNS SETOF taskmill.running_task
LANGUAGE plpgsql
SET jit = off AS $$
DECLARE
  v_claimed taskmill.running_task[];
BEGIN
  FOR v_try IN 1..10 LOOP
    BEGIN
      v_claimed := ARRAY(SELECT c FROM taskmill.claim_by_turns_once(
                           p_node, p_limit, p_turns, p_capped_types, p_type_limits,
                           p_global_limit, p_types, p_local_types, p_local_room,
                           p_after_short_claim) c);
      RETURN QUERY SELECT * FROM unnest(v_claimed);
      RETURN;
    EXCEPTION WHEN serialization_failure THEN
      IF v_try = 10 THEN
        RAISE;
      END IF;
    END;
  END LOOP;
END
$$;

-- When this node's claims may next find work: whether a task or a key's rate
-- came due within the last second that the claim before did not take (its
-- type at a limit, locked by another node's claim, or due as that claim
-- began: it ran in a transaction of its own that started a moment earlier),
-- and the earliest due time still to come within the horizon. The pusher
-- waits less for the one than for the other, and never past the second.
CREATE FUNCTION taskmill.next_due_times(p_types text[], p_horizon_ms bigint, p_node text,
                                        OUT due_now boolean, OUT next_due_at timestamptz,
                                        OUT db_now timestamptz)
LANGUAGE plpgsql STABLE
SET enable_seqscan = off
SET enable_sort = off AS $$
BEGIN
  SELECT bool_or(d.execute_at IS NOT NULL), min(l.execute_at), now()
    INTO due_now, next_due_at, db_now
    FROM generate_series(1, 5) AS lvl(p)
    LEFT JOIN LATERAL (
      SELECT t.execute_at FROM taskmill.tasks t
       WHERE t.status IN ('pending', 'failed') AND t.priority = lvl.p
         AND t.execute_at > now() - interval '1 second' AND t.execute_at <= now()
         AND (p_types IS NULL OR t.type = ANY (p_types))
         AND (t.pinned_node IS NULL OR t.pinned_node = p_node)
       ORDER BY t.execute_at LIMIT 1) d ON true
    LEFT JOIN LATERAL (
      SELECT t.execute_at FROM taskmill.tasks t
       WHERE t.status IN ('pending', 'failed') AND t.priority = lvl.p
         AND t.execute_at > now() AND t.execute_at <= now() + p_horizon_ms * interval '1 ms'
         AND (p_types IS NULL OR t.type = ANY (p_types))
         AND (t.pinned_node IS NULL OR t.pinned_node = p_node)
       ORDER BY t.execute_at LIMIT 1) l ON true;
  -- A key at its rate starts again when its oldest slot of the period frees,
  -- however long its tasks have been due (storage/sql/key_rates.sql).
  SELECT due_now OR coalesce(bool_or(k.rate_opens_at <= now()), false),
         least(next_due_at, min(k.rate_opens_at) FILTER (WHERE k.rate_opens_at > now()))
    INTO due_now, next_due_at
    FROM taskmill.key_turns k
   WHERE k.rate_opens_at > now() - interval '1 second'
     AND k.rate_opens_at <= now() + p_horizon_ms * interval '1 ms'
     AND k.space IN (SELECT s.key_space FROM taskmill.task_types s
                      WHERE p_types IS NULL OR s.type = ANY (p_types));
END
$$;
