#include "storage/storage.hpp"

#include "messages/errors.hpp"
#include "messages/names.hpp"
#include "messages/time.hpp"
#include "storage/alert_rows.hpp"
#include "storage/hand_off_notice.hpp"
#include "storage/job_rows.hpp"
#include "storage/listener.hpp"
#include "storage/migrations.hpp"
#include "storage/rows.hpp"
#include "storage/statements.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>

namespace taskmill {

namespace {

using results = std::vector<caf::expected<db::result>>;

// Deadlocks and serialization failures are tried again this often.
constexpr int max_tries = 3;

// Rows per submit statement; a larger batch is split. Each row holds an
// advisory lock until commit, and the lock table is shared and bounded.
constexpr size_t max_submit_rows = 1000;

// Tasks a page of the task list reads at most, however few its filters
// match: a bounded, indexed read even among millions of tasks (SPEC §8).
constexpr int list_scan_rows = 50000;

// Counts in the stats and /metrics are exact up to this many rows in the
// task table (finished tasks) and this many waiting tasks (pending and
// failed), estimated beyond (SPEC §8).
constexpr int64_t exact_counts_up_to = 100000;

struct submit_request {
  pb::SubmitTasks tasks;
  caf::typed_response_promise<pb::SubmitResults> promise;
  int tries = 0;
  // 0: merged with any other request. After a merged statement failed, its
  // requests are tried again in two halves, each a group of its own, until the
  // bad one is alone.
  int group = 0;
};

struct complete_request {
  pb::TaskOutcomes outcomes;
  caf::typed_response_promise<pb::OutcomeAcks> promise;
  int tries = 0;
};

/// Any other request: statements of its own, and what to do with their results.
struct plain_request {
  std::vector<db::call> calls;
  std::function<void(results&&)> answer;
  int tries = 0;
};

/// Statements sent in one round trip, and who gets which results.
struct part {
  std::vector<db::call> calls;
  std::function<void(results&&)> on_results;
};

}  // namespace

struct storage_state {
  static inline const char* name = "storage";

  storage_options options;
  std::optional<db::connection> conn;
  std::vector<submit_request> submits;
  std::vector<complete_request> completes;
  std::vector<plain_request> plains;
  bool flush_scheduled = false;
  bool reconnect_scheduled = false;
  int last_group = 0;
  std::chrono::milliseconds reconnect_delay{0};
  pb::StorageStatus status;
  std::unique_ptr<db::notification_listener> listener;
  std::unique_ptr<db::notification_listener> job_listener;
  // Compensation rules as prepared statements; the strings back the views.
  std::vector<std::pair<std::string, std::string>> rule_text;
  std::vector<db::statement> rule_statements;
};

namespace {

using self_ptr = storage_actor::stateful_pointer<storage_state>;

caf::error unavailable(self_ptr self) {
  auto& last = self->state.status.last_error();
  return make_error(errc::storage_unavailable,
                    "PostgreSQL is not reachable" + (last.empty() ? "" : ": " + last));
}

bool retryable(const caf::error& err) {
  return is(err, errc::retryable);
}

void schedule_flush(self_ptr self) {
  if (self->state.flush_scheduled) return;
  self->state.flush_scheduled = true;
  self->send(self, caf::flush_atom_v);
}

bool connect(self_ptr self) {
  auto& st = self->state;
  auto fail = [&](const caf::error& err) {
    st.status.set_last_error(error_message(err));
    spdlog::warn("storage: {}", error_message(err));
    return false;
  };
  auto conn = db::connection::open(st.options.conninfo, st.options.statement_timeout,
                                   st.options.lock_timeout, st.options.transaction_pooler);
  if (!conn) return fail(conn.error());
  auto version = db::apply_migrations(*conn, db::all_migrations());
  if (!version) return fail(version.error());
  auto statements = db::sql::all();
  for (const auto& rule : st.rule_statements) statements.push_back(&rule);
  if (auto err = conn->prepare_and_enter_pipeline(statements)) return fail(err);
  st.conn = std::move(*conn);
  st.status.set_connected(true);
  st.status.set_schema_version(*version);
  st.status.set_schema_current(*version >= db::all_migrations().back().version);
  st.status.clear_last_error();
  st.reconnect_delay = std::chrono::milliseconds{0};
  spdlog::info("storage: connected to {}, schema version {}",
               db::redact_conninfo(st.options.conninfo), *version);
  return true;
}

void schedule_reconnect(self_ptr self) {
  auto& st = self->state;
  if (st.reconnect_scheduled) return;
  st.reconnect_scheduled = true;
  st.reconnect_delay = st.reconnect_delay.count() == 0
                           ? st.options.reconnect_min
                           : std::min(st.reconnect_delay * 2, st.options.reconnect_max);
  self->delayed_send(self, st.reconnect_delay, reconnect_atom_v);
}

void disconnect(self_ptr self) {
  auto& st = self->state;
  st.conn.reset();
  st.status.set_connected(false);
  st.status.set_reconnects(st.status.reconnects() + 1);
  schedule_reconnect(self);
}

// -- submit ---------------------------------------------------------------------

void read_submit_results(const db::result& res, std::vector<pb::SubmitResult>& by_ordinal) {
  db::task_columns cols{res};
  int ordinal = res.column("ordinal");
  int outcome = res.column("outcome");
  for (int row = 0; row < res.rows(); ++row) {
    auto index = static_cast<size_t>(res.int64(row, ordinal) - 1);
    if (index >= by_ordinal.size()) continue;
    auto& out = by_ordinal[index];
    out.set_outcome(
        parse_submit_outcome(res.text(row, outcome)).value_or(pb::SUBMIT_OUTCOME_UNSPECIFIED));
    db::read_task(res, row, cols, out.mutable_task());
  }
}

void requeue_submits(self_ptr self, std::vector<submit_request>& requests, const caf::error& err) {
  auto& st = self->state;
  bool split = !retryable(err) && requests.size() > 1 && !is(err, errc::storage_unavailable);
  int halves[2] = {++st.last_group, ++st.last_group};
  for (size_t i = 0; i < requests.size(); ++i) {
    auto& r = requests[i];
    if (split) {
      // One bad submit must not fail the others merged with it.
      r.group = halves[i < requests.size() / 2 ? 0 : 1];
    } else if (retryable(err) && r.tries + 1 < max_tries) {
      ++r.tries;
    } else {
      r.promise.deliver(err);
      continue;
    }
    st.submits.push_back(std::move(r));
  }
  schedule_flush(self);
}

part submit_part(self_ptr self, std::vector<submit_request> requests) {
  auto shared = std::make_shared<std::vector<submit_request>>(std::move(requests));
  std::vector<const pb::SubmitTask*> tasks;
  for (const auto& r : *shared)
    for (const auto& t : r.tasks.tasks()) tasks.push_back(&t);
  part p;
  p.calls.push_back(db::call{&db::sql::submit_batch, db::submit_params(tasks)});
  p.on_results = [self, shared, total = tasks.size()](results&& rs) {
    if (!rs[0]) {
      requeue_submits(self, *shared, rs[0].error());
      return;
    }
    std::vector<pb::SubmitResult> by_ordinal(total);
    read_submit_results(*rs[0], by_ordinal);
    size_t next = 0;
    for (auto& r : *shared) {
      pb::SubmitResults answer;
      for (int i = 0; i < r.tasks.tasks_size(); ++i)
        *answer.add_results() = std::move(by_ordinal[next++]);
      r.promise.deliver(std::move(answer));
    }
  };
  return p;
}

void add_submit_parts(self_ptr self, std::vector<part>& parts) {
  std::map<int, std::vector<submit_request>> groups;
  std::map<int, size_t> rows;
  for (auto& r : self->state.submits) {
    auto& group = groups[r.group];
    auto& group_rows = rows[r.group];
    if (group_rows > 0 && group_rows + r.tasks.tasks_size() > max_submit_rows) {
      parts.push_back(submit_part(self, std::move(group)));
      group.clear();
      group_rows = 0;
    }
    group_rows += r.tasks.tasks_size();
    group.push_back(std::move(r));
  }
  for (auto& [id, group] : groups)
    if (!group.empty()) parts.push_back(submit_part(self, std::move(group)));
  self->state.submits.clear();
}

// -- complete -------------------------------------------------------------------

void requeue_completes(self_ptr self, std::vector<complete_request>& requests,
                       const caf::error& err) {
  for (auto& r : requests) {
    if (retryable(err) && r.tries + 1 < max_tries) {
      ++r.tries;
      self->state.completes.push_back(std::move(r));
    } else {
      r.promise.deliver(err);
    }
  }
  schedule_flush(self);
}

void add_complete_part(self_ptr self, std::vector<part>& parts) {
  auto& st = self->state;
  if (st.completes.empty()) return;
  auto shared = std::make_shared<std::vector<complete_request>>(std::move(st.completes));
  st.completes.clear();
  // The same (task, attempt) twice counts once: the second is answered stale.
  std::vector<const pb::TaskOutcome*> unique;
  std::map<std::pair<int64_t, int32_t>, size_t> seen;
  auto slots = std::make_shared<std::vector<std::optional<size_t>>>();
  for (const auto& r : *shared)
    for (const auto& o : r.outcomes.outcomes()) {
      auto [it, inserted] = seen.emplace(std::pair{o.task_id(), o.attempt()}, unique.size());
      slots->push_back(inserted ? std::optional<size_t>{unique.size()} : std::nullopt);
      if (inserted) unique.push_back(&o);
    }
  part p;
  p.calls.push_back(
      db::call{&db::sql::complete_many, db::complete_params(unique, st.options.node)});
  p.on_results = [self, shared, slots](results&& rs) {
    if (!rs[0]) {
      requeue_completes(self, *shared, rs[0].error());
      return;
    }
    const auto& res = *rs[0];
    int applied = res.column("applied");
    int status = res.column("status");
    size_t next = 0;
    for (auto& r : *shared) {
      pb::OutcomeAcks acks;
      for (const auto& o : r.outcomes.outcomes()) {
        auto ack = acks.add_acks();
        ack->set_task_id(o.task_id());
        ack->set_attempt(o.attempt());
        auto slot = (*slots)[next++];
        if (!slot || static_cast<int>(*slot) >= res.rows()) continue;
        int row = static_cast<int>(*slot);
        ack->set_applied(res.boolean(row, applied));
        ack->set_status(parse_status(res.text(row, status)).value_or(pb::TASK_STATUS_UNSPECIFIED));
      }
      r.promise.deliver(std::move(acks));
    }
  };
  parts.push_back(std::move(p));
}

// -- plain requests -------------------------------------------------------------

void add_plain_parts(self_ptr self, std::vector<part>& parts) {
  for (auto& r : self->state.plains) {
    auto shared = std::make_shared<plain_request>(std::move(r));
    part p;
    p.calls = shared->calls;
    p.on_results = [self, shared](results&& rs) {
      for (auto& res : rs) {
        if (!res && retryable(res.error()) && shared->tries + 1 < max_tries) {
          ++shared->tries;
          self->state.plains.push_back(std::move(*shared));
          schedule_flush(self);
          return;
        }
      }
      shared->answer(std::move(rs));
    };
    parts.push_back(std::move(p));
  }
  self->state.plains.clear();
}

/// Sends `calls` in the next round trip and answers `promise` with what
/// `read` makes of their results. The first `must_succeed` calls (all, by
/// default) fail the request when they fail; `read` sees the others as they
/// came back.
template <class T>
void enqueue(self_ptr self, std::vector<db::call> calls, caf::typed_response_promise<T> promise,
             std::function<caf::expected<T>(results&)> read,
             size_t must_succeed = std::numeric_limits<size_t>::max()) {
  plain_request r;
  r.calls = std::move(calls);
  r.answer = [promise, read = std::move(read), must_succeed](results&& rs) mutable {
    for (size_t i = 0; i < rs.size() && i < must_succeed; ++i)
      if (!rs[i]) {
        promise.deliver(rs[i].error());
        return;
      }
    auto value = read(rs);
    if (value)
      promise.deliver(std::move(*value));
    else
      promise.deliver(value.error());
  };
  self->state.plains.push_back(std::move(r));
  schedule_flush(self);
}

/// Answers a request with what `read` makes of the results of `calls`, sent
/// in the next round trip; at once with an error while PostgreSQL is away.
template <class T>
caf::result<T> ask_db(self_ptr self, std::vector<db::call> calls,
                      std::function<caf::expected<T>(results&)> read,
                      size_t must_succeed = std::numeric_limits<size_t>::max()) {
  if (!self->state.conn) return unavailable(self);
  auto promise = self->make_response_promise<T>();
  enqueue<T>(self, std::move(calls), promise, std::move(read), must_succeed);
  return promise;
}

// -- the round trip -------------------------------------------------------------

void fail_queued(self_ptr self, const caf::error& err) {
  auto& st = self->state;
  for (auto& r : st.submits) r.promise.deliver(err);
  for (auto& r : st.completes) r.promise.deliver(err);
  for (auto& r : st.plains) {
    results rs;
    for (size_t i = 0; i < r.calls.size(); ++i) rs.emplace_back(err);
    r.answer(std::move(rs));
  }
  st.submits.clear();
  st.completes.clear();
  st.plains.clear();
}

void flush(self_ptr self) {
  auto& st = self->state;
  st.flush_scheduled = false;
  if (!st.conn) {
    fail_queued(self, unavailable(self));
    return;
  }
  std::vector<part> parts;
  add_submit_parts(self, parts);
  add_complete_part(self, parts);
  add_plain_parts(self, parts);
  if (parts.empty()) return;
  std::vector<db::call> calls;
  for (const auto& p : parts) calls.insert(calls.end(), p.calls.begin(), p.calls.end());
  // Each part is answered as soon as its statements are through, before
  // those after it ran (a claim reaches its pusher before the next-due read).
  // Once the connection is lost the rest wait for the disconnect, so that
  // those that retry find the storage away.
  size_t next_part = 0;
  results pending;
  std::vector<std::pair<size_t, results>> after_disconnect;
  st.conn->run(calls, [&](caf::expected<db::result>&& res) {
    pending.push_back(std::move(res));
    if (pending.size() < parts[next_part].calls.size()) return;
    if (st.conn->broken())
      after_disconnect.emplace_back(next_part, std::move(pending));
    else
      parts[next_part].on_results(std::move(pending));
    pending = results{};
    ++next_part;
  });
  st.status.set_round_trips(st.status.round_trips() + 1);
  st.status.set_statements(st.status.statements() + static_cast<int64_t>(calls.size()));
  st.status.set_requests(st.status.requests() + static_cast<int64_t>(parts.size()));
  if (st.conn->broken()) {
    for (const auto& [index, rs] : after_disconnect)
      for (const auto& r : rs)
        if (!r) st.status.set_last_error(error_message(r.error()));
    spdlog::warn("storage: {}", st.status.last_error());
    disconnect(self);
  }
  for (auto& [index, rs] : after_disconnect) parts[index].on_results(std::move(rs));
}

// -- reading rows ---------------------------------------------------------------

caf::expected<pb::Task> single_task(const db::result& res, const std::string& missing) {
  if (res.rows() == 0) return make_error(errc::not_found, missing);
  pb::Task task;
  db::read_task(res, 0, db::task_columns{res}, &task);
  return task;
}

template <class Result, class Outcome>
caf::expected<Result> outcome_and_task(const db::result& res,
                                       std::optional<Outcome> (*parse)(std::string_view)) {
  if (res.rows() == 0) return make_error(errc::storage_error, "statement returned no row");
  Result out;
  out.set_outcome(parse(res.text(0, res.column("outcome"))).value_or(Outcome{}));
  db::read_task(res, 0, db::task_columns{res}, out.mutable_task());
  return out;
}

/// The claimed tasks, started when the claim did, by the database's clock.
pb::ClaimedTasks read_claim(const db::result& claimed) {
  pb::ClaimedTasks out;
  db::task_columns cols{claimed};
  auto turns_taken = claimed.column("turns_taken");
  auto claimed_at = claimed.column("claimed_at_us");
  auto handed_unheard = claimed.column("handed_unheard");
  if (handed_unheard >= 0 && claimed.rows() > 0)
    out.set_handed_unheard(claimed.int32(0, handed_unheard));
  for (int row = 0; row < claimed.rows(); ++row) {
    // A claim that took back an offer and no task answers in a row without one.
    if (claimed.is_null(row, cols.id)) continue;
    auto* task = out.add_tasks();
    db::read_task(claimed, row, cols, task);
    set_micros(task->mutable_started_at(), claimed.int64(row, claimed_at));
    // Rows of a second walk over the turns tell how far that one went.
    out.set_turns_taken(std::max(out.turns_taken(), claimed.int32(row, turns_taken)));
  }
  return out;
}

/// Milliseconds until the next task not yet due becomes due, by the
/// database's clock; -1 when none does within the horizon.
int64_t read_next_due(const db::result& next) {
  if (next.rows() == 0 || next.is_null(0, 0)) return -1;
  auto delay_us = next.micros(0, 0) - next.micros(0, 1);
  return std::max<int64_t>(0, (delay_us + 999) / 1000);
}

pb::TaskList read_task_page(const db::result& res, int limit) {
  pb::TaskList out;
  db::task_columns cols{res};
  int rows = std::min(res.rows(), limit);
  for (int row = 0; row < rows; ++row) db::read_task(res, row, cols, out.add_tasks());
  if (res.rows() > limit && rows > 0)
    out.set_next_page_token(std::to_string(out.tasks(rows - 1).id()));
  return out;
}

/// A page of list_tasks: its matches, and the next page's token either
/// after the last match shown or, when the scan ended before the page was
/// full, where the scan ended, unless it reached the end of the table.
pb::TaskList read_scanned_task_page(const db::result& res, int limit, int scan_rows) {
  if (res.rows() == 0) return {};
  bool matched = !res.is_null(0, res.column("id"));
  auto out = matched ? read_task_page(res, limit) : pb::TaskList{};
  if (out.next_page_token().empty() && res.int64(0, res.column("scan_rows")) == scan_rows)
    out.set_next_page_token(res.string(0, res.column("scan_last")));
  return out;
}

caf::expected<pb::AttemptList> read_attempts(const db::result& res, int64_t id) {
  if (res.rows() == 0) return make_error(errc::not_found, "no task with id " + std::to_string(id));
  pb::AttemptList out;
  for (int row = 0; row < res.rows(); ++row) {
    if (res.is_null(row, 1)) continue;  // a task without attempts yet
    auto a = out.add_attempts();
    a->set_attempt(res.int32(row, 1));
    a->set_node(res.string(row, 2));
    if (!res.is_null(row, 3)) set_micros(a->mutable_started_at(), res.micros(row, 3));
    if (!res.is_null(row, 4)) set_micros(a->mutable_finished_at(), res.micros(row, 4));
    a->set_outcome(res.string(row, 5));
    a->set_error(res.string(row, 6));
    if (!res.is_null(row, 3) && !res.is_null(row, 4))
      a->set_duration_ms((res.micros(row, 4) - res.micros(row, 3)) / 1000);
  }
  return out;
}

pb::NodeList read_nodes(const db::result& res) {
  pb::NodeList out;
  for (int row = 0; row < res.rows(); ++row) {
    auto n = out.add_nodes();
    n->set_name(res.string(row, 0));
    n->set_address(res.string(row, 1));
    set_micros(n->mutable_started_at(), res.micros(row, 2));
    set_micros(n->mutable_heartbeat_at(), res.micros(row, 3));
    n->set_role(res.string(row, 4));
    n->set_running(res.int64(row, 5));
  }
  return out;
}

caf::expected<pb::BatchCounts> read_batch_counts(const db::result& res, const std::string& batch) {
  if (res.rows() == 0) return make_error(errc::not_found, "no batch " + batch);
  pb::BatchCounts out;
  out.set_batch(batch);
  for (int row = 0; row < res.rows(); ++row)
    (*out.mutable_counts())[res.string(row, 0)] = res.int64(row, 1);
  return out;
}

/// Rows of (type, status, count, estimated).
void read_status_counts(const db::result& counts, pb::Stats& out) {
  for (int row = 0; row < counts.rows(); ++row) {
    auto c = out.add_counts();
    c->set_type(counts.string(row, 0));
    c->set_status(parse_status(counts.text(row, 1)).value_or(pb::TASK_STATUS_UNSPECIFIED));
    c->set_count(counts.int64(row, 2));
    c->set_estimated(counts.boolean(row, 3));
  }
}

pb::Stats read_stats(const db::result& counts, const db::result& recent) {
  pb::Stats out;
  read_status_counts(counts, out);
  for (int row = 0; row < recent.rows(); ++row) {
    auto m = out.add_recent();
    set_micros(m->mutable_minute(), recent.micros(row, 0));
    m->set_succeeded(recent.int64(row, 1));
    m->set_retried(recent.int64(row, 2));
    m->set_failed(recent.int64(row, 3));
  }
  return out;
}

std::string int_array(const google::protobuf::RepeatedField<int32_t>& values) {
  return db::number_array_literal(values, [](int32_t v) { return v; });
}

std::string text_array(const google::protobuf::RepeatedPtrField<std::string>& values) {
  return db::array_literal_of(values, [](const std::string& v) { return db::param{v}; });
}

/// A map as two arrays in the same order: keys, values.
std::pair<std::string, std::string> key_value_arrays(
    const google::protobuf::Map<std::string, int32_t>& map) {
  std::vector<db::param> keys, values;
  for (const auto& [key, value] : map) {
    keys.emplace_back(key);
    values.emplace_back(std::to_string(value));
  }
  return {db::array_literal(keys), db::array_literal(values)};
}

/// The types a grant lets this node claim; null: any.
db::param claimable_types(const pb::ClaimGrant& grant) {
  return grant.any_type() ? db::param{} : db::param{text_array(grant.types())};
}

db::call claim_call(const pb::ClaimRequest& req, const db::param& types) {
  const auto& grant = req.grant();
  auto [capped_types, capped_limits] = key_value_arrays(grant.type_limits());
  auto [room_types, room] = key_value_arrays(grant.executor_room());
  std::vector<db::param> params{req.node(),
                                std::to_string(grant.permits()),
                                int_array(req.turns()),
                                std::move(capped_types),
                                std::move(capped_limits),
                                std::to_string(grant.global_limit()),
                                types,
                                std::move(room_types),
                                std::move(room),
                                req.after_short_claim() ? "t" : "f"};
  if (req.offered() <= 0) return {&db::sql::claim, std::move(params)};
  params.emplace_back(std::to_string(req.offered()));
  return {&db::sql::claim_taking_offer_back, std::move(params)};
}

// -- requests -----------------------------------------------------------------
// Each request is one pipelined call (or a few), answered from its rows.

caf::result<pb::SubmitResults> queue_submit(self_ptr self, pb::SubmitTasks&& tasks) {
  if (!self->state.conn) return unavailable(self);
  auto promise = self->make_response_promise<pb::SubmitResults>();
  self->state.submits.push_back(submit_request{std::move(tasks), promise});
  schedule_flush(self);
  return promise;
}

caf::result<pb::OutcomeAcks> queue_complete(self_ptr self, pb::TaskOutcomes&& outcomes) {
  if (!self->state.conn) return unavailable(self);
  auto promise = self->make_response_promise<pb::OutcomeAcks>();
  self->state.completes.push_back(complete_request{std::move(outcomes), promise});
  schedule_flush(self);
  return promise;
}

caf::result<pb::RescheduleResult> reschedule(self_ptr self, const pb::RescheduleRequest& req) {
  db::call c{&db::sql::reschedule,
             {req.type(), req.key(),
              req.has_execute_at() ? db::timestamp_param(req.execute_at()) : db::param{},
              req.has_payload() ? db::param{req.payload()} : db::param{}}};
  return ask_db<pb::RescheduleResult>(self, {std::move(c)}, [](results& rs) {
    return outcome_and_task<pb::RescheduleResult>(*rs[0], &parse_reschedule_outcome);
  });
}

caf::result<pb::CancelResult> cancel(self_ptr self, const pb::CancelRequest& req) {
  db::call c = req.id() != 0 ? db::call{&db::sql::cancel_by_id, {std::to_string(req.id())}}
                             : db::call{&db::sql::cancel_by_key, {req.type(), req.key()}};
  return ask_db<pb::CancelResult>(self, {std::move(c)}, [](results& rs) {
    return outcome_and_task<pb::CancelResult>(*rs[0], &parse_cancel_outcome);
  });
}

caf::result<pb::ClaimedTasks> claim(self_ptr self, const pb::ClaimRequest& req) {
  return ask_db<pb::ClaimedTasks>(self, {claim_call(req, claimable_types(req.grant()))},
                                  [](results& rs) { return read_claim(*rs[0]); });
}

caf::result<bool> offer_permits(self_ptr self, const pb::ClaimRequest& req) {
  return ask_db<bool>(
      self,
      {db::call{&db::sql::offer_permits,
                {req.node(), claimable_types(req.grant()), std::to_string(req.grant().permits()),
                 std::to_string(req.offer_generation()), std::to_string(req.offer_fresh_ms())}}},
      [](results& rs) { return rs[0]->boolean(0, 0); });
}

caf::result<int64_t> next_due(self_ptr self, const pb::ClaimRequest& req) {
  db::call next{&db::sql::next_due,
                {claimable_types(req.grant()),
                 std::to_string(self->state.options.next_due_horizon.count()), req.node()}};
  return ask_db<int64_t>(self, {std::move(next)},
                         [](results& rs) { return read_next_due(*rs[0]); });
}

pb::Executions read_executions(const db::result& res) {
  pb::Executions out;
  for (int row = 0; row < res.rows(); ++row) {
    out.add_task_ids(res.int64(row, 0));
    out.add_attempts(res.int32(row, 1));
  }
  return out;
}

caf::result<pb::Executions> running_on_node(self_ptr self, const std::string& node) {
  return ask_db<pb::Executions>(self, {db::call{&db::sql::running_on_node, {node}}},
                                [](results& rs) { return read_executions(*rs[0]); });
}

std::vector<db::param> execution_params(const pb::Executions& executions) {
  return {db::number_array_literal(executions.task_ids(), [](int64_t id) { return id; }),
          int_array(executions.attempts())};
}

caf::result<pb::TaskList> still_running(self_ptr self, const pb::Executions& executions) {
  return ask_db<pb::TaskList>(
      self, {db::call{&db::sql::still_running, execution_params(executions)}},
      [](results& rs) { return read_task_page(*rs[0], std::numeric_limits<int>::max()); });
}

/// A task with its waiting reason, read in one round trip.
caf::result<pb::Task> task_with_waiting(self_ptr self, int64_t id) {
  const auto& w = self->state.options.waiting;
  auto weights = db::number_array_literal(w.weights, [](int v) { return v; });
  db::call reason{&db::sql::waiting_reason,
                  {std::to_string(id), std::to_string(w.lease.count()),
                   std::to_string(w.heartbeat_interval.count()), std::to_string(w.global_limit),
                   std::move(weights)}};
  return ask_db<pb::Task>(
      self, {db::call{&db::sql::get_task, {std::to_string(id)}}, reason}, [id](results& rs) {
        auto task = single_task(*rs[0], "no task with id " + std::to_string(id));
        if (task && rs[1]->rows() > 0) {
          const auto& r = *rs[1];
          auto* waiting = task->mutable_waiting();
          waiting->set_reason(r.string(0, 0));
          waiting->set_message(r.string(0, 1));
          if (!r.is_null(0, 2)) set_micros(waiting->mutable_until(), r.micros(0, 2));
        }
        return task;
      });
}

caf::result<pb::Task> task_by_id(self_ptr self, const db::statement& statement, int64_t id) {
  return ask_db<pb::Task>(self, {db::call{&statement, {std::to_string(id)}}}, [id](results& rs) {
    return single_task(*rs[0], "no task with id " + std::to_string(id));
  });
}

caf::result<pb::TaskList> list_tasks(self_ptr self, const pb::ListTasksRequest& req) {
  auto optional_text = [](const std::string& s) { return s.empty() ? db::param{} : db::param{s}; };
  auto limit = req.limit() > 0 ? req.limit() : 100;
  bool one_unit = !req.type().empty() && !req.key().empty();
  db::call c{one_unit ? &db::sql::list_unit_tasks : &db::sql::list_tasks,
             {optional_text(req.type()), optional_text(req.key()),
              req.status() == pb::TASK_STATUS_UNSPECIFIED ? db::param{}
                                                          : db::param{status_name(req.status())},
              optional_text(req.batch()), req.page_token().empty() ? "0" : req.page_token(),
              std::to_string(limit + 1)}};
  if (one_unit)
    return ask_db<pb::TaskList>(self, {std::move(c)},
                                [limit](results& rs) { return read_task_page(*rs[0], limit); });
  c.params.emplace_back(std::to_string(list_scan_rows));
  return ask_db<pb::TaskList>(self, {std::move(c)}, [limit](results& rs) {
    return read_scanned_task_page(*rs[0], limit, list_scan_rows);
  });
}

caf::result<pb::AttemptList> attempts(self_ptr self, int64_t id) {
  return ask_db<pb::AttemptList>(self, {db::call{&db::sql::task_attempts, {std::to_string(id)}}},
                                 [id](results& rs) { return read_attempts(*rs[0], id); });
}

caf::result<pb::BatchCounts> batch_counts(self_ptr self, const std::string& batch) {
  return ask_db<pb::BatchCounts>(self, {db::call{&db::sql::batch_counts, {batch}}},
                                 [batch](results& rs) { return read_batch_counts(*rs[0], batch); });
}

/// A call whose answer is the integer in its first row and column.
caf::result<int32_t> ask_count(self_ptr self, db::call c) {
  return ask_db<int32_t>(self, {std::move(c)},
                         [](results& rs) -> caf::expected<int32_t> { return rs[0]->int32(0, 0); });
}

caf::result<pb::Stats> live_counts(self_ptr self) {
  return ask_db<pb::Stats>(self,
                           {db::call{&db::sql::live_counts, {std::to_string(exact_counts_up_to)}}},
                           [](results& rs) {
                             pb::Stats out;
                             read_status_counts(*rs[0], out);
                             return out;
                           });
}

caf::result<pb::Stats> stats(self_ptr self) {
  constexpr const char* recent_minutes = "15";
  return ask_db<pb::Stats>(self,
                           {db::call{&db::sql::status_counts, {std::to_string(exact_counts_up_to)}},
                            db::call{&db::sql::recent_outcomes, {recent_minutes}}},
                           [](results& rs) { return read_stats(*rs[0], *rs[1]); });
}

caf::result<pb::NodeList> nodes(self_ptr self, int64_t lease_ms) {
  return ask_db<pb::NodeList>(
      self, {db::call{&db::sql::list_nodes, {std::to_string(lease_ms)}}},
      [](results& rs) -> caf::expected<pb::NodeList> { return read_nodes(*rs[0]); });
}

caf::result<int32_t> register_node(self_ptr self, const pb::NodeRegistration& node) {
  auto types = node.any_type() ? db::param{} : db::param{text_array(node.types())};
  return ask_count(self, {&db::sql::register_node,
                          {node.name(), node.incarnation(), node.address(),
                           std::to_string(node.lease_ms()), types}});
}

caf::result<bool> heartbeat(self_ptr self, const pb::Heartbeat& beat) {
  std::vector<db::call> calls{
      {&db::sql::heartbeat, {beat.name(), beat.incarnation(), beat.leader() ? "true" : "false"}}};
  if (beat.succeeded() > 0 || beat.retried() > 0 || beat.failed() > 0)
    calls.push_back({&db::sql::add_outcomes,
                     {beat.name(), std::to_string(beat.succeeded()), std::to_string(beat.retried()),
                      std::to_string(beat.failed())}});
  return ask_db<bool>(self, std::move(calls), [](results& rs) { return rs[0]->boolean(0, 0); });
}

caf::result<int64_t> lead(self_ptr self, const pb::Lead& req) {
  return ask_db<int64_t>(self,
                         {db::call{&db::sql::lead,
                                   {req.node(), req.incarnation(), req.want() ? "true" : "false",
                                    std::to_string(req.lease_ms())}}},
                         [](results& rs) { return rs[0]->int64(0, 0); });
}

caf::result<pb::SweepResult> sweep(self_ptr self, const pb::SweepRequest& req) {
  auto batch = std::to_string(req.batch_size());
  auto term = std::to_string(req.term());
  std::vector<db::call> calls{
      {&db::sql::sweep_lost, {std::to_string(req.lease_ms()), batch, term}},
      {&db::sql::sweep_timeouts, {std::to_string(req.timeout_grace_ms()), batch, term}},
      {&db::sql::sweep_deadlines, {batch, term}},
      {&db::sql::sweep_succeeded, {std::to_string(req.success_retention_ms()), batch, term}},
      {&db::sql::sweep_purge, {std::to_string(req.purge_retention_ms()), batch, term}},
      {&db::sql::sweep_repin, {std::to_string(req.lease_ms()), batch, term}},
  };
  return ask_db<pb::SweepResult>(self, std::move(calls),
                                 [](results& rs) -> caf::expected<pb::SweepResult> {
                                   pb::SweepResult out;
                                   out.set_lost(rs[0]->int32(0, 0));
                                   out.set_timed_out(rs[1]->int32(0, 0));
                                   out.set_expired(rs[2]->int32(0, 0));
                                   out.set_stopped(rs[3]->int32(0, 0));
                                   out.set_purged(rs[4]->int32(0, 0));
                                   out.set_repinned(rs[5]->int32(0, 0));
                                   return out;
                                 });
}

caf::result<pb::Executions> finished_executions(self_ptr self, const pb::Executions& executions) {
  return ask_db<pb::Executions>(
      self, {db::call{&db::sql::finished_executions, execution_params(executions)}},
      [](results& rs) { return read_executions(*rs[0]); });
}

caf::result<int32_t> compensate(self_ptr self, int32_t rule, int64_t term) {
  auto& st = self->state;
  if (rule < 0 || rule >= static_cast<int32_t>(st.rule_statements.size()))
    return make_error(errc::invalid_argument, "no compensation rule " + std::to_string(rule));
  return ask_count(self, {&st.rule_statements[rule],
                          {st.options.rules[rule].type,
                           std::to_string(st.options.compensation_batch), std::to_string(term)}});
}

caf::result<int32_t> put_type_settings(self_ptr self, const pb::TypeSettingsList& settings) {
  db::call c{&db::sql::put_type_settings, db::type_settings_params(settings)};
  return ask_db<int32_t>(
      self, {std::move(c)},
      [n = settings.types_size()](results&) -> caf::expected<int32_t> { return n; });
}

/// Starts `listener` on `channels`, calling `on_notify` from its thread.
void subscribe(self_ptr self, std::unique_ptr<db::notification_listener>& listener,
               std::vector<std::string> channels, db::notification_listener::callback on_notify) {
  auto& st = self->state;
  if (!st.options.listen || listener) return;
  listener = std::make_unique<db::notification_listener>(
      st.options.conninfo, std::move(channels), std::move(on_notify), st.options.reconnect_min,
      st.options.reconnect_max);
}

/// Forwards NOTIFY on `channel` to `target`, through a listener of its own.
void subscribe(self_ptr self, std::unique_ptr<db::notification_listener>& listener,
               const char* channel, wake_listener_actor target) {
  subscribe(self, listener, {channel}, [target](const std::vector<db::notification>&, bool) {
    caf::anon_send(target, wake_atom_v);
  });
}

/// Wake-ups and the tasks handed to `node` to `pusher`, and a word after
/// every (re)connect, as hand-offs meanwhile went unheard.
void subscribe_claims(self_ptr self, claim_waker_actor pusher, const std::string& node) {
  subscribe(self, self->state.listener, {"taskmill_tasks", "taskmill_handoffs"},
            [pusher, node](const std::vector<db::notification>& burst, bool connected) {
              if (connected) {
                caf::anon_send(pusher, adopt_atom_v);
                return;
              }
              pb::Executions handed;
              bool wake = false;
              for (const auto& n : burst) {
                if (n.channel != "taskmill_handoffs")
                  wake = true;
                else if (!db::add_if_handed_to(node, n.payload, handed))
                  spdlog::warn("storage: a hand-off notification that is no hand-off: {}",
                               n.payload);
              }
              if (handed.task_ids_size() > 0)
                caf::anon_send(pusher, adopt_atom_v, std::move(handed));
              if (wake) caf::anon_send(pusher, wake_atom_v);
            });
}

// -- recurring jobs ------------------------------------------------------------

caf::expected<pb::Job> single_job(const db::result& res, const std::string& name) {
  if (res.rows() == 0) return make_error(errc::not_found, "no job " + name);
  pb::Job job;
  db::read_job(res, 0, &job);
  return job;
}

caf::result<pb::JobPutResult> put_job(self_ptr self, const pb::Job& job) {
  return ask_db<pb::JobPutResult>(self, {db::call{&db::sql::put_job, db::job_params(job)}},
                                  [](results& rs) -> caf::expected<pb::JobPutResult> {
                                    pb::JobPutResult out;
                                    out.set_created(rs[0]->boolean(0, 0));
                                    db::read_job(*rs[0], 0, out.mutable_job());
                                    return out;
                                  });
}

caf::result<pb::Job> get_job(self_ptr self, const std::string& name) {
  return ask_db<pb::Job>(self, {db::call{&db::sql::get_job, {name}}},
                         [name](results& rs) { return single_job(*rs[0], name); });
}

caf::result<pb::JobList> list_jobs(self_ptr self) {
  return ask_db<pb::JobList>(self, {db::call{&db::sql::list_jobs, {}}},
                             [](results& rs) -> caf::expected<pb::JobList> {
                               pb::JobList out;
                               for (int row = 0; row < rs[0]->rows(); ++row)
                                 db::read_job(*rs[0], row, out.add_jobs());
                               return out;
                             });
}

caf::result<bool> delete_job(self_ptr self, const std::string& name) {
  return ask_db<bool>(self, {db::call{&db::sql::delete_job, {name}}},
                      [](results& rs) -> caf::expected<bool> { return rs[0]->boolean(0, 0); });
}

caf::result<pb::Job> set_job_enabled(self_ptr self, const std::string& name, bool enabled,
                                     int64_t next_us) {
  db::call c{&db::sql::set_job_enabled,
             {name, enabled ? "true" : "false", db::micros_param(next_us)}};
  return ask_db<pb::Job>(self, {std::move(c)},
                         [name](results& rs) { return single_job(*rs[0], name); });
}

caf::result<pb::JobFiring> trigger_job(self_ptr self, const std::string& name,
                                       const std::string& payload, int64_t lease_ms) {
  db::call c{&db::sql::trigger_job,
             {name, payload.empty() ? db::param{} : db::param{payload}, std::to_string(lease_ms)}};
  return ask_db<pb::JobFiring>(self, {std::move(c)},
                               [name](results& rs) -> caf::expected<pb::JobFiring> {
                                 pb::JobFiring out;
                                 out.set_job(name);
                                 set_micros(out.mutable_fire_at(), rs[0]->micros(0, 0));
                                 out.set_kind("manual");
                                 out.set_outcome(rs[0]->string(0, 1));
                                 out.set_batch(rs[0]->string(0, 2));
                                 return out;
                               });
}

caf::result<pb::JobFirings> job_firings(self_ptr self, const std::string& name, int32_t limit) {
  return ask_db<pb::JobFirings>(self,
                                {db::call{&db::sql::job_firings, {name, std::to_string(limit)}}},
                                [name](results& rs) { return db::read_firings(*rs[0], name); });
}

caf::result<pb::JobMetrics> job_metrics(self_ptr self) {
  return ask_db<pb::JobMetrics>(self, {db::call{&db::sql::job_metrics, {}}},
                                [](results& rs) { return db::read_job_metrics(*rs[0]); });
}

caf::result<pb::DueJobs> due_jobs(self_ptr self, int32_t limit) {
  return ask_db<pb::DueJobs>(
      self,
      {db::call{&db::sql::due_jobs, {std::to_string(limit)}}, db::call{&db::sql::next_job_due, {}}},
      [](results& rs) { return db::read_due_jobs(*rs[0], *rs[1]); });
}

/// The firings and, in the same round trip, when the next job is due after
/// them, so that the cron actor need not ask again.
caf::result<pb::FiringRound> fire_jobs(self_ptr self, const pb::JobPlans& plans) {
  return ask_db<pb::FiringRound>(
      self,
      {db::call{&db::sql::fire_jobs, db::fire_params(plans)}, db::call{&db::sql::next_job_due, {}}},
      [](results& rs) { return db::read_firing_round(*rs[0], rs[1]); }, 1);
}

// -- alerts ----------------------------------------------------------------------

/// The alerts raised and, in the same round trip, the deliveries due.
caf::result<pb::AlertRound> alert_round(self_ptr self, const pb::AlertCheck& check) {
  return ask_db<pb::AlertRound>(
      self,
      {db::call{&db::sql::raise_alerts, db::raise_alerts_params(check)},
       db::call{&db::sql::take_alert_deliveries,
                {std::to_string(check.batch_size()), std::to_string(check.delivery_lease_ms()),
                 std::to_string(check.term())}}},
      [](results& rs) { return db::read_alert_round(*rs[0], *rs[1]); });
}

caf::result<pb::AlertList> list_alerts(self_ptr self, const pb::ListAlertsRequest& req) {
  return ask_db<pb::AlertList>(self, {db::call{&db::sql::list_alerts, db::list_alerts_params(req)}},
                               [](results& rs) { return db::read_alert_list(*rs[0]); });
}

caf::result<pb::AlertMetrics> alert_metrics(self_ptr self) {
  return ask_db<pb::AlertMetrics>(self, {db::call{&db::sql::alert_metrics, {}}},
                                  [](results& rs) { return db::read_alert_metrics(*rs[0]); });
}

void reconnect(self_ptr self) {
  self->state.reconnect_scheduled = false;
  if (self->state.conn) return;
  if (!connect(self)) schedule_reconnect(self);
}

storage_actor::behavior_type storage(self_ptr self, storage_options options) {
  auto& st = self->state;
  st.options = std::move(options);
  for (size_t i = 0; i < st.options.rules.size(); ++i)
    st.rule_text.emplace_back("compensate_" + std::to_string(i),
                              db::sql::compensation_sql(st.options.rules[i].query));
  for (const auto& [name, sql] : st.rule_text)
    st.rule_statements.push_back({name.c_str(), sql.c_str()});
  if (!connect(self)) schedule_reconnect(self);
  return {
      [self](submit_atom, pb::SubmitTasks& t) { return queue_submit(self, std::move(t)); },
      [self](complete_atom, pb::TaskOutcomes& o) { return queue_complete(self, std::move(o)); },
      [self](reschedule_atom, const pb::RescheduleRequest& r) { return reschedule(self, r); },
      [self](cancel_atom, const pb::CancelRequest& r) { return cancel(self, r); },
      [self](claim_atom, const pb::ClaimRequest& r) { return claim(self, r); },
      [self](next_due_atom, const pb::ClaimRequest& r) { return next_due(self, r); },
      [self](offer_atom, const pb::ClaimRequest& r) { return offer_permits(self, r); },
      [self](offer_atom, const std::string& node, int64_t generation, int32_t permits) {
        return ask_db<bool>(self,
                            {db::call{&db::sql::add_to_offer,
                                      {node, std::to_string(generation), std::to_string(permits)}}},
                            [](results& rs) { return rs[0]->boolean(0, 0); });
      },
      [self](offer_atom, const std::string& node, int32_t offered) {
        return ask_count(self, {&db::sql::withdraw_offer, {node, std::to_string(offered)}});
      },
      [self](running_atom, const std::string& node) { return running_on_node(self, node); },
      [self](running_atom, const pb::Executions& e) { return still_running(self, e); },
      [self](caf::get_atom, int64_t id) { return task_with_waiting(self, id); },
      [self](list_atom, const pb::ListTasksRequest& r) { return list_tasks(self, r); },
      [self](attempts_atom, int64_t id) { return attempts(self, id); },
      [self](retry_atom, int64_t id) { return task_by_id(self, db::sql::retry_task, id); },
      [self](batch_atom, const std::string& batch) { return batch_counts(self, batch); },
      [self](retry_atom, const std::string& batch) {
        return ask_count(self, {&db::sql::retry_batch, {batch}});
      },
      [self](stats_atom) { return stats(self); },
      [self](stats_atom, live_atom) { return live_counts(self); },
      [self](nodes_atom, int64_t lease_ms) { return nodes(self, lease_ms); },
      [self](status_atom) { return self->state.status; },
      [self](register_atom, const pb::NodeRegistration& n) { return register_node(self, n); },
      [self](heartbeat_atom, const pb::Heartbeat& beat) { return heartbeat(self, beat); },
      [self](lead_atom, const pb::Lead& req) { return lead(self, req); },
      [self](leave_atom, const pb::Heartbeat& n) {
        return ask_count(self, {&db::sql::leave, {n.name(), n.incarnation()}});
      },
      [self](sweep_atom, const pb::SweepRequest& r) { return sweep(self, r); },
      [self](check_atom, const pb::Executions& e) { return finished_executions(self, e); },
      [self](compensate_atom, int32_t rule, int64_t term) { return compensate(self, rule, term); },
      [self](configure_atom, const pb::TypeSettingsList& s) { return put_type_settings(self, s); },
      [self](caf::subscribe_atom, claim_waker_actor pusher, const std::string& node) {
        subscribe_claims(self, pusher, node);
      },
      [self](job_atom, const pb::Job& job) { return put_job(self, job); },
      [self](job_atom, const std::string& name) { return get_job(self, name); },
      [self](jobs_atom) { return list_jobs(self); },
      [self](drop_atom, const std::string& name) { return delete_job(self, name); },
      [self](enable_atom, const std::string& name, bool on, int64_t next_us) {
        return set_job_enabled(self, name, on, next_us);
      },
      [self](trigger_atom, const std::string& name, const std::string& payload, int64_t lease_ms) {
        return trigger_job(self, name, payload, lease_ms);
      },
      [self](firings_atom, const std::string& name, int32_t n) {
        return job_firings(self, name, n);
      },
      [self](jobs_atom, stats_atom) { return job_metrics(self); },
      [self](due_atom, int32_t limit) { return due_jobs(self, limit); },
      [self](fire_atom, const pb::JobPlans& plans) { return fire_jobs(self, plans); },
      [self](jobs_atom, caf::subscribe_atom, wake_listener_actor target) {
        subscribe(self, self->state.job_listener, "taskmill_jobs", target);
      },
      [self](alerts_atom, const pb::AlertCheck& c) { return alert_round(self, c); },
      [self](deliver_atom, const pb::DeliveryResults& r) {
        return ask_count(self,
                         {&db::sql::record_alert_deliveries, db::record_deliveries_params(r)});
      },
      [self](alerts_atom, const pb::ListAlertsRequest& r) { return list_alerts(self, r); },
      [self](alerts_atom, stats_atom) { return alert_metrics(self); },
      [self](caf::flush_atom) { flush(self); },
      [self](reconnect_atom) { reconnect(self); },
  };
}

}  // namespace

storage_actor spawn_storage(caf::actor_system& sys, storage_options options) {
  return sys.spawn<caf::detached>(storage, std::move(options));
}

}  // namespace taskmill
