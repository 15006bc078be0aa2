-- Child jobs and firing callbacks (SPEC §10), and what a workflow keeps of
-- its purged steps. A job names jobs to fire once a firing of it succeeded
-- (child_jobs) or failed (child_jobs_on_failure), and tasks to submit after
-- a firing's tasks (on_finish, on_success: task objects as a batch's
-- callbacks take them).
ALTER TABLE taskmill.jobs
  ADD COLUMN child_jobs text[] NOT NULL DEFAULT '{}',
  ADD COLUMN child_jobs_on_failure text[] NOT NULL DEFAULT '{}',
  ADD COLUMN on_finish jsonb,
  ADD COLUMN on_success jsonb;
ALTER TABLE taskmill.jobs
  ALTER COLUMN child_jobs DROP DEFAULT,
  ALTER COLUMN child_jobs_on_failure DROP DEFAULT;

-- A child firing (kind child) names the firing whose finish fired it; one
-- per child job and parent firing.
ALTER TABLE taskmill.job_firings
  ADD COLUMN parent_job text,
  ADD COLUMN parent_fire_at timestamptz;
CREATE UNIQUE INDEX job_firings_once_per_parent
  ON taskmill.job_firings (parent_job, parent_fire_at, job) WHERE parent_job IS NOT NULL;

-- child_jobs: the task that fires a firing's child jobs once its tasks
-- finished.
ALTER TABLE taskmill.batch_callbacks DROP CONSTRAINT batch_callbacks_kind_check;
ALTER TABLE taskmill.batch_callbacks ADD CONSTRAINT batch_callbacks_kind_check
  CHECK (kind IN ('on_finish', 'on_success', 'child_jobs'));

-- A workflow whose dead or cancelled steps were purged before its other
-- steps still reads as failed.
ALTER TABLE taskmill.workflows ADD COLUMN failed_steps_purged boolean NOT NULL DEFAULT false;
