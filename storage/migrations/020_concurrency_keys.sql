-- Concurrency keys (SPEC §4 Keyed limits): a key space holds a running limit
-- per key, with limits of their own for named keys and for classes of keys;
-- the types that name a space have each task's key (and class) taken from
-- it as it is submitted (storage/sql/keys.sql).
CREATE TABLE taskmill.key_spaces (
  name         text PRIMARY KEY CHECK (name <> '' AND length(name) <= 200),
  key_limit    integer NOT NULL CHECK (key_limit > 0),
  -- {"<key>": limit}: keys with a limit of their own.
  key_limits   jsonb NOT NULL DEFAULT '{}',
  -- A payload path whose value is a key's class, and {"<class>": limit}.
  class_path   text,
  class_limits jsonb NOT NULL DEFAULT '{}',
  -- Starts allowed per key in any window of rate_period_ms (NULL: no rate).
  rate           integer CHECK (rate BETWEEN 1 AND 10000),
  rate_period_ms integer CHECK (rate_period_ms > 0),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  CHECK ((rate IS NULL) = (rate_period_ms IS NULL))
);

-- The space a type's tasks are keyed in, and where their key comes from: a
-- payload path, or the task's key up to a separator.
ALTER TABLE taskmill.task_types
  ADD COLUMN key_space text,
  ADD COLUMN key_path text,
  ADD COLUMN key_separator text,
  -- What a start of one of its tasks costs its key's rate.
  ADD COLUMN rate_units integer NOT NULL DEFAULT 1 CHECK (rate_units > 0);

-- Bytewise, so that the order keys take turns in is the same on every server.
ALTER TABLE taskmill.tasks
  ADD COLUMN key_space text,
  ADD COLUMN concurrency_key text COLLATE "C",
  ADD COLUMN key_class text;

-- Due keyed work by space, level and key: a claim walks the keys with work
-- from one entry to the next key's, whatever a key's backlog.
CREATE INDEX tasks_due_by_key ON taskmill.tasks (key_space, priority, concurrency_key, execute_at, id)
  WHERE status IN ('pending', 'failed') AND key_space IS NOT NULL;
-- A key's running tasks, counted by a claim that would start more.
CREATE INDEX tasks_running_by_key ON taskmill.tasks (key_space, concurrency_key)
  WHERE status = 'running' AND key_space IS NOT NULL;

-- Where each space's turns stand at each level: the key served last, and
-- when the first key its last claim found at its rate may start again.
CREATE TABLE taskmill.key_turns (
  space    text NOT NULL,
  priority smallint NOT NULL,
  last_key text COLLATE "C" NOT NULL,
  rate_opens_at timestamptz,
  PRIMARY KEY (space, priority)
);

-- The starts of each key of a space with a rate, as slots: the time of the
-- last start each slot took (storage/sql/key_rates.sql).
CREATE TABLE taskmill.key_starts (
  space  text NOT NULL,
  key    text COLLATE "C" NOT NULL,
  starts timestamptz[] NOT NULL,
  PRIMARY KEY (space, key)
);
