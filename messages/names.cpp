#include "messages/names.hpp"

#include <array>
#include <utility>

namespace taskmill {

namespace {

template <class Enum, size_t N>
using name_table = std::array<std::pair<Enum, const char*>, N>;

template <class Enum, size_t N>
const char* name_of(const name_table<Enum, N>& table, Enum value) {
  for (const auto& [v, name] : table)
    if (v == value) return name;
  return "unspecified";
}

template <class Enum, size_t N>
std::optional<Enum> value_of(const name_table<Enum, N>& table, std::string_view name) {
  for (const auto& [v, n] : table)
    if (name == n) return v;
  return std::nullopt;
}

constexpr name_table<pb::TaskStatus, 7> statuses{{
    {pb::PENDING, "pending"},
    {pb::RUNNING, "running"},
    {pb::SUCCEEDED, "succeeded"},
    {pb::FAILED, "failed"},
    {pb::DEAD, "dead"},
    {pb::CANCELLED, "cancelled"},
    {pb::STOPPED, "stopped"},
}};

constexpr name_table<pb::ExecutionOutcome, 3> outcomes{{
    {pb::OUTCOME_SUCCEEDED, "succeeded"},
    {pb::OUTCOME_RETRY, "retry"},
    {pb::OUTCOME_FAIL, "fail"},
}};

constexpr name_table<pb::SubmitOutcome, 4> submit_outcomes{{
    {pb::CREATED, "created"},
    {pb::REPLACED, "replaced"},
    {pb::DUPLICATE, "duplicate"},
    {pb::STALE, "stale"},
}};

constexpr name_table<pb::RescheduleOutcome, 4> reschedule_outcomes{{
    {pb::UPDATED, "updated"},
    {pb::RECREATED, "recreated"},
    {pb::IGNORED, "ignored"},
    {pb::RESCHEDULE_CREATED, "created"},
}};

constexpr name_table<pb::CancelOutcome, 2> cancel_outcomes{{
    {pb::CANCELLED_NOW, "cancelled"},
    {pb::UNCHANGED, "unchanged"},
}};

constexpr name_table<pb::BackoffKind, 2> backoff_kinds{{
    {pb::FIXED, "fixed"},
    {pb::EXPONENTIAL, "exponential"},
}};

}  // namespace

const char* status_name(pb::TaskStatus status) {
  return name_of(statuses, status);
}

std::optional<pb::TaskStatus> parse_status(std::string_view name) {
  return value_of(statuses, name);
}

const char* outcome_name(pb::ExecutionOutcome outcome) {
  return name_of(outcomes, outcome);
}

std::optional<pb::ExecutionOutcome> parse_outcome(std::string_view name) {
  return value_of(outcomes, name);
}

const char* submit_outcome_name(pb::SubmitOutcome outcome) {
  return name_of(submit_outcomes, outcome);
}

std::optional<pb::SubmitOutcome> parse_submit_outcome(std::string_view name) {
  return value_of(submit_outcomes, name);
}

const char* reschedule_outcome_name(pb::RescheduleOutcome outcome) {
  return name_of(reschedule_outcomes, outcome);
}

std::optional<pb::RescheduleOutcome> parse_reschedule_outcome(std::string_view name) {
  return value_of(reschedule_outcomes, name);
}

const char* cancel_outcome_name(pb::CancelOutcome outcome) {
  return name_of(cancel_outcomes, outcome);
}

std::optional<pb::CancelOutcome> parse_cancel_outcome(std::string_view name) {
  return value_of(cancel_outcomes, name);
}

const char* backoff_kind_name(pb::BackoffKind kind) {
  return name_of(backoff_kinds, kind);
}

std::optional<pb::BackoffKind> parse_backoff_kind(std::string_view name) {
  return value_of(backoff_kinds, name);
}

}  // namespace taskmill
