#pragma once

// Error codes that cross actor boundaries. Every error carries a human message;
// for bad input the message names the offending field.

#include <caf/atom.hpp>
#include <caf/error.hpp>

#include <cstdint>
#include <string>

namespace taskmill {

enum class errc : uint8_t {
  invalid_argument = 1,  // bad input; the message names the field
  not_found,
  conflict,
  payload_too_large,
  unauthorized,
  storage_unavailable,  // PostgreSQL cannot be reached right now
  storage_error,        // a statement failed
  retryable,            // deadlock, serialization failure, lock timeout, full lock table: try again
  unavailable,          // the node is starting or stopping
  internal,
  method_not_allowed,  // a known path, another method
  forbidden,           // a request the node refuses to take from where it comes
  misdirected,         // a request for another host (its Host header)
  unsupported_media_type,
};

constexpr caf::atom_value error_category = caf::atom("taskmill");

caf::error make_error(errc code, std::string message);
caf::error make_error(errc code);

const char* to_string(errc code);

/// True if `err` is a taskmill error with `code`.
bool is(const caf::error& err, errc code);

/// The human message of `err`: the context string of a taskmill error, CAF's
/// rendering for any other error.
std::string error_message(const caf::error& err);

}  // namespace taskmill
