#pragma once

// The statements `taskmill bench` runs itself: the raw-SQL ceiling (the same
// insert -> claim -> complete work as the node's, as plain batched SQL on a
// table of its own), the backlog it loads, and what it reads to check and
// time the node's work. Times come from the database clock, as the node's do.

namespace taskmill::db::bench_sql {

/// A minimal job table with the claim index a queue needs.
extern const char* const create_raw_table;
/// $1: how many jobs to insert.
extern const char* const raw_insert;
/// $1: worker name, $2: batch size. Answers the claimed ids.
extern const char* const raw_claim;
/// $1: ids as an array literal. Answers how many were completed.
extern const char* const raw_complete;
/// $1: a payload. One job, as one autocommit statement: the ceiling of
/// one-task submits.
extern const char* const raw_insert_one;
/// The channel raw jobs' inserts notify.
extern const char* const raw_channel;
/// $1: a payload, $2: the channel. One job and a NOTIFY, as one autocommit
/// statement. Answers its id.
extern const char* const raw_insert_one_notify;
/// Answers the number of jobs not succeeded.
extern const char* const raw_unfinished;
extern const char* const raw_reset;
extern const char* const vacuum_raw;

/// Removes every task and attempt: the bench database is its own.
extern const char* const reset_tasks;
extern const char* const vacuum_tasks;
/// The statistics of the task tables, as autovacuum would keep them.
extern const char* const analyze_tasks;
/// The nodes of earlier incarnations, gone as the purge forgets them.
extern const char* const forget_stopped_nodes;
/// Needs superuser or pg_checkpoint; the bench goes on without it.
extern const char* const checkpoint;
/// How many autovacuum workers are at work now.
extern const char* const autovacuum_workers;
/// $1: type, $2: how many, $3: key prefix. Due tasks, loaded directly.
extern const char* const load_backlog;
/// $1: types (text[]), $2: how many, $3: key prefix. Due tasks spread evenly
/// over the types and the five priorities.
extern const char* const load_mixed_backlog;
extern const char* const load_keyed_backlog;
extern const char* const submit_for_tenant;
extern const char* const pickup_by_prefix;
/// Tasks whose key starts with $1 waiting to run.
extern const char* const waiting_by_prefix;
/// $1: type, $2: how many. Tasks due days later: a calendar.
extern const char* const load_calendar;
/// $1: type, $2: how many, $3: how many were loaded before, $4: all of
/// them. Tasks that succeeded over the last day, as a long-lived table holds
/// them, loaded in parts.
extern const char* const load_history;
/// $1: how many days. The tables of the days before today that a purge
/// retention of that many days keeps stopped tasks in.
extern const char* const make_past_days;
/// The id of the newest task that succeeded (0: none).
extern const char* const newest_succeeded;
/// $1: types (text[]). Removes their tasks and attempts, keeping the rest.
extern const char* const delete_types;
/// A vacuum of the live tasks alone.
extern const char* const vacuum_live_tasks;
/// $1: type, $2: how many. A chain of tasks (keys chain-1, chain-2, ...),
/// each submitted after the one before.
extern const char* const submit_chain;
/// $1: type, $2: how many. A root (key fan-root), that many children after
/// it (fan-1, fan-2, ...), and one task after all of them (fan-in).
extern const char* const submit_fan_out;
extern const char* const submit_fan_in;
/// $1: type. Seconds from the chain's first start to its last finish.
extern const char* const chain_seconds;
/// $1: type. Seconds from the root's finish to the children's last finish,
/// and from that to the fan-in task's start.
extern const char* const fan_seconds;
/// $1: type, $2: how many, $3: how long each runs (ms). Tasks of the
/// progress measurement, each running long enough to report for the whole
/// measurement.
extern const char* const submit_talking;
/// $1: type. The ids of its running tasks.
extern const char* const running_ids;
/// Counts the calls of the functions of taskmill (superuser: the bench's
/// own PostgreSQL); the count lags a second behind.
extern const char* const track_function_calls;
extern const char* const untrack_function_calls;
extern const char* const reload_configuration;
/// The session's statistics flushed at its next idle moment, not up to a
/// second later: so that what it just did is counted before what follows.
extern const char* const flush_statistics;
/// Calls of taskmill.report_progress so far, as the statistics know them.
// Calls and milliseconds, in all and in itself, of each taskmill function
// (track_functions = 'all').
extern const char* const claim_function_times;
extern const char* const progress_statements;
/// $1: type. Cancels its tasks (the node stops their executions).
extern const char* const cancel_type;

/// The database's clock now.
extern const char* const now;
/// $1: types (text[]). Answers succeeded count, count of tasks claimed more
/// than once, and the count of all tasks of the types.
extern const char* const succeeded_count;
/// $1: types (text[]), $2: a time. Their tasks that succeeded (or stopped)
/// since then.
extern const char* const finished_count;
/// $1: type, $2: a start time. Seconds from it to the last completion.
extern const char* const seconds_to_last_completion;
/// $1: types (text[]). Seconds from the first claim to the last completion,
/// and the number of succeeded tasks in between.
extern const char* const claim_window;
/// $1: types (text[]). Seconds from a task's claim to its outcome's start
/// (started_at to updated_at), on average over the finished tasks.
extern const char* const claim_to_outcome;
/// $1: type. Each task's key and when the noop executor ran it, in seconds
/// since the epoch by the node's clock (the bench's host and clock).
extern const char* const start_times;
/// $1: type, $2: key. As submit_one, for a noop that reports when it ran.
extern const char* const submit_reporting_start;
/// $1: type, $2: key. A task submitted by the rules, as a business service would.
extern const char* const submit_one;

/// $1: seconds. The soak's pickup latencies (ms, due to started) of the
/// attempts started in the last $1 seconds: p50, p99, how many.
extern const char* const soak_pickups;
/// The soak's look at the tasks table: its heap and its indexes (bytes),
/// live and dead tuples, autovacuum and autoanalyze runs so far.
extern const char* const soak_table;
/// The purge phase: whether the schema keeps stopped tasks by day, the table
/// of the day $1 days ago, $2 stopped tasks of type $1 loaded as of $4 days
/// ago (keys $3 || g), the lead taken and given up, a sweep of the purge,
/// the WAL's position and the bytes written since one.
extern const char* const keeps_stopped_days;
extern const char* const seize_lead;
extern const char* const give_up_lead;
extern const char* const make_stopped_day;
extern const char* const load_stopped;
extern const char* const purge_sweep;
extern const char* const wal_position;
extern const char* const wal_since;

}  // namespace taskmill::db::bench_sql
