-- Permits an idle node offers to submits: a task submitted due at once is
-- handed to such a node as the submit's transaction commits, running under
-- it from then, instead of waiting for the node to hear of it and claim it
-- in a transaction of its own (see storage/sql/offers.sql).
--
-- A node's offer, and the generation its permits must be of to be taken (the
-- node numbers its offers; 0: taken back). types NULL: any type. The offer
-- holds while the node's heartbeat is younger than fresh_ms.
CREATE TABLE taskmill.offers (
  node       text PRIMARY KEY,
  generation bigint NOT NULL,
  types      text[],
  fresh_ms   integer NOT NULL
);
-- A permit offered, a row each: a committing submit takes one by deleting
-- it, and locks no row that anyone else waits for (a counter would hold
-- every other submit and the node's own claims until that commit is done).
CREATE TABLE taskmill.offer_slots (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  node       text NOT NULL,
  generation bigint NOT NULL
);
CREATE INDEX offer_slots_by_node ON taskmill.offer_slots (node, generation);
-- Tasks a submit asked to hand off: each is handed to a node, or not, as its
-- transaction commits (taskmill.hand_off_at_commit), so that the task's
-- timeout starts then, not while the transaction was still open.
CREATE TABLE taskmill.handoff_requests (
  task_id bigint PRIMARY KEY
);
