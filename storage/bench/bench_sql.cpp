#include "storage/bench/bench_sql.hpp"

namespace taskmill::db::bench_sql {

const char* const create_raw_table = R"sql(
CREATE SCHEMA IF NOT EXISTS bench_raw;
CREATE TABLE IF NOT EXISTS bench_raw.jobs (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  payload    jsonb NOT NULL DEFAULT '{}',
  status     text NOT NULL DEFAULT 'pending',
  run_at     timestamptz NOT NULL DEFAULT now(),
  attempt    integer NOT NULL DEFAULT 0,
  picked_by  text,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS jobs_due ON bench_raw.jobs (run_at, id) WHERE status = 'pending';
)sql";

const char* const raw_insert = R"sql(
INSERT INTO bench_raw.jobs (payload) SELECT '{}' FROM generate_series(1, $1::integer)
)sql";

const char* const raw_claim = R"sql(
WITH picked AS (
  SELECT id FROM bench_raw.jobs
   WHERE status = 'pending' AND run_at <= now()
   ORDER BY run_at, id LIMIT $2::integer
   FOR UPDATE SKIP LOCKED)
UPDATE bench_raw.jobs j
   SET status = 'running', attempt = j.attempt + 1, picked_by = $1, updated_at = now()
  FROM picked WHERE j.id = picked.id
RETURNING j.id
)sql";

const char* const raw_complete = R"sql(
WITH done AS (
  UPDATE bench_raw.jobs SET status = 'succeeded', updated_at = now()
   WHERE id = ANY ($1::bigint[]) AND status = 'running'
  RETURNING 1)
SELECT count(*) FROM done
)sql";

const char* const raw_insert_one = "INSERT INTO bench_raw.jobs (payload) VALUES ($1::jsonb)";

const char* const raw_channel = "bench_raw_jobs";

const char* const raw_insert_one_notify = R"sql(
WITH job AS (INSERT INTO bench_raw.jobs (payload) VALUES ($1::jsonb) RETURNING id)
SELECT id, pg_notify($2, '') FROM job
)sql";

const char* const raw_unfinished =
    "SELECT count(*) FROM bench_raw.jobs WHERE status <> 'succeeded'";

const char* const raw_reset = "TRUNCATE bench_raw.jobs";

const char* const vacuum_raw = "VACUUM ANALYZE bench_raw.jobs";

// The tally of running tasks (migration 17) goes with them, where the node
// measured has one.
const char* const reset_tasks = R"sql(
DO $$
BEGIN
  TRUNCATE taskmill.tasks, taskmill.task_keys, taskmill.attempts, taskmill.task_edges,
           taskmill.task_waits;
  IF to_regclass('taskmill.running_tally') IS NOT NULL THEN
    TRUNCATE taskmill.running_tally;
  END IF;
END
$$
)sql";

const char* const vacuum_tasks =
    "VACUUM ANALYZE taskmill.tasks, taskmill.task_keys, taskmill.attempts";

const char* const analyze_tasks = "ANALYZE taskmill.tasks, taskmill.task_keys, taskmill.attempts";

const char* const forget_stopped_nodes = "DELETE FROM taskmill.nodes WHERE stopped_at IS NOT NULL";

const char* const checkpoint = "CHECKPOINT";

const char* const autovacuum_workers =
    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'";

const char* const load_backlog = R"sql(
INSERT INTO taskmill.tasks (type, key, execute_at, trace_id, priority, max_retries, timeout_ms,
                            backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter)
SELECT $1, $3 || g, now() - interval '1 minute', md5(g::text), taskmill.default_priority(),
       s.max_retries, s.timeout_ms,
       s.backoff_kind, s.backoff_base_ms, s.backoff_cap_ms, s.backoff_jitter
  FROM generate_series(1, $2::integer) g, taskmill.type_settings($1) s
)sql";

const char* const load_mixed_backlog = R"sql(
INSERT INTO taskmill.tasks (type, key, execute_at, trace_id, priority, max_retries, timeout_ms,
                            backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter)
SELECT m.type, $3 || g, now() - interval '1 minute', md5(g::text), 1 + g % 5, s.max_retries,
       s.timeout_ms, s.backoff_kind, s.backoff_base_ms, s.backoff_cap_ms, s.backoff_jitter
  FROM generate_series(1, $2::integer) g,
       LATERAL (SELECT ($1::text[])[1 + g % cardinality($1::text[])] AS type) m,
       LATERAL taskmill.type_settings(m.type) s
)sql";

// $2 due tasks of type $1 (keys $3 || n) over all five levels, their
// tenants ($.tenant) $5 keys in turn; keyed in space $4 unless it is NULL,
// as a submit keys them.
const char* const load_keyed_backlog = R"sql(
INSERT INTO taskmill.tasks (type, key, execute_at, trace_id, priority, max_retries, timeout_ms,
                            backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter,
                            payload, key_space, concurrency_key)
SELECT $1, $3 || g, now() - interval '1 minute', md5(g::text), 1 + g % 5, s.max_retries,
       s.timeout_ms, s.backoff_kind, s.backoff_base_ms, s.backoff_cap_ms, s.backoff_jitter,
       jsonb_build_object('tenant', 't' || g % $5::integer), $4::text,
       CASE WHEN $4::text IS NOT NULL THEN 't' || g % $5::integer END
  FROM generate_series(1, $2::integer) g, taskmill.type_settings($1) s
)sql";

const char* const load_calendar = R"sql(
INSERT INTO taskmill.tasks (type, key, execute_at, trace_id, priority, max_retries, timeout_ms,
                            backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter)
SELECT $1, 'cal' || g, now() + interval '2 days' + g * interval '50 ms', md5(g::text),
       taskmill.default_priority(), s.max_retries, s.timeout_ms, s.backoff_kind,
       s.backoff_base_ms, s.backoff_cap_ms, s.backoff_jitter
  FROM generate_series(1, $2::integer) g, taskmill.type_settings($1) s
)sql";

// Within the node's default success retention (a day), so that its purge
// leaves them while the bench measures beside them: tasks $3 + 1 to $3 + $2
// of a history of $4, spread over 19 hours.
const char* const load_history = R"sql(
INSERT INTO taskmill.tasks (type, key, execute_at, trace_id, priority, max_retries, timeout_ms,
                            backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter,
                            status, attempt, picked_by, started_at, finished_at, updated_at)
SELECT $1, 'h' || g, f.at - interval '10 ms', md5(g::text), taskmill.default_priority(),
       s.max_retries, s.timeout_ms, s.backoff_kind, s.backoff_base_ms, s.backoff_cap_ms,
       s.backoff_jitter, 'succeeded', 1, 'history', f.at - interval '5 ms', f.at, f.at
  FROM generate_series($3::integer + 1, $3::integer + $2::integer) g,
       taskmill.type_settings($1) s,
       LATERAL (SELECT now() - interval '20 hours' + g * (interval '19 hours' / $4::integer)
                  AS at) f
)sql";

const char* const make_past_days = R"sql(
SELECT taskmill.make_stopped_days((now() AT TIME ZONE 'UTC')::date - $1::integer,
                                  (now() AT TIME ZONE 'UTC')::date - 1)
)sql";

const char* const newest_succeeded = R"sql(
SELECT coalesce(max(id), 0) FROM taskmill.tasks WHERE status = 'succeeded'
)sql";

const char* const delete_types = R"sql(
WITH gone AS (DELETE FROM taskmill.tasks WHERE type = ANY ($1::text[]) RETURNING id)
DELETE FROM taskmill.attempts a USING gone WHERE a.task_id = gone.id
)sql";

const char* const vacuum_live_tasks = "VACUUM taskmill.live_tasks";

const char* const now = "SELECT clock_timestamp()";

const char* const succeeded_count = R"sql(
SELECT count(*) FILTER (WHERE status IN ('succeeded', 'stopped')),
       count(*) FILTER (WHERE attempt > 1),
       count(*)
  FROM taskmill.tasks WHERE type = ANY ($1::text[])
)sql";

// What the bench polls while a node works: read through the index of
// finished tasks from $2 on, so that watching costs the node next to nothing
// (counting over the whole table would take a core of its own with a large
// backlog, and over every finished task one beside a long history).
const char* const finished_count = R"sql(
SELECT count(*) FROM taskmill.tasks
 WHERE status IN ('succeeded', 'stopped') AND type = ANY ($1::text[])
   AND updated_at >= $2::timestamptz
)sql";

const char* const seconds_to_last_completion = R"sql(
SELECT extract(epoch FROM max(updated_at) - $2::timestamptz)::float8
  FROM taskmill.tasks WHERE type = $1 AND status IN ('succeeded', 'stopped')
)sql";

const char* const claim_window = R"sql(
SELECT extract(epoch FROM max(updated_at) - min(started_at))::float8, count(*)
  FROM taskmill.tasks WHERE type = ANY ($1::text[]) AND status IN ('succeeded', 'stopped')
)sql";

const char* const claim_to_outcome = R"sql(
SELECT avg(extract(epoch FROM updated_at - started_at))::float8
  FROM taskmill.tasks WHERE type = ANY ($1::text[]) AND status IN ('succeeded', 'stopped')
)sql";

const char* const start_times =
    "SELECT key, (result->>'started_at_us')::float8 / 1e6 FROM taskmill.tasks WHERE type = $1";

const char* const submit_reporting_start =
    "SELECT (taskmill.submit($1, $2, payload => '{\"report_start\": true}')).outcome";

const char* const submit_one = "SELECT (taskmill.submit($1, $2)).outcome";

const char* const submit_for_tenant =
    "SELECT (taskmill.submit($1, $2, payload => jsonb_build_object('tenant', $3::text))).outcome";

const char* const waiting_by_prefix = R"sql(
SELECT count(*) FROM taskmill.tasks WHERE key LIKE $1 || '%' AND status IN ('pending', 'failed')
)sql";

// Of the tasks whose key starts with $1: how many started, and each one's
// pickup latency (created to started) in ms, by the database clock.
const char* const pickup_by_prefix = R"sql(
SELECT extract(epoch FROM started_at - created_at) * 1000 FROM taskmill.tasks
 WHERE key LIKE $1 || '%' AND started_at IS NOT NULL
)sql";

// Each submit finds the one before by its (type, key): submitted earlier in
// the same statement, it is there to be found.
const char* const submit_chain = R"sql(
SELECT count(*) FROM (
  SELECT taskmill.submit($1, 'chain-' || g,
           after => CASE WHEN g > 1 THEN jsonb_build_array(jsonb_build_object(
                                           'type', $1::text, 'key', 'chain-' || (g - 1))) END)
    FROM generate_series(1, $2::int) g) s
)sql";

const char* const submit_fan_out = R"sql(
SELECT count(*) FROM (
  SELECT taskmill.submit($1, 'fan-root')
  UNION ALL
  SELECT taskmill.submit($1, 'fan-' || g,
           after => jsonb_build_array(jsonb_build_object('type', $1::text, 'key', 'fan-root')))
    FROM generate_series(1, $2::int) g) s
)sql";

const char* const submit_fan_in = R"sql(
SELECT (taskmill.submit($1, 'fan-in', after => (
          SELECT jsonb_agg(jsonb_build_object('type', $1::text, 'key', 'fan-' || g))
            FROM generate_series(1, $2::int) g))).outcome
)sql";

const char* const chain_seconds = R"sql(
SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8
  FROM taskmill.tasks WHERE type = $1 AND status = 'succeeded'
)sql";

const char* const fan_seconds = R"sql(
SELECT extract(epoch FROM c.last - r.finished_at)::float8,
       extract(epoch FROM i.started_at - c.last)::float8
  FROM (SELECT max(finished_at) AS last FROM taskmill.tasks
         WHERE type = $1 AND key NOT IN ('fan-root', 'fan-in')) c,
       taskmill.tasks r, taskmill.tasks i
 WHERE r.type = $1 AND r.key = 'fan-root' AND i.type = $1 AND i.key = 'fan-in'
)sql";

const char* const submit_talking = R"sql(
SELECT count(*) FROM generate_series(1, $2::int) g,
  taskmill.submit($1, 'talk-' || g, payload => jsonb_build_object('ms', $3::int),
                  timeout_ms => $3::int * 2)
)sql";

const char* const running_ids = R"sql(
SELECT id FROM taskmill.tasks WHERE type = $1 AND status = 'running' ORDER BY id
)sql";

const char* const track_function_calls = "ALTER SYSTEM SET track_functions = 'all'";
const char* const untrack_function_calls = "ALTER SYSTEM RESET track_functions";
const char* const reload_configuration = "SELECT pg_reload_conf()";

const char* const progress_statements = R"sql(
SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_user_functions
 WHERE schemaname = 'taskmill' AND funcname = 'report_progress'
)sql";

const char* const flush_statistics = "SELECT pg_stat_force_next_flush()";

const char* const claim_function_times = R"sql(
SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions
 WHERE schemaname = 'taskmill'
)sql";

const char* const cancel_type = R"sql(
SELECT count(*) FROM taskmill.tasks t, taskmill.cancel(t.id)
 WHERE t.type = $1 AND t.status IN ('pending', 'running')
)sql";

const char* const soak_pickups = R"sql(
SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY l.ms), 0),
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY l.ms), 0), count(*)
  FROM (SELECT extract(epoch FROM t.started_at - t.execute_at) * 1000 AS ms
          FROM taskmill.tasks t
         WHERE t.started_at > now() - make_interval(secs => $1::double precision)) l
)sql";

const char* const soak_table = R"sql(
SELECT sum(pg_relation_size(s.relid))::bigint, sum(pg_indexes_size(s.relid))::bigint,
       sum(s.n_live_tup)::bigint, sum(s.n_dead_tup)::bigint, sum(s.autovacuum_count)::bigint,
       sum(s.autoanalyze_count)::bigint
  FROM pg_stat_user_tables s
 WHERE s.relid IN (SELECT p.relid FROM pg_partition_tree('taskmill.tasks') p WHERE p.isleaf)
)sql";

// Whether the schema keeps stopped tasks by day, and the table of the day
// $1 days ago (UTC).
const char* const keeps_stopped_days =
    "SELECT to_regproc('taskmill.make_stopped_days') IS NOT NULL";

const char* const make_stopped_day =
    "SELECT taskmill.make_stopped_days(d, d) "
    "FROM (SELECT (now() AT TIME ZONE 'UTC')::date - $1::integer AS d) x";

// $2 tasks of type $1 (keys $3 || g) that succeeded and stopped $4 days ago
// (UTC: an hour into that day, a millisecond apart), one in ten after a
// failed attempt; their keys as a submit writes them (the table's trigger).
const char* const load_stopped = R"sql(
WITH stopped AS (
  INSERT INTO taskmill.tasks (type, key, execute_at, trace_id, priority, max_retries, timeout_ms,
                              backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter,
                              status, attempt, picked_by, started_at, finished_at, updated_at)
  SELECT $1, $3 || g, a.at, md5(g::text), 3, s.max_retries, s.timeout_ms, s.backoff_kind,
         s.backoff_base_ms, s.backoff_cap_ms, s.backoff_jitter, 'stopped',
         CASE WHEN g % 10 = 0 THEN 2 ELSE 1 END, 'purge', a.at, a.at, a.at
    FROM generate_series(1, $2::integer) g, taskmill.type_settings($1) s,
         LATERAL (SELECT ((now() AT TIME ZONE 'UTC')::date - $4::integer)::timestamp
                         AT TIME ZONE 'UTC' + interval '1 hour' + g * interval '1 ms' AS at) a
  RETURNING id, attempt, updated_at)
INSERT INTO taskmill.attempts (task_id, attempt, node, started_at, finished_at, outcome, error)
SELECT p.id, 1, 'purge', p.updated_at, p.updated_at, 'failed', 'boom'
  FROM stopped p WHERE p.attempt = 2
)sql";

// The lead, taken for the bench's own sweeps (its term), and given up.
const char* const seize_lead =
    "UPDATE taskmill.leadership SET node = 'bench', incarnation = 'bench', term = term + 1, "
    "expires_at = now() + interval '1 day' RETURNING term";

const char* const give_up_lead = "UPDATE taskmill.leadership SET expires_at = now()";

// One sweep of the leader's purge, as its watcher makes it ($1 the purge
// retention in ms, $2 its batch, $3 the term).
const char* const purge_sweep = "SELECT taskmill.sweep_purge($1::bigint, $2::integer, $3::bigint)";

const char* const wal_position = "SELECT pg_current_wal_lsn()::text";

const char* const wal_since = "SELECT (pg_current_wal_lsn() - $1::pg_lsn)::bigint";

}  // namespace taskmill::db::bench_sql
