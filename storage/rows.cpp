#include "storage/rows.hpp"

#include "messages/names.hpp"
#include "messages/time.hpp"
#include "storage/key_rows.hpp"

namespace taskmill::db {

task_columns::task_columns(const result& res)
    : id(res.column("id")),
      type(res.column("type")),
      key(res.column("key")),
      version(res.column("version")),
      status(res.column("status")),
      priority(res.column("priority")),
      execute_at(res.column("execute_at")),
      payload(res.column("payload")),
      result_json(res.column("result")),
      error(res.column("error")),
      attempt(res.column("attempt")),
      retry_count(res.column("retry_count")),
      max_retries(res.column("max_retries")),
      timeout_ms(res.column("timeout_ms")),
      backoff_kind(res.column("backoff_kind")),
      backoff_base_ms(res.column("backoff_base_ms")),
      backoff_cap_ms(res.column("backoff_cap_ms")),
      backoff_jitter(res.column("backoff_jitter")),
      batch(res.column("batch")),
      shard_index(res.column("shard_index")),
      shard_total(res.column("shard_total")),
      trace_id(res.column("trace_id")),
      picked_by(res.column("picked_by")),
      heartbeat_at(res.column("heartbeat_at")),
      started_at(res.column("started_at")),
      created_at(res.column("created_at")),
      updated_at(res.column("updated_at")),
      parent_results(res.column("parent_results")),
      key_space(res.column("key_space")),
      concurrency_key(res.column("concurrency_key")),
      key_class(res.column("key_class")) {}

namespace {

// A task waiting for its parents is due at 'infinity' (storage/sql/dependencies.sql):
// it has no time to answer until they finished.
void read_time(const result& res, int row, int col,
               google::protobuf::Timestamp* (pb::Task::*field)(), pb::Task* out) {
  if (!res.is_null(row, col) && res.text(row, col) != "infinity")
    set_micros((out->*field)(), res.micros(row, col));
}

param text_param(const std::string& s) {
  return s;
}

template <class T>
param number_param(T value) {
  return std::to_string(value);
}

}  // namespace

void read_task(const result& res, int row, const task_columns& c, pb::Task* out) {
  out->set_id(res.int64(row, c.id));
  out->set_type(res.string(row, c.type));
  out->set_key(res.string(row, c.key));
  out->set_version(res.int64(row, c.version));
  out->set_status(parse_status(res.text(row, c.status)).value_or(pb::TASK_STATUS_UNSPECIFIED));
  out->set_priority(res.int32(row, c.priority));
  read_time(res, row, c.execute_at, &pb::Task::mutable_execute_at, out);
  out->set_payload(res.string(row, c.payload));
  out->set_result(res.string(row, c.result_json));
  out->set_error(res.string(row, c.error));
  out->set_attempt(res.int32(row, c.attempt));
  out->set_retry_count(res.int32(row, c.retry_count));
  out->set_max_retries(res.int32(row, c.max_retries));
  out->set_timeout_ms(res.int32(row, c.timeout_ms));
  if (c.backoff_kind >= 0) {
    auto backoff = out->mutable_backoff();
    backoff->set_kind(parse_backoff_kind(res.text(row, c.backoff_kind)).value_or(pb::EXPONENTIAL));
    backoff->set_base_ms(res.int32(row, c.backoff_base_ms));
    backoff->set_cap_ms(res.int32(row, c.backoff_cap_ms));
    backoff->set_jitter(res.float64(row, c.backoff_jitter));
  }
  out->set_batch(res.string(row, c.batch));
  out->set_shard_index(res.int32(row, c.shard_index));
  out->set_shard_total(res.int32(row, c.shard_total));
  out->set_trace_id(res.string(row, c.trace_id));
  out->set_picked_by(res.string(row, c.picked_by));
  read_time(res, row, c.heartbeat_at, &pb::Task::mutable_heartbeat_at, out);
  read_time(res, row, c.started_at, &pb::Task::mutable_started_at, out);
  read_time(res, row, c.created_at, &pb::Task::mutable_created_at, out);
  read_time(res, row, c.updated_at, &pb::Task::mutable_updated_at, out);
  out->set_parent_results(res.string(row, c.parent_results));
  // A claim's rows leave the keys out.
  if (c.key_space >= 0) {
    out->set_key_space(res.string(row, c.key_space));
    out->set_concurrency_key(res.string(row, c.concurrency_key));
    out->set_key_class(res.string(row, c.key_class));
  }
}

param timestamp_param(const google::protobuf::Timestamp& ts) {
  return format_rfc3339(to_micros(ts));
}

std::vector<param> submit_params(const std::vector<const pb::SubmitTask*>& tasks) {
  auto column = [&](auto&& fn) { return param{array_literal_of(tasks, fn)}; };
  // Read by taskmill.submit_batch only through unnest and subscripts.
  auto optional = [&](auto&& fn) { return optional_array_of(tasks, fn); };
  auto optional_number = [](bool has, auto value) { return has ? number_param(value) : param{}; };
  auto backoff_number = [](const pb::SubmitTask* t, auto value) {
    return t->has_backoff() && value != 0 ? number_param(value) : param{};
  };
  return {
      column([](auto t) { return text_param(t->type()); }),
      column([](auto t) { return text_param(t->key()); }),
      optional([&](auto t) { return optional_number(t->has_version(), t->version()); }),
      optional([](auto t) { return t->has_payload() ? text_param(t->payload()) : param{}; }),
      optional(
          [](auto t) { return t->has_execute_at() ? timestamp_param(t->execute_at()) : param{}; }),
      optional([&](auto t) { return optional_number(t->has_priority(), t->priority()); }),
      optional([&](auto t) { return optional_number(t->has_max_retries(), t->max_retries()); }),
      optional([&](auto t) { return optional_number(t->has_timeout_ms(), t->timeout_ms()); }),
      optional([](auto t) {
        return t->has_backoff() && t->backoff().kind() != pb::BACKOFF_KIND_UNSPECIFIED
                   ? param{backoff_kind_name(t->backoff().kind())}
                   : param{};
      }),
      optional([&](auto t) { return backoff_number(t, t->backoff().base_ms()); }),
      optional([&](auto t) { return backoff_number(t, t->backoff().cap_ms()); }),
      optional(
          [](auto t) { return t->has_backoff() ? number_param(t->backoff().jitter()) : param{}; }),
      optional([](auto t) { return t->has_batch() ? text_param(t->batch()) : param{}; }),
      optional([](auto t) { return t->has_trace_id() ? text_param(t->trace_id()) : param{}; }),
      optional([&](auto t) { return optional_number(t->has_shard_index(), t->shard_index()); }),
      optional([&](auto t) { return optional_number(t->has_shard_total(), t->shard_total()); }),
      optional([](auto t) { return t->has_after() ? text_param(t->after()) : param{}; }),
      optional([](auto t) {
        return t->has_on_parent_failure() ? text_param(t->on_parent_failure()) : param{};
      }),
      optional([](auto t) {
        return t->has_concurrency_key() ? text_param(t->concurrency_key()) : param{};
      }),
  };
}

std::vector<param> complete_params(const std::vector<const pb::TaskOutcome*>& outcomes,
                                   const std::string& node) {
  auto column = [&](auto&& fn) { return param{array_literal_of(outcomes, fn)}; };
  // Read by taskmill.complete_many only through unnest.
  auto optional = [&](auto&& fn) { return optional_array_of(outcomes, fn); };
  return {
      param{number_array_literal(outcomes, [](auto o) { return o->task_id(); })},
      param{number_array_literal(outcomes, [](auto o) { return o->attempt(); })},
      column([](auto o) { return param{outcome_name(o->outcome())}; }),
      optional([](auto o) { return o->result().empty() ? param{} : text_param(o->result()); }),
      optional([](auto o) { return o->error().empty() ? param{} : text_param(o->error()); }),
      param{node},
  };
}

namespace {

param text_or_null(const std::string& text) {
  return text.empty() ? param{} : text_param(text);
}

/// The key spaces as taskmill.put_key_spaces takes them.
std::string key_spaces_json(const pb::TypeSettingsList& settings) {
  std::string out = "[";
  for (const auto& k : settings.key_spaces()) {
    if (out.size() > 1) out += ',';
    out += key_space_json(k);
  }
  return out + "]";
}

}  // namespace

std::vector<param> type_settings_params(const pb::TypeSettingsList& settings) {
  const auto& types = settings.types();
  auto column = [&](auto&& fn) { return param{array_literal_of(types, fn)}; };
  auto positive_or_null = [](auto value) { return value > 0 ? number_param(value) : param{}; };
  return {
      column([](const pb::TypeSettings& t) { return text_param(t.type()); }),
      column([](const pb::TypeSettings& t) { return number_param(t.timeout_ms()); }),
      column([](const pb::TypeSettings& t) { return number_param(t.max_retries()); }),
      column(
          [](const pb::TypeSettings& t) { return param{backoff_kind_name(t.backoff().kind())}; }),
      column([](const pb::TypeSettings& t) { return number_param(t.backoff().base_ms()); }),
      column([](const pb::TypeSettings& t) { return number_param(t.backoff().cap_ms()); }),
      column([](const pb::TypeSettings& t) { return number_param(t.backoff().jitter()); }),
      column([&](const pb::TypeSettings& t) { return positive_or_null(t.pending_deadline_ms()); }),
      column([&](const pb::TypeSettings& t) { return positive_or_null(t.running_limit()); }),
      column([&](const pb::TypeSettings& t) { return positive_or_null(t.heartbeat_timeout_ms()); }),
      column([&](const pb::TypeSettings& t) { return positive_or_null(t.max_timeout_ms()); }),
      positive_or_null(settings.global_limit()),
      text_param(key_spaces_json(settings)),
      column([&](const pb::TypeSettings& t) { return text_or_null(t.key_space()); }),
      column([&](const pb::TypeSettings& t) { return text_or_null(t.key_path()); }),
      column([&](const pb::TypeSettings& t) { return text_or_null(t.key_separator()); }),
      column([&](const pb::TypeSettings& t) {
        return t.has_rate_units() ? number_param(t.rate_units()) : param{};
      }),
  };
}

pb::TaskList read_task_page(const result& res, int limit) {
  pb::TaskList out;
  task_columns cols{res};
  int rows = std::min(res.rows(), limit);
  for (int row = 0; row < rows; ++row) read_task(res, row, cols, out.add_tasks());
  if (res.rows() > limit && rows > 0)
    out.set_next_page_token(std::to_string(out.tasks(rows - 1).id()));
  return out;
}

pb::TaskList read_scanned_task_page(const result& res, int limit, int scan_rows) {
  if (res.rows() == 0) return {};
  bool matched = !res.is_null(0, res.column("id"));
  auto out = matched ? read_task_page(res, limit) : pb::TaskList{};
  if (out.next_page_token().empty() && res.int64(0, res.column("scan_rows")) == scan_rows)
    out.set_next_page_token(res.string(0, res.column("scan_last")));
  return out;
}

}  // namespace taskmill::db
