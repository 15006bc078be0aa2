-- Workflows (SPEC §10): named steps and the edges between them, stored in
-- one transaction as tasks with dependencies (storage/sql/dependencies.sql
-- runs them). A step is one task, or one per shard of a broadcast; a child
-- step waits for every task of its parent steps.

-- The most a step is given of its parents' results, as JSON text.
CREATE FUNCTION taskmill.max_parent_results_bytes() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT 1048576
$$;

-- The edges of a workflow by the steps' places (from 1) in p_names: each
-- step's `after`, a JSON array of step names or {"step", "on_failure"}
-- objects (on_failure overriding the step's on_parent_failure). Refuses,
-- naming the field, anything else, an unknown step and a step named twice.
CREATE FUNCTION taskmill.step_edges(p_names text[], p_afters jsonb[],
                                    p_on_parent_failures text[])
RETURNS TABLE (parent integer, child integer, on_failure text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_ref jsonb;
  v_at text;
  v_name text;
  v_policy text;
  v_seen integer[];
BEGIN
  FOR c IN 1 .. cardinality(p_names) LOOP
    v_policy := coalesce(p_on_parent_failures[c], 'fail');
    IF v_policy NOT IN ('fail', 'run', 'skip') THEN
      PERFORM taskmill.bad_argument(format(
        'steps[%s].on_parent_failure must be one of fail, run, skip (got "%s")', c - 1, v_policy));
    END IF;
    CONTINUE WHEN p_afters[c] IS NULL;
    IF jsonb_typeof(p_afters[c]) <> 'array' THEN
      PERFORM taskmill.bad_argument(format('steps[%s].after must be an array of step names', c - 1));
    END IF;
    v_seen := '{}';
    FOR i IN 0 .. jsonb_array_length(p_afters[c]) - 1 LOOP
      v_ref := p_afters[c] -> i;
      v_at := format('steps[%s].after[%s]', c - 1, i);
      on_failure := taskmill.edge_policy(v_ref, '{step}', v_policy, v_at);
      IF jsonb_typeof(v_ref) = 'object' THEN
        v_ref := v_ref -> 'step';
        v_at := v_at || '.step';
      END IF;
      IF jsonb_typeof(v_ref) IS DISTINCT FROM 'string' THEN
        PERFORM taskmill.bad_argument(format(
          '%s must be the name of a step (got %s)', v_at, coalesce(v_ref::text, 'nothing')));
      END IF;
      v_name := v_ref #>> '{}';
      parent := array_position(p_names, v_name);
      IF parent IS NULL THEN
        PERFORM taskmill.bad_argument(format('%s: no step "%s"', v_at, v_name));
      END IF;
      IF parent = ANY (v_seen) THEN
        PERFORM taskmill.bad_argument(format('%s names step "%s" a second time', v_at, v_name));
      END IF;
      v_seen := v_seen || parent;
      child := c;
      RETURN NEXT;
    END LOOP;
  END LOOP;
END
$$;

-- A cycle among p_count steps with these edges (places from 1), as the
-- places along it, first and last the same; NULL when there is none.
-- Kahn's order: the steps it cannot reach all lie on or after a cycle;
-- walking parents among them from any of them comes round to one.
CREATE FUNCTION taskmill.step_cycle(p_count integer, p_parents integer[], p_children integer[])
RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_waiting integer[] := array_fill(0, ARRAY[p_count]);
  -- The edges ordered by parent, and where each parent's begin.
  v_children integer[];
  v_first integer[] := array_fill(1, ARRAY[p_count + 1]);
  v_ready integer[] := '{}';
  v_next integer := 1;
  v_step integer;
  v_path integer[];
BEGIN
  IF coalesce(cardinality(p_parents), 0) = 0 THEN
    RETURN NULL;
  END IF;
  SELECT array_agg(e.child ORDER BY e.parent, e.child) INTO v_children
    FROM unnest(p_parents, p_children) AS e(parent, child);
  FOR i IN 1 .. cardinality(p_parents) LOOP
    v_waiting[p_children[i]] := v_waiting[p_children[i]] + 1;
    v_first[p_parents[i] + 1] := v_first[p_parents[i] + 1] + 1;
  END LOOP;
  FOR s IN 2 .. p_count + 1 LOOP
    v_first[s] := v_first[s] + v_first[s - 1] - 1;
  END LOOP;
  FOR s IN 1 .. p_count LOOP
    IF v_waiting[s] = 0 THEN
      v_ready := v_ready || s;
    END IF;
  END LOOP;
  WHILE v_next <= cardinality(v_ready) LOOP
    v_step := v_ready[v_next];
    v_next := v_next + 1;
    FOR j IN v_first[v_step] .. v_first[v_step + 1] - 1 LOOP
      v_waiting[v_children[j]] := v_waiting[v_children[j]] - 1;
      IF v_waiting[v_children[j]] = 0 THEN
        v_ready := v_ready || v_children[j];
      END IF;
    END LOOP;
  END LOOP;
  IF cardinality(v_ready) = p_count THEN
    RETURN NULL;
  END IF;
  v_step := (SELECT min(s) FROM generate_subscripts(v_waiting, 1) s WHERE v_waiting[s] > 0);
  v_path := ARRAY[v_step];
  LOOP
    v_step := (SELECT min(e.parent) FROM unnest(p_parents, p_children) AS e(parent, child)
                WHERE e.child = v_step AND v_waiting[e.parent] > 0);
    IF v_step = ANY (v_path) THEN
      v_path := v_path[array_position(v_path, v_step):] || v_step;
      RETURN ARRAY(SELECT x FROM unnest(v_path) WITH ORDINALITY AS p(x, n) ORDER BY n DESC);
    END IF;
    v_path := v_path || v_step;
  END LOOP;
END
$$;

-- What is wrong with the steps of a workflow, in the words of the API, or
-- NULL: a name, a step given twice, the routing, then each step as a task
-- (taskmill.task_problem; a key left to the workflow is checked as one).
CREATE FUNCTION taskmill.steps_problem(
  p_names text[], p_shards integer[], p_types text[], p_keys text[], p_versions bigint[],
  p_execute_ats timestamptz[], p_priorities integer[], p_max_retries integer[],
  p_timeouts integer[], p_backoff_kinds text[], p_backoff_bases integer[],
  p_backoff_caps integer[], p_backoff_jitters real[], p_batches text[], p_trace_ids text[],
  p_shard_indexes integer[], p_shard_totals integer[]) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT format('steps[%s].%s', u.ord - 1, u.problem)
    FROM (SELECT s.ord,
                 CASE
                   WHEN s.name IS NULL OR s.name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'
                     THEN 'name must be 1 to 100 letters, digits or _.:- (starting with a letter '
                          'or digit)'
                   WHEN row_number() OVER (PARTITION BY s.name ORDER BY s.ord) > 1
                     THEN format('name: step "%s" is given twice', s.name)
                   WHEN s.shards NOT BETWEEN 0 AND 10000
                     THEN 'shards must be between 1 and 10000'
                   WHEN s.shard_index IS NOT NULL OR s.shard_total IS NOT NULL
                     THEN 'shard_index and shard_total are set by the workflow: use routing '
                          'broadcast'
                   ELSE taskmill.task_problem(s.type, coalesce(s.key, 'step'), s.version,
                                              s.execute_at, s.priority, s.max_retries,
                                              s.timeout_ms, s.backoff_kind, s.backoff_base_ms,
                                              s.backoff_cap_ms, s.backoff_jitter, s.batch,
                                              s.trace_id, NULL, NULL)
                 END AS problem
            FROM unnest(p_names, p_shards, p_types, p_keys, p_versions, p_execute_ats,
                        p_priorities, p_max_retries, p_timeouts, p_backoff_kinds,
                        p_backoff_bases, p_backoff_caps, p_backoff_jitters, p_batches,
                        p_trace_ids, p_shard_indexes, p_shard_totals)
                 WITH ORDINALITY AS s(name, shards, type, key, version, execute_at, priority,
                                      max_retries, timeout_ms, backoff_kind, backoff_base_ms,
                                      backoff_cap_ms, backoff_jitter, batch, trace_id,
                                      shard_index, shard_total, ord)) u
   WHERE u.problem IS NOT NULL
   ORDER BY u.ord
   LIMIT 1
$$;

-- POST /v1/workflows: the steps (p_names, with the tasks as
-- taskmill.submit_batch takes them, `after` naming steps) in one
-- transaction. p_shards: NULL for one task, 0 for one per live node that
-- runs the type (silent for less than p_lease_ms), n for n; shard i is
-- pinned to the i-th such node, as a broadcast job's. A step's key defaults
-- to "<workflow id>/<step>" (and "#<shard>"); every task must be new to its
-- unit. A workflow with the key p_key of an earlier one is that one
-- (outcome duplicate), else created.
CREATE FUNCTION taskmill.submit_workflow(
  p_name text, p_key text, p_names text[], p_shards integer[], p_lease_ms bigint,
  p_types text[], p_keys text[], p_versions bigint[], p_payloads jsonb[],
  p_execute_ats timestamptz[], p_priorities integer[], p_max_retries integer[],
  p_timeouts integer[], p_backoff_kinds text[], p_backoff_bases integer[],
  p_backoff_caps integer[], p_backoff_jitters real[], p_batches text[], p_trace_ids text[],
  p_shard_indexes integer[], p_shard_totals integer[], p_afters jsonb[],
  p_on_parent_failures text[], p_concurrency_keys text[] DEFAULT NULL,
  OUT outcome text, OUT workflow_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer := coalesce(cardinality(p_names), 0);
  v_problem text;
  v_parents integer[];
  v_children integer[];
  v_policies text[];
  v_cycle integer[];
  -- The tasks: their step, shard (NULL: the step is one task), key, node.
  v_steps integer[];
  v_shards integer[];
  v_totals integer[];
  v_keys text[];
  v_pins text[];
  v_ids bigint[];
BEGIN
  IF p_name IS NULL OR p_name = '' OR length(p_name) > 200 THEN
    PERFORM taskmill.bad_argument('name must be 1 to 200 characters');
  END IF;
  IF p_key = '' OR length(p_key) > 500 THEN
    PERFORM taskmill.bad_argument('key must be 1 to 500 characters');
  END IF;
  IF v_count = 0 OR v_count > 10000 THEN
    PERFORM taskmill.bad_argument('steps must hold 1 to 10000 steps');
  END IF;
  v_problem := taskmill.steps_problem(p_names, p_shards, p_types, p_keys, p_versions,
                                      p_execute_ats, p_priorities, p_max_retries, p_timeouts,
                                      p_backoff_kinds, p_backoff_bases, p_backoff_caps,
                                      p_backoff_jitters, p_batches, p_trace_ids,
                                      p_shard_indexes, p_shard_totals);
  IF v_problem IS NULL THEN
    SELECT format('steps[%s].%s', u.ord - 1, x.p) INTO v_problem
      FROM unnest(p_types, p_keys, p_payloads, p_concurrency_keys)
             WITH ORDINALITY AS u(type, key, payload, given, ord),
           LATERAL taskmill.type_settings(u.type) s,
           LATERAL (SELECT coalesce(taskmill.given_key_problem(u.type, s, u.given),
                                    CASE WHEN s.key_space IS NOT NULL
                                         THEN taskmill.task_key_problem(
                                                u.type, s.key_path, s.key_separator,
                                                coalesce(u.key, 'step'),
                                                coalesce(u.payload, '{}')) END) AS p) x
     WHERE x.p IS NOT NULL
     ORDER BY u.ord LIMIT 1;
  END IF;
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;
  SELECT array_agg(e.parent), array_agg(e.child), array_agg(e.on_failure)
    INTO v_parents, v_children, v_policies
    FROM taskmill.step_edges(p_names, p_afters, p_on_parent_failures) e;
  v_cycle := taskmill.step_cycle(v_count, v_parents, v_children);
  IF v_cycle IS NOT NULL THEN
    PERFORM taskmill.bad_argument(format('steps[%s].after: a cycle: %s', v_cycle[2] - 1,
      (SELECT string_agg(p_names[x], ' -> ' ORDER BY n)
         FROM unnest(v_cycle) WITH ORDINALITY AS c(x, n))));
  END IF;

  IF p_key IS NOT NULL THEN
    PERFORM pg_advisory_xact_lock(taskmill.unit_lock_key('', p_key));
    SELECT w.id INTO workflow_id FROM taskmill.workflows w WHERE w.key = p_key;
    IF FOUND THEN
      outcome := 'duplicate';
      RETURN;
    END IF;
  END IF;
  -- Before the shards are counted out one by one.
  IF (SELECT sum(CASE WHEN s.n > 0 THEN s.n ELSE 1 END) FROM unnest(p_shards) AS s(n)) > 10000 THEN
    PERFORM taskmill.bad_argument('steps: a workflow has at most 10000 tasks (its shards make more)');
  END IF;
  INSERT INTO taskmill.workflows (name, key) VALUES (p_name, p_key) RETURNING id INTO workflow_id;

  SELECT array_agg(x.step ORDER BY x.step, x.shard), array_agg(x.shard ORDER BY x.step, x.shard),
         array_agg(x.total ORDER BY x.step, x.shard),
         array_agg(coalesce(p_keys[x.step], workflow_id || '/' || p_names[x.step])
                   || coalesce('#' || x.shard, '') ORDER BY x.step, x.shard),
         array_agg(x.nodes[x.shard + 1] ORDER BY x.step, x.shard)
    INTO v_steps, v_shards, v_totals, v_keys, v_pins
    FROM (SELECT s.step, n.nodes, n.total, g.shard
            FROM generate_series(1, v_count) AS s(step)
            CROSS JOIN LATERAL (
              SELECT r.nodes, CASE WHEN p_shards[s.step] = 0 THEN greatest(cardinality(r.nodes), 1)
                                   ELSE p_shards[s.step] END AS total
                FROM (SELECT CASE WHEN p_shards[s.step] IS NULL THEN '{}'::text[]
                                  ELSE taskmill.nodes_running(p_types[s.step], p_lease_ms)
                             END AS nodes) r) n
            CROSS JOIN LATERAL (
              SELECT i AS shard FROM generate_series(0, n.total - 1) i WHERE n.total IS NOT NULL
              UNION ALL
              SELECT NULL WHERE n.total IS NULL) g) x;
  v_problem := taskmill.workflow_size_problem(v_steps, v_parents, v_children);
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;
  SELECT format('steps[%s].key must be at most 500 characters with its "#<shard>"', k.step - 1)
    INTO v_problem
    FROM unnest(v_steps, v_keys) AS k(step, key) WHERE length(k.key) > 500 LIMIT 1;
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;
  SELECT format('steps[%s].key: step "%s" has the type and key of step "%s"', max(k.step) - 1,
                p_names[max(k.step)], p_names[min(k.step)])
    INTO v_problem
    FROM unnest(v_steps, v_keys) AS k(step, key)
   GROUP BY p_types[k.step], k.key HAVING count(*) > 1 LIMIT 1;
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT taskmill.unit_lock_key(p_types[k.step], k.key) AS h
             FROM unnest(v_steps, v_keys) AS k(step, key) ORDER BY 1) l;
  SELECT format('steps[%s].key: task %s of type %s has the key %s already; the steps of a '
                'workflow are new tasks', k.step - 1, t.task_id, p_types[k.step], k.key)
    INTO v_problem
    FROM unnest(v_steps, v_keys) AS k(step, key)
    JOIN taskmill.task_keys t ON t.type = p_types[k.step] AND t.key = k.key
   LIMIT 1;
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;

  v_ids := ARRAY(SELECT nextval(pg_get_serial_sequence('taskmill.tasks', 'id'))
                   FROM generate_series(1, cardinality(v_steps)));
  PERFORM taskmill.insert_steps(workflow_id, p_names, v_ids, v_steps, v_shards, v_totals, v_keys,
                                v_pins, v_parents, v_children, v_policies, p_types, p_versions,
                                p_payloads, p_execute_ats, p_priorities, p_max_retries,
                                p_timeouts, p_backoff_kinds, p_backoff_bases, p_backoff_caps,
                                p_backoff_jitters, p_batches, p_trace_ids, p_concurrency_keys);
  outcome := 'created';
END
$$;

-- What is wrong with the size of a workflow whose tasks are those of the
-- steps p_steps (a step's number once per task), and whose edges go from
-- every task of step p_parents[i] to every task of step p_children[i], or
-- NULL: at most 10,000 tasks and 100,000 edges.
CREATE FUNCTION taskmill.workflow_size_problem(p_steps integer[], p_parents integer[],
                                               p_children integer[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  WITH tasks AS (SELECT s.step, count(*) AS n FROM unnest(p_steps) AS s(step) GROUP BY s.step),
  edges AS (SELECT sum(p.n * c.n) AS n
              FROM unnest(p_parents, p_children) AS e(parent, child)
              JOIN tasks p ON p.step = e.parent JOIN tasks c ON c.step = e.child)
  SELECT CASE
    WHEN cardinality(p_steps) > 10000
      THEN format('steps: a workflow has at most 10000 tasks (these steps and their shards '
                  'make %s)', cardinality(p_steps))
    WHEN (SELECT e.n FROM edges e) > 100000
      THEN format('steps: a workflow has at most 100000 edges between tasks (every shard of a '
                  'step after every shard of its parents makes %s)', (SELECT e.n FROM edges e))
  END
$$;

-- The rows of a workflow's tasks (ids given, by step and shard), their
-- edges (every task of a parent step to every task of the child step) and
-- the waits of those with parents.
CREATE FUNCTION taskmill.insert_steps(
  p_workflow bigint, p_names text[], p_ids bigint[], p_steps integer[], p_shards integer[],
  p_totals integer[], p_keys text[], p_pins text[], p_parents integer[], p_children integer[],
  p_policies text[], p_types text[], p_versions bigint[], p_payloads jsonb[],
  p_execute_ats timestamptz[], p_priorities integer[], p_max_retries integer[],
  p_timeouts integer[], p_backoff_kinds text[], p_backoff_bases integer[],
  p_backoff_caps integer[], p_backoff_jitters real[], p_batches text[], p_trace_ids text[],
  p_concurrency_keys text[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_due integer;
BEGIN
  WITH edges AS (
    SELECT pt.id AS parent_id, ct.id AS child_id, e.on_failure
      FROM unnest(p_parents, p_children, p_policies) AS e(parent, child, on_failure)
      JOIN unnest(p_ids, p_steps) AS pt(id, step) ON pt.step = e.parent
      JOIN unnest(p_ids, p_steps) AS ct(id, step) ON ct.step = e.child
  ),
  added AS (
    INSERT INTO taskmill.task_edges (parent_id, child_id, on_failure, done)
    SELECT e.parent_id, e.child_id, e.on_failure, false FROM edges e
  ),
  waits AS (
    INSERT INTO taskmill.task_waits (task_id, parents_left, execute_at)
    SELECT e.child_id, count(*), coalesce(p_execute_ats[min(c.step)], now())
      FROM edges e JOIN unnest(p_ids, p_steps) AS c(id, step) ON c.id = e.child_id
     GROUP BY e.child_id
  ),
  inserted AS (
    INSERT INTO taskmill.tasks AS t (id, type, key, version, payload, execute_at, priority,
                                     max_retries, timeout_ms, backoff_kind, backoff_base_ms,
                                     backoff_cap_ms, backoff_jitter, deadline_at, batch,
                                     trace_id, shard_index, shard_total, pinned_node,
                                     has_children, parent_results, key_space, concurrency_key,
                                     key_class)
    OVERRIDING SYSTEM VALUE
    SELECT u.id, p_types[u.step], u.key, coalesce(p_versions[u.step], 0),
           coalesce(p_payloads[u.step], '{}'),
           CASE WHEN waiting THEN 'infinity' ELSE coalesce(p_execute_ats[u.step], now()) END,
           coalesce(p_priorities[u.step], taskmill.default_priority()),
           coalesce(p_max_retries[u.step], s.max_retries),
           coalesce(p_timeouts[u.step], s.timeout_ms),
           coalesce(p_backoff_kinds[u.step], s.backoff_kind),
           coalesce(p_backoff_bases[u.step], s.backoff_base_ms),
           coalesce(p_backoff_caps[u.step], s.backoff_cap_ms),
           coalesce(p_backoff_jitters[u.step], s.backoff_jitter),
           CASE WHEN NOT waiting
                THEN coalesce(p_execute_ats[u.step], now())
                     + s.pending_deadline_ms * interval '1 millisecond' END,
           p_batches[u.step], coalesce(nullif(p_trace_ids[u.step], ''), taskmill.new_trace_id()),
           u.shard, u.total, u.pin, coalesce(u.step = ANY (p_parents), false),
           CASE WHEN waiting THEN '{}'::jsonb END, s.key_space,
           CASE WHEN s.key_space IS NOT NULL
                THEN taskmill.concurrency_key_of(s.key_path, s.key_separator, u.key,
                                                 coalesce(p_payloads[u.step], '{}'),
                                                 p_concurrency_keys[u.step]) END,
           CASE WHEN s.key_space IS NOT NULL
                THEN taskmill.key_class_of(s.key_space, coalesce(p_payloads[u.step], '{}')) END
      FROM unnest(p_ids, p_steps, p_shards, p_totals, p_keys, p_pins)
             AS u(id, step, shard, total, key, pin),
           LATERAL taskmill.type_settings(p_types[u.step]) s,
           LATERAL (SELECT coalesce(u.step = ANY (p_children), false) AS waiting) w
    RETURNING t.execute_at
  )
  SELECT count(*) FILTER (WHERE i.execute_at <= now()) INTO v_due FROM inserted i;
  INSERT INTO taskmill.workflow_steps (task_id, workflow_id, step, position)
  SELECT u.id, p_workflow, p_names[u.step], u.step FROM unnest(p_ids, p_steps) AS u(id, step);
  IF v_due > 0 THEN
    PERFORM taskmill.wake_nodes();
  END IF;
END
$$;

-- Steps among p_ids (due now) are given their parents' results: {step:
-- result}, the results of a broadcast step's shards in an array by shard
-- (batch callbacks among them their batch's counts: batch_callbacks.sql).
-- A step whose parents' results are more than taskmill.max_parent_results_bytes
-- ends dead, saying so; answers those.
CREATE FUNCTION taskmill.give_parent_results(p_ids bigint[]) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  v_ended bigint[];
BEGIN
  PERFORM taskmill.settle_callbacks(p_ids);
  WITH results AS (
    SELECT r.child_id, jsonb_object_agg(r.step, r.result) AS given
      FROM (SELECT e.child_id, ps.step,
                   CASE WHEN bool_or(p.shard_total IS NOT NULL)
                        THEN jsonb_agg(p.result ORDER BY p.shard_index)
                        ELSE (array_agg(p.result))[1] END AS result
              FROM taskmill.task_edges e
              JOIN taskmill.workflow_steps cs ON cs.task_id = e.child_id
              JOIN taskmill.workflow_steps ps ON ps.task_id = e.parent_id
                                             AND ps.workflow_id = cs.workflow_id
              JOIN taskmill.tasks p ON p.id = e.parent_id
             WHERE e.child_id = ANY (p_ids)
             GROUP BY e.child_id, ps.step) r
     GROUP BY r.child_id
  ),
  given AS (
    UPDATE taskmill.tasks t
       SET parent_results = CASE WHEN octet_length(r.given::text)
                                      <= taskmill.max_parent_results_bytes() THEN r.given
                                 ELSE '{}'::jsonb END,
           status = CASE WHEN octet_length(r.given::text) <= taskmill.max_parent_results_bytes()
                         THEN t.status ELSE 'dead' END,
           error = CASE WHEN octet_length(r.given::text) <= taskmill.max_parent_results_bytes()
                        THEN t.error
                        ELSE format('the results of its parents take %s bytes, more than the %s '
                                    'a step is given', octet_length(r.given::text),
                                    taskmill.max_parent_results_bytes()) END,
           updated_at = now()
      FROM results r
     WHERE t.id = ANY (p_ids) AND t.id = r.child_id
    RETURNING t.id, t.status
  )
  SELECT coalesce(array_agg(g.id) FILTER (WHERE g.status = 'dead'), '{}') INTO v_ended FROM given g;
  IF cardinality(v_ended) > 0 THEN
    PERFORM taskmill.note_dead_tasks(v_ended);
  END IF;
  RETURN v_ended;
END
$$;

-- A workflow as GET /v1/workflows/{id} shows it: running while a step has
-- not finished (pending while none ran), else cancelled if it was, failed if
-- a step ended dead or cancelled, else succeeded; started when its first
-- task started, finished when its last one did.
CREATE FUNCTION taskmill.workflow_summary(p_id bigint, OUT id bigint, OUT name text,
                                          OUT key text, OUT status text,
                                          OUT created_at timestamptz, OUT started_at timestamptz,
                                          OUT finished_at timestamptz,
                                          OUT cancelled_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT w.id, w.name, w.key,
         CASE WHEN bool_or(NOT taskmill.is_finished(t.status))
              THEN CASE WHEN bool_or(t.status <> 'pending' OR t.attempt > 0) THEN 'running'
                        ELSE 'pending' END
              WHEN w.cancelled_at IS NOT NULL THEN 'cancelled'
              WHEN bool_or(t.status IN ('dead', 'cancelled')) OR w.failed_steps_purged
                THEN 'failed'
              ELSE 'succeeded' END,
         w.created_at, min(t.started_at),
         CASE WHEN bool_and(taskmill.is_finished(t.status)) THEN max(t.updated_at) END,
         w.cancelled_at
    FROM taskmill.workflows w
    LEFT JOIN taskmill.workflow_steps s ON s.workflow_id = w.id
    LEFT JOIN taskmill.tasks t ON t.id = s.task_id
   WHERE w.id = p_id
   GROUP BY w.id
$$;

-- Locks a workflow against other cancels and retries of it; refuses an
-- unknown one.
CREATE FUNCTION taskmill.lock_workflow(p_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM taskmill.workflows w WHERE w.id = p_id FOR UPDATE;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'no_data_found', MESSAGE = format('no workflow %s', p_id);
  END IF;
END
$$;

-- The tasks of the steps of a workflow that have not finished are cancelled,
-- running ones too: their attempts are fenced off (an outcome that comes is
-- refused as late). Answers how many.
CREATE FUNCTION taskmill.cancel_workflow(p_id bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
BEGIN
  PERFORM taskmill.lock_workflow(p_id);
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT taskmill.unit_lock_key(t.type, t.key) AS h
             FROM taskmill.workflow_steps s JOIN taskmill.tasks t ON t.id = s.task_id
            WHERE s.workflow_id = p_id AND NOT taskmill.is_finished(t.status)
            ORDER BY 1) l;
  -- Rows in the order an outcome takes them, its task before the children
  -- it releases (by id within each), so that the two cannot deadlock.
  PERFORM taskmill.lock_tasks(ARRAY(
    SELECT t.id FROM taskmill.tasks t
     WHERE t.id IN (SELECT s.task_id FROM taskmill.workflow_steps s WHERE s.workflow_id = p_id)
       AND t.status IN ('pending', 'failed', 'running')
     ORDER BY t.execute_at = 'infinity', t.id));
  UPDATE taskmill.tasks t
     SET status = 'cancelled', error = 'workflow cancelled', updated_at = now()
   WHERE t.id IN (SELECT s.task_id FROM taskmill.workflow_steps s WHERE s.workflow_id = p_id)
     AND t.status IN ('pending', 'failed', 'running');
  GET DIAGNOSTICS v_count = ROW_COUNT;
  -- A workflow that had finished stays as it ended.
  IF v_count > 0 THEN
    UPDATE taskmill.workflows w SET cancelled_at = now() WHERE w.id = p_id;
  END IF;
  RETURN v_count;
END
$$;

-- The steps of a workflow that ended dead or cancelled, or were skipped
-- for a parent that did, run again: the edges among them count again, so
-- that each waits for its parents among them, and those without any are due
-- now. Refused, naming the step, if a higher version of a unit superseded
-- its task or a live task of it runs beside it. Answers how many.
CREATE FUNCTION taskmill.retry_workflow(p_id bigint) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_ids bigint[];
  v_problem text;
BEGIN
  PERFORM taskmill.lock_workflow(p_id);
  v_ids := ARRAY(SELECT t.id FROM taskmill.workflow_steps s JOIN taskmill.tasks t ON t.id = s.task_id
                  WHERE s.workflow_id = p_id
                    AND (t.status IN ('dead', 'cancelled')
                         OR (t.status = 'stopped' AND t.error LIKE 'skipped: %'))
                  ORDER BY t.id);
  IF cardinality(v_ids) = 0 THEN
    RETURN 0;
  END IF;
  PERFORM pg_advisory_xact_lock(l.h)
     FROM (SELECT DISTINCT taskmill.unit_lock_key(t.type, t.key) AS h
             FROM taskmill.tasks t WHERE t.id = ANY (v_ids) ORDER BY 1) l;
  -- Read again once locked: a retry of one of them by id may have run it
  -- meanwhile.
  v_ids := ARRAY(SELECT t.id FROM taskmill.tasks t
                  WHERE t.id = ANY (v_ids)
                    AND (t.status IN ('dead', 'cancelled')
                         OR (t.status = 'stopped' AND t.error LIKE 'skipped: %'))
                  ORDER BY t.id);
  SELECT format('step %s (task %s): task %s of its unit (version %s) is live', s.step, t.id,
                k.task_id, k.version)
    INTO v_problem
    FROM taskmill.tasks t
    JOIN taskmill.workflow_steps s ON s.task_id = t.id
    JOIN taskmill.task_keys k ON k.type = t.type AND k.key = t.key AND k.task_id <> t.id
   WHERE t.id = ANY (v_ids)
   LIMIT 1;
  IF v_problem IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'object_in_use', MESSAGE = v_problem;
  END IF;
  UPDATE taskmill.task_edges e SET done = false
   WHERE e.parent_id = ANY (v_ids) AND e.child_id = ANY (v_ids) AND e.done;
  UPDATE taskmill.tasks t SET has_children = true
   WHERE t.id = ANY (v_ids) AND NOT t.has_children
     AND EXISTS (SELECT 1 FROM taskmill.task_edges e WHERE e.parent_id = t.id);
  UPDATE taskmill.workflows w SET cancelled_at = NULL WHERE w.id = p_id;
  -- The trigger taskmill.task_rearmed makes those with parents left wait.
  -- The others are given their parents' results once every one is back: one
  -- that ends dead for their size then finds its children waiting for it.
  PERFORM set_config('taskmill.rearming', 'on', true);
  UPDATE taskmill.tasks t
     SET status = 'pending', execute_at = now(), retry_count = 0, error = NULL, result = NULL,
         deadline_at = taskmill.deadline_after(now(), t.type), heartbeat_at = NULL,
         parent_results = CASE WHEN t.parent_results IS NOT NULL THEN '{}'::jsonb END,
         updated_at = now()
   WHERE t.id = ANY (v_ids);
  PERFORM set_config('taskmill.rearming', '', true);
  PERFORM taskmill.give_parent_results(ARRAY(
    SELECT t.id FROM taskmill.tasks t
     WHERE t.id = ANY (v_ids) AND t.status = 'pending' AND t.execute_at <> 'infinity'
       AND t.parent_results IS NOT NULL));
  PERFORM taskmill.wake_nodes();
  RETURN cardinality(v_ids);
END
$$;

-- The tasks of a workflow's steps in step and shard order, without payloads
-- and results, each with its step's status: the least finished of its
-- tasks' (running, failed, pending, dead, cancelled, stopped, succeeded).
CREATE FUNCTION taskmill.workflow_tasks(p_id bigint)
RETURNS TABLE (step text, step_status text, id bigint, type text, key text, version bigint,
               status taskmill.task_status, priority smallint, execute_at timestamptz,
               payload jsonb, result jsonb, error text, attempt integer, retry_count integer,
               max_retries integer, timeout_ms integer, backoff_kind text,
               backoff_base_ms integer, backoff_cap_ms integer, backoff_jitter real,
               batch text, shard_index integer,
               shard_total integer, trace_id text, picked_by text, heartbeat_at timestamptz,
               started_at timestamptz, created_at timestamptz, updated_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT s.step,
         ('{running,failed,pending,dead,cancelled,stopped,succeeded}'::text[])[
           min(array_position('{running,failed,pending,dead,cancelled,stopped,succeeded}'::text[],
                              t.status::text)) OVER (PARTITION BY s.position)],
         t.id, t.type, t.key, t.version, t.status, t.priority, t.execute_at, NULL::jsonb,
         NULL::jsonb, t.error,
         t.attempt, t.retry_count, t.max_retries, t.timeout_ms, t.backoff_kind,
         t.backoff_base_ms, t.backoff_cap_ms, t.backoff_jitter, t.batch, t.shard_index,
         t.shard_total, t.trace_id, t.picked_by, t.heartbeat_at, t.started_at, t.created_at,
         t.updated_at
    FROM taskmill.workflow_steps s JOIN taskmill.tasks t ON t.id = s.task_id
   WHERE s.workflow_id = p_id
   ORDER BY s.position, t.shard_index
$$;

-- The edges between a workflow's steps, in the steps' order.
CREATE FUNCTION taskmill.workflow_edges(p_id bigint)
RETURNS TABLE (parent text, child text, on_failure text)
LANGUAGE sql STABLE AS $$
  SELECT ps.step, cs.step, min(e.on_failure)
    FROM taskmill.workflow_steps cs
    JOIN taskmill.task_edges e ON e.child_id = cs.task_id
    JOIN taskmill.workflow_steps ps ON ps.task_id = e.parent_id
   WHERE cs.workflow_id = p_id
   GROUP BY ps.step, ps.position, cs.step, cs.position
   ORDER BY cs.position, ps.position
$$;
