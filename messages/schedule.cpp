#include "messages/schedule.hpp"

#include "messages/errors.hpp"
#include "messages/text.hpp"

#include <date/tz.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace taskmill::cron {

namespace {

using namespace std::chrono;

/// One field of a cron expression: its name in errors, its range, and the
/// names its values may go by (index 0 is the value `min`).
struct field {
  const char* name;
  int min;
  int max;
  const std::array<const char*, 12>* names = nullptr;
};

constexpr std::array<const char*, 12> month_names{"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                                  "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::array<const char*, 12> day_names{"SUN", "MON", "TUE", "WED", "THU", "FRI",
                                                "SAT", "",    "",    "",    "",    ""};

constexpr field second_field{"second", 0, 59};
constexpr field minute_field{"minute", 0, 59};
constexpr field hour_field{"hour", 0, 23};
constexpr field day_field{"day-of-month", 1, 31};
constexpr field month_field{"month", 1, 12, &month_names};
// 7 is Sunday as well as 0.
constexpr field weekday_field{"day-of-week", 0, 7, &day_names};
// 1 is Sunday, 7 Saturday.
constexpr field quartz_weekday_field{"day-of-week", 1, 7, &day_names};

caf::error bad(const field& f, std::string_view token, const std::string& why) {
  return make_error(errc::invalid_argument, std::string{"schedule: "} + quote_input(token) +
                                                " in the " + f.name + " field " + why);
}

std::string upper(std::string_view text) {
  std::string out{text};
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == sep) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

std::optional<int> number(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

/// A value of `f`, as a number or a name; an error names the token.
caf::expected<int> value_of(const field& f, std::string_view token) {
  if (auto n = number(token)) {
    if (*n < f.min || *n > f.max)
      return bad(f, token,
                 "is not between " + std::to_string(f.min) + " and " + std::to_string(f.max));
    return *n;
  }
  if (f.names) {
    auto name = upper(token);
    for (size_t i = 0; i < f.names->size(); ++i)
      if ((*f.names)[i][0] != '\0' && name == (*f.names)[i]) return f.min + static_cast<int>(i);
  }
  return bad(f, token, "is not a value of the field");
}

/// The values one comma-separated part of a field takes: `*`, `a`, `a-b`,
/// each optionally with `/step`, or `a/step` (from a to the end).
template <size_t N>
caf::error add_part(const field& f, std::string_view part, std::bitset<N>& bits) {
  auto slash = part.find('/');
  auto range = part.substr(0, slash);
  int step = 1;
  if (slash != std::string_view::npos) {
    auto s = number(part.substr(slash + 1));
    if (!s || *s < 1) return bad(f, part, "has a bad step");
    step = *s;
  }
  int from = f.min;
  int to = f.max;
  if (range == "*" || range == "?") {
    if (f.min == 0 && f.max == 7) to = 6;
  } else {
    auto dash = range.find('-');
    auto first = value_of(f, range.substr(0, dash));
    if (!first) return first.error();
    from = *first;
    if (dash != std::string_view::npos) {
      auto last = value_of(f, range.substr(dash + 1));
      if (!last) return last.error();
      to = *last;
      if (to < from) return bad(f, part, "is a range that ends before it starts");
    } else if (slash == std::string_view::npos) {
      to = from;
    }
  }
  for (int v = from; v <= to; v += step) bits.set(static_cast<size_t>(v));
  return {};
}

template <size_t N>
caf::error parse_bits(const field& f, std::string_view text, std::bitset<N>& bits) {
  for (auto part : split(text, ','))
    if (auto err = add_part(f, part, bits)) return err;
  return {};
}

bool is_any(std::string_view text) {
  return text == "*" || text == "?";
}

caf::error parse_month_days(std::string_view text, month_days& out) {
  if (is_any(text)) return {};
  out.any = false;
  for (auto part : split(text, ',')) {
    auto token = upper(part);
    if (token == "L") {
      out.last = true;
    } else if (token == "LW") {
      out.last_weekday = true;
    } else if (token.size() > 1 && token.back() == 'W') {
      auto day = value_of(day_field, std::string_view{token}.substr(0, token.size() - 1));
      if (!day) return bad(day_field, part, "is not a day followed by W");
      out.near_weekdays.push_back(*day);
    } else if (auto err = add_part(day_field, part, out.days)) {
      return err;
    }
  }
  return {};
}

caf::error parse_week_days(std::string_view text, week_days& out, dialect d) {
  if (is_any(text)) return {};
  out.any = false;
  const auto& f = d == dialect::quartz ? quartz_weekday_field : weekday_field;
  // A value of the field as a weekday, 0 (Sunday) to 6.
  auto weekday = [d](int v) { return d == dialect::quartz ? v - 1 : v % 7; };
  for (auto part : split(text, ',')) {
    auto token = upper(part);
    auto hash = token.find('#');
    if (hash != std::string::npos) {
      auto day = value_of(f, std::string_view{token}.substr(0, hash));
      auto nth = number(std::string_view{token}.substr(hash + 1));
      if (!day || !nth || *nth < 1 || *nth > 5) return bad(f, part, "is not a weekday # 1 to 5");
      out.nth_of_month.emplace_back(weekday(*day), *nth);
    } else if (token.size() > 1 && token.back() == 'L') {
      auto day = value_of(f, std::string_view{token}.substr(0, token.size() - 1));
      if (!day) return bad(f, part, "is not a weekday followed by L");
      out.last_of_month.push_back(weekday(*day));
    } else {
      std::bitset<8> values;
      if (auto err = add_part(f, part, values)) return err;
      for (int v = f.min; v <= f.max; ++v)
        if (values[static_cast<size_t>(v)]) out.days.set(static_cast<size_t>(weekday(v)));
    }
  }
  return {};
}

/// `@every` durations: one or more of <number><unit>, units s, m, h, d.
caf::expected<seconds> parse_every(std::string_view text) {
  auto fail = [&] {
    return make_error(errc::invalid_argument,
                      "schedule: " + quote_input(text) +
                          " is not a duration for @every (e.g. 90s, 5m, 1h30m, 1d)");
  };
  if (text.empty()) return fail();
  seconds total{0};
  size_t i = 0;
  while (i < text.size()) {
    size_t digits = i;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    auto n = number(text.substr(i, digits - i));
    if (!n || digits == text.size()) return fail();
    int64_t unit = 0;
    switch (text[digits]) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      default:
        return fail();
    }
    total += seconds{*n * unit};
    i = digits + 1;
  }
  if (total < seconds{1} || total > hours{24 * 366}) return fail();
  return total;
}

const char* macro_expression(std::string_view macro) {
  static const std::array<std::pair<const char*, const char*>, 7> macros{{
      {"@yearly", "0 0 1 1 *"},
      {"@annually", "0 0 1 1 *"},
      {"@monthly", "0 0 1 * *"},
      {"@weekly", "0 0 * * 0"},
      {"@daily", "0 0 * * *"},
      {"@midnight", "0 0 * * *"},
      {"@hourly", "0 * * * *"},
  }};
  for (const auto& [name, expression] : macros)
    if (macro == name) return expression;
  return nullptr;
}

std::vector<std::string_view> fields_of(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

// -- calendar ---------------------------------------------------------------------

unsigned last_day(int year, unsigned month) {
  return static_cast<unsigned>(
      date::year_month_day_last{date::year{year}, date::month_day_last{date::month{month}}}.day());
}

unsigned weekday_of(int year, unsigned month, unsigned day) {
  return date::weekday{date::sys_days{date::year{year} / date::month{month} / date::day{day}}}
      .c_encoding();
}

/// The weekday nearest to `day` within the month (SPEC §6 `nW`); 0 if the
/// month has no such day.
unsigned nearest_weekday(int year, unsigned month, unsigned day) {
  auto last = last_day(year, month);
  if (day > last) return 0;
  switch (weekday_of(year, month, day)) {
    case 6:  // Saturday: the Friday before, or the Monday after the 1st
      return day == 1 ? 3 : day - 1;
    case 0:  // Sunday: the Monday after, or the Friday before the last day
      return day == last ? day - 2 : day + 1;
    default:
      return day;
  }
}

unsigned last_weekday(int year, unsigned month) {
  auto last = last_day(year, month);
  switch (weekday_of(year, month, last)) {
    case 6:
      return last - 1;
    case 0:
      return last - 2;
    default:
      return last;
  }
}

bool month_day_matches(const month_days& d, int year, unsigned month, unsigned day) {
  if (d.days[day]) return true;
  if (d.last && day == last_day(year, month)) return true;
  if (d.last_weekday && day == last_weekday(year, month)) return true;
  return std::any_of(d.near_weekdays.begin(), d.near_weekdays.end(), [&](int n) {
    return nearest_weekday(year, month, static_cast<unsigned>(n)) == day;
  });
}

bool week_day_matches(const week_days& w, int year, unsigned month, unsigned day) {
  auto wd = static_cast<int>(weekday_of(year, month, day));
  if (w.days[static_cast<size_t>(wd)]) return true;
  auto last = last_day(year, month);
  if (std::find(w.last_of_month.begin(), w.last_of_month.end(), wd) != w.last_of_month.end() &&
      day + 7 > last)
    return true;
  auto nth = static_cast<int>((day - 1) / 7 + 1);
  return std::find(w.nth_of_month.begin(), w.nth_of_month.end(), std::pair{wd, nth}) !=
         w.nth_of_month.end();
}

/// The first local time at or after `t` that the fields match, searching no
/// further than `limit`.
std::optional<date::local_seconds> next_match(const schedule& s, date::local_seconds t,
                                              date::local_seconds limit) {
  while (t <= limit) {
    auto day = floor<date::days>(t);
    date::year_month_day ymd{day};
    auto year = static_cast<int>(ymd.year());
    auto month = static_cast<unsigned>(ymd.month());
    if (!s.months[month]) {
      t = date::local_days{(ymd.year() / ymd.month() / 1) + date::months{1}};
      continue;
    }
    if (!matches_day(s, year, month, static_cast<unsigned>(ymd.day()))) {
      t = day + date::days{1};
      continue;
    }
    date::hh_mm_ss<seconds> time{t - day};
    auto h = static_cast<size_t>(time.hours().count());
    auto m = static_cast<size_t>(time.minutes().count());
    auto sec = static_cast<size_t>(time.seconds().count());
    if (!s.hours[h]) {
      t = day + hours{h + 1};
      continue;
    }
    if (!s.minutes[m]) {
      t = day + hours{h} + minutes{m + 1};
      continue;
    }
    if (!s.seconds[sec]) {
      t += seconds{1};
      continue;
    }
    return t;
  }
  return std::nullopt;
}

/// When local time `local` happens in `zone` (SPEC §6 for gaps and overlaps).
seconds_time when(const date::time_zone* zone, date::local_seconds local) {
  auto info = zone->get_info(local);
  switch (info.result) {
    case date::local_info::nonexistent:
      return floor<seconds>(info.second.begin);
    case date::local_info::ambiguous:
      return seconds_time{(local - info.first.offset).time_since_epoch()};
    default:
      return seconds_time{(local - info.first.offset).time_since_epoch()};
  }
}

}  // namespace

bool matches_day(const schedule& s, int year, unsigned month, unsigned day) {
  const auto& d = s.days;
  const auto& w = s.weekdays;
  if (d.any && w.any) return true;
  if (d.any) return week_day_matches(w, year, month, day);
  if (w.any) return month_day_matches(d, year, month, day);
  return month_day_matches(d, year, month, day) || week_day_matches(w, year, month, day);
}

caf::expected<dialect> dialect_named(const std::string& name) {
  if (name == "unix") return dialect::unix_cron;
  if (name == "quartz") return dialect::quartz;
  return make_error(errc::invalid_argument,
                    "dialect must be one of unix, quartz (got " + quote_input(name) + ")");
}

caf::expected<schedule> parse(const std::string& text, const std::string& dialect_name) {
  auto d = dialect_named(dialect_name.empty() ? default_dialect : dialect_name);
  if (!d) return d.error();
  return parse(text, *d);
}

caf::expected<schedule> parse(const std::string& text, dialect d) {
  schedule out;
  out.text = text;
  auto fields = fields_of(text);
  if (fields.empty()) return make_error(errc::invalid_argument, "schedule: must not be empty");
  if (fields[0] == "@every") {
    if (fields.size() != 2)
      return make_error(errc::invalid_argument, "schedule: @every takes one duration");
    auto every = parse_every(fields[1]);
    if (!every) return every.error();
    out.every = *every;
    return out;
  }
  std::string expanded;
  if (fields[0].front() == '@') {
    auto expression = macro_expression(fields[0]);
    if (!expression || fields.size() != 1)
      return make_error(errc::invalid_argument,
                        "schedule: " + quote_input(fields[0]) +
                            " is not one of @yearly, @annually, @monthly, @weekly, @daily, "
                            "@midnight, @hourly, @every");
    expanded = expression;
    fields = fields_of(expanded);
    // A macro means the same in every dialect; its expansion is unix cron.
    d = dialect::unix_cron;
  }
  if (fields.size() != 5 && fields.size() != 6)
    return make_error(errc::invalid_argument,
                      "schedule: needs 5 fields (minute hour day-of-month month day-of-week) or "
                      "6 (seconds first), got " +
                          std::to_string(fields.size()));
  if (fields.size() == 5) {
    out.seconds.set(0);
  } else if (auto err = parse_bits(second_field, fields[0], out.seconds)) {
    return err;
  }
  auto rest = fields.size() - 5;
  if (auto err = parse_bits(minute_field, fields[rest], out.minutes)) return err;
  if (auto err = parse_bits(hour_field, fields[rest + 1], out.hours)) return err;
  if (auto err = parse_month_days(fields[rest + 2], out.days)) return err;
  if (auto err = parse_bits(month_field, fields[rest + 3], out.months)) return err;
  if (auto err = parse_week_days(fields[rest + 4], out.weekdays, d)) return err;
  return out;
}

caf::expected<const date::time_zone*> find_zone(const std::string& name) {
  try {
    return date::locate_zone(name.empty() ? "UTC" : name);
  } catch (const std::exception&) {
    return make_error(errc::invalid_argument,
                      "time_zone: " + quote_input(name) + " is not an IANA time zone name");
  }
}

std::optional<seconds_time> next_after(const schedule& s, const date::time_zone* zone,
                                       seconds_time after, seconds_time anchor) {
  if (s.every.count() > 0) {
    if (after < anchor) return anchor;
    auto k = (after - anchor) / s.every + 1;
    return anchor + k * s.every;
  }
  // Leap days and the rarest weekday-of-month rules come round within 8
  // years (and 2100 is not a leap year), so no later match exists.
  auto local = zone->to_local(after);
  auto limit = local + date::days{366 * 9};
  auto t = local + seconds{1};
  while (auto match = next_match(s, t, limit)) {
    auto at = when(zone, *match);
    // A local time that happened at an earlier instant (the second pass of
    // an overlap) has fired already.
    if (at > after) return at;
    t = *match + seconds{1};
  }
  return std::nullopt;
}

std::vector<seconds_time> next_times(const schedule& s, const date::time_zone* zone,
                                     seconds_time after, int count, seconds_time anchor) {
  std::vector<seconds_time> out;
  while (static_cast<int>(out.size()) < count) {
    auto next = next_after(s, zone, after, anchor);
    if (!next) break;
    out.push_back(*next);
    after = *next;
  }
  return out;
}

}  // namespace taskmill::cron
