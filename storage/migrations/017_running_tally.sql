-- The running tasks of each limited scope, tallied (SPEC §4 Limits): a claim
-- reads a limit's use from two rows instead of counting the running tasks,
-- a count that read every task finished since the last vacuum
-- (storage/sql/running_tally.sql). Claims add to the tasks started, every
-- way out of running to those ended, in separate rows so that outcomes do
-- not wait for claims.
CREATE TABLE taskmill.running_tally (
  -- 'all': every task (the global limit); 'type': the tasks of one type.
  scope text NOT NULL CHECK (scope IN ('all', 'type')),
  -- The type; '' for scope 'all'.
  name text NOT NULL,
  ended boolean NOT NULL,
  tasks bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (scope, name, ended)
);
