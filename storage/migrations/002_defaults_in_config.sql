-- The defaults of a task's settings have one home, the node's configuration
-- (config/config.hpp), which every node writes to taskmill.task_types as it
-- starts; taskmill.submit reads them there. The tables keep no copy.
ALTER TABLE taskmill.task_types
  ALTER COLUMN timeout_ms DROP DEFAULT,
  ALTER COLUMN max_retries DROP DEFAULT,
  ALTER COLUMN backoff_kind DROP DEFAULT,
  ALTER COLUMN backoff_base_ms DROP DEFAULT,
  ALTER COLUMN backoff_cap_ms DROP DEFAULT,
  ALTER COLUMN backoff_jitter DROP DEFAULT;

ALTER TABLE taskmill.tasks
  ALTER COLUMN priority DROP DEFAULT,
  ALTER COLUMN max_retries DROP DEFAULT,
  ALTER COLUMN timeout_ms DROP DEFAULT,
  ALTER COLUMN backoff_kind DROP DEFAULT,
  ALTER COLUMN backoff_base_ms DROP DEFAULT,
  ALTER COLUMN backoff_cap_ms DROP DEFAULT,
  ALTER COLUMN backoff_jitter DROP DEFAULT;
