-- The task list by type reads the type's tasks in id order, as it does among
-- the stopped ones (stopped_tasks_by_type), instead of every task from its
-- page token on: beside millions of finished tasks of other types, a type's
-- first page was empty.
CREATE INDEX live_tasks_by_type ON taskmill.live_tasks (type, id);
