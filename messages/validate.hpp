#pragma once

// Validation of everything a caller can send (SPEC §9). Errors are
// `invalid_argument` (or `payload_too_large`) and name the field, prefixed
// with where it sits ("tasks[3].priority ...").

#include "taskmill.pb.h"

#include <caf/error.hpp>

#include <string>
#include <string_view>

namespace taskmill {

struct input_limits {
  int64_t max_payload_bytes = 1 << 20;
};

caf::error validate(const pb::SubmitTask& task, const input_limits& limits,
                    const std::string& where = "");
caf::error validate(const pb::SubmitTasks& tasks, const input_limits& limits);
caf::error validate(const pb::RescheduleRequest& req, const input_limits& limits);
caf::error validate(const pb::CancelRequest& req);
caf::error validate(const pb::ResultReport& report, const input_limits& limits);

/// True if `text` is one complete JSON value.
bool is_json(std::string_view text);

}  // namespace taskmill
