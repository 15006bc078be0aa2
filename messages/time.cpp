#include "messages/time.hpp"

#include "messages/errors.hpp"
#include "messages/text.hpp"

#include <google/protobuf/timestamp.pb.h>

#include <algorithm>
#include <charconv>
#include <chrono>

namespace taskmill {

namespace {

constexpr int64_t micros_per_second = 1'000'000;
constexpr int64_t seconds_per_day = 86'400;

int64_t floor_div(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

bool read_digits(std::string_view text, size_t& pos, size_t count, int& out) {
  if (pos + count > text.size()) return false;
  out = 0;
  for (size_t i = 0; i < count; ++i) {
    char c = text[pos + i];
    if (c < '0' || c > '9') return false;
    out = out * 10 + (c - '0');
  }
  pos += count;
  return true;
}

/// Writes `value` with at least `width` digits, zero-padded.
char* put_digits(char* at, int value, int width) {
  char digits[12];
  auto end = std::to_chars(digits, digits + sizeof(digits), value).ptr;
  auto count = static_cast<int>(end - digits);
  for (int i = count; i < width; ++i) *at++ = '0';
  return std::copy(digits, end, at);
}

bool expect(std::string_view text, size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

}  // namespace

std::string format_rfc3339(int64_t micros) {
  auto seconds = floor_div(micros, micros_per_second);
  auto fraction = micros - seconds * micros_per_second;
  auto days = floor_div(seconds, seconds_per_day);
  auto of_day = static_cast<int>(seconds - days * seconds_per_day);
  std::chrono::year_month_day date{std::chrono::sys_days{std::chrono::days{days}}};
  // Written by hand: snprintf and gmtime_r were a tenth of a node's time
  // answering a submit of many tasks.
  char buf[40];
  char* at = buf;
  int year = static_cast<int>(date.year());
  if (year < 0) {
    *at++ = '-';
    year = -year;
  }
  at = put_digits(at, year, 4);
  *at++ = '-';
  at = put_digits(at, static_cast<int>(static_cast<unsigned>(date.month())), 2);
  *at++ = '-';
  at = put_digits(at, static_cast<int>(static_cast<unsigned>(date.day())), 2);
  *at++ = 'T';
  at = put_digits(at, of_day / 3600, 2);
  *at++ = ':';
  at = put_digits(at, of_day / 60 % 60, 2);
  *at++ = ':';
  at = put_digits(at, of_day % 60, 2);
  if (fraction != 0) {
    *at++ = '.';
    at = put_digits(at, static_cast<int>(fraction), 6);
    while (at[-1] == '0') --at;
  }
  *at++ = 'Z';
  return std::string{buf, at};
}

caf::expected<int64_t> parse_rfc3339(std::string_view text) {
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      quote_input(text) + " is not an RFC 3339 time such as 2026-11-21T22:52:00Z");
  };
  size_t pos = 0;
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!read_digits(text, pos, 4, year) || !expect(text, pos, '-') ||
      !read_digits(text, pos, 2, month) || !expect(text, pos, '-') ||
      !read_digits(text, pos, 2, day))
    return bad();
  if (pos >= text.size() || (text[pos] != 'T' && text[pos] != 't' && text[pos] != ' '))
    return bad();
  ++pos;
  if (!read_digits(text, pos, 2, hour) || !expect(text, pos, ':') ||
      !read_digits(text, pos, 2, minute) || !expect(text, pos, ':') ||
      !read_digits(text, pos, 2, second))
    return bad();
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return bad();
  int64_t fraction = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t scale = 100'000;
    size_t digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      fraction += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
      ++digits;
    }
    if (digits == 0) return bad();
  }
  int64_t offset_seconds = 0;
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int oh = 0, om = 0;
    if (!read_digits(text, pos, 2, oh)) return bad();
    if (pos < text.size() && text[pos] == ':') {
      ++pos;
      if (!read_digits(text, pos, 2, om)) return bad();
    }
    if (oh > 23 || om > 59) return bad();
    offset_seconds = sign * (oh * 3600 + om * 60);
  } else {
    return bad();
  }
  if (pos != text.size()) return bad();
  std::chrono::year_month_day date{std::chrono::year{year},
                                   std::chrono::month{static_cast<unsigned>(month)},
                                   std::chrono::day{static_cast<unsigned>(day)}};
  if (!date.ok()) return bad();  // e.g. February 30
  // A leap second (:60) is the first second of the next minute.
  int64_t seconds = std::chrono::sys_days{date}.time_since_epoch().count() * seconds_per_day +
                    hour * 3600 + minute * 60 + second;
  auto utc = seconds - offset_seconds;
  if (utc < first_time_seconds || utc > last_time_seconds) return bad();
  return utc * micros_per_second + fraction;
}

int64_t to_micros(const google::protobuf::Timestamp& ts) {
  return ts.seconds() * micros_per_second + ts.nanos() / 1000;
}

void set_micros(google::protobuf::Timestamp* ts, int64_t micros) {
  auto seconds = floor_div(micros, micros_per_second);
  ts->set_seconds(seconds);
  ts->set_nanos(static_cast<int32_t>((micros - seconds * micros_per_second) * 1000));
}

int64_t wall_clock_micros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace taskmill
