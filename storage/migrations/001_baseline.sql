-- The tables of taskmill: the task model (SPEC §2), per-type settings, the
-- identity of live tasks, the attempt history and the nodes. Tables, indexes
-- and data moves only: the functions, triggers and views that work on them
-- live in storage/sql/, one file per concern.

CREATE TYPE taskmill.task_status AS ENUM (
  'pending', 'running', 'succeeded', 'failed', 'dead', 'cancelled', 'stopped'
);

-- Settings per task type, written by the nodes from their configuration, so
-- that a submit from SQL gets the same defaults as one through a node. The row
-- with the empty type holds the defaults for types without a row.
CREATE TABLE taskmill.task_types (
  type                text PRIMARY KEY,
  timeout_ms          integer NOT NULL DEFAULT 5000 CHECK (timeout_ms > 0),
  max_retries         integer NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
  backoff_kind        text NOT NULL DEFAULT 'exponential' CHECK (backoff_kind IN ('fixed', 'exponential')),
  backoff_base_ms     integer NOT NULL DEFAULT 1000 CHECK (backoff_base_ms > 0),
  backoff_cap_ms      integer NOT NULL DEFAULT 3600000 CHECK (backoff_cap_ms > 0),
  backoff_jitter      real NOT NULL DEFAULT 0.1 CHECK (backoff_jitter BETWEEN 0 AND 1),
  pending_deadline_ms bigint CHECK (pending_deadline_ms > 0),
  running_limit       integer CHECK (running_limit > 0),
  updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE taskmill.tasks (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  type            text NOT NULL,
  key             text NOT NULL,
  version         bigint NOT NULL DEFAULT 0,
  status          taskmill.task_status NOT NULL DEFAULT 'pending',
  priority        smallint NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 5),
  execute_at      timestamptz NOT NULL DEFAULT now(),
  payload         jsonb NOT NULL DEFAULT '{}',
  result          jsonb,
  error           text,
  -- +1 at every claim: the fencing token of that execution.
  attempt         integer NOT NULL DEFAULT 0,
  -- Failed attempts so far; success does not reset it.
  retry_count     integer NOT NULL DEFAULT 0,
  max_retries     integer NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
  timeout_ms      integer NOT NULL DEFAULT 5000 CHECK (timeout_ms > 0),
  backoff_kind    text NOT NULL DEFAULT 'exponential' CHECK (backoff_kind IN ('fixed', 'exponential')),
  backoff_base_ms integer NOT NULL DEFAULT 1000 CHECK (backoff_base_ms > 0),
  backoff_cap_ms  integer NOT NULL DEFAULT 3600000 CHECK (backoff_cap_ms > 0),
  backoff_jitter  real NOT NULL DEFAULT 0.1 CHECK (backoff_jitter BETWEEN 0 AND 1),
  -- A task still waiting to run after this time becomes dead (optional).
  deadline_at     timestamptz,
  batch           text,
  shard_index     integer,
  shard_total     integer,
  trace_id        text NOT NULL,
  picked_by       text,
  heartbeat_at    timestamptz,
  started_at      timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  -- When the last attempt ended; with node and start it is the history of a
  -- successful attempt, which writes no row of its own (see attempt_history).
  finished_at     timestamptz,
  CHECK (type <> '' AND length(type) <= 200),
  CHECK (key <> '' AND length(key) <= 500),
  CHECK (version >= 0)
);

CREATE INDEX tasks_cancelled ON taskmill.tasks (type, key, id) WHERE status = 'cancelled';
-- The claim path: due work in claim order, per priority level.
CREATE INDEX tasks_due ON taskmill.tasks (priority, execute_at, id)
  WHERE status IN ('pending', 'failed');
CREATE INDEX tasks_running ON taskmill.tasks (picked_by) WHERE status = 'running';
CREATE INDEX tasks_deadline ON taskmill.tasks (deadline_at)
  WHERE deadline_at IS NOT NULL AND status IN ('pending', 'failed');
CREATE INDEX tasks_finished ON taskmill.tasks (updated_at)
  WHERE status IN ('succeeded', 'stopped', 'dead', 'cancelled');
CREATE INDEX tasks_batch ON taskmill.tasks (batch) WHERE batch IS NOT NULL;

-- A queue table churns: vacuum it early so the claim index stays small.
ALTER TABLE taskmill.tasks SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_analyze_scale_factor = 0.02,
  autovacuum_vacuum_cost_delay = 0
);

-- One row per finished attempt, including those whose outcome came too late
-- to change the task.
CREATE TABLE taskmill.attempts (
  task_id     bigint NOT NULL,
  attempt     integer NOT NULL,
  node        text,
  started_at  timestamptz,
  finished_at timestamptz NOT NULL DEFAULT now(),
  outcome     text NOT NULL,
  error       text,
  PRIMARY KEY (task_id, attempt)
);

-- (type, key, version) names one live task, the task_id; cancelled tasks may
-- repeat it and have no row. Kept by triggers on tasks (storage/sql/identity.sql)
-- and written only when a task is created, cancelled or revived: claims and
-- outcomes never touch an index spread over every key.
CREATE TABLE taskmill.task_keys (
  type    text NOT NULL,
  key     text NOT NULL,
  version bigint NOT NULL,
  task_id bigint NOT NULL,
  PRIMARY KEY (type, key, version)
);

-- The nodes of the cluster (SPEC §7).
CREATE TABLE taskmill.nodes (
  name         text PRIMARY KEY,
  -- Changes at every start: a node that restarts under the same name is a new
  -- incarnation, and only the newest may renew the heartbeat.
  incarnation  text NOT NULL,
  address      text NOT NULL DEFAULT '',
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  leader       boolean NOT NULL DEFAULT false,
  stopped_at   timestamptz
);
