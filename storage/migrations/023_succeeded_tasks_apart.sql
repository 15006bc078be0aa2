-- Successes leave the live tasks as they succeed (SPEC §11): they wait out
-- the success retention in a partition of their own, so that the live
-- tasks' table, its indexes and its vacuums hold the work that waits and
-- runs (and the few dead and cancelled tasks) and not a day of history,
-- however many tasks a day succeed. A success is moved there by its
-- outcome, and on into its stopped day by the retention's sweep.
ALTER TABLE taskmill.tasks DETACH PARTITION taskmill.live_tasks;

CREATE TABLE taskmill.succeeded_tasks PARTITION OF taskmill.tasks FOR VALUES IN ('succeeded');

-- Each success leaves again once its retention is over: vacuumed as early
-- as the live tasks are.
ALTER TABLE taskmill.succeeded_tasks SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_analyze_scale_factor = 0.02,
  autovacuum_vacuum_cost_delay = 0
);

-- Moved, not deleted: the triggers of the definitions before these (which
-- would drop the tasks' keys) stay out of it.
ALTER TABLE taskmill.live_tasks DISABLE TRIGGER USER;
ALTER TABLE taskmill.succeeded_tasks DISABLE TRIGGER USER;
INSERT INTO taskmill.succeeded_tasks SELECT * FROM taskmill.live_tasks WHERE status = 'succeeded';
DELETE FROM taskmill.live_tasks WHERE status = 'succeeded';
ALTER TABLE taskmill.succeeded_tasks ENABLE TRIGGER USER;
ALTER TABLE taskmill.live_tasks ENABLE TRIGGER USER;

-- What reads successes: by id (a task, a duplicate submit), by type (the
-- list by type), by batch, and the retention's sweep by age.
CREATE INDEX succeeded_tasks_by_id ON taskmill.succeeded_tasks (id);
CREATE INDEX succeeded_tasks_by_type ON taskmill.succeeded_tasks (type, id);
CREATE INDEX succeeded_tasks_by_batch ON taskmill.succeeded_tasks (batch) WHERE batch IS NOT NULL;
CREATE INDEX succeeded_tasks_by_age ON taskmill.succeeded_tasks (updated_at);

ALTER TABLE taskmill.tasks ATTACH PARTITION taskmill.live_tasks
  FOR VALUES IN ('pending', 'running', 'failed', 'dead', 'cancelled');
