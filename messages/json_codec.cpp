#include "messages/json_codec.hpp"

#include "messages/errors.hpp"
#include "messages/json_parse.hpp"
#include "messages/names.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"
#include "messages/validate.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

namespace taskmill::json {

namespace {

using nlohmann::json;

caf::error bad(const std::string& what) {
  return make_error(errc::invalid_argument, what);
}

caf::expected<json> parse_body(std::string_view body) {
  return parse_bounded(body, "", max_json_depth + max_envelope_depth);
}

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

caf::error read_backoff(const json& value, const std::string& where, pb::Backoff& out) {
  object_reader b{value, where};
  if (auto kind = b.name<pb::BackoffKind>("kind", &parse_backoff_kind, "fixed, exponential"))
    out.set_kind(*kind);
  if (auto v = b.integer("base_ms", INT32_MIN, INT32_MAX))
    out.set_base_ms(static_cast<int32_t>(*v));
  if (auto v = b.integer("cap_ms", INT32_MIN, INT32_MAX)) out.set_cap_ms(static_cast<int32_t>(*v));
  if (auto v = b.number("jitter")) out.set_jitter(*v);
  return b.finish();
}

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

// Numbers are only checked to fit their fields here: the rules on their
// values are taskmill.task_problem's (storage/sql/submit.sql).
caf::error read_submit_task(const json& value, const std::string& where, pb::SubmitTask& out) {
  object_reader r{value, where};
  if (auto v = r.text("type")) out.set_type(*v);
  if (auto v = r.text("key")) out.set_key(*v);
  if (auto v = r.integer("version", INT64_MIN, INT64_MAX)) out.set_version(*v);
  if (auto v = r.raw("payload")) out.set_payload(*v);
  if (auto v = r.time("execute_at")) *out.mutable_execute_at() = *v;
  if (auto err = read_task_settings(r, out)) return err;
  if (auto v = r.text("batch")) out.set_batch(*v);
  if (auto v = r.text("trace_id")) out.set_trace_id(*v);
  if (auto v = r.integer("shard_index", INT32_MIN, INT32_MAX))
    out.set_shard_index(static_cast<int32_t>(*v));
  if (auto v = r.integer("shard_total", INT32_MIN, INT32_MAX))
    out.set_shard_total(static_cast<int32_t>(*v));
  if (auto v = r.raw("after")) out.set_after(*v);
  if (auto v = r.text("on_parent_failure")) out.set_on_parent_failure(*v);
  return r.finish();
}

json time_or_null(const google::protobuf::Timestamp& ts, bool present) {
  if (!present) return nullptr;
  return format_rfc3339(to_micros(ts));
}

json raw_or_null(const std::string& text) {
  if (text.empty()) return nullptr;
  return json::parse(text, nullptr, false);
}

json text_or_null(const std::string& text) {
  if (text.empty()) return nullptr;
  return text;
}

// Tasks are written straight into the answer: building a document first cost
// more than the rest of a batch submit in the node. Payload and result are
// jsonb text from PostgreSQL, so they go in as they are.
void append_string(std::string& out, std::string_view text) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
}

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

void write_ids(std::string& out, const google::protobuf::RepeatedField<int64_t>& ids) {
  out += '[';
  for (int i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
}

void write_waiting(std::string& out, const pb::Waiting& waiting) {
  object_writer w{out};
  w.text("reason", waiting.reason());
  w.text("message", waiting.message());
  if (waiting.has_until()) w.time_or_null("until", waiting.until(), true);
  if (waiting.parents_size() > 0) write_ids(w.field("parents"), waiting.parents());
}

void write_task(std::string& out, const pb::Task& t) {
  object_writer w{out};
  w.number("id", t.id());
  w.text("type", t.type());
  w.text("key", t.key());
  w.number("version", t.version());
  w.text("status", status_name(t.status()));
  w.number("priority", t.priority());
  w.time_or_null("execute_at", t.execute_at(), t.has_execute_at());
  w.raw_or_null("payload", t.payload());
  w.raw_or_null("result", t.result());
  w.text_or_null("error", t.error());
  w.number("attempt", t.attempt());
  w.number("retry_count", t.retry_count());
  w.number("max_retries", t.max_retries());
  w.number("timeout_ms", t.timeout_ms());
  {
    auto& backoff = w.field("backoff");
    object_writer b{backoff};
    b.text("kind", backoff_kind_name(t.backoff().kind()));
    b.number("base_ms", t.backoff().base_ms());
    b.number("cap_ms", t.backoff().cap_ms());
    b.field("jitter") += dump(json(t.backoff().jitter()));
  }
  w.text_or_null("picked_by", t.picked_by());
  w.text_or_null("batch", t.batch());
  if (t.shard_total() > 0) {
    w.number("shard_index", t.shard_index());
    w.number("shard_total", t.shard_total());
  } else {
    w.field("shard_index") += "null";
    w.field("shard_total") += "null";
  }
  w.text("trace_id", t.trace_id());
  w.time_or_null("heartbeat_at", t.heartbeat_at(), t.has_heartbeat_at());
  w.time_or_null("started_at", t.started_at(), t.has_started_at());
  w.time_or_null("created_at", t.created_at(), t.has_created_at());
  w.time_or_null("updated_at", t.updated_at(), t.has_updated_at());
  if (t.has_waiting()) write_waiting(w.field("waiting"), t.waiting());
  if (t.parents_size() > 0) write_ids(w.field("parents"), t.parents());
  if (t.children_size() > 0) write_ids(w.field("children"), t.children());
}

/// `{"outcome": "...", "task": {...}}`
void write_outcome_and_task(std::string& out, std::string_view outcome, const pb::Task& task) {
  object_writer w{out};
  w.text("outcome", outcome);
  write_task(w.field("task"), task);
}

}  // namespace

caf::expected<pb::SubmitTasks> decode_submit(std::string_view body, bool& batch) {
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  pb::SubmitTasks out;
  batch = doc->is_object() && doc->contains("tasks");
  if (!batch) {
    if (auto err = read_submit_task(*doc, "", *out.add_tasks())) return err;
    return out;
  }
  object_reader r{*doc, ""};
  auto tasks = r.find("tasks");
  if (auto err = r.finish()) return err;
  if (!tasks || !tasks->is_array()) return bad("tasks must be an array");
  if (tasks->size() > static_cast<size_t>(max_batch_size))
    return bad("tasks must hold at most " + std::to_string(max_batch_size) + " tasks");
  for (size_t i = 0; i < tasks->size(); ++i)
    if (auto err =
            read_submit_task((*tasks)[i], "tasks[" + std::to_string(i) + "]", *out.add_tasks()))
      return err;
  return out;
}

caf::expected<pb::RescheduleRequest> decode_reschedule(std::string_view body) {
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  object_reader r{*doc, ""};
  pb::RescheduleRequest out;
  if (auto v = r.text("type")) out.set_type(*v);
  if (auto v = r.text("key")) out.set_key(*v);
  if (auto v = r.time("execute_at")) *out.mutable_execute_at() = *v;
  if (auto v = r.raw("payload")) out.set_payload(*v);
  if (auto err = r.finish()) return err;
  return out;
}

caf::expected<pb::CancelRequest> decode_cancel(std::string_view body) {
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  object_reader r{*doc, ""};
  pb::CancelRequest out;
  if (auto v = r.integer("id", 1, INT64_MAX)) out.set_id(*v);
  if (auto v = r.text("type")) out.set_type(*v);
  if (auto v = r.text("key")) out.set_key(*v);
  if (auto err = r.finish()) return err;
  return out;
}

caf::expected<pb::ResultReport> decode_result_report(std::string_view body) {
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  object_reader r{*doc, ""};
  pb::ResultReport out;
  if (auto v = r.integer("attempt", 1, INT32_MAX)) out.set_attempt(static_cast<int32_t>(*v));
  if (auto v = r.name<pb::ExecutionOutcome>("outcome", &parse_outcome, "succeeded, retry, fail"))
    out.set_outcome(*v);
  if (auto v = r.raw("result")) out.set_result(*v);
  if (auto v = r.text("error")) out.set_error(*v);
  if (auto err = r.finish()) return err;
  if (out.attempt() == 0) return bad("attempt is required");
  if (out.outcome() == pb::EXECUTION_OUTCOME_UNSPECIFIED) return bad("outcome is required");
  return out;
}

caf::expected<executor_answer> decode_executor_answer(std::string_view body) {
  executor_answer out;
  if (body.empty()) return out;
  auto doc = parse_bounded(body, "the executor's answer", max_json_depth + 1);
  if (!doc) {
    // Only a JSON body is a result (SPEC §4); any other body says nothing.
    if (!json::accept(body)) return out;
    return doc.error();
  }
  if (!doc->is_object() || !doc->contains("outcome")) {
    out.result = dump(*doc);
    return out;
  }
  const auto& outcome = (*doc)["outcome"];
  auto parsed = outcome.is_string() ? parse_outcome(outcome.get<std::string>()) : std::nullopt;
  if (!parsed) return bad("the executor's answer has an unknown outcome " + dump(outcome));
  out.outcome = *parsed;
  if (auto it = doc->find("error"); it != doc->end() && !it->is_null())
    out.error = it->is_string() ? it->get<std::string>() : dump(*it);
  if (auto it = doc->find("result"); it != doc->end() && !it->is_null()) out.result = dump(*it);
  return out;
}

std::string encode(const pb::Task& task) {
  std::string out;
  write_task(out, task);
  return out;
}

std::string encode(const pb::SubmitResults& results, bool batch) {
  std::string out;
  auto one = [&out](const pb::SubmitResult& r) {
    write_outcome_and_task(out, submit_outcome_name(r.outcome()), r.task());
  };
  if (!batch && results.results_size() == 1) {
    one(results.results(0));
    return out;
  }
  out.reserve(static_cast<size_t>(results.results_size()) * 700);
  out += "{\"results\":[";
  for (int i = 0; i < results.results_size(); ++i) {
    if (i > 0) out += ',';
    one(results.results(i));
  }
  out += "]}";
  return out;
}

std::string encode(const pb::RescheduleResult& result) {
  std::string out;
  write_outcome_and_task(out, reschedule_outcome_name(result.outcome()), result.task());
  return out;
}

std::string encode(const pb::CancelResult& result) {
  std::string out;
  write_outcome_and_task(out, cancel_outcome_name(result.outcome()), result.task());
  return out;
}

std::string encode(const pb::TaskList& list) {
  std::string out = "{\"tasks\":[";
  for (int i = 0; i < list.tasks_size(); ++i) {
    if (i > 0) out += ',';
    write_task(out, list.tasks(i));
  }
  out += "],\"next_page_token\":";
  if (list.next_page_token().empty())
    out += "null";
  else
    append_string(out, list.next_page_token());
  out += '}';
  return out;
}

std::string encode(const pb::AttemptList& list) {
  json attempts = json::array();
  for (const auto& a : list.attempts())
    attempts.push_back(json{
        {"attempt", a.attempt()},
        {"node", text_or_null(a.node())},
        {"started_at", time_or_null(a.started_at(), a.has_started_at())},
        {"finished_at", time_or_null(a.finished_at(), a.has_finished_at())},
        {"outcome", a.outcome()},
        {"error", text_or_null(a.error())},
        {"duration_ms",
         a.has_finished_at() && a.has_started_at() ? json(a.duration_ms()) : json(nullptr)},
    });
  return dump(json{{"attempts", attempts}});
}

std::string encode(const pb::ResultAck& ack) {
  json out{{"accepted", ack.accepted()}};
  if (!ack.reason().empty()) out["reason"] = ack.reason();
  return dump(out);
}

std::string encode(const pb::BatchCounts& counts) {
  json by_status = json::object();
  int64_t total = 0;
  for (const auto& [status, n] : counts.counts()) {
    by_status[status] = n;
    total += n;
  }
  return dump(json{{"batch", counts.batch()}, {"counts", by_status}, {"total", total}});
}

std::string encode(const pb::Stats& stats) {
  json counts = json::object();
  std::set<std::string> estimated;
  for (const auto& c : stats.counts()) {
    counts[c.type()][status_name(c.status())] = c.count();
    if (c.estimated()) estimated.insert(status_name(c.status()));
  }
  json nodes = json::array();
  for (const auto& n : stats.nodes())
    nodes.push_back(json{{"node", n.name()}, {"running", n.running()}});
  json limiter = json::array();
  for (const auto& l : stats.limiter())
    limiter.push_back(json{{"scope", l.scope()},
                           {"used", l.used()},
                           {"limit", l.limit() > 0 ? json(l.limit()) : json(nullptr)}});
  json recent = json::array();
  for (const auto& m : stats.recent())
    recent.push_back(json{{"minute", format_rfc3339(to_micros(m.minute()))},
                          {"succeeded", m.succeeded()},
                          {"retried", m.retried()},
                          {"failed", m.failed()}});
  return dump(json{{"counts", counts},
                   {"estimated", estimated},
                   {"running_by_node", nodes},
                   {"limiter", limiter},
                   {"recent", recent}});
}

std::string encode(const pb::NodeList& list) {
  json nodes = json::array();
  for (const auto& n : list.nodes())
    nodes.push_back(json{
        {"name", n.name()},
        {"address", text_or_null(n.address())},
        {"role", n.role()},
        {"started_at", time_or_null(n.started_at(), n.has_started_at())},
        {"heartbeat_at", time_or_null(n.heartbeat_at(), n.has_heartbeat_at())},
        {"running", n.running()},
        {"link", text_or_null(n.link())},
    });
  json links = json::array();
  for (const auto& l : list.links())
    links.push_back(json{{"name", l.name()},
                         {"address", text_or_null(l.address())},
                         {"kind", l.kind()},
                         {"state", l.state()},
                         {"since", time_or_null(l.since(), l.has_since())},
                         {"last_error", text_or_null(l.last_error())}});
  return dump(json{{"nodes", nodes}, {"links", links}});
}

std::string encode_error(const pb::Error& error) {
  std::string out = R"({"error":)";
  {
    object_writer w{out};
    // Through nlohmann's dump, which replaces invalid UTF-8: a message may
    // quote any input.
    w.field("code") += dump(json(error.code()));
    w.field("message") += dump(json(error.message()));
    if (error.has_waiting()) write_waiting(w.field("waiting"), error.waiting());
  }
  return out + "}";
}

std::string encode_error(const std::string& code, const std::string& message) {
  pb::Error error;
  error.set_code(code);
  error.set_message(message);
  return encode_error(error);
}

std::string encode_execution(const pb::Task& t) {
  std::string out;
  {
    object_writer w{out};
    w.number("id", t.id());
    w.text("type", t.type());
    w.text("key", t.key());
    w.number("version", t.version());
    w.number("attempt", t.attempt());
    w.raw_or_null("payload", t.payload());
    w.text_or_null("batch", t.batch());
    bool sharded = t.shard_total() > 0;
    w.field("shard_index") += sharded ? std::to_string(t.shard_index()) : "null";
    w.field("shard_total") += sharded ? std::to_string(t.shard_total()) : "null";
    w.text("trace_id", t.trace_id());
  }
  return out;
}

// -- recurring jobs ---------------------------------------------------------------

// The rules on the values are taskmill.job_problem's and task_problem's
// (storage/sql/), and the schedule's and zone's messages/schedule.cpp's.
caf::expected<pb::Job> decode_job(std::string_view body, const std::string& name) {
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  object_reader r{*doc, ""};
  pb::Job out;
  out.set_name(name);
  if (auto v = r.text("name"); v && *v != name)
    r.fail("name " + quote_input(*v) + " differs from the name in the path");
  if (auto v = r.text("schedule")) out.set_schedule(*v);
  if (auto v = r.text("dialect")) out.set_dialect(*v);
  if (auto v = r.text("time_zone")) out.set_time_zone(*v);
  if (auto v = r.text("type")) out.set_type(*v);
  if (auto v = r.raw("payload")) out.set_payload(*v);
  if (auto err = read_task_settings(r, out)) return err;
  if (auto v = r.find("enabled")) {
    if (!v->is_boolean())
      r.fail("enabled must be true or false");
    else
      out.set_enabled(v->get<bool>());
  }
  if (auto v = r.text("routing")) out.set_routing(*v);
  if (auto v = r.integer("shards", INT32_MIN, INT32_MAX)) out.set_shards(static_cast<int32_t>(*v));
  if (auto v = r.text("overlap")) out.set_overlap(*v);
  if (auto v = r.text("misfire")) out.set_misfire(*v);
  if (auto v = r.integer("catch_up_limit", INT32_MIN, INT32_MAX))
    out.set_catch_up_limit(static_cast<int32_t>(*v));
  if (auto v = r.text("description")) out.set_description(*v);
  if (auto err = r.finish()) return err;
  if (out.schedule().empty()) return bad("schedule is required");
  return out;
}

caf::expected<pb::TriggerRequest> decode_trigger(std::string_view body) {
  pb::TriggerRequest out;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return out;
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  object_reader r{*doc, ""};
  if (auto v = r.raw("payload")) out.set_payload(*v);
  if (auto err = r.finish()) return err;
  return out;
}

namespace {

json job_json(const pb::Job& j) {
  json backoff = nullptr;
  if (j.has_backoff()) {
    backoff = json::object();
    const auto& b = j.backoff();
    if (b.kind() != pb::BACKOFF_KIND_UNSPECIFIED) backoff["kind"] = backoff_kind_name(b.kind());
    if (b.base_ms() != 0) backoff["base_ms"] = b.base_ms();
    if (b.cap_ms() != 0) backoff["cap_ms"] = b.cap_ms();
    backoff["jitter"] = b.jitter();
  }
  auto optional = [](bool has, int64_t v) { return has ? json(v) : json(nullptr); };
  return json{
      {"name", j.name()},
      {"schedule", j.schedule()},
      {"dialect", j.dialect()},
      {"time_zone", j.time_zone()},
      {"type", j.type()},
      {"payload", raw_or_null(j.payload())},
      {"priority", optional(j.has_priority(), j.priority())},
      {"max_retries", optional(j.has_max_retries(), j.max_retries())},
      {"timeout_ms", optional(j.has_timeout_ms(), j.timeout_ms())},
      {"backoff", backoff},
      {"enabled", j.enabled()},
      {"routing", j.routing()},
      {"shards", optional(j.has_shards(), j.shards())},
      {"overlap", j.overlap()},
      {"misfire", j.misfire()},
      {"catch_up_limit", j.catch_up_limit()},
      {"description", j.description()},
      {"source", j.source()},
      {"next_fire_at", time_or_null(j.next_fire_at(), j.has_next_fire_at())},
      {"created_at", time_or_null(j.created_at(), j.has_created_at())},
      {"updated_at", time_or_null(j.updated_at(), j.has_updated_at())},
  };
}

json firing_json(const pb::JobFiring& f) {
  json counts = json::object();
  for (const auto& [status, n] : f.counts()) counts[status] = n;
  return json{{"job", f.job()},     {"fire_at", time_or_null(f.fire_at(), f.has_fire_at())},
              {"kind", f.kind()},   {"outcome", f.outcome()},
              {"batch", f.batch()}, {"counts", counts}};
}

json alert_json(const pb::Alert& a) {
  auto details = json::parse(a.details(), nullptr, false);
  return json{{"id", a.id()},
              {"kind", a.kind()},
              {"subject", a.subject()},
              {"type", text_or_null(a.type())},
              {"job", text_or_null(a.job())},
              {"batch", text_or_null(a.batch())},
              {"task_id", a.task_id() == 0 ? json(nullptr) : json(a.task_id())},
              {"message", a.message()},
              {"details", details.is_discarded() ? json(a.details()) : details},
              {"raised_at", time_or_null(a.raised_at(), a.has_raised_at())}};
}

json delivery_json(const pb::AlertDelivery& d) {
  return json{{"url", d.url()},
              {"attempts", d.attempts()},
              {"delivered_at", time_or_null(d.delivered_at(), d.has_delivered_at())},
              {"next_at", time_or_null(d.next_at(), d.has_next_at())},
              {"last_error", text_or_null(d.last_error())}};
}

}  // namespace

std::string encode(const pb::Job& job) {
  return dump(job_json(job));
}

std::string encode(const pb::JobPutResult& result) {
  return dump(json{{"created", result.created()}, {"job", job_json(result.job())}});
}

std::string encode(const pb::JobList& list) {
  json jobs = json::array();
  for (const auto& j : list.jobs()) jobs.push_back(job_json(j));
  return dump(json{{"jobs", jobs}});
}

std::string encode(const pb::JobFiring& firing) {
  return dump(firing_json(firing));
}

std::string encode(const pb::JobFirings& firings) {
  json out = json::array();
  for (const auto& f : firings.firings()) out.push_back(firing_json(f));
  return dump(json{{"firings", out}});
}

std::string encode(const pb::FireTimes& times) {
  json out = json::array();
  for (const auto& t : times.times()) out.push_back(format_rfc3339(to_micros(t)));
  return dump(json{{"times", out}, {"paused", times.paused()}});
}

std::string encode(const pb::Alert& alert) {
  return dump(alert_json(alert));
}

std::string encode(const pb::AlertList& list) {
  json alerts = json::array();
  for (const auto& a : list.alerts()) {
    auto out = alert_json(a);
    json deliveries = json::array();
    for (const auto& d : a.deliveries()) deliveries.push_back(delivery_json(d));
    out["deliveries"] = deliveries;
    alerts.push_back(out);
  }
  return dump(json{{"alerts", alerts}});
}

}  // namespace taskmill::json
