-- A cancel stays until its executor heard it: the node that takes it marks
-- it taken (by whom, when, how many times) and removes it once the executor
-- answered; one not heard of within a while, or whose taker is gone, is
-- taken again.
ALTER TABLE taskmill.cancel_requests
  ADD COLUMN taken_by text,
  ADD COLUMN taken_at timestamptz,
  ADD COLUMN tries integer NOT NULL DEFAULT 0;
