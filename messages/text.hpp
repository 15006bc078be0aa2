#pragma once

// Text that comes from outside: checks for the fields that store it, and a
// safe rendering for error messages, which must stay valid UTF-8 whatever a
// client sent.

#include <cstddef>
#include <string>
#include <string_view>

namespace taskmill {

/// True if `text` is well-formed UTF-8 (RFC 3629: shortest forms only, no
/// surrogates, nothing above U+10FFFF).
bool is_utf8(std::string_view text);

/// What is wrong with `text` as a stored text field, or nullptr: PostgreSQL
/// text holds neither invalid UTF-8 nor the NUL character.
const char* text_problem(std::string_view text);

/// `text` in double quotes for an error message: valid UTF-8 stays as it is,
/// invalid bytes and control characters become \xNN, and anything past
/// `max_bytes` is cut off with "...".
std::string quote_input(std::string_view text, std::size_t max_bytes = 80);

/// A PostgreSQL connection string (URL or key=value) with its password
/// blanked, for logs and the printed config.
std::string redact_conninfo(const std::string& conninfo);

}  // namespace taskmill
