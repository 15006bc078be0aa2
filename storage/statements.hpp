#pragma once

// Every SQL statement a node runs, by name. They are prepared on each
// connection; the rules themselves live in the migrations' SQL functions.

#include "storage/pg.hpp"

#include <string>
#include <vector>

namespace taskmill::db::sql {

extern const statement submit_batch;
extern const statement reschedule;
extern const statement cancel_by_id;
extern const statement cancel_by_key;
extern const statement claim;
extern const statement claim_taking_offer_back;
extern const statement next_due;
extern const statement offer_permits;
extern const statement add_to_offer;
extern const statement withdraw_offer;
extern const statement complete_many;
extern const statement get_task;
/// $1: a task id. Its parents' and its children's ids (the first 100 of
/// each), joined by commas.
extern const statement task_relatives;
extern const statement submit_batch_with_callbacks;
extern const statement submit_workflow;
extern const statement workflow_summary;
extern const statement workflow_tasks;
extern const statement workflow_edges;
extern const statement list_workflows;
extern const statement cancel_workflow;
extern const statement retry_workflow;
extern const statement running_on_node;
extern const statement still_running;
extern const statement live_counts;
extern const statement key_use;
extern const statement add_outcomes;
extern const statement recent_outcomes;
extern const statement waiting_reason;
extern const statement put_type_settings;
extern const statement key_space_views;
extern const statement top_keys;
extern const statement key_view;
extern const statement key_tasks;
extern const statement put_key_space;
extern const statement delete_key_space;
extern const statement put_job;
extern const statement put_job_problem;
extern const statement get_job;
extern const statement list_jobs;
extern const statement delete_job;
extern const statement set_job_enabled;
extern const statement trigger_job;
extern const statement job_firings;
extern const statement due_jobs;
extern const statement next_job_due;
extern const statement fire_jobs;
extern const statement job_metrics;
extern const statement raise_alerts;
extern const statement take_alert_deliveries;
extern const statement record_alert_deliveries;
extern const statement list_alerts;
extern const statement alert_metrics;
extern const statement list_tasks;
extern const statement list_unit_tasks;
extern const statement task_attempts;
extern const statement retry_task;
extern const statement batch_counts;
extern const statement retry_batch;
extern const statement finished_counts;
extern const statement list_nodes;
extern const statement register_node;
extern const statement heartbeat;
extern const statement lead;
extern const statement leave;
extern const statement sweep_lost;
extern const statement sweep_timeouts;
extern const statement sweep_silent;
extern const statement sweep_deadlines;
extern const statement sweep_succeeded;
extern const statement sweep_running_tally;
extern const statement sweep_purge;
extern const statement sweep_repin;
extern const statement finished_executions;
extern const statement take_cancels;
extern const statement cancels_told;
extern const statement report_progress;
extern const statement task_progress;
extern const statement attempt_deadline;
extern const statement append_logs;
extern const statement attempt_log;
extern const statement task_status;

/// The statement of a compensation rule: rows of `query` (key, execute_at,
/// payload) without a live task of type $1 are submitted, at most $2 of them;
/// answers how many were created or re-armed.
std::string compensation_sql(const std::string& query);

/// All of the above, to prepare on connect.
const std::vector<const statement*>& all();

}  // namespace taskmill::db::sql
