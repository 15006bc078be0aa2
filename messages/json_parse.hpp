#pragma once

// Bounded parsing of JSON from outside. Include from .cpp files only: it
// brings in nlohmann/json.

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace taskmill::json {

/// `text` as a JSON document, or an `invalid_argument` error that names
/// `field` (empty: the request body) and the place inside it: not JSON,
/// invalid UTF-8, a number out of range, nesting deeper than `max_depth`, or a
/// NUL character in a string or key (PostgreSQL's jsonb cannot hold one).
/// Never throws.
caf::expected<nlohmann::json> parse_bounded(std::string_view text, const std::string& field,
                                            int max_depth);

/// The same checks without building the document.
caf::error check_bounded(std::string_view text, const std::string& field, int max_depth);

/// `value` as compact JSON text; never throws (invalid UTF-8 is replaced).
std::string dump(const nlohmann::json& value);

}  // namespace taskmill::json
