#include "messages/json_codec.hpp"

#include "messages/json_objects.hpp"

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

/// A batch callback: a task of its own, due after the batch (SPEC §10).
caf::error read_callback(const json& value, const std::string& where, pb::SubmitTask& out) {
  object_reader r{value, where};
  if (auto v = r.text("type")) out.set_type(*v);
  if (auto v = r.text("key")) out.set_key(*v);
  if (auto v = r.raw("payload")) out.set_payload(*v);
  if (auto v = r.integer("priority", INT32_MIN, INT32_MAX))
    out.set_priority(static_cast<int32_t>(*v));
  if (auto v = r.integer("max_retries", INT32_MIN, INT32_MAX))
    out.set_max_retries(static_cast<int32_t>(*v));
  if (auto v = r.integer("timeout_ms", INT32_MIN, INT32_MAX))
    out.set_timeout_ms(static_cast<int32_t>(*v));
  return r.finish();
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
  auto on_finish = r.find("on_finish");
  auto on_success = r.find("on_success");
  if (auto err = r.finish()) return err;
  if (!tasks || !tasks->is_array()) return bad("tasks must be an array");
  if (on_finish)
    if (auto err = read_callback(*on_finish, "on_finish", *out.mutable_on_finish())) return err;
  if (on_success)
    if (auto err = read_callback(*on_success, "on_success", *out.mutable_on_success())) return err;
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

caf::expected<pb::Progress> decode_progress(std::string_view body) {
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  object_reader r{*doc, ""};
  pb::Progress out;
  if (auto v = r.integer("attempt", 1, INT32_MAX)) out.set_attempt(static_cast<int32_t>(*v));
  if (auto v = r.number("progress")) out.set_progress(*v);
  if (auto v = r.integer("processed", 0, INT64_MAX)) out.set_processed(*v);
  if (auto v = r.integer("failed", 0, INT64_MAX)) out.set_failed(*v);
  if (auto v = r.text("message")) out.set_message(*v);
  if (auto v = r.integer("deadline_in_ms", 1, INT32_MAX)) out.set_deadline_in_ms(*v);
  if (auto err = r.finish()) return err;
  return out;
}

caf::expected<pb::AttemptLog> decode_attempt_log(std::string_view body) {
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  object_reader r{*doc, ""};
  pb::AttemptLog out;
  if (auto v = r.integer("attempt", 1, INT32_MAX)) out.set_attempt(static_cast<int32_t>(*v));
  if (const auto* lines = r.find("lines")) {
    if (!lines->is_array()) return bad("lines must be an array of strings");
    for (size_t i = 0; i < lines->size(); ++i) {
      const auto& line = (*lines)[i];
      if (!line.is_string()) return bad("lines[" + std::to_string(i) + "] must be a string");
      out.add_lines(line.get<std::string>());
    }
  }
  if (auto err = r.finish()) return err;
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
  out += ']';
  for (auto [name, callback] : {std::pair{"on_finish", &results.on_finish()},
                                std::pair{"on_success", &results.on_success()}})
    if (callback->has_task()) {
      out += ",\"" + std::string{name} + "\":";
      one(*callback);
    }
  out += '}';
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

std::string encode(const pb::TaskLog& log) {
  json lines = json::array();
  for (const auto& l : log.lines())
    lines.push_back(json{{"id", l.id()},
                         {"attempt", l.attempt()},
                         {"logged_at", time_or_null(l.logged_at(), l.has_logged_at())},
                         {"line", l.line()}});
  return dump(json{
      {"lines", lines}, {"status", status_name(log.status())}, {"next_after", log.next_after()}});
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
  return dump(
      json{{"batch", counts.batch()},
           {"counts", by_status},
           {"total", total},
           {"records",
            {{"processed", counts.records_processed()}, {"failed", counts.records_failed()}}}});
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

std::string encode_callback(const pb::SubmitTask& callback) {
  std::string out;
  object_writer w{out};
  w.text("type", callback.type());
  if (!callback.key().empty()) w.text("key", callback.key());
  if (callback.has_payload()) w.raw_or_null("payload", callback.payload());
  if (callback.has_priority()) w.number("priority", callback.priority());
  if (callback.has_max_retries()) w.number("max_retries", callback.max_retries());
  if (callback.has_timeout_ms()) w.number("timeout_ms", callback.timeout_ms());
  return out;
}

std::string encode_cancel(int64_t id, const std::string& type, const std::string& key,
                          int32_t attempt) {
  std::string out;
  {
    object_writer w{out};
    w.number("id", id);
    w.text("type", type);
    w.text("key", key);
    w.number("attempt", attempt);
  }
  return out;
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
    if (!t.parent_results().empty()) w.raw_or_null("parents", t.parent_results());
  }
  return out;
}

// -- recurring jobs ---------------------------------------------------------------

namespace {

/// A list of job names (the rules on each are taskmill.child_jobs_problem's).
void read_job_names(object_reader& r, const char* key,
                    google::protobuf::RepeatedPtrField<std::string>& out) {
  auto v = r.find(key);
  if (!v) return;
  if (!v->is_array()) return r.fail(r.path(key) + " must be an array of job names");
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string())
      return r.fail(r.path(key) + "[" + std::to_string(i) + "] must be a job name");
    out.Add((*v)[i].get<std::string>());
  }
}

}  // namespace

// The rules on the values are taskmill.job_problem's, task_problem's and
// put_job_problem's (storage/sql/), and the schedule's and zone's
// messages/schedule.cpp's.
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
  read_job_names(r, "child_jobs", *out.mutable_child_jobs());
  read_job_names(r, "child_jobs_on_failure", *out.mutable_child_jobs_on_failure());
  if (auto v = r.raw("on_finish")) out.set_on_finish(*v);
  if (auto v = r.raw("on_success")) out.set_on_success(*v);
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

json names(const google::protobuf::RepeatedPtrField<std::string>& list) {
  return json(std::vector<std::string>(list.begin(), list.end()));
}

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
      {"child_jobs", names(j.child_jobs())},
      {"child_jobs_on_failure", names(j.child_jobs_on_failure())},
      {"on_finish", j.has_on_finish() ? raw_or_null(j.on_finish()) : json(nullptr)},
      {"on_success", j.has_on_success() ? raw_or_null(j.on_success()) : json(nullptr)},
      {"source", j.source()},
      {"next_fire_at", time_or_null(j.next_fire_at(), j.has_next_fire_at())},
      {"created_at", time_or_null(j.created_at(), j.has_created_at())},
      {"updated_at", time_or_null(j.updated_at(), j.has_updated_at())},
  };
}

json firing_json(const pb::JobFiring& f) {
  json counts = json::object();
  for (const auto& [status, n] : f.counts()) counts[status] = n;
  json parent = nullptr;
  if (!f.parent_job().empty())
    parent = json{{"job", f.parent_job()}, {"fire_at", time_or_null(f.parent_fire_at(), true)}};
  return json{{"job", f.job()},     {"fire_at", time_or_null(f.fire_at(), f.has_fire_at())},
              {"kind", f.kind()},   {"outcome", f.outcome()},
              {"batch", f.batch()}, {"counts", counts},
              {"parent", parent}};
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
