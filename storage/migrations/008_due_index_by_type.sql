-- Due work led by its type. The claim index serves claims in claim order
-- over all types; a claim that must leave out the types at their running
-- limit (or at their executors' capacity) could only tell them by reading
-- each due task's row, every due task of the level at each claim while such
-- a type had a backlog: a limited drain of 100,000 on a node that also ran
-- other types went at 14k/s against 38-45k/s, its claims 68 us a task
-- against 17. With this index the other types' tasks are found type by
-- type, and each limited type's own search reads only its tasks. It costs
-- every submitted task one index entry more (about 1.3 us in PostgreSQL);
-- the claim index gives back the type that 007 added to it for the limited
-- types' searches, which this index now serves.
CREATE INDEX tasks_due_by_type ON taskmill.tasks (type, priority, execute_at, id)
  WHERE status IN ('pending', 'failed');
CREATE INDEX tasks_due_in_claim_order ON taskmill.tasks (priority, execute_at, id)
  WHERE status IN ('pending', 'failed');
DROP INDEX taskmill.tasks_due;
ALTER INDEX taskmill.tasks_due_in_claim_order RENAME TO tasks_due;
