-- Recurring jobs and their firings (SPEC §6). The nodes evaluate schedules
-- (messages/schedule.cpp) and pass the fire times; these functions keep the
-- ledger: one row per (job, fire time), written in the same transaction as
-- the firing's tasks, so that no firing is created twice.

-- What is wrong with the fields of a job, in the words of the API, or NULL.
-- The schedule and time zone are the node's to check.
CREATE FUNCTION taskmill.job_problem(
  p_name text, p_type text, p_priority integer, p_max_retries integer, p_timeout_ms integer,
  p_backoff_kind text, p_backoff_base_ms integer, p_backoff_cap_ms integer,
  p_backoff_jitter real, p_routing text, p_shards integer, p_overlap text, p_misfire text,
  p_catch_up_limit integer, p_description text, p_dialect text) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE
    WHEN p_name IS NULL OR p_name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$'
      THEN 'name must be 1 to 100 letters, digits, ".", "_", ":" or "-", '
           'starting with a letter or digit'
    WHEN p_routing IS NULL OR p_routing NOT IN ('any', 'broadcast')
      THEN format('routing must be one of any, broadcast (got "%s")', p_routing)
    WHEN p_shards IS NOT NULL AND p_routing <> 'broadcast'
      THEN 'shards is for routing broadcast only'
    WHEN p_shards NOT BETWEEN 1 AND 10000 THEN 'shards must be between 1 and 10000'
    WHEN p_overlap IS NULL OR p_overlap NOT IN ('allow', 'skip', 'replace')
      THEN format('overlap must be one of allow, skip, replace (got "%s")', p_overlap)
    WHEN p_misfire IS NULL OR p_misfire NOT IN ('skip', 'fire_once', 'catch_up')
      THEN format('misfire must be one of skip, fire_once, catch_up (got "%s")', p_misfire)
    WHEN p_catch_up_limit IS NULL OR p_catch_up_limit NOT BETWEEN 1 AND 1000
      THEN 'catch_up_limit must be between 1 and 1000'
    WHEN length(p_description) > 2000 THEN 'description must be at most 2000 characters'
    WHEN p_dialect IS NULL OR p_dialect NOT IN ('unix', 'quartz')
      THEN format('dialect must be one of unix, quartz (got "%s")', p_dialect)
  END
$$;

-- The batch of a job's firing: <job>@<fire time, RFC 3339 UTC>, fractions
-- of a second only when there are some (as the node writes times).
CREATE FUNCTION taskmill.firing_batch(p_job text, p_fire_at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_job || '@' || to_char(p_fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
         || CASE WHEN extract(microseconds FROM p_fire_at)::bigint % 1000000 = 0 THEN ''
                 ELSE rtrim('.' || lpad((extract(microseconds FROM p_fire_at)::bigint
                                         % 1000000)::text, 6, '0'), '0') END
         || 'Z'
$$;

-- What is wrong with putting a job of these fields (taskmill.put_job's), in
-- the words of the API, or NULL. A node checks every job of its config so
-- before it writes anything, naming the config's jobs in p_known_jobs: a
-- child may be one of them as well as a job already stored.
CREATE FUNCTION taskmill.put_job_problem(
  p_name text, p_schedule text, p_time_zone text, p_type text, p_payload jsonb,
  p_priority integer, p_max_retries integer, p_timeout_ms integer, p_backoff_kind text,
  p_backoff_base_ms integer, p_backoff_cap_ms integer, p_backoff_jitter real,
  p_enabled boolean, p_routing text, p_shards integer, p_overlap text, p_misfire text,
  p_catch_up_limit integer, p_description text, p_source text,
  p_next_fire_at timestamptz, p_anchor_at timestamptz, p_dialect text DEFAULT 'unix',
  p_child_jobs text[] DEFAULT '{}', p_child_jobs_on_failure text[] DEFAULT '{}',
  p_on_finish jsonb DEFAULT NULL, p_on_success jsonb DEFAULT NULL,
  p_known_jobs text[] DEFAULT '{}')
RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT coalesce(
    taskmill.job_problem(p_name, p_type, p_priority, p_max_retries, p_timeout_ms,
                         p_backoff_kind, p_backoff_base_ms, p_backoff_cap_ms, p_backoff_jitter,
                         p_routing, p_shards, p_overlap, p_misfire, p_catch_up_limit,
                         p_description, p_dialect),
    taskmill.task_problem(p_type, 'key', NULL, NULL, p_priority, p_max_retries, p_timeout_ms,
                          p_backoff_kind, p_backoff_base_ms, p_backoff_cap_ms,
                          p_backoff_jitter, NULL, NULL, NULL, NULL),
    taskmill.child_jobs_problem(p_name, 'child_jobs', p_child_jobs, p_known_jobs),
    taskmill.child_jobs_problem(p_name, 'child_jobs_on_failure', p_child_jobs_on_failure,
                                p_known_jobs),
    taskmill.child_jobs_cycle(p_name, p_child_jobs || p_child_jobs_on_failure, p_known_jobs),
    taskmill.callback_problem('on_finish', p_on_finish, false),
    taskmill.callback_problem('on_success', p_on_success, false))
$$;

-- What is wrong with one list of a job's children (p_field), or NULL: at
-- most 100 names of jobs stored (or of p_known), none twice, not the job
-- itself.
CREATE FUNCTION taskmill.child_jobs_problem(p_name text, p_field text, p_children text[],
                                            p_known text[]) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT coalesce(
    CASE WHEN p_children IS NULL THEN p_field || ' must be a list of job names'
         WHEN cardinality(p_children) > 100 THEN p_field || ' may name at most 100 jobs' END,
    (SELECT format(CASE WHEN c.name IS NULL THEN '%s[%s] must be a job name'
                        WHEN c.name = p_name THEN '%s[%s] names the job itself'
                        WHEN c.first < c.n THEN '%s[%s] names job %s a second time'
                        ELSE '%s[%s]: no job %s' END,
                   p_field, c.n - 1, c.name)
       FROM (SELECT u.name, u.n, min(u.n) OVER (PARTITION BY u.name) AS first
               FROM unnest(p_children) WITH ORDINALITY AS u(name, n)) c
      WHERE c.name IS NULL OR c.name = p_name OR c.first < c.n
         OR NOT (c.name = ANY (p_known)
                 OR EXISTS (SELECT FROM taskmill.jobs j WHERE j.name = c.name))
      ORDER BY c.n LIMIT 1))
$$;

-- The cycle that giving job p_name the children p_children would close
-- through the children of the jobs stored, as "child_jobs: a cycle: a -> b
-- -> a", or NULL. (A walk with where each job was reached from, once each.)
-- The stored children of the jobs p_known, which are being written anew, do
-- not count: the node checks a config's own graph (config/config.cpp).
CREATE FUNCTION taskmill.child_jobs_cycle(p_name text, p_children text[], p_known text[])
RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_from jsonb := '{}';
  v_frontier text[];
  v_path text[];
BEGIN
  SELECT coalesce(jsonb_object_agg(c, p_name), '{}'), coalesce(array_agg(c), '{}')
    INTO v_from, v_frontier
    FROM (SELECT DISTINCT c FROM unnest(p_children) c WHERE c IS NOT NULL) u(c);
  WHILE cardinality(v_frontier) > 0 AND NOT p_name = ANY (v_frontier) LOOP
    SELECT v_from || coalesce(jsonb_object_agg(n.child, n.parent), '{}'),
           coalesce(array_agg(n.child), '{}')
      INTO v_from, v_frontier
      FROM (SELECT DISTINCT ON (k.child) k.child, j.name AS parent
              FROM taskmill.jobs j
             CROSS JOIN unnest(j.child_jobs || j.child_jobs_on_failure) AS k(child)
             WHERE j.name = ANY (v_frontier) AND j.name <> p_name
               AND NOT j.name = ANY (p_known)
               AND (NOT v_from ? k.child OR k.child = p_name)
             ORDER BY k.child, j.name) n;
  END LOOP;
  IF cardinality(v_frontier) = 0 THEN
    RETURN NULL;
  END IF;
  v_path := ARRAY[p_name];
  LOOP
    v_path := (v_from ->> v_path[1]) || v_path;
    EXIT WHEN v_path[1] = p_name;
  END LOOP;
  RETURN 'child_jobs: a cycle: ' || array_to_string(v_path, ' -> ');
END
$$;

-- PUT /v1/jobs/{name}, and a node's [[jobs]] at start. A job that keeps its
-- schedule, dialect and time zone keeps its next fire time (so a restart
-- neither skips nor repeats a firing); otherwise it fires next at
-- p_next_fire_at, which the node worked out from p_anchor_at (the start of
-- @every's rate). The defaults of p_dialect and after answer the calls of
-- nodes of older releases (storage/sql/compat.sql says until when). Puts that
-- name children take turns, so that two cannot close a cycle between them;
-- p_known_jobs: as taskmill.put_job_problem takes it.
CREATE FUNCTION taskmill.put_job(
  p_name text, p_schedule text, p_time_zone text, p_type text, p_payload jsonb,
  p_priority integer, p_max_retries integer, p_timeout_ms integer, p_backoff_kind text,
  p_backoff_base_ms integer, p_backoff_cap_ms integer, p_backoff_jitter real,
  p_enabled boolean, p_routing text, p_shards integer, p_overlap text, p_misfire text,
  p_catch_up_limit integer, p_description text, p_source text,
  p_next_fire_at timestamptz, p_anchor_at timestamptz, p_dialect text DEFAULT 'unix',
  p_child_jobs text[] DEFAULT '{}', p_child_jobs_on_failure text[] DEFAULT '{}',
  p_on_finish jsonb DEFAULT NULL, p_on_success jsonb DEFAULT NULL,
  p_known_jobs text[] DEFAULT '{}', OUT created boolean, OUT job taskmill.jobs)
LANGUAGE plpgsql AS $$
DECLARE
  v_problem text;
  cur taskmill.jobs;
  keeps boolean;
BEGIN
  IF cardinality(p_child_jobs) > 0 OR cardinality(p_child_jobs_on_failure) > 0 THEN
    PERFORM pg_advisory_xact_lock(taskmill.unit_lock_key('job', 'child_jobs'));
  END IF;
  v_problem := taskmill.put_job_problem(
    p_name, p_schedule, p_time_zone, p_type, p_payload, p_priority, p_max_retries, p_timeout_ms,
    p_backoff_kind, p_backoff_base_ms, p_backoff_cap_ms, p_backoff_jitter, p_enabled, p_routing,
    p_shards, p_overlap, p_misfire, p_catch_up_limit, p_description, p_source, p_next_fire_at,
    p_anchor_at, p_dialect, p_child_jobs, p_child_jobs_on_failure, p_on_finish, p_on_success,
    p_known_jobs);
  IF v_problem IS NOT NULL THEN
    PERFORM taskmill.bad_argument(v_problem);
  END IF;
  SELECT * INTO cur FROM taskmill.jobs j WHERE j.name = p_name FOR UPDATE;
  created := cur.name IS NULL;
  keeps := NOT created AND cur.enabled AND p_enabled AND cur.schedule = p_schedule
           AND cur.dialect = p_dialect AND cur.time_zone = p_time_zone;
  INSERT INTO taskmill.jobs AS j (name, schedule, time_zone, type, payload, priority,
                                  max_retries, timeout_ms, backoff_kind, backoff_base_ms,
                                  backoff_cap_ms, backoff_jitter, enabled, routing, shards,
                                  overlap, misfire, catch_up_limit, description, source,
                                  next_fire_at, anchor_at, created_at, updated_at, dialect,
                                  child_jobs, child_jobs_on_failure, on_finish, on_success)
  VALUES (p_name, p_schedule, p_time_zone, p_type, coalesce(p_payload, '{}'::jsonb), p_priority,
          p_max_retries, p_timeout_ms, p_backoff_kind, p_backoff_base_ms, p_backoff_cap_ms,
          p_backoff_jitter, p_enabled, p_routing, p_shards, p_overlap, p_misfire,
          p_catch_up_limit, coalesce(p_description, ''), p_source,
          CASE WHEN p_enabled THEN p_next_fire_at END, p_anchor_at, now(), now(), p_dialect,
          p_child_jobs, p_child_jobs_on_failure, p_on_finish, p_on_success)
  ON CONFLICT (name) DO UPDATE
     SET schedule = excluded.schedule, dialect = excluded.dialect,
         time_zone = excluded.time_zone, type = excluded.type,
         payload = excluded.payload, priority = excluded.priority,
         max_retries = excluded.max_retries, timeout_ms = excluded.timeout_ms,
         backoff_kind = excluded.backoff_kind, backoff_base_ms = excluded.backoff_base_ms,
         backoff_cap_ms = excluded.backoff_cap_ms, backoff_jitter = excluded.backoff_jitter,
         enabled = excluded.enabled, routing = excluded.routing, shards = excluded.shards,
         overlap = excluded.overlap, misfire = excluded.misfire,
         catch_up_limit = excluded.catch_up_limit, description = excluded.description,
         source = excluded.source, child_jobs = excluded.child_jobs,
         child_jobs_on_failure = excluded.child_jobs_on_failure,
         on_finish = excluded.on_finish, on_success = excluded.on_success,
         next_fire_at = CASE WHEN keeps THEN j.next_fire_at ELSE excluded.next_fire_at END,
         anchor_at = CASE WHEN keeps THEN j.anchor_at ELSE excluded.anchor_at END,
         updated_at = now()
  RETURNING * INTO job;
  PERFORM pg_notify('taskmill_jobs', p_name);
END
$$;

-- DELETE /v1/jobs/{name}: the job and its ledger go; tasks already created
-- stay. Answers whether there was such a job.
CREATE FUNCTION taskmill.delete_job(p_name text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM taskmill.job_firings f WHERE f.job = p_name;
  DELETE FROM taskmill.jobs j WHERE j.name = p_name;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM pg_notify('taskmill_jobs', p_name);
  RETURN true;
END
$$;

-- Pause (p_enabled false) or resume a job; a resumed job fires next at
-- p_next_fire_at, not for the times it was paused.
CREATE FUNCTION taskmill.set_job_enabled(p_name text, p_enabled boolean,
                                         p_next_fire_at timestamptz) RETURNS taskmill.jobs
LANGUAGE plpgsql AS $$
DECLARE
  v_job taskmill.jobs;
BEGIN
  UPDATE taskmill.jobs j
     SET enabled = p_enabled,
         next_fire_at = CASE WHEN NOT p_enabled THEN NULL
                             WHEN j.enabled THEN j.next_fire_at
                             ELSE p_next_fire_at END,
         updated_at = now()
   WHERE j.name = p_name
  RETURNING * INTO v_job;
  IF v_job.name IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'no_data_found', MESSAGE = format('no job %s', p_name);
  END IF;
  PERFORM pg_notify('taskmill_jobs', p_name);
  RETURN v_job;
END
$$;

-- Jobs due by now, oldest first, with the database's now.
CREATE FUNCTION taskmill.due_jobs(p_limit integer)
RETURNS TABLE (name text, schedule text, time_zone text, misfire text, catch_up_limit integer,
               next_fire_at timestamptz, anchor_at timestamptz, now timestamptz, dialect text)
LANGUAGE sql STABLE AS $$
  SELECT j.name, j.schedule, j.time_zone, j.misfire, j.catch_up_limit, j.next_fire_at,
         j.anchor_at, now(), j.dialect
    FROM taskmill.jobs j
   WHERE j.enabled AND j.next_fire_at <= now()
   ORDER BY j.next_fire_at
   LIMIT p_limit
$$;

-- When the next job becomes due, by the database clock: milliseconds from
-- now (0 if one is due), or NULL if no job is scheduled. (greatest() skips
-- a NULL: applied to the NULL of no job it would say one is due now, and the
-- leader would ask again at once, round after round.)
CREATE FUNCTION taskmill.next_job_due_in_ms() RETURNS bigint
LANGUAGE sql STABLE AS $$
  SELECT greatest(0, ceil(extract(epoch FROM n.next_fire_at - now()) * 1000))::bigint
    FROM (SELECT min(j.next_fire_at) AS next_fire_at FROM taskmill.jobs j WHERE j.enabled) n
   WHERE n.next_fire_at IS NOT NULL
$$;

-- Whether the job has a firing whose tasks are not all finished; firings
-- found finished are closed on the way.
CREATE FUNCTION taskmill.job_has_open_firing(p_job text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_open boolean;
BEGIN
  UPDATE taskmill.job_firings f SET open = false
   WHERE f.job = p_job AND f.open
     AND NOT EXISTS (SELECT 1 FROM taskmill.tasks t
                      WHERE t.batch = f.batch AND t.status IN ('pending', 'running', 'failed'));
  SELECT EXISTS (SELECT 1 FROM taskmill.job_firings f WHERE f.job = p_job AND f.open)
    INTO v_open;
  RETURN v_open;
END
$$;

-- The tasks of one firing: one (routing any), or one per shard (broadcast),
-- shard i pinned to the i-th live node that runs the type; shards beyond the
-- live nodes (a fixed number larger than them) go to any node. Answers
-- their ids.
CREATE FUNCTION taskmill.create_firing_tasks(p_job taskmill.jobs, p_batch text, p_payload jsonb,
                                             p_lease_ms bigint) RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
  v_nodes text[];
  v_total integer := 1;
  v_id bigint;
  v_ids bigint[] := '{}';
BEGIN
  IF p_job.routing = 'broadcast' THEN
    v_nodes := taskmill.nodes_running(p_job.type, p_lease_ms);
    v_total := coalesce(p_job.shards, greatest(cardinality(v_nodes), 1));
  END IF;
  FOR i IN 0 .. v_total - 1 LOOP
    SELECT (s.task).id INTO v_id
      FROM taskmill.submit(p_job.type,
                           CASE WHEN p_job.routing = 'broadcast' THEN p_batch || '#' || i
                                ELSE p_batch END,
                           payload => coalesce(p_payload, p_job.payload),
                           priority => p_job.priority, max_retries => p_job.max_retries,
                           timeout_ms => p_job.timeout_ms, backoff_kind => p_job.backoff_kind,
                           backoff_base_ms => p_job.backoff_base_ms,
                           backoff_cap_ms => p_job.backoff_cap_ms,
                           backoff_jitter => p_job.backoff_jitter, batch => p_batch,
                           shard_index => CASE WHEN p_job.routing = 'broadcast' THEN i END,
                           shard_total => CASE WHEN p_job.routing = 'broadcast' THEN v_total END) s;
    IF i < cardinality(v_nodes) THEN
      UPDATE taskmill.tasks t SET pinned_node = v_nodes[i + 1] WHERE t.id = v_id;
    END IF;
    v_ids := v_ids || v_id;
  END LOOP;
  RETURN v_ids;
END
$$;

-- One firing: its ledger row, then (unless missed, or skipped for overlap)
-- its tasks and their callbacks. Outcome: fired | skipped | missed |
-- duplicate (the ledger had it: another leader, or an earlier run, fired
-- it). A child firing names the firing it follows (p_parent_job's at
-- p_parent_fire_at).
CREATE FUNCTION taskmill.fire_job(p_job taskmill.jobs, p_fire_at timestamptz, p_kind text,
                                  p_missed boolean, p_payload jsonb, p_lease_ms bigint,
                                  p_parent_job text DEFAULT NULL,
                                  p_parent_fire_at timestamptz DEFAULT NULL,
                                  OUT outcome text, OUT batch text)
LANGUAGE plpgsql AS $$
DECLARE
  v_open boolean;
  r record;
BEGIN
  batch := taskmill.firing_batch(p_job.name, p_fire_at);
  IF NOT p_missed THEN
    v_open := taskmill.job_has_open_firing(p_job.name);
  END IF;
  outcome := CASE WHEN p_missed THEN 'missed'
                  WHEN v_open AND p_job.overlap = 'skip' THEN 'skipped'
                  ELSE 'fired' END;
  INSERT INTO taskmill.job_firings AS f (job, fire_at, kind, outcome, batch, open, created_at,
                                         parent_job, parent_fire_at)
  VALUES (p_job.name, p_fire_at, p_kind, outcome, batch, outcome = 'fired', now(), p_parent_job,
          p_parent_fire_at)
  ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    outcome := 'duplicate';
    RETURN;
  END IF;
  IF outcome <> 'fired' THEN
    INSERT INTO taskmill.alert_inbox (kind, type, batch, job, fire_at, created_at)
    VALUES ('firing_' || outcome, p_job.type, batch, p_job.name, p_fire_at, now());
    RETURN;
  END IF;
  IF v_open AND p_job.overlap = 'replace' THEN
    FOR r IN SELECT t.type, t.key
               FROM taskmill.job_firings f JOIN taskmill.tasks t ON t.batch = f.batch
              WHERE f.job = p_job.name AND f.open AND f.batch <> fire_job.batch
                AND t.status IN ('pending', 'running', 'failed') LOOP
      PERFORM taskmill.cancel(r.type, r.key);
    END LOOP;
    UPDATE taskmill.job_firings f SET open = false
     WHERE f.job = p_job.name AND f.open AND f.batch <> fire_job.batch;
  END IF;
  PERFORM taskmill.submit_firing_callbacks(
    p_job, p_fire_at, fire_job.batch,
    taskmill.create_firing_tasks(p_job, fire_job.batch, p_payload, p_lease_ms), p_lease_ms);
END
$$;

-- The leader's firings of due jobs, all in one transaction. Each job's next
-- fire time moves from p_expected_next to p_new_next only if nobody moved it
-- since it was read (another leader, an edit): then its firings are
-- written, else they are left out (outcome 'taken').
CREATE FUNCTION taskmill.fire_jobs(p_jobs text[], p_fire_ats timestamptz[], p_kinds text[],
                                   p_missed boolean[], p_expected_next timestamptz[],
                                   p_new_next timestamptz[], p_lease_ms bigint,
                                   p_term bigint DEFAULT NULL)
RETURNS TABLE (job text, fire_at timestamptz, outcome text, batch text)
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  v_job taskmill.jobs;
  v_current text;
  v_taken boolean := false;
  v_fired record;
BEGIN
  PERFORM taskmill.fence(p_term);
  -- In name order, as a firing's child jobs take them.
  PERFORM 1 FROM taskmill.jobs j WHERE j.name = ANY (p_jobs) ORDER BY j.name FOR UPDATE;
  FOR r IN SELECT * FROM unnest(p_jobs, p_fire_ats, p_kinds, p_missed, p_expected_next,
                                p_new_next) WITH ORDINALITY
                         AS u(job, fire_at, kind, missed, expected, next, ord)
            ORDER BY u.ord LOOP
    IF v_current IS DISTINCT FROM r.job THEN
      v_current := r.job;
      UPDATE taskmill.jobs j SET next_fire_at = r.next
       WHERE j.name = r.job AND j.enabled AND j.next_fire_at = r.expected
      RETURNING * INTO v_job;
      v_taken := NOT FOUND;
    END IF;
    IF v_taken THEN
      job := r.job; fire_at := r.fire_at; outcome := 'taken'; batch := NULL;
    ELSIF r.fire_at IS NULL THEN
      CONTINUE;
    ELSE
      SELECT * INTO v_fired
        FROM taskmill.fire_job(v_job, r.fire_at, r.kind, r.missed, NULL, p_lease_ms);
      job := r.job; fire_at := r.fire_at; outcome := v_fired.outcome; batch := v_fired.batch;
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;

-- POST /v1/jobs/{name}/trigger: a firing now, recorded as manual.
CREATE FUNCTION taskmill.trigger_job(p_name text, p_payload jsonb, p_lease_ms bigint,
                                     OUT outcome text, OUT batch text, OUT fire_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
  v_job taskmill.jobs;
BEGIN
  SELECT * INTO v_job FROM taskmill.jobs j WHERE j.name = p_name FOR UPDATE;
  IF v_job.name IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = 'no_data_found', MESSAGE = format('no job %s', p_name);
  END IF;
  fire_at := clock_timestamp();
  SELECT f.outcome, f.batch INTO outcome, batch
    FROM taskmill.fire_job(v_job, fire_at, 'manual', false, p_payload, p_lease_ms) f;
END
$$;

-- A job's latest firings, newest first, each with its batch's task counts
-- per status: one row per firing and status (status NULL: no tasks). A
-- child firing names its parent firing.
CREATE FUNCTION taskmill.job_firings(p_name text, p_limit integer)
RETURNS TABLE (fire_at timestamptz, kind text, outcome text, batch text, status text, n bigint,
               parent_job text, parent_fire_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT f.fire_at, f.kind, f.outcome, f.batch, c.status, c.n, f.parent_job, f.parent_fire_at
    FROM (SELECT * FROM taskmill.job_firings jf WHERE jf.job = p_name
           ORDER BY jf.fire_at DESC LIMIT p_limit) f
    LEFT JOIN LATERAL (SELECT t.status::text AS status, count(*) AS n
                         FROM taskmill.tasks t WHERE t.batch = f.batch
                        GROUP BY t.status) c ON true
   ORDER BY f.fire_at DESC, c.status
$$;

-- For /metrics: each job's firings by outcome, when it last fired and when
-- it fires next. One row per job and outcome (outcome NULL: none yet).
CREATE FUNCTION taskmill.job_metrics()
RETURNS TABLE (name text, outcome text, n bigint, last_fire_at timestamptz,
               next_fire_at timestamptz)
LANGUAGE sql STABLE AS $$
  SELECT j.name, f.outcome, f.n, f.last_fire_at, j.next_fire_at
    FROM taskmill.jobs j
    LEFT JOIN LATERAL (SELECT jf.outcome, count(*) AS n, max(jf.fire_at) AS last_fire_at
                         FROM taskmill.job_firings jf WHERE jf.job = j.name
                        GROUP BY jf.outcome) f ON true
   ORDER BY j.name, f.outcome
$$;
