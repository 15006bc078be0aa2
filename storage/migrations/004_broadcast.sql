-- Broadcast firings (SPEC §6) pin each shard to a node; nodes say which task
-- types they run, so that shards go only to nodes that can run them.
ALTER TABLE taskmill.nodes ADD COLUMN types text[];  -- NULL: any type
ALTER TABLE taskmill.tasks ADD COLUMN pinned_node text;
CREATE INDEX tasks_pinned ON taskmill.tasks (pinned_node)
  WHERE pinned_node IS NOT NULL AND status IN ('pending', 'failed');
