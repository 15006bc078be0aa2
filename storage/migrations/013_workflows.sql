-- Workflows (SPEC §10): named steps submitted together, each one task or
-- one task per shard of a broadcast. Their edges are the tasks' own
-- (taskmill.task_edges): a workflow is a graph of dependencies with names.
CREATE TABLE taskmill.workflows (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name         text NOT NULL CHECK (name <> '' AND length(name) <= 200),
  -- Given by the submitter: a second submit with it answers the first.
  key          text UNIQUE CHECK (key <> '' AND length(key) <= 500),
  created_at   timestamptz NOT NULL DEFAULT now(),
  cancelled_at timestamptz
);
CREATE INDEX workflows_by_age ON taskmill.workflows (created_at);

-- The tasks of each step; position: the step's place in the request.
CREATE TABLE taskmill.workflow_steps (
  task_id     bigint PRIMARY KEY,
  workflow_id bigint NOT NULL REFERENCES taskmill.workflows ON DELETE CASCADE,
  step        text NOT NULL,
  position    integer NOT NULL
);
CREATE INDEX workflow_steps_of_workflow ON taskmill.workflow_steps (workflow_id, position);

-- What a step is given of its parents' results ({step: result}), set when
-- it becomes due.
ALTER TABLE taskmill.tasks ADD COLUMN parent_results jsonb;

-- The callbacks of batches: on_finish runs once every task of the batch
-- finished, on_success once every one succeeded; one of each per batch.
CREATE TABLE taskmill.batch_callbacks (
  batch   text NOT NULL,
  kind    text NOT NULL CHECK (kind IN ('on_finish', 'on_success')),
  task_id bigint NOT NULL UNIQUE,
  PRIMARY KEY (batch, kind)
);
