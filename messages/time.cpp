#include "messages/time.hpp"

#include "messages/errors.hpp"
#include "messages/text.hpp"

#include <google/protobuf/timestamp.pb.h>

#include <chrono>
#include <cstdio>
#include <ctime>

namespace taskmill {

namespace {

constexpr int64_t micros_per_second = 1'000'000;

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

bool expect(std::string_view text, size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

}  // namespace

std::string format_rfc3339(int64_t micros) {
  auto seconds = floor_div(micros, micros_per_second);
  auto fraction = micros - seconds * micros_per_second;
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  int n = std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  std::string out{buf, static_cast<size_t>(n)};
  if (fraction != 0) {
    std::snprintf(buf, sizeof(buf), ".%06lld", static_cast<long long>(fraction));
    out += buf;
    while (out.back() == '0') out.pop_back();
  }
  out += 'Z';
  return out;
}

caf::expected<int64_t> parse_rfc3339(std::string_view text) {
  auto bad = [&] {
    return make_error(errc::invalid_argument,
                      quote_input(text) + " is not an RFC 3339 time such as 2026-11-21T22:52:00Z");
  };
  size_t pos = 0;
  std::tm tm{};
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
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  int64_t seconds = static_cast<int64_t>(timegm(&tm));
  std::tm check{};
  std::time_t back = static_cast<std::time_t>(seconds);
  gmtime_r(&back, &check);
  if (second < 60 && check.tm_mday != day) return bad();  // e.g. February 30
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
