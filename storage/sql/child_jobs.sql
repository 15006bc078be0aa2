-- A job's firing's callbacks and child jobs (SPEC §10). Submitted after the
-- firing's tasks, in its transaction, as a batch's callbacks are
-- (storage/sql/batch_callbacks.sql): the job's on_finish and on_success, and
-- a task of type taskmill.child_jobs that fires its child jobs once the
-- firing's tasks all finished. That task is never claimed: it becomes due
-- in the transaction of the last of them, and ends there, having fired them.

-- The callbacks of job p_job's firing at p_fire_at (batch p_batch, tasks
-- p_ids). p_lease_ms: how recently a node must have beaten to be given a
-- shard of a child job's broadcast.
CREATE FUNCTION taskmill.submit_firing_callbacks(p_job taskmill.jobs, p_fire_at timestamptz,
                                                 p_batch text, p_ids bigint[],
                                                 p_lease_ms bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_job.on_finish IS NOT NULL THEN
    PERFORM taskmill.submit_callback(p_batch, 'on_finish', p_job.on_finish, to_jsonb(p_ids));
  END IF;
  IF p_job.on_success IS NOT NULL THEN
    PERFORM taskmill.submit_callback(p_batch, 'on_success', p_job.on_success, to_jsonb(p_ids));
  END IF;
  IF cardinality(p_job.child_jobs) + cardinality(p_job.child_jobs_on_failure) > 0 THEN
    PERFORM set_config('taskmill.own_task', 'on', true);
    PERFORM taskmill.submit_callback(
      p_batch, 'child_jobs',
      jsonb_build_object('type', 'taskmill.child_jobs', 'payload', jsonb_build_object(
        'job', p_job.name, 'fire_at', p_fire_at, 'child_jobs', p_job.child_jobs,
        'child_jobs_on_failure', p_job.child_jobs_on_failure, 'lease_ms', p_lease_ms)),
      to_jsonb(p_ids));
    PERFORM set_config('taskmill.own_task', '', true);
  END IF;
END
$$;

-- The child-jobs tasks among p_ids, due now, fire their jobs: child_jobs if
-- every task of the firing succeeded (a success kept past its retention is
-- stopped), else child_jobs_on_failure; each once per parent firing
-- (job_firings_once_per_parent), a paused one not at all. A task ends
-- succeeded, its result saying what it fired, or dead, naming a job that no
-- longer exists (the others fired) or the error that undid its firings;
-- retried, it fires what it has not. A lock it could not take in time
-- fails the whole transaction, to be tried again, as a claim's would. Runs
-- as a walk of its own (taskmill.settle_children): what its firings end
-- (an older firing replaced) and its own end settle their children here.
CREATE FUNCTION taskmill.fire_child_jobs(p_ids bigint[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  r record;
  v_fired jsonb;
  v_missing text[];
  v_error text;
  v_settling text := current_setting('taskmill.settling', true);
BEGIN
  FOR r IN SELECT t.id, t.payload,
                  (t.payload -> 'counts') ?| ARRAY['dead', 'cancelled'] AS failed
             FROM taskmill.tasks t JOIN taskmill.batch_callbacks c ON c.task_id = t.id
            WHERE t.id = ANY (p_ids) AND c.kind = 'child_jobs' AND t.status = 'pending'
            ORDER BY t.id LOOP
    PERFORM set_config('taskmill.settling', '', true);
    v_error := NULL;
    BEGIN
      SELECT f.fired, f.missing INTO v_fired, v_missing
        FROM taskmill.fire_children(
          r.payload ->> 'job', (r.payload ->> 'fire_at')::timestamptz,
          ARRAY(SELECT jsonb_array_elements_text(r.payload -> CASE WHEN r.failed
                                                                   THEN 'child_jobs_on_failure'
                                                                   ELSE 'child_jobs' END)),
          (r.payload ->> 'lease_ms')::bigint) f;
      IF cardinality(v_missing) > 0 THEN
        v_error := format('child job %s does not exist', array_to_string(v_missing, ', '));
      END IF;
    EXCEPTION
      WHEN lock_not_available OR deadlock_detected OR serialization_failure THEN
        RAISE;
      WHEN OTHERS THEN
        v_fired := '[]';
        v_error := 'firing the child jobs failed: ' || SQLERRM;
    END;
    -- parent_results '{}': a retry settles it here again (taskmill.task_rearmed).
    UPDATE taskmill.tasks t
       SET status = CASE WHEN v_error IS NULL THEN 'succeeded' ELSE 'dead' END::taskmill.task_status,
           result = jsonb_build_object('children', v_fired), error = v_error,
           finished_at = now(), updated_at = now(), parent_results = '{}'
     WHERE t.id = r.id;
    IF v_error IS NOT NULL THEN
      PERFORM taskmill.note_dead_tasks(ARRAY[r.id]);
    END IF;
    PERFORM set_config('taskmill.settling', coalesce(v_settling, ''), true);
  END LOOP;
END
$$;

-- Fires the jobs p_children, those that exist and are not paused, as child
-- firings of job p_job's firing at p_fire_at, each at its own fire time
-- (now, or the next free microsecond of its ledger). Answers what each
-- firing became ([{job, fire_at, outcome}]: fired, skipped for overlap, or
-- duplicate for a child this parent firing fired already; paused: not
-- fired) and the children that do not exist.
CREATE FUNCTION taskmill.fire_children(p_job text, p_fire_at timestamptz, p_children text[],
                                       p_lease_ms bigint, OUT fired jsonb, OUT missing text[])
LANGUAGE plpgsql AS $$
DECLARE
  v_name text;
  v_job taskmill.jobs;
  v_at timestamptz;
  v_outcome text;
BEGIN
  fired := '[]';
  missing := '{}';
  -- In name order, as the leader's firings take them.
  PERFORM 1 FROM taskmill.jobs j WHERE j.name = ANY (p_children) ORDER BY j.name FOR UPDATE;
  FOREACH v_name IN ARRAY p_children LOOP
    SELECT * INTO v_job FROM taskmill.jobs j WHERE j.name = v_name;
    IF v_job.name IS NULL THEN
      missing := missing || v_name;
      CONTINUE;
    END IF;
    v_at := NULL;
    IF NOT v_job.enabled THEN
      v_outcome := 'paused';
    ELSIF EXISTS (SELECT FROM taskmill.job_firings f
                   WHERE f.parent_job = p_job AND f.parent_fire_at = p_fire_at
                     AND f.job = v_name) THEN
      v_outcome := 'duplicate';
    ELSE
      v_at := clock_timestamp();
      WHILE EXISTS (SELECT FROM taskmill.job_firings f WHERE f.job = v_name AND f.fire_at = v_at)
      LOOP
        v_at := v_at + interval '1 microsecond';
      END LOOP;
      SELECT f.outcome INTO v_outcome
        FROM taskmill.fire_job(v_job, v_at, 'child', false, NULL, p_lease_ms, p_job,
                               p_fire_at) f;
    END IF;
    fired := fired || jsonb_build_object('job', v_name, 'fire_at', v_at, 'outcome', v_outcome);
  END LOOP;
END
$$;
