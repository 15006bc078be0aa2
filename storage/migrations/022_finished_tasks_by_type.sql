-- A type's finished live tasks by status, type and id, so that a page of
-- the task list by type reads that type's tasks and not a day's successes
-- of every other type (storage/sql/task_reads.sql). Only a move into a
-- finished status writes it; inserts and claims do not.
CREATE INDEX tasks_finished_by_type ON taskmill.live_tasks (status, type, id)
  WHERE status IN ('succeeded', 'dead', 'cancelled');
