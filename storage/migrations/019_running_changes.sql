-- The tasks a transaction moved in or out of running other than by a claim
-- or an outcome, a row a task, until its commit tallies them together
-- (storage/sql/running_tally.sql), so that a transaction moving thousands
-- (a node's stop) updates each tally row once rather than once a task. It
-- only ever holds rows of transactions in flight: unlogged.
CREATE UNLOGGED TABLE taskmill.running_changes (
  txid  bigint NOT NULL,
  type  text NOT NULL,
  ended boolean NOT NULL
);
CREATE INDEX running_changes_by_transaction ON taskmill.running_changes (txid);
