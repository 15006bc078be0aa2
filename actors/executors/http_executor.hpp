#pragma once

// The HTTP executor (SPEC §4): the task is POSTed to the type's URL; the
// answer, or its absence, is the outcome.

#include "actors/http/http_client.hpp"
#include "node.pb.h"

#include <optional>
#include <random>
#include <string>

namespace taskmill {

/// The request for `task`: the task as JSON, an Idempotency-Key naming the
/// attempt, and a W3C traceparent (the task's trace id, or a new one).
http_call http_call_for(const pb::Task& task, const std::string& url, std::mt19937_64& rng);

/// The cancel of a running attempt: a DELETE to `url` with the task's id,
/// type, key and attempt as JSON and the attempt's Idempotency-Key.
http_call cancel_call_for(const pb::CancelNotice& cancel, const std::string& url);

/// Whether an executor heard a cancel: a 2xx, or 404 or 410 (it knows
/// nothing of the attempt any more). Any other answer, or none, is sent again.
bool cancel_heard(const http_answer& answer);

/// What an executor's answer means; nullopt: accepted (202), the outcome
/// comes later through POST /v1/tasks/{id}/result.
std::optional<pb::TaskOutcome> outcome_of_answer(const pb::Task& task, const http_answer& answer);

/// The body an executor answered a failed attempt with, kept in the
/// attempt's log: its first 64 KiB, line by line, after a line naming the
/// status; nullopt for a success or an empty body.
std::optional<pb::AttemptLog> log_of_failed_answer(const pb::TaskOutcome& outcome,
                                                   const http_answer& answer);

}  // namespace taskmill
