#pragma once

// The schedule of a recurring job (SPEC §6): a cron expression of 5 fields
// (minute hour day-of-month month day-of-week) or 6 (seconds first), a macro
// (@yearly @monthly @weekly @daily @hourly), or `@every <duration>`; and when
// it fires in a time zone, given by its IANA name.

#include <caf/expected.hpp>

#include <bitset>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace date {
class time_zone;
}

namespace taskmill::cron {

using seconds_time = std::chrono::sys_time<std::chrono::seconds>;

/// Which days of a month a day-of-month field takes.
struct month_days {
  bool any = true;                 // `*` or `?`
  std::bitset<32> days;            // 1..31
  bool last = false;               // L
  bool last_weekday = false;       // LW
  std::vector<int> near_weekdays;  // nW: the weekday nearest to day n
};

/// Which days a day-of-week field takes (0 is Sunday).
struct week_days {
  bool any = true;                                // `*` or `?`
  std::bitset<7> days;                            // every such weekday
  std::vector<int> last_of_month;                 // nL: the last such weekday
  std::vector<std::pair<int, int>> nth_of_month;  // n#k: the k-th such weekday
};

struct schedule {
  std::string text;  // as written
  /// Fixed rate (`@every`); zero for a cron expression.
  std::chrono::seconds every{0};
  std::bitset<60> seconds;
  std::bitset<60> minutes;
  std::bitset<24> hours;
  month_days days;
  std::bitset<13> months;  // 1..12
  week_days weekdays;
};

/// How the day-of-week field counts. Unix cron: 0 (or 7) is Sunday, 5 is
/// Friday. Quartz (and XXL-JOB, whose 6- and 7-field expressions people
/// paste): 1 is Sunday, 6 is Friday, 0 is no day. Names mean the same in
/// both.
enum class dialect { unix_cron, quartz };
/// A job's dialect when it names none.
inline constexpr const char* default_dialect = "unix";

/// The dialect called `name` ("unix" or "quartz"); an error names the field.
caf::expected<dialect> dialect_named(const std::string& name);

/// Parses a schedule; an error names the field and the token at fault.
caf::expected<schedule> parse(const std::string& text, dialect d);
/// The same in the dialect called `dialect_name` (empty: the default).
caf::expected<schedule> parse(const std::string& text, const std::string& dialect_name);

/// The time zone of an IANA name; an error names it.
caf::expected<const date::time_zone*> find_zone(const std::string& name);

/// The first fire time after `after` in `zone`; none if the schedule never
/// fires again. Local times that do not exist (spring forward) fire at the
/// first instant after the gap; local times that occur twice (fall back) fire
/// at their first occurrence only. `@every` fires at `anchor` + k * interval.
std::optional<seconds_time> next_after(const schedule& s, const date::time_zone* zone,
                                       seconds_time after, seconds_time anchor = {});

/// Up to `count` fire times after `after`.
std::vector<seconds_time> next_times(const schedule& s, const date::time_zone* zone,
                                     seconds_time after, int count, seconds_time anchor = {});

/// Whether `s` matches the local calendar day `y-m-d`.
bool matches_day(const schedule& s, int year, unsigned month, unsigned day);

}  // namespace taskmill::cron
