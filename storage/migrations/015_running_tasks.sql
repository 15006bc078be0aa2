-- Running attempts and their executors talk both ways.
--
-- Cancels of running attempts, to tell their executors (SPEC §3): written in
-- the transaction that cancels the task, taken by the node that runs the
-- attempt, or, for an executor any node can reach (HTTP), by another node
-- once that one is gone.
CREATE TABLE taskmill.cancel_requests (
  task_id    bigint NOT NULL,
  attempt    integer NOT NULL,
  node       text NOT NULL,
  type       text NOT NULL,
  key        text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (task_id, attempt)
);
CREATE INDEX cancel_requests_by_node ON taskmill.cancel_requests (node);

-- What a running attempt last said of itself: how far it got, how many
-- records it processed and how many of them failed. Kept beside the task,
-- so that reports do not rewrite the rows of the hot table.
CREATE TABLE taskmill.task_progress (
  task_id     bigint PRIMARY KEY,
  attempt     integer NOT NULL,
  progress    real CHECK (progress BETWEEN 0 AND 1),
  processed   bigint NOT NULL CHECK (processed >= 0),
  failed      bigint NOT NULL CHECK (failed >= 0),
  message     text,
  reported_at timestamptz NOT NULL
);
