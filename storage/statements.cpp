#include "storage/statements.hpp"

#include <cctype>

namespace taskmill::db::sql {

const statement submit_batch{
    "submit_batch",
    "SELECT * FROM taskmill.submit_batch($1::text[], $2::text[], "
    "$3::bigint[], $4::jsonb[], $5::timestamptz[], $6::int[], $7::int[], $8::int[], $9::text[], "
    "$10::int[], $11::int[], $12::real[], $13::text[], $14::text[], $15::int[], $16::int[], "
    "$17::jsonb[], $18::text[], $19::text[])"};

const statement reschedule{
    "reschedule",
    "SELECT r.outcome, (r.task).* FROM taskmill.reschedule($1::text, $2::text, $3::timestamptz, "
    "$4::jsonb) r"};

const statement cancel_by_id{"cancel_by_id",
                             "SELECT c.outcome, (c.task).* FROM taskmill.cancel($1::bigint) c"};

const statement cancel_by_key{
    "cancel_by_key", "SELECT c.outcome, (c.task).* FROM taskmill.cancel($1::text, $2::text) c"};

// A claim's tasks are taskmill.running_task rows (storage/sql/claim.sql),
// with the claim's time, in microseconds worked out once for all rows: a
// timestamp a row would cost the server its text form at every row.
#define TASKMILL_CLAIMED_AT \
  "(SELECT (extract(epoch FROM now()) * 1000000)::bigint) AS claimed_at_us"
// Whether the database keys a type the claim is for ($7: the node's types,
// NULL: any), whatever the node's config says: asked once a claim, in the
// statement rather than in taskmill.running_task, whose shape the prepared
// claims of a node of the release before depend on.
#define TASKMILL_KEYED \
  "(SELECT cardinality(k.types) > 0 FROM taskmill.keyed_types($7::text[]) k) AS keyed"

const statement claim{
    "claim", "SELECT c.*, " TASKMILL_CLAIMED_AT ", " TASKMILL_KEYED
             " FROM taskmill.claim_by_turns($1::text, $2::int, $3::int[], $4::text[], $5::int[], "
             "$6::int, $7::text[], $8::text[], $9::int[], $10::boolean) c"};

// Its tasks, and with each (or alone, when it took none) how many of the
// offer's permits submits took unheard.
const statement claim_taking_offer_back{
    "claim_taking_offer_back",
    "SELECT (c.task).*, c.handed_unheard, " TASKMILL_CLAIMED_AT ", " TASKMILL_KEYED
    " FROM taskmill.claim_taking_offer_back($1::text, $2::int, $3::int[], $4::text[], "
    "$5::int[], $6::int, $7::text[], $8::text[], $9::int[], $10::boolean, $11::int) c"};

#undef TASKMILL_CLAIMED_AT
#undef TASKMILL_KEYED

const statement offer_permits{
    "offer_permits",
    "SELECT taskmill.offer_permits($1::text, $2::text[], $3::int, $4::bigint, $5::int)"};

const statement add_to_offer{"add_to_offer",
                             "SELECT taskmill.add_to_offer($1::text, $2::bigint, $3::int)"};

const statement withdraw_offer{"withdraw_offer",
                               "SELECT taskmill.withdraw_offer($1::text, $2::int)"};

const statement next_due{"next_due",
                         "SELECT due_now, next_due_at, db_now "
                         "FROM taskmill.next_due_times($1::text[], $2::bigint, $3::text)"};

const statement complete_many{
    "complete_many",
    "SELECT * FROM taskmill.complete_many($1::bigint[], $2::int[], $3::text[], $4::jsonb[], "
    "$5::text[], $6::text)"};

const statement get_task{"get_task", "SELECT * FROM taskmill.task_by_id($1::bigint)"};

const statement task_relatives{
    "task_relatives",
    "SELECT array_to_string(ARRAY(SELECT e.parent_id FROM taskmill.task_edges e "
    "WHERE e.child_id = $1::bigint ORDER BY e.parent_id LIMIT 100), ','), "
    "array_to_string(ARRAY(SELECT e.child_id FROM taskmill.task_edges e "
    "WHERE e.parent_id = $1::bigint ORDER BY e.child_id LIMIT 100), ',')"};

const statement submit_batch_with_callbacks{
    "submit_batch_with_callbacks",
    "SELECT * FROM taskmill.submit_batch_with_callbacks($1::text[], $2::text[], $3::bigint[], "
    "$4::jsonb[], $5::timestamptz[], $6::int[], $7::int[], $8::int[], $9::text[], $10::int[], "
    "$11::int[], $12::real[], $13::text[], $14::text[], $15::int[], $16::int[], $17::jsonb[], "
    "$18::text[], $20::jsonb, $21::jsonb, $19::text[])"};

// $1..$5: the workflow's name, key, step names, shards and the lease (ms);
// the tasks as submit_batch takes them.
const statement submit_workflow{
    "submit_workflow",
    "SELECT outcome, workflow_id FROM taskmill.submit_workflow($1::text, $2::text, $3::text[], "
    "$4::int[], $5::bigint, $6::text[], $7::text[], $8::bigint[], $9::jsonb[], "
    "$10::timestamptz[], $11::int[], $12::int[], $13::int[], $14::text[], $15::int[], $16::int[], "
    "$17::real[], $18::text[], $19::text[], $20::int[], $21::int[], $22::jsonb[], $23::text[], "
    "$24::text[])"};

const statement workflow_summary{"workflow_summary",
                                 "SELECT * FROM taskmill.workflow_summary($1::bigint) WHERE id "
                                 "IS NOT NULL"};

const statement workflow_tasks{"workflow_tasks",
                               "SELECT * FROM taskmill.workflow_tasks($1::bigint)"};

const statement workflow_edges{"workflow_edges",
                               "SELECT * FROM taskmill.workflow_edges($1::bigint)"};

// $1: at most how many, $2: older than this id (NULL: the newest).
const statement list_workflows{
    "list_workflows",
    "SELECT s.* FROM (SELECT w.id FROM taskmill.workflows w WHERE $2::bigint IS NULL OR w.id < "
    "$2::bigint ORDER BY w.id DESC LIMIT $1::int) w, LATERAL taskmill.workflow_summary(w.id) s "
    "ORDER BY s.id DESC"};

const statement cancel_workflow{"cancel_workflow", "SELECT taskmill.cancel_workflow($1::bigint)"};

const statement retry_workflow{"retry_workflow", "SELECT taskmill.retry_workflow($1::bigint)"};

const statement running_on_node{
    "running_on_node",
    "SELECT id, attempt FROM taskmill.tasks WHERE status = 'running' AND picked_by = $1::text"};

// The timeout is what is left of it by the database's clock: the watcher
// times an attempt out from its start, the claim that was lost.
const statement still_running{
    "still_running",
    "SELECT t.id, t.type, t.key, t.version, t.status, t.priority, t.payload, t.attempt, "
    "t.retry_count, t.max_retries, ceil(t.timeout_ms - extract(epoch FROM now() - t.started_at) * "
    "1000)::int AS timeout_ms, t.error, t.batch, t.shard_index, t.shard_total, t.trace_id, "
    "t.picked_by, t.execute_at, t.started_at FROM unnest($1::bigint[], $2::int[]) AS e(id, "
    "attempt) JOIN taskmill.tasks t ON t.id = e.id AND t.attempt = e.attempt WHERE t.status = "
    "'running' AND t.started_at + t.timeout_ms * interval '1 ms' > now() ORDER BY t.id"};

const statement waiting_reason{"waiting_reason",
                               "SELECT reason, message, until, array_to_string(parents, ',') "
                               "FROM taskmill.waiting_reason($1::bigint, $2::bigint, "
                               "$3::bigint, $4::int, $5::int[])"};

const statement put_type_settings{
    "put_type_settings",
    "SELECT taskmill.put_type_settings($1::text[], $2::int[], $3::int[], $4::text[], $5::int[], "
    "$6::int[], $7::real[], $8::bigint[], $9::int[], $10::bigint[], $11::int[], $12::int, "
    "$13::jsonb, $14::text[], $15::text[], $16::text[], $17::int[])"};

// A page of tasks newest first (storage/sql/task_reads.sql): $7 is how many
// tasks before the page token it reads at most when it scans them.
const statement list_tasks{
    "list_tasks",
    "SELECT (p.task).*, p.scan_last, p.scan_rows FROM taskmill.tasks_before($1::text, $2::text, "
    "$3::taskmill.task_status, $4::text, $5::bigint, $6::int, $7::int) p "
    "ORDER BY (p.task).id DESC"};

const statement list_unit_tasks{
    "list_unit_tasks",
    "SELECT * FROM taskmill.unit_tasks_before($1::text, $2::text, $3::taskmill.task_status, "
    "$4::text, $5::bigint, $6::int)"};

const statement task_attempts{"task_attempts", "SELECT * FROM taskmill.task_attempts($1::bigint)"};

const statement retry_task{"retry_task", "SELECT * FROM taskmill.retry($1::bigint)"};

const statement batch_counts{"batch_counts",
                             "SELECT status, n, processed, failed FROM taskmill.batch_counts($1)"};

const statement retry_batch{"retry_batch", "SELECT taskmill.retry_batch($1)"};

// $1: up to how many rows in the table, and how many waiting tasks, they
// are counted exactly.
const statement finished_counts{
    "finished_counts",
    "SELECT type, status, n, estimated FROM taskmill.finished_counts($1::bigint, $2::boolean)"};

// $1: how long a node may be silent before it counts as dead, in ms.
const statement list_nodes{
    "list_nodes",
    "SELECT n.name, n.address, n.started_at, n.heartbeat_at, CASE WHEN n.stopped_at IS NOT NULL "
    "OR n.heartbeat_at < now() - $1::bigint * interval '1 ms' THEN 'dead' WHEN n.leader THEN "
    "'leader' ELSE 'follower' END, (SELECT count(*) FROM taskmill.tasks t WHERE t.status = "
    "'running' AND t.picked_by = n.name) FROM taskmill.nodes n ORDER BY n.name"};

const statement register_node{"register_node",
                              "SELECT taskmill.register_node($1, $2, $3, $4::bigint, $5::text[])"};

const statement heartbeat{"heartbeat", "SELECT taskmill.heartbeat($1, $2, $3::boolean)"};

const statement lead{"lead", "SELECT taskmill.lead($1, $2, $3::boolean, $4::bigint)"};

// $1: up to how many waiting tasks they are counted exactly.
const statement live_counts{
    "live_counts", "SELECT type, status, n, estimated FROM taskmill.live_counts($1::bigint)"};

const statement key_use{"key_use",
                        "SELECT space, key, running, key_limit FROM taskmill.key_use($1::int)"};

const statement add_outcomes{
    "add_outcomes", "SELECT taskmill.add_outcomes($1, $2::bigint, $3::bigint, $4::bigint)"};

const statement recent_outcomes{
    "recent_outcomes",
    "SELECT minute, succeeded, retried, failed FROM taskmill.recent_outcomes($1::int)"};

const statement leave{"leave",
                      "SELECT taskmill.stop_node($1, $2), taskmill.lead($1, $2, false, 0)"};

const statement sweep_lost{"sweep_lost",
                           "SELECT taskmill.sweep_lost($1::bigint, $2::int, $3::bigint)"};
const statement sweep_timeouts{"sweep_timeouts",
                               "SELECT taskmill.sweep_timeouts($1::bigint, $2::int, $3::bigint)"};
const statement sweep_silent{"sweep_silent", "SELECT taskmill.sweep_silent($1::int, $2::bigint)"};
const statement sweep_deadlines{"sweep_deadlines",
                                "SELECT taskmill.sweep_deadlines($1::int, $2::bigint)"};
const statement sweep_succeeded{"sweep_succeeded",
                                "SELECT taskmill.sweep_succeeded($1::bigint, $2::int, $3::bigint)"};
const statement sweep_repin{"sweep_repin",
                            "SELECT taskmill.sweep_repin($1::bigint, $2::int, $3::bigint)"};

const statement sweep_running_tally{"sweep_running_tally",
                                    "SELECT taskmill.sweep_running_tally($1::bigint)"};
const statement sweep_purge{"sweep_purge",
                            "SELECT taskmill.sweep_purge($1::bigint, $2::int, $3::bigint)"};

const statement finished_executions{
    "finished_executions",
    "SELECT task_id, attempt FROM taskmill.finished_executions($1::bigint[], $2::int[])"};

const statement report_progress{
    "report_progress",
    "SELECT task_id, applied FROM taskmill.report_progress($1::bigint[], $2::int[], $3::real[], "
    "$4::bigint[], $5::bigint[], $6::text[], $7::bigint[])"};

const statement task_progress{
    "task_progress",
    "SELECT attempt, progress, processed, failed, message, reported_at, deadline_at "
    "FROM taskmill.task_progress WHERE task_id = $1::bigint"};

const statement append_logs{
    "append_logs",
    "SELECT task_id, attempt FROM taskmill.append_logs($1::bigint[], $2::int[], $3::text[])"};

const statement attempt_log{
    "attempt_log",
    "SELECT l.id, l.attempt, l.logged_at, l.line FROM taskmill.attempt_log($1::bigint, $2::bigint, "
    "$3::int) l"};

const statement task_status{"task_status",
                            "SELECT status::text FROM taskmill.task_by_id($1::bigint)"};

const statement attempt_deadline{"attempt_deadline",
                                 "SELECT taskmill.attempt_deadline($1::bigint, $2::int)"};

const statement take_cancels{
    "take_cancels",
    "SELECT * FROM taskmill.take_cancels($1::text, $2::text[], $3::bigint, $3::bigint)"};

const statement cancels_told{"cancels_told",
                             "SELECT taskmill.cancels_told($1::bigint[], $2::integer[])"};

std::string compensation_sql(const std::string& query) {
  auto body = query;
  while (!body.empty() &&
         (std::isspace(static_cast<unsigned char>(body.back())) || body.back() == ';'))
    body.pop_back();
  return "WITH missing AS (SELECT r.key::text AS key, r.execute_at::timestamptz AS execute_at, "
         "r.payload::jsonb AS payload FROM (" +
         body +
         "\n) r WHERE NOT EXISTS (SELECT 1 FROM taskmill.task_keys k JOIN taskmill.tasks t ON t.id "
         "= k.task_id WHERE k.type = $1 AND k.key = r.key::text AND t.status <> 'dead') LIMIT "
         "$2::int) "
         "SELECT count(*) FILTER (WHERE s.outcome IN ('created', 'replaced')) FROM (SELECT "
         "taskmill.fence($3::bigint)) f, missing m CROSS JOIN LATERAL taskmill.submit($1, m.key, "
         "0, "
         "coalesce(m.payload, '{}'), coalesce(m.execute_at, now())) s";
}

// -- recurring jobs (storage/sql/jobs.sql) --------------------------------------

// Key spaces (storage/sql/key_spaces.sql).
const statement key_space_views{"key_space_views",
                                "SELECT * FROM taskmill.key_space_views($1::text)"};
const statement top_keys{"top_keys", "SELECT * FROM taskmill.top_keys($1::text, $2::int, $3::int)"};
const statement key_view{"key_view",
                         "SELECT * FROM taskmill.key_view($1::text, $2::text, $3::int)"};
const statement key_tasks{"key_tasks",
                          "SELECT * FROM taskmill.key_tasks($1::text, $2::text, $3::int)"};
const statement put_key_space{"put_key_space", "SELECT taskmill.put_key_space($1::jsonb)"};
const statement delete_key_space{
    "delete_key_space",
    "SELECT deleted, array_to_string(types, ', ') FROM taskmill.delete_key_space($1::text)"};

const statement put_job{
    "put_job",
    "SELECT p.created, (p.job).* FROM taskmill.put_job($1::text, $2::text, $3::text, $4::text, "
    "$5::jsonb, $6::int, $7::int, $8::int, $9::text, $10::int, $11::int, $12::real, $13::boolean, "
    "$14::text, $15::int, $16::text, $17::text, $18::int, $19::text, $20::text, $21::timestamptz, "
    "$22::timestamptz, $23::text, $24::text[], $25::text[], $26::jsonb, $27::jsonb, $28::text[]) "
    "p"};

const statement put_job_problem{
    "put_job_problem",
    "SELECT taskmill.put_job_problem($1::text, $2::text, $3::text, $4::text, $5::jsonb, $6::int, "
    "$7::int, $8::int, $9::text, $10::int, $11::int, $12::real, $13::boolean, $14::text, "
    "$15::int, $16::text, $17::text, $18::int, $19::text, $20::text, $21::timestamptz, "
    "$22::timestamptz, $23::text, $24::text[], $25::text[], $26::jsonb, $27::jsonb, $28::text[])"};

const statement get_job{"get_job",
                        "SELECT false AS created, j.* FROM taskmill.jobs j WHERE j.name = $1"};

const statement list_jobs{"list_jobs",
                          "SELECT false AS created, j.* FROM taskmill.jobs j ORDER BY j.name"};

const statement delete_job{"delete_job", "SELECT taskmill.delete_job($1::text)"};

const statement set_job_enabled{
    "set_job_enabled",
    "SELECT false AS created, j.* FROM taskmill.set_job_enabled($1::text, $2::boolean, "
    "$3::timestamptz) j"};

const statement trigger_job{
    "trigger_job",
    "SELECT t.fire_at, t.outcome, t.batch FROM taskmill.trigger_job($1::text, $2::jsonb, "
    "$3::bigint) t"};

const statement job_firings{
    "job_firings",
    "SELECT fire_at, kind, outcome, batch, status, n, parent_job, parent_fire_at "
    "FROM taskmill.job_firings($1::text, $2::int)"};

const statement due_jobs{
    "due_jobs",
    "SELECT name, schedule, time_zone, misfire, catch_up_limit, next_fire_at, anchor_at, now, "
    "dialect FROM taskmill.due_jobs($1::int)"};

const statement next_job_due{"next_job_due", "SELECT taskmill.next_job_due_in_ms()"};

const statement job_metrics{
    "job_metrics",
    "SELECT name, outcome, n, last_fire_at, next_fire_at FROM taskmill.job_metrics()"};

const statement fire_jobs{
    "fire_jobs",
    "SELECT job, fire_at, outcome, batch FROM taskmill.fire_jobs($1::text[], $2::timestamptz[], "
    "$3::text[], $4::boolean[], $5::timestamptz[], $6::timestamptz[], $7::bigint, $8::bigint)"};

// -- alerts (storage/sql/alerts.sql) -------------------------------------------------

const statement raise_alerts{
    "raise_alerts",
    "SELECT a.* FROM taskmill.raise_alerts($1::jsonb, $2::text[], $3::int, $4::boolean, "
    "$5::bigint) a"};

const statement take_alert_deliveries{
    "take_alert_deliveries",
    "SELECT d.url, d.attempts, (d.alert).* FROM taskmill.take_alert_deliveries($1::int, "
    "$2::bigint, $3::bigint) d"};

const statement record_alert_deliveries{
    "record_alert_deliveries",
    "SELECT taskmill.record_alert_deliveries($1::bigint[], $2::text[], $3::text[], $4::int, "
    "$5::bigint, $6::bigint)"};

const statement list_alerts{
    "list_alerts",
    "SELECT (l.alert).*, l.url, l.attempts AS delivery_attempts, l.next_at, l.delivered_at, "
    "l.last_error FROM taskmill.list_alerts($1::bigint, $2::timestamptz, $3::int) l"};

const statement alert_metrics{"alert_metrics",
                              "SELECT what, name, n FROM taskmill.alert_metrics()"};

const std::vector<const statement*>& all() {
  static const std::vector<const statement*> list{
      &submit_batch,
      &reschedule,
      &cancel_by_id,
      &cancel_by_key,
      &claim,
      &claim_taking_offer_back,
      &next_due,
      &offer_permits,
      &add_to_offer,
      &withdraw_offer,
      &complete_many,
      &get_task,
      &task_relatives,
      &submit_batch_with_callbacks,
      &submit_workflow,
      &workflow_summary,
      &workflow_tasks,
      &workflow_edges,
      &list_workflows,
      &cancel_workflow,
      &retry_workflow,
      &running_on_node,
      &still_running,
      &live_counts,
      &key_use,
      &add_outcomes,
      &recent_outcomes,
      &waiting_reason,
      &put_type_settings,
      &list_tasks,
      &list_unit_tasks,
      &task_attempts,
      &retry_task,
      &batch_counts,
      &retry_batch,
      &finished_counts,
      &list_nodes,
      &register_node,
      &heartbeat,
      &lead,
      &leave,
      &sweep_lost,
      &sweep_timeouts,
      &sweep_silent,
      &sweep_deadlines,
      &sweep_succeeded,
      &sweep_purge,
      &sweep_repin,
      &sweep_running_tally,
      &finished_executions,
      &take_cancels,
      &cancels_told,
      &report_progress,
      &task_progress,
      &attempt_deadline,
      &append_logs,
      &attempt_log,
      &task_status,
      &key_space_views,
      &top_keys,
      &key_view,
      &key_tasks,
      &put_key_space,
      &delete_key_space,
      &put_job,
      &put_job_problem,
      &get_job,
      &list_jobs,
      &delete_job,
      &set_job_enabled,
      &trigger_job,
      &job_firings,
      &due_jobs,
      &next_job_due,
      &fire_jobs,
      &job_metrics,
      &raise_alerts,
      &take_alert_deliveries,
      &record_alert_deliveries,
      &list_alerts,
      &alert_metrics,
  };
  return list;
}

}  // namespace taskmill::db::sql
