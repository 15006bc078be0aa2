#pragma once

// The names the API, the CLI and the database use for enum values.

#include "taskmill.pb.h"

#include <optional>
#include <string_view>

namespace taskmill {

const char* status_name(pb::TaskStatus status);
std::optional<pb::TaskStatus> parse_status(std::string_view name);

const char* outcome_name(pb::ExecutionOutcome outcome);
std::optional<pb::ExecutionOutcome> parse_outcome(std::string_view name);

const char* submit_outcome_name(pb::SubmitOutcome outcome);
std::optional<pb::SubmitOutcome> parse_submit_outcome(std::string_view name);

const char* reschedule_outcome_name(pb::RescheduleOutcome outcome);
std::optional<pb::RescheduleOutcome> parse_reschedule_outcome(std::string_view name);

const char* cancel_outcome_name(pb::CancelOutcome outcome);
std::optional<pb::CancelOutcome> parse_cancel_outcome(std::string_view name);

const char* backoff_kind_name(pb::BackoffKind kind);
std::optional<pb::BackoffKind> parse_backoff_kind(std::string_view name);

}  // namespace taskmill
