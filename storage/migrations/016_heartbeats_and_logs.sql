-- Heartbeats and logs of running attempts (SPEC §4, talking back).
--
-- A type may take back an attempt that went silent longer than its
-- heartbeat timeout, and may let an attempt move its own deadline up to its
-- max timeout after its start.
ALTER TABLE taskmill.task_types
  ADD COLUMN heartbeat_timeout_ms bigint CHECK (heartbeat_timeout_ms > 0),
  ADD COLUMN max_timeout_ms integer CHECK (max_timeout_ms > 0);

-- The deadline an attempt moved itself to (NULL: its timeout after start).
ALTER TABLE taskmill.task_progress ADD COLUMN deadline_at timestamptz;

-- A finished batch or firing whose share of failed records (progress
-- reports' failed over processed) is above the rule's record_failure_rate.
ALTER TABLE taskmill.alerts DROP CONSTRAINT alerts_kind_check;
ALTER TABLE taskmill.alerts ADD CONSTRAINT alerts_kind_check
  CHECK (kind IN ('dead_task', 'failure_rate', 'record_failure_rate', 'firing_missed',
                  'firing_skipped', 'pending_too_old'));

-- Lines an execution logged for its attempt, in the order taken (id), the
-- last of each attempt kept (storage/sql/logs.sql).
CREATE TABLE taskmill.attempt_logs (
  task_id   bigint NOT NULL,
  attempt   integer NOT NULL,
  id        bigint GENERATED ALWAYS AS IDENTITY,
  logged_at timestamptz NOT NULL,
  line      text NOT NULL,
  PRIMARY KEY (task_id, attempt, id)
);
