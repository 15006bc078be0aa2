-- The tally of running tasks per limited scope (SPEC §4 Limits; the table is
-- in storage/migrations/017_running_tally.sql). A scope is tallied once a
-- node that limits it started (taskmill.track_running); claims read its use
-- from the tally (taskmill.claim_rooms), the leader's watcher sets it to the
-- truth at every sweep (taskmill.recount_running).
--
-- Claims and outcomes, which move most tasks in and out of running, tally
-- in bulk as the last thing they do, with the setting taskmill.tallied 'on'
-- while they update; every other way is noted a task at a time and tallied
-- together as its transaction commits. So a transaction holds tally rows only
-- once it has taken every lock on tasks it takes, and those who tally never
-- wait for a task another tallying transaction holds. Tally rows are locked
-- in one order, every row of the ended side, then every row of the started
-- side, each in key order; no transaction tallies the ended side after the
-- started one (a claim tallies only what it started), so none waits in a
-- cycle.

-- Adds p_tasks tasks of each type of p_types (distinct) to the tally of the
-- tasks started, or ended, in each tallied scope, and p_all (default: as
-- many as those) to that of all tasks. When a row changes, every row of the
-- side is locked first, in key order.
CREATE FUNCTION taskmill.tally_running(p_types text[], p_tasks bigint[], p_ended boolean,
                                       p_all bigint DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_scope record;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM taskmill.running_tally r
                  WHERE r.ended = p_ended
                    AND CASE WHEN r.scope = 'all'
                             THEN coalesce(p_all, (SELECT sum(n) FROM unnest(p_tasks) AS n)) > 0
                             ELSE coalesce(p_tasks[array_position(p_types, r.name)], 0) > 0
                        END) THEN
    RETURN;
  END IF;
  FOR v_scope IN
    SELECT r.scope, r.name,
           CASE WHEN r.scope = 'all'
                THEN coalesce(p_all, (SELECT sum(n) FROM unnest(p_tasks) AS n))
                ELSE p_tasks[array_position(p_types, r.name)] END AS tasks
      FROM taskmill.running_tally r
     WHERE r.ended = p_ended
     ORDER BY r.scope, r.name
       FOR UPDATE
  LOOP
    CONTINUE WHEN coalesce(v_scope.tasks, 0) = 0;
    UPDATE taskmill.running_tally r SET tasks = r.tasks + v_scope.tasks
     WHERE r.scope = v_scope.scope AND r.name = v_scope.name AND r.ended = p_ended;
  END LOOP;
END
$$;

-- The same for tasks of p_types, one entry a task.
CREATE FUNCTION taskmill.tally_running(p_types text[], p_ended boolean) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_types text[];
  v_tasks bigint[];
BEGIN
  IF coalesce(cardinality(p_types), 0) = 0
     OR NOT EXISTS (SELECT 1 FROM taskmill.running_tally) THEN
    RETURN;
  END IF;
  SELECT array_agg(g.type), array_agg(g.n) INTO v_types, v_tasks
    FROM (SELECT u.type, count(*) AS n FROM unnest(p_types) AS u(type) GROUP BY u.type) g;
  PERFORM taskmill.tally_running(v_types, v_tasks, p_ended);
END
$$;

-- What a claim started: the tasks p_ids, p_taken of them of each type of
-- p_capped (the types it counted the room of). Read again only when a type
-- it did not count is tallied (a limit of another node's).
CREATE FUNCTION taskmill.tally_claim(p_ids bigint[], p_capped text[], p_taken integer[])
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(cardinality(p_ids), 0) = 0
     OR NOT EXISTS (SELECT 1 FROM taskmill.running_tally) THEN
    RETURN;
  END IF;
  IF EXISTS (SELECT 1 FROM taskmill.running_tally r
              WHERE r.scope = 'type' AND r.name <> ALL (p_capped)) THEN
    PERFORM taskmill.tally_running(ARRAY(SELECT t.type FROM taskmill.tasks t
                                          WHERE t.id = ANY (p_ids) AND t.status = 'running'),
                                   false);
  ELSE
    PERFORM taskmill.tally_running(p_capped, p_taken::bigint[], false, cardinality(p_ids));
  END IF;
END
$$;

-- A task that started or stopped running other than by a claim or an
-- outcome (which tally in bulk) is noted as it moves
-- (taskmill.running_changes), and tallied with the rest its transaction
-- moved as that commits: each tally row is updated once however many tasks
-- moved, and only once the transaction took every lock on tasks it takes.
CREATE FUNCTION taskmill.note_running_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM taskmill.running_tally) THEN
    RETURN NULL;
  END IF;
  IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.status = 'running' THEN
    INSERT INTO taskmill.running_changes VALUES (txid_current(), OLD.type, true);
  END IF;
  IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.status = 'running' THEN
    INSERT INTO taskmill.running_changes VALUES (txid_current(), NEW.type, false);
  END IF;
  PERFORM set_config('taskmill.running_changes', 'noted', true);
  RETURN NULL;
END
$$;

CREATE TRIGGER tasks_note_running AFTER UPDATE OF status ON taskmill.tasks
  FOR EACH ROW
  WHEN ((OLD.status = 'running') <> (NEW.status = 'running')
        AND current_setting('taskmill.tallied', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION taskmill.note_running_change();

CREATE TRIGGER tasks_note_running_in AFTER INSERT ON taskmill.tasks
  FOR EACH ROW WHEN (NEW.status = 'running')
  EXECUTE FUNCTION taskmill.note_running_change();

-- A success's outcome is also a delete among the live tasks (it moves to
-- the successes' partition), tallied by the outcome like the rest.
CREATE TRIGGER tasks_note_running_gone AFTER DELETE ON taskmill.tasks
  FOR EACH ROW
  WHEN (OLD.status = 'running' AND current_setting('taskmill.tallied', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION taskmill.note_running_change();

-- As a transaction commits, the first of its notes tallies them all (the
-- others find none left): every tally row is locked first, in the order
-- above.
CREATE FUNCTION taskmill.tally_running_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  v_ended text[];
  v_started text[];
BEGIN
  IF current_setting('taskmill.running_changes', true) IS DISTINCT FROM 'noted' THEN
    RETURN NULL;
  END IF;
  PERFORM set_config('taskmill.running_changes', '', true);
  WITH taken AS (
    DELETE FROM taskmill.running_changes c WHERE c.txid = txid_current()
    RETURNING c.type, c.ended
  )
  SELECT array_agg(t.type) FILTER (WHERE t.ended), array_agg(t.type) FILTER (WHERE NOT t.ended)
    INTO v_ended, v_started FROM taken t;
  PERFORM 1 FROM taskmill.running_tally r ORDER BY r.ended DESC, r.scope, r.name FOR UPDATE;
  PERFORM taskmill.tally_running(v_ended, true);
  PERFORM taskmill.tally_running(v_started, false);
  RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER running_changes_tallied AFTER INSERT ON taskmill.running_changes
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  EXECUTE FUNCTION taskmill.tally_running_changes();

-- The scopes a node limits: p_types, and every task when p_all. Those not
-- tallied yet are from now on, counted from the truth. A claim or outcome
-- that began before and tallies after this commits tallies these scopes
-- too; one that tallied before this commits and commits after its count
-- goes uncounted until the leader's next sweep sets the tally right (at
-- most a claim's tasks, once, as a limit first comes in).
CREATE FUNCTION taskmill.track_running(p_types text[], p_all boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO taskmill.running_tally (scope, name, ended)
  SELECT s.scope, s.name, e.ended
    FROM (SELECT 'type', u.type FROM unnest(coalesce(p_types, '{}')) AS u(type)
          UNION ALL SELECT 'all', '' WHERE p_all) AS s(scope, name),
         (VALUES (false), (true)) AS e(ended)
  ON CONFLICT DO NOTHING;
  IF FOUND THEN
    PERFORM taskmill.recount_running();
  END IF;
END
$$;

-- Each tallied scope whose tally is not the truth as the statement that
-- asks sees it: the tasks it says started and ended, and those running.
CREATE FUNCTION taskmill.running_tally_off()
RETURNS TABLE (scope text, name text, started bigint, ended bigint, running bigint)
LANGUAGE sql STABLE AS $$
  WITH truth AS (
    SELECT t.type, count(*) AS tasks FROM taskmill.tasks t
     WHERE t.status = 'running' GROUP BY t.type
  ),
  tallied AS (
    SELECT s.scope, s.name,
           sum(s.tasks) FILTER (WHERE NOT s.ended) AS started,
           sum(s.tasks) FILTER (WHERE s.ended) AS ended,
           CASE WHEN s.scope = 'all' THEN (SELECT coalesce(sum(h.tasks), 0) FROM truth h)
                ELSE coalesce((SELECT h.tasks FROM truth h WHERE h.type = s.name), 0)
           END AS running
      FROM taskmill.running_tally s GROUP BY s.scope, s.name
  )
  SELECT a.scope, a.name, a.started, a.ended, a.running FROM tallied a
   WHERE a.started - a.ended <> a.running
$$;

-- Sets the tally of every tallied scope to the tasks running there, and
-- answers by how many tasks it was off, in all. When off, its rows are
-- locked first, in the order above: claims and outcomes that tallied have
-- committed, and the count, a statement of its own, sees their tasks; those
-- under way tally after this commits, and the count does not see their
-- tasks.
CREATE FUNCTION taskmill.recount_running() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_off bigint;
BEGIN
  -- Most often the tally is the truth, which one snapshot shows without a
  -- lock (what moves tasks tallies them in its own transaction): only a
  -- tally found off is locked and counted again.
  IF NOT EXISTS (SELECT 1 FROM taskmill.running_tally_off()) THEN
    RETURN 0;
  END IF;
  PERFORM 1 FROM taskmill.running_tally r ORDER BY r.ended DESC, r.scope, r.name FOR UPDATE;
  WITH fixed AS (
    UPDATE taskmill.running_tally r SET tasks = a.ended + a.running
      FROM taskmill.running_tally_off() a
     WHERE r.scope = a.scope AND r.name = a.name AND NOT r.ended
    RETURNING abs(a.started - a.ended - a.running) AS off
  )
  SELECT coalesce(sum(f.off), 0) INTO v_off FROM fixed f;
  RETURN v_off;
END
$$;

-- The leader's sweep: the tally set to the truth; how far off it was.
CREATE FUNCTION taskmill.sweep_running_tally(p_term bigint DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM taskmill.fence(p_term);
  RETURN taskmill.recount_running();
END
$$;

-- The running tasks of each limited type of p_capped and of all tasks, as
-- tallied; NULL where a scope is not tallied.
CREATE FUNCTION taskmill.tallied_running(p_capped text[], OUT capped_running integer[],
                                         OUT all_running integer)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  SELECT ARRAY(SELECT (SELECT sum(CASE WHEN r.ended THEN -r.tasks ELSE r.tasks END)
                         FROM taskmill.running_tally r
                        WHERE r.scope = 'type' AND r.name = c.type
                       HAVING count(*) = 2)::integer
                 FROM unnest(p_capped) WITH ORDINALITY AS c(type, i) ORDER BY c.i),
         (SELECT sum(CASE WHEN r.ended THEN -r.tasks ELSE r.tasks END)
            FROM taskmill.running_tally r WHERE r.scope = 'all' HAVING count(*) = 2)::integer
    INTO capped_running, all_running;
END
$$;
