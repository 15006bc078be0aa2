#pragma once

// The pieces the JSON codecs share (messages/json_codec.cpp and
// messages/workflow_json.cpp). Include from .cpp files only: it brings in
// nlohmann/json.

#include "messages/errors.hpp"
#include "messages/json_parse.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"
#include "taskmill.pb.h"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <nlohmann/json.hpp>

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace taskmill::json {

using nlohmann::json;

caf::error bad(const std::string& what);

/// A request body as JSON, as deep as a payload inside its envelope.
caf::expected<json> parse_body(std::string_view body);

/// `text` as a JSON string, escaped, at the end of `out`.
void append_string(std::string& out, std::string_view text);

/// Reads the fields of one JSON object, remembering the first problem and
/// which fields it knows, so that unknown fields are reported.
class object_reader {
 public:
  object_reader(const json& value, std::string where) : where_(std::move(where)) {
    if (!value.is_object())
      fail(where_.empty() ? "the body must be a JSON object" : where_ + " must be an object");
    else
      object_ = &value;
  }

  const caf::error& error() const { return error_; }

  /// The field, or nullptr when absent or null.
  const json* find(const char* key) {
    known_.push_back(key);
    if (!object_) return nullptr;
    auto it = object_->find(key);
    if (it == object_->end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<std::string> text(const char* key) {
    auto v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) return fail_field(key, "must be a string");
    return v->get<std::string>();
  }

  std::optional<int64_t> integer(const char* key, int64_t min, int64_t max) {
    auto v = find(key);
    if (!v) return std::nullopt;
    int64_t out = 0;
    if (v->is_number_integer()) {
      if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        return fail_field(key, "must be between " + std::to_string(min) + " and " +
                                   std::to_string(max) + " (got " + dump(*v) + ")");
      out = v->get<int64_t>();
    } else if (v->is_string()) {
      const auto& s = v->get_ref<const std::string&>();
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
      if (ec != std::errc{} || end != s.data() + s.size() || s.empty())
        return fail_field(key, "must be an integer");
    } else {
      return fail_field(key, "must be an integer");
    }
    if (out < min || out > max)
      return fail_field(key, "must be between " + std::to_string(min) + " and " +
                                 std::to_string(max) + " (got " + std::to_string(out) + ")");
    return out;
  }

  std::optional<double> number(const char* key) {
    auto v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) return fail_field(key, "must be a number");
    return v->get<double>();
  }

  std::optional<google::protobuf::Timestamp> time(const char* key) {
    auto s = text(key);
    if (!s) return std::nullopt;
    auto micros = parse_rfc3339(*s);
    if (!micros) return fail_field(key, "must be an RFC 3339 time such as 2026-11-21T22:52:00Z");
    google::protobuf::Timestamp ts;
    set_micros(&ts, *micros);
    return ts;
  }

  /// Any JSON value, as compact JSON text.
  std::optional<std::string> raw(const char* key) {
    auto v = find(key);
    if (!v) return std::nullopt;
    return dump(*v);
  }

  template <class Enum>
  std::optional<Enum> name(const char* key, std::optional<Enum> (*parse)(std::string_view),
                           const char* choices) {
    auto s = text(key);
    if (!s) return std::nullopt;
    auto value = parse(*s);
    if (!value)
      return fail_field(
          key, std::string{"must be one of "} + choices + " (got " + quote_input(*s) + ")");
    return value;
  }

  /// Call last: complains about fields nobody asked for.
  caf::error finish() {
    if (!error_ && object_)
      for (const auto& [key, value] : object_->items())
        if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
          fail("unknown field " + path(key));
          break;
        }
    return error_;
  }

  std::string path(const std::string& key) const {
    return where_.empty() ? key : where_ + "." + key;
  }

  void fail(const std::string& what) {
    if (!error_) error_ = bad(what);
  }

 private:
  std::nullopt_t fail_field(const char* key, const std::string& what) {
    fail(path(key) + " " + what);
    return std::nullopt;
  }

  const json* object_ = nullptr;
  std::string where_;
  // The fields asked for, by name: string literals, a dozen at most, so a
  // list beats a set of copies (which was a tenth of decoding a submit).
  std::vector<std::string_view> known_;
  caf::error error_;
};

class object_writer {
 public:
  explicit object_writer(std::string& out) : out_(out) { out_ += '{'; }
  ~object_writer() { out_ += '}'; }
  object_writer(const object_writer&) = delete;
  object_writer& operator=(const object_writer&) = delete;

  std::string& field(const char* name) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_ += name;
    out_ += "\":";
    return out_;
  }
  void number(const char* name, int64_t value) { field(name) += std::to_string(value); }
  void text(const char* name, std::string_view value) { append_string(field(name), value); }
  void text_or_null(const char* name, std::string_view value) {
    if (value.empty())
      field(name) += "null";
    else
      text(name, value);
  }
  void raw_or_null(const char* name, std::string_view value) {
    field(name) += value.empty() ? std::string_view{"null"} : value;
  }
  void time_or_null(const char* name, const google::protobuf::Timestamp& ts, bool present) {
    if (present)
      text(name, format_rfc3339(to_micros(ts)));
    else
      field(name) += "null";
  }

 private:
  std::string& out_;
  bool first_ = true;
};

caf::error read_backoff(const json& value, const std::string& where, pb::Backoff& out);

/// The settings a task and a job's tasks share: priority, max_retries,
/// timeout_ms, backoff (pb::SubmitTask and pb::Job name them alike).
template <class Message>
caf::error read_task_settings(object_reader& r, Message& out) {
  if (auto v = r.integer("priority", INT32_MIN, INT32_MAX))
    out.set_priority(static_cast<int32_t>(*v));
  if (auto v = r.integer("max_retries", INT32_MIN, INT32_MAX))
    out.set_max_retries(static_cast<int32_t>(*v));
  if (auto v = r.integer("timeout_ms", INT32_MIN, INT32_MAX))
    out.set_timeout_ms(static_cast<int32_t>(*v));
  if (auto backoff = r.find("backoff"))
    return read_backoff(*backoff, r.path("backoff"), *out.mutable_backoff());
  return caf::none;
}

/// The fields of a task to submit, from `r`, which the caller finishes.
caf::error read_submit_fields(object_reader& r, pb::SubmitTask& out);
caf::error read_submit_task(const json& value, const std::string& where, pb::SubmitTask& out);

json time_or_null(const google::protobuf::Timestamp& ts, bool present);
json raw_or_null(const std::string& text);
json text_or_null(const std::string& text);

void write_ids(std::string& out, const google::protobuf::RepeatedField<int64_t>& ids);
void write_waiting(std::string& out, const pb::Waiting& waiting);
void write_task(std::string& out, const pb::Task& t);
/// `{"outcome": "...", "task": {...}}`
void write_outcome_and_task(std::string& out, std::string_view outcome, const pb::Task& task);

}  // namespace taskmill::json
