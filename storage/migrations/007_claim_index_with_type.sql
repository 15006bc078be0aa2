-- The claim index ends with each task's type. A claim under a type's running
-- limit looks for that type's tasks only: without the type in the index it
-- read every due task of the other types on the way from the table, to see
-- its type (with three types, three rows read for each one claimed); now it
-- passes over them in the index. Under limits a drain's claims cost
-- PostgreSQL 24.6 us a task, 18.2 with this index. (A separate index led by
-- the type made those claims cheaper still, 16.7 us, but cost every submit an
-- index entry more, whether limits are used or not.)
CREATE INDEX tasks_due_with_type ON taskmill.tasks (priority, execute_at, id, type)
  WHERE status IN ('pending', 'failed');
DROP INDEX taskmill.tasks_due;
ALTER INDEX taskmill.tasks_due_with_type RENAME TO tasks_due;
