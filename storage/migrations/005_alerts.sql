-- Alerts (SPEC §6): what the leader raised, once per subject, and their
-- delivery to each webhook, which outlives the node delivering it.

-- What may deserve an alert, written where it happens (a task went dead, a
-- firing was missed or skipped) and taken by the leader's next alert pass,
-- which applies the rules of the node's configuration.
CREATE TABLE taskmill.alert_inbox (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind       text NOT NULL CHECK (kind IN ('dead_task', 'firing_missed', 'firing_skipped')),
  task_id    bigint,
  attempt    integer,
  type       text,
  key        text,
  batch      text,
  job        text,
  fire_at    timestamptz,
  error      text,
  created_at timestamptz NOT NULL
);

-- Batches with a dead task, waiting to finish: their failure rate is
-- judged then. A batch without a dead task fails no one.
CREATE TABLE taskmill.alert_batches (
  batch      text PRIMARY KEY,
  type       text NOT NULL,
  created_at timestamptz NOT NULL
);

CREATE TABLE taskmill.alerts (
  id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  kind      text NOT NULL CHECK (kind IN ('dead_task', 'failure_rate', 'firing_missed',
                                          'firing_skipped', 'pending_too_old')),
  -- What the alert is about; an alert is raised once per (kind, subject).
  subject   text NOT NULL,
  type      text,
  job       text,
  batch     text,
  task_id   bigint,
  message   text NOT NULL,
  details   jsonb NOT NULL,
  raised_at timestamptz NOT NULL,
  UNIQUE (kind, subject)
);

CREATE INDEX alerts_raised ON taskmill.alerts (raised_at);

-- Types whose pending tasks wait longer than their bound: while a type is
-- here its alert is not raised again.
CREATE TABLE taskmill.overdue_types (
  type  text PRIMARY KEY,
  since timestamptz NOT NULL
);

CREATE TABLE taskmill.alert_deliveries (
  alert_id     bigint NOT NULL REFERENCES taskmill.alerts ON DELETE CASCADE,
  url          text NOT NULL,
  attempts     integer NOT NULL,
  -- When to try (again), or when a try under way counts as lost; NULL:
  -- delivered, or given up.
  next_at      timestamptz,
  delivered_at timestamptz,
  last_error   text,
  PRIMARY KEY (alert_id, url)
);

CREATE INDEX alert_deliveries_due ON taskmill.alert_deliveries (next_at)
  WHERE next_at IS NOT NULL;

-- Alerts name the job of a firing's batch; retention of the ledger goes by
-- fire time.
CREATE INDEX job_firings_batch ON taskmill.job_firings (batch);
CREATE INDEX job_firings_fire_at ON taskmill.job_firings (fire_at) WHERE NOT open;
