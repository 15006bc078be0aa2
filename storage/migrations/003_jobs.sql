-- Recurring jobs (SPEC §6) and their firings. A job's schedule is cron text,
-- evaluated by the nodes (messages/schedule.cpp); the database keeps when
-- each job fires next, and one ledger row per (job, fire time), so that no
-- firing is ever created twice.
CREATE TABLE taskmill.jobs (
  name            text PRIMARY KEY,
  schedule        text NOT NULL,
  time_zone       text NOT NULL,
  type            text NOT NULL,
  payload         jsonb NOT NULL,
  -- The task settings a firing's tasks get; NULL: the type's.
  priority        integer,
  max_retries     integer,
  timeout_ms      integer,
  backoff_kind    text,
  backoff_base_ms integer,
  backoff_cap_ms  integer,
  backoff_jitter  real,
  enabled         boolean NOT NULL,
  routing         text NOT NULL CHECK (routing IN ('any', 'broadcast')),
  -- broadcast: a fixed number of shards; NULL: one per live node.
  shards          integer CHECK (shards BETWEEN 1 AND 10000),
  overlap         text NOT NULL CHECK (overlap IN ('allow', 'skip', 'replace')),
  misfire         text NOT NULL CHECK (misfire IN ('skip', 'fire_once', 'catch_up')),
  catch_up_limit  integer NOT NULL CHECK (catch_up_limit BETWEEN 1 AND 1000),
  description     text NOT NULL,
  -- 'config': written from a node's [[jobs]], which wins at start.
  source          text NOT NULL CHECK (source IN ('api', 'config')),
  -- The next scheduled fire time, set by whoever wrote or fired the job;
  -- NULL: it never fires again (or it is paused).
  next_fire_at    timestamptz,
  -- Where the rate of an @every schedule starts.
  anchor_at       timestamptz NOT NULL,
  created_at      timestamptz NOT NULL,
  updated_at      timestamptz NOT NULL
);

CREATE INDEX jobs_next_fire ON taskmill.jobs (next_fire_at) WHERE enabled;

-- One row per (job, fire time): the firing and what became of it.
CREATE TABLE taskmill.job_firings (
  job        text NOT NULL,
  fire_at    timestamptz NOT NULL,
  -- scheduled | manual | fire_once (for several missed times) | catch_up
  kind       text NOT NULL,
  -- fired | skipped (overlap) | missed (misfire)
  outcome    text NOT NULL,
  batch      text NOT NULL,
  -- Tasks of the firing may still be unfinished (for the overlap rules);
  -- cleared once found finished.
  open       boolean NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (job, fire_at)
);

CREATE INDEX job_firings_open ON taskmill.job_firings (job) WHERE open;
