-- Hand-offs (SPEC §4): a task submitted due at once goes to an idle node in
-- the submit's own transaction. A node that claimed all it could offers
-- permits it holds free (taskmill.offer_permits); a submit that finds such an
-- offer asks to hand its task off, and as its transaction commits the task
-- is made running under that node, as a claim would have left it, and the
-- node is notified on taskmill_handoffs. A pickup then waits for no claim of
-- its own: the claim's round trip, a durable commit after the node heard of
-- the task, was most of the time from a submit's commit to an HTTP
-- executor. Done at the commit, the attempt's timeout starts
-- then, however long the transaction ran after its submit; one task a
-- transaction is handed off, the first one submitted due at once.
--
-- The offer's permits stay held at the node. As it hears of hand-offs it
-- counts their permits as running tasks' and adds as many to the offer
-- (taskmill.add_to_offer), so that a steady trickle of submits never finds it
-- used up. Each of its claims takes the offer back first, in the claim's
-- transaction (taskmill.withdraw_offer), and takes as many tasks fewer as
-- submits took of it unheard, so that those and the claim's never exceed the
-- permits held. Only nodes without running limits and without executors of
-- limited capacity offer, and a task of a type with a running limit, or
-- keyed (storage/sql/keys.sql), is never handed off: limits are counted in
-- claims. A task is handed off only while no due task waits, so that none
-- overtakes one that is due.
--
-- Nobody waits on a submit that took a permit: the permit is a row the
-- committing submit deletes, which the node's own calls pass over until the
-- commit is done. A permit is counted as taken once a submit holds it,
-- whether the commit succeeds or not; one that fails leaves a permit of a
-- generation nobody takes.

-- Permits of p_node's offers but those of p_keep (0: none kept) are gone,
-- but for those that committing submits hold; answers the generation of
-- each permit removed.
CREATE FUNCTION taskmill.drop_offer_slots(p_node text, p_keep bigint) RETURNS SETOF bigint
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY
    DELETE FROM taskmill.offer_slots s
     WHERE s.id = ANY (ARRAY(SELECT o.id FROM taskmill.offer_slots o
                              WHERE o.node = p_node AND o.generation <> p_keep
                                FOR UPDATE SKIP LOCKED))
    RETURNING s.generation;
END
$$;

-- A node's offer is gone with it: it stopped, was declared dead, or started
-- again under a new incarnation.
CREATE FUNCTION taskmill.drop_offer(p_node text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM taskmill.offers o WHERE o.node = p_node;
  PERFORM taskmill.drop_offer_slots(p_node, 0);
END
$$;

-- A node offers p_permits for tasks of p_types (NULL: any) as its offer
-- p_generation (a number it never used before, not 0), to hold while its
-- heartbeat is younger than p_fresh_ms: a node that stopped beating, dead
-- or cut off, is handed nothing long before it is declared dead. A node
-- declared dead offers nothing. False when no offer was made.
CREATE FUNCTION taskmill.offer_permits(p_node text, p_types text[], p_permits integer,
                                       p_generation bigint, p_fresh_ms integer) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF p_permits <= 0 OR p_generation = 0 OR NOT taskmill.may_claim(p_node) THEN
    RETURN false;
  END IF;
  INSERT INTO taskmill.offers AS o (node, generation, types, fresh_ms)
  VALUES (p_node, p_generation, p_types, p_fresh_ms)
  ON CONFLICT (node) DO UPDATE
     SET generation = excluded.generation, types = excluded.types, fresh_ms = excluded.fresh_ms;
  PERFORM taskmill.drop_offer_slots(p_node, p_generation);
  INSERT INTO taskmill.offer_slots (node, generation)
  SELECT p_node, p_generation FROM generate_series(1, p_permits);
  RETURN true;
END
$$;

-- p_permits more for the node's offer p_generation; false when it no longer
-- stands.
CREATE FUNCTION taskmill.add_to_offer(p_node text, p_generation bigint, p_permits integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF p_permits <= 0 OR NOT EXISTS (SELECT 1 FROM taskmill.offers o
                                    WHERE o.node = p_node AND o.generation = p_generation
                                      AND o.generation <> 0) THEN
    RETURN false;
  END IF;
  INSERT INTO taskmill.offer_slots (node, generation)
  SELECT p_node, p_generation FROM generate_series(1, p_permits);
  RETURN true;
END
$$;

-- A node takes back its offer, of which it holds p_offered permits that it
-- has not heard were taken; answers how many of them submits took (or hold,
-- their commits under way). No offer standing: all of them, as the node's
-- hand-offs may be on their way still.
CREATE FUNCTION taskmill.withdraw_offer(p_node text, p_offered integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_generation bigint;
  v_left integer;
BEGIN
  UPDATE taskmill.offers o SET generation = 0
    FROM (SELECT c.generation FROM taskmill.offers c WHERE c.node = p_node FOR UPDATE) cur
   WHERE o.node = p_node
  RETURNING cur.generation INTO v_generation;
  SELECT count(*) FILTER (WHERE l.generation = v_generation AND v_generation <> 0)
    INTO v_left FROM taskmill.drop_offer_slots(p_node, 0) AS l(generation);
  RETURN greatest(p_offered - v_left, 0);
END
$$;

-- A claim (taskmill.claim_by_turns, with its arguments) that first takes back
-- the node's standing offer, of which it holds p_offered of the p_limit
-- permits, in the claim's transaction, and claims as many tasks fewer as
-- submits took of it unheard: that number comes with every row, and alone in
-- a row without a task when the claim took none, for the node to keep their
-- permits until it hears of those tasks (task NULL).
CREATE FUNCTION taskmill.claim_taking_offer_back(p_node text, p_limit integer,
                                                 p_turns integer[], p_capped_types text[],
                                                 p_type_limits integer[],
                                                 p_global_limit integer, p_types text[],
                                                 p_local_types text[], p_local_room integer[],
                                                 p_after_short_claim boolean,
                                                 p_offered integer)
RETURNS TABLE (task taskmill.running_task, handed_unheard integer)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY
    SELECT c, w.handed_unheard
      FROM (SELECT taskmill.withdraw_offer(p_node, p_offered) AS handed_unheard) w
      LEFT JOIN LATERAL taskmill.claim_by_turns(p_node, p_limit - w.handed_unheard, p_turns,
                                                p_capped_types, p_type_limits, p_global_limit,
                                                p_types, p_local_types, p_local_room,
                                                p_after_short_claim) c ON true;
END
$$;

-- The node task p_task of p_type, due now, is handed to, and the generation
-- of the offer whose permit it took; NULL when no live node offers, or other
-- due work waits (tasks pinned to a node aside: no idle node could take
-- them).
CREATE FUNCTION taskmill.take_offer(p_type text, p_task bigint, OUT node text,
                                    OUT generation bigint)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_sort = off
SET jit = off AS $$
#variable_conflict use_column
DECLARE
  -- At the commit, late in a long transaction perhaps: tasks that came due
  -- since it began count.
  v_now timestamptz := clock_timestamp();
  v_node text;
  v_generation bigint;
BEGIN
  -- Read as the claims read it, from the oldest due task.
  IF EXISTS (SELECT 1 FROM taskmill.tasks d
              WHERE d.status IN ('pending', 'failed') AND d.priority = ANY ('{1,2,3,4,5}')
                AND d.execute_at <= v_now AND d.id <> p_task AND d.pinned_node IS NULL
              ORDER BY d.priority, d.execute_at, d.id LIMIT 1) THEN
    RETURN;
  END IF;
  DELETE FROM taskmill.offer_slots s
   WHERE s.id = (SELECT t.id FROM taskmill.offer_slots t
                   JOIN taskmill.offers o ON o.node = t.node AND o.generation = t.generation
                   JOIN taskmill.nodes n ON n.name = o.node
                  WHERE (o.types IS NULL OR p_type = ANY (o.types)) AND n.stopped_at IS NULL
                    AND n.heartbeat_at > v_now - o.fresh_ms * interval '1 ms'
                  LIMIT 1
                    FOR UPDATE OF t SKIP LOCKED)
  RETURNING s.node, s.generation INTO v_node, v_generation;
  node := v_node;
  generation := v_generation;
END
$$;

-- A submit of task p_task due at once asks to hand it off, if a node offers
-- permits and no task of this transaction asked before. Not in a transaction
-- of a stricter isolation than read committed: at its commit, the permit
-- taken from its snapshot may be gone, and the commit would fail.
CREATE FUNCTION taskmill.ask_hand_off(p_task bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('taskmill.hand_off_asked', true) = 'on'
     OR current_setting('transaction_isolation') <> 'read committed'
     OR NOT EXISTS (SELECT 1 FROM taskmill.offer_slots t
                      JOIN taskmill.offers o ON o.node = t.node AND o.generation = t.generation) THEN
    RETURN false;
  END IF;
  PERFORM set_config('taskmill.hand_off_asked', 'on', true);
  INSERT INTO taskmill.handoff_requests (task_id) VALUES (p_task);
  RETURN true;
END
$$;

-- As the transaction that asked commits: the task goes to a node that offers
-- permits, running from now, or stays pending, and the nodes are woken.
CREATE FUNCTION taskmill.hand_off_at_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_task taskmill.tasks;
  v_node text;
  v_generation bigint;
  v_started timestamptz;
BEGIN
  DELETE FROM taskmill.handoff_requests r WHERE r.task_id = NEW.task_id;
  -- A broadcast shard is for its node only.
  SELECT * INTO v_task FROM taskmill.tasks t
   WHERE t.id = NEW.task_id AND t.status = 'pending' AND t.execute_at <= clock_timestamp()
     AND t.pinned_node IS NULL;
  IF v_task.id IS NOT NULL THEN
    SELECT o.node, o.generation INTO v_node, v_generation
      FROM taskmill.take_offer(v_task.type, v_task.id) o;
  END IF;
  IF v_node IS NULL THEN
    PERFORM taskmill.wake_nodes();
    RETURN NULL;
  END IF;
  -- One reading of the clock: read for each column, they differed by a
  -- microsecond at times.
  v_started := clock_timestamp();
  UPDATE taskmill.tasks t
     SET status = 'running', attempt = t.attempt + 1, picked_by = v_node,
         heartbeat_at = v_started, started_at = v_started, updated_at = v_started
   WHERE t.id = v_task.id AND t.status <> 'stopped'
  RETURNING t.* INTO v_task;
  PERFORM pg_notify('taskmill_handoffs', taskmill.hand_off_notice(v_task, v_generation));
  RETURN NULL;
END
$$;

-- What the nodes hear of task p_task handed to its node: a first line
-- "<id> <attempt> <generation> <node>", which every node reads and all but
-- that one leave, then the task as a claim gives it (taskmill.running_task),
-- in JSON, so that the node starts it without reading it (a round trip on
-- the way to the executor); what the first line tells is left out. The
-- payload is the text of its JSON, and times are in microseconds since the
-- epoch as well. A task that would not fit a notification (under 8000
-- bytes) is told of by the first line alone, and the node reads it.
CREATE FUNCTION taskmill.hand_off_notice(p_task taskmill.tasks, p_generation bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_ids text := format('%s %s %s %s', p_task.id, p_task.attempt, p_generation, p_task.picked_by);
  v_notice text;
BEGIN
  v_notice := v_ids || E'\n' || (
    to_jsonb(taskmill.as_running(p_task, 0)) - '{id,attempt,status,picked_by,execute_at,turns_taken}'::text[]
    || jsonb_build_object(
         'payload', p_task.payload::text,
         'execute_at_us', (extract(epoch FROM p_task.execute_at) * 1000000)::bigint,
         'started_at_us', (extract(epoch FROM p_task.started_at) * 1000000)::bigint))::text;
  IF octet_length(v_notice) < 8000 THEN
    RETURN v_notice;
  END IF;
  RETURN v_ids;
END
$$;

CREATE CONSTRAINT TRIGGER handoff_requests_at_commit AFTER INSERT ON taskmill.handoff_requests
  DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION taskmill.hand_off_at_commit();

-- Permits of offers no longer standing that a commit held as they were
-- taken back, and that commit failed: nobody takes them; the watcher's pass
-- removes them.
CREATE FUNCTION taskmill.drop_stale_offer_slots() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM taskmill.offer_slots s
   WHERE s.id = ANY (ARRAY(SELECT t.id FROM taskmill.offer_slots t
                            WHERE NOT EXISTS (SELECT 1 FROM taskmill.offers o
                                               WHERE o.node = t.node
                                                 AND o.generation = t.generation)
                              FOR UPDATE SKIP LOCKED));
END
$$;
