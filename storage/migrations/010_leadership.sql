-- The lead, as a lease: the node that holds it renews it every heartbeat
-- interval, and another takes it once it has expired by the database's
-- clock, whatever became of the holder's connection (a session lock stayed
-- with a silent leader's connection until its TCP keepalive gave up, hours
-- by default). term grows at every change of holder: each of the leader's
-- duties names the term it acts under and is refused once that term is
-- over (taskmill.fence).
CREATE TABLE taskmill.leadership (
  one         boolean PRIMARY KEY DEFAULT true CHECK (one),
  node        text,
  incarnation text,
  term        bigint NOT NULL DEFAULT 0,
  expires_at  timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO taskmill.leadership DEFAULT VALUES;
