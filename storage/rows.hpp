#pragma once

// Converting between protobuf messages and statement rows and parameters.

#include "node.pb.h"
#include "storage/pg.hpp"

namespace taskmill::db {

/// Column positions of a task row in one result, looked up once.
struct task_columns {
  explicit task_columns(const result& res);
  int id, type, key, version, status, priority, execute_at, payload, result_json, error, attempt,
      retry_count, max_retries, timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms,
      backoff_jitter, batch, shard_index, shard_total, trace_id, picked_by, heartbeat_at,
      started_at, created_at, updated_at, parent_results, key_space, concurrency_key, key_class;
};

/// Fields whose column the result lacks read as empty (a narrower select).
void read_task(const result& res, int row, const task_columns& cols, pb::Task* out);

/// The 16 array parameters of submit_batch for `tasks`.
std::vector<param> submit_params(const std::vector<const pb::SubmitTask*>& tasks);

/// The parameters of complete_many for `outcomes`.
std::vector<param> complete_params(const std::vector<const pb::TaskOutcome*>& outcomes,
                                   const std::string& node);

/// The parameters of put_type_settings.
std::vector<param> type_settings_params(const pb::TypeSettingsList& settings);

param timestamp_param(const google::protobuf::Timestamp& ts);

/// A page of tasks: its first `limit` rows, and the last one's id as the
/// next page's token when the result holds more.
pb::TaskList read_task_page(const result& res, int limit);

/// A page of list_tasks (storage/sql/task_reads.sql): its matches, and the
/// next page's token either the last match shown or, when its scan of
/// `scan_rows` tasks ended before the page was full, where the scan ended.
pb::TaskList read_scanned_task_page(const result& res, int limit, int scan_rows);

}  // namespace taskmill::db
