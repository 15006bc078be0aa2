#include "storage/hand_off_notice.hpp"

#include <google/protobuf/util/json_util.h>

#include <sstream>

namespace taskmill::db {

bool add_if_handed_to(const std::string& node, const std::string& notice, pb::Executions& handed) {
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
  handed.add_task_ids(id);
  handed.add_attempts(attempt);
  handed.add_generations(generation);
  auto* task = handed.add_tasks();
  if (end_of_ids == std::string::npos) return true;
  google::protobuf::util::JsonParseOptions lenient;
  lenient.ignore_unknown_fields = true;
  auto json = google::protobuf::StringPiece{notice}.substr(end_of_ids + 1);
  if (!google::protobuf::util::JsonStringToMessage(json, task, lenient).ok() ||
      task->type().empty()) {
    task->Clear();
    return true;
  }
  task->set_id(id);
  task->set_attempt(attempt);
  task->set_status(pb::RUNNING);
  task->set_picked_by(node);
  return true;
}

}  // namespace taskmill::db
