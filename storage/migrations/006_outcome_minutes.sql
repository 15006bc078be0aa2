-- Outcomes per minute and node, added by each node's heartbeat from the
-- counters it exports in /metrics, so that throughput and failure rate over
-- the last minutes are one small read, cluster-wide, that never touches the
-- task table (SPEC §8, Console).
CREATE TABLE taskmill.outcome_minutes (
  minute    timestamptz NOT NULL,
  node      text NOT NULL,
  succeeded bigint NOT NULL,
  retried   bigint NOT NULL,
  failed    bigint NOT NULL,
  PRIMARY KEY (minute, node)
);
