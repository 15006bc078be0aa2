#include "storage/hand_off_notice.hpp"

#include "messages/time.hpp"

#include <nlohmann/json.hpp>

#include <sstream>
#include <string_view>

namespace taskmill::db {

namespace {

using json = nlohmann::json;

/// `task[name]` as a T; `fallback` when absent, null or of another kind.
template <class T>
T field(const json& task, const char* name, T fallback = T{}) {
  auto it = task.find(name);
  if (it == task.end() || it->is_null()) return fallback;
  if constexpr (std::is_same_v<T, std::string>) {
    return it->is_string() ? it->template get<std::string>() : fallback;
  } else {
    return it->is_number_integer() ? it->template get<T>() : fallback;
  }
}

/// The task the notice's JSON part tells of, or one with id 0 when it tells
/// of none (it did not fit, or cannot be read): the node reads the task.
pb::Task task_of(std::string_view text, int64_t id, int32_t attempt, const std::string& node) {
  pb::Task task;
  auto parsed = json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object() || field<std::string>(parsed, "type").empty())
    return task;
  task.set_id(id);
  task.set_type(field<std::string>(parsed, "type"));
  task.set_key(field<std::string>(parsed, "key"));
  task.set_version(field<int64_t>(parsed, "version"));
  task.set_status(pb::RUNNING);
  task.set_priority(field<int32_t>(parsed, "priority"));
  task.set_payload(field<std::string>(parsed, "payload"));
  task.set_attempt(attempt);
  task.set_retry_count(field<int32_t>(parsed, "retry_count"));
  task.set_max_retries(field<int32_t>(parsed, "max_retries"));
  task.set_timeout_ms(field<int32_t>(parsed, "timeout_ms"));
  task.set_error(field<std::string>(parsed, "error"));
  task.set_batch(field<std::string>(parsed, "batch"));
  task.set_shard_index(field<int32_t>(parsed, "shard_index"));
  task.set_shard_total(field<int32_t>(parsed, "shard_total"));
  task.set_trace_id(field<std::string>(parsed, "trace_id"));
  task.set_picked_by(node);
  set_micros(task.mutable_execute_at(), field<int64_t>(parsed, "execute_at_us"));
  set_micros(task.mutable_started_at(), field<int64_t>(parsed, "started_at_us"));
  return task;
}

}  // namespace

bool add_if_handed_to(const std::string& node, const std::string& notice, pb::HandOffs& handed) {
  auto end_of_ids = notice.find('\n');
  std::istringstream in{notice.substr(0, end_of_ids)};
  int64_t id = 0;
  int32_t attempt = 0;
  int64_t generation = 0;
  std::string named;
  if (!(in >> id >> attempt >> generation) || !std::getline(in >> std::ws, named) || id <= 0 ||
      attempt <= 0)
    return false;
  if (named != node) return true;
  auto* hand_off = handed.add_hand_offs();
  hand_off->set_task_id(id);
  hand_off->set_attempt(attempt);
  hand_off->set_generation(generation);
  if (end_of_ids != std::string::npos)
    *hand_off->mutable_task() =
        task_of(std::string_view{notice}.substr(end_of_ids + 1), id, attempt, node);
  return true;
}

}  // namespace taskmill::db
