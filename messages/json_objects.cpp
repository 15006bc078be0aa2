// The pieces the JSON codecs share: reading request objects field by field,
// writing answers straight into text, and a task's fields both ways.

#include "messages/json_objects.hpp"

#include "messages/json_parse.hpp"
#include "messages/names.hpp"
#include "messages/validate.hpp"

namespace taskmill::json {

caf::error bad(const std::string& what) {
  return make_error(errc::invalid_argument, what);
}

caf::expected<json> parse_body(std::string_view body) {
  return parse_bounded(body, "", max_json_depth + max_envelope_depth);
}

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

// Numbers are only checked to fit their fields here: the rules on their
// values are taskmill.task_problem's (storage/sql/submit.sql).
caf::error read_submit_fields(object_reader& r, pb::SubmitTask& out) {
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
  if (auto v = r.text("concurrency_key")) out.set_concurrency_key(*v);
  return caf::none;
}

caf::error read_submit_task(const json& value, const std::string& where, pb::SubmitTask& out) {
  object_reader r{value, where};
  if (auto err = read_submit_fields(r, out)) return err;
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
  w.text_or_null("key_space", t.key_space());
  // A keyed task's key may be "" (its type's tasks share one).
  if (t.key_space().empty())
    w.field("concurrency_key") += "null";
  else
    w.text("concurrency_key", t.concurrency_key());
  w.text_or_null("key_class", t.key_class());
  w.time_or_null("heartbeat_at", t.heartbeat_at(), t.has_heartbeat_at());
  w.time_or_null("started_at", t.started_at(), t.has_started_at());
  w.time_or_null("created_at", t.created_at(), t.has_created_at());
  w.time_or_null("updated_at", t.updated_at(), t.has_updated_at());
  if (t.has_waiting()) write_waiting(w.field("waiting"), t.waiting());
  if (t.parents_size() > 0) write_ids(w.field("parents"), t.parents());
  if (t.children_size() > 0) write_ids(w.field("children"), t.children());
  if (!t.parent_results().empty()) w.raw_or_null("parent_results", t.parent_results());
  if (t.has_progress()) {
    const auto& p = t.progress();
    object_writer o{w.field("progress")};
    o.number("attempt", p.attempt());
    o.field("progress") += p.has_progress() ? dump(json(p.progress())) : "null";
    o.number("processed", p.processed());
    o.number("failed", p.failed());
    if (p.has_message())
      o.text("message", p.message());
    else
      o.field("message") += "null";
    o.time_or_null("reported_at", p.reported_at(), p.has_reported_at());
    o.time_or_null("deadline_at", p.deadline_at(), p.has_deadline_at());
  }
}

void write_outcome_and_task(std::string& out, std::string_view outcome, const pb::Task& task) {
  object_writer w{out};
  w.text("outcome", outcome);
  write_task(w.field("task"), task);
}

}  // namespace taskmill::json
