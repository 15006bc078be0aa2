-- Task dependencies (SPEC §10): a task submitted `after` others waits for
-- them, and becomes due in the transaction in which its last parent
-- finishes.
--
-- An edge: child waits for parent. done: the parent's finish was counted
-- (each edge counts once, whatever runs the parent again later). on_failure:
-- what a parent that ends dead or cancelled does to the child: fail (the
-- child is cancelled, and so on down the graph), run (it runs anyway) or
-- skip (it is stopped without running, and its own children go on).
CREATE TABLE taskmill.task_edges (
  parent_id  bigint NOT NULL,
  child_id   bigint NOT NULL,
  on_failure text NOT NULL CHECK (on_failure IN ('fail', 'run', 'skip')),
  done       boolean NOT NULL,
  PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX task_edges_by_child ON taskmill.task_edges (child_id);

-- A task waiting for its parents is pending with execute_at 'infinity', out
-- of every claim's reach; here are how many parents it still waits for and
-- when it is due once they finished.
CREATE TABLE taskmill.task_waits (
  task_id      bigint PRIMARY KEY,
  parents_left integer NOT NULL CHECK (parents_left >= 0),
  execute_at   timestamptz NOT NULL
);

-- Whether a task has children: only then does its finish look for them, so
-- that tasks without any pay nothing for dependencies.
ALTER TABLE taskmill.tasks ADD COLUMN has_children boolean NOT NULL DEFAULT false;
