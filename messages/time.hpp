#pragma once

// Times are microseconds since the Unix epoch, UTC, everywhere inside a node.

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace google::protobuf {
class Timestamp;
}

namespace taskmill {

/// The times taskmill takes, in seconds since the epoch: years 1 to 9999 in
/// UTC, the range RFC 3339 and PostgreSQL share.
inline constexpr int64_t first_time_seconds = -62135596800LL;
inline constexpr int64_t last_time_seconds = 253402300799LL;

/// "2026-11-21T22:52:00.123456Z"; fractions are dropped when zero.
std::string format_rfc3339(int64_t micros);

/// Parses RFC 3339 ("2026-11-21T22:52:00Z", "...00.5+01:00"); also accepts the
/// space PostgreSQL prints instead of 'T' and an hour-only offset ("+00").
caf::expected<int64_t> parse_rfc3339(std::string_view text);

int64_t to_micros(const google::protobuf::Timestamp& ts);
void set_micros(google::protobuf::Timestamp* ts, int64_t micros);

/// The local wall clock. Scheduling decisions use the database clock instead.
int64_t wall_clock_micros();

}  // namespace taskmill
