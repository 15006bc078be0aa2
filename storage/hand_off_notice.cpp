#include "storage/hand_off_notice.hpp"

#include "messages/time.hpp"

#include <nlohmann/json.hpp>

#include <sstream>

namespace taskmill::db {

namespace {

using json = nlohmann::json;

/// `notice[name]` as a T; `fallback` when absent, null or of another kind.
template <class T>
T field(const json& notice, const char* name, T fallback = T{}) {
  auto it = notice.find(name);
  if (it == notice.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : fallback;
  } else {
    return it->is_number_integer() ? it->template get<T>() : fallback;
  }
}

void add(pb::Executions& handed, int64_t id, int32_t attempt, int64_t generation, pb::Task task) {
  handed.add_task_ids(id);
  handed.add_attempts(attempt);
  handed.add_generations(generation);
  *handed.add_tasks() = std::move(task);
}

/// "<id> <attempt> <generation> <node>": the task did not fit the notice.
bool add_ids_only(const std::string& node, const std::string& notice, pb::Executions& handed) {
  std::istringstream in{notice};
  int64_t id = 0;
  int32_t attempt = 0;
  int64_t generation = 0;
  std::string named;
  if (!(in >> id >> attempt >> generation) || !std::getline(in >> std::ws, named)) return false;
  if (named == node) add(handed, id, attempt, generation, {});
  return true;
}

pb::Task task_of(const json& notice) {
  pb::Task task;
  task.set_id(field<int64_t>(notice, "id"));
  task.set_type(field<std::string>(notice, "type"));
  task.set_key(field<std::string>(notice, "key"));
  task.set_version(field<int64_t>(notice, "version"));
  task.set_status(pb::RUNNING);
  task.set_priority(field<int32_t>(notice, "priority"));
  task.set_payload(field<std::string>(notice, "payload"));
  task.set_attempt(field<int32_t>(notice, "attempt"));
  task.set_retry_count(field<int32_t>(notice, "retry_count"));
  task.set_max_retries(field<int32_t>(notice, "max_retries"));
  task.set_timeout_ms(field<int32_t>(notice, "timeout_ms"));
  task.set_error(field<std::string>(notice, "error"));
  task.set_batch(field<std::string>(notice, "batch"));
  task.set_shard_index(field<int32_t>(notice, "shard_index"));
  task.set_shard_total(field<int32_t>(notice, "shard_total"));
  task.set_trace_id(field<std::string>(notice, "trace_id"));
  task.set_picked_by(field<std::string>(notice, "node"));
  set_micros(task.mutable_execute_at(), field<int64_t>(notice, "execute_at_us"));
  set_micros(task.mutable_started_at(), field<int64_t>(notice, "started_at_us"));
  return task;
}

}  // namespace

bool add_if_handed_to(const std::string& node, const std::string& notice, pb::Executions& handed) {
  if (notice.empty() || notice.front() != '{') return add_ids_only(node, notice, handed);
  auto parsed = json::parse(notice, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return false;
  auto id = field<int64_t>(parsed, "id");
  auto attempt = field<int32_t>(parsed, "attempt");
  auto generation = field<int64_t>(parsed, "generation");
  if (id <= 0 || attempt <= 0 || generation <= 0 || field<std::string>(parsed, "type").empty())
    return false;
  if (field<std::string>(parsed, "node") == node)
    add(handed, id, attempt, generation, task_of(parsed));
  return true;
}

}  // namespace taskmill::db
