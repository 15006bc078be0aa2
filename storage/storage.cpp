#include "storage/storage_internal.hpp"

#include "messages/errors.hpp"
#include "messages/json_codec.hpp"
#include "messages/names.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"
#include "messages/validate.hpp"
#include "storage/alert_rows.hpp"
#include "storage/hand_off_notice.hpp"
#include "storage/job_rows.hpp"
#include "storage/listener.hpp"
#include "storage/lock_table.hpp"
#include "storage/migrations.hpp"
#include "storage/rows.hpp"
#include "storage/statements.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>

namespace taskmill::storage_internal {

caf::error unavailable(self_ptr self) {
  auto last = self->state.options.status->read().last_error();
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

std::chrono::milliseconds retry_delay(int failed, double unit_random) {
  auto base = 50.0 * (1 << (2 * std::clamp(failed - 1, 0, max_tries - 2)));
  return std::chrono::milliseconds{static_cast<int64_t>(base * (0.75 + 0.5 * unit_random))};
}

void retry_later(self_ptr self, int failed, std::function<void()> requeue) {
  auto& st = self->state;
  auto delay = retry_delay(failed, std::uniform_real_distribution<double>{}(st.retry_random));
  st.retries.emplace_back(std::chrono::steady_clock::now() + delay, std::move(requeue));
  self->delayed_send(self, delay, caf::flush_atom_v);
}

namespace {

/// Puts the requests whose wait is over (all of them with `all`) back in
/// their queues.
void take_back_retries(self_ptr self, bool all) {
  auto& retries = self->state.retries;
  auto now = std::chrono::steady_clock::now();
  auto waiting = std::stable_partition(retries.begin(), retries.end(),
                                       [&](const auto& r) { return !all && r.first > now; });
  std::vector<std::function<void()>> due;
  for (auto it = waiting; it != retries.end(); ++it) due.push_back(std::move(it->second));
  retries.erase(waiting, retries.end());
  for (auto& requeue : due) requeue();
}

}  // namespace

/// A call whose answer is the integer in its first row and column.
caf::result<int32_t> ask_count(self_ptr self, db::call c) {
  return ask_db<int32_t>(self, {std::move(c)},
                         [](results& rs) -> caf::expected<int32_t> { return rs[0]->int32(0, 0); });
}

std::string int_array(const google::protobuf::RepeatedField<int32_t>& values) {
  return db::number_array_literal(values, [](int32_t v) { return v; });
}

std::string text_array(const google::protobuf::RepeatedPtrField<std::string>& values) {
  return db::array_literal_of(values, [](const std::string& v) { return db::param{v}; });
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

namespace {

bool connect(self_ptr self) {
  auto& st = self->state;
  auto fail = [&](const caf::error& err) {
    st.options.status->update([&](pb::StorageStatus& s) { s.set_last_error(error_message(err)); });
    spdlog::warn("storage: {}", error_message(err));
    return false;
  };
  auto conn = db::connection::open(st.options.conninfo, st.options.statement_timeout,
                                   st.options.lock_timeout, st.options.transaction_pooler);
  if (!conn) return fail(conn.error());
  auto version = db::apply_migrations(*conn, db::all_migrations());
  if (!version) return fail(version.error());
  // Said once a process: each storage actor connects, and again after a loss.
  static std::once_flag lock_table_told;
  std::call_once(lock_table_told, [&] {
    if (auto shortfall = db::lock_table_shortfall(*conn); shortfall && *shortfall)
      spdlog::warn("storage: {}", **shortfall);
  });
  auto statements = db::sql::all();
  for (const auto& rule : st.rule_statements) statements.push_back(&rule);
  if (auto err = conn->prepare_and_enter_pipeline(statements)) return fail(err);
  st.conn = std::move(*conn);
  st.options.status->update([&](pb::StorageStatus& s) {
    s.set_connected(true);
    s.set_schema_version(*version);
    s.set_schema_current(*version >= db::all_migrations().back().version);
    s.clear_last_error();
  });
  st.reconnect_delay = std::chrono::milliseconds{0};
  spdlog::info("storage: connected to {}, schema version {}", redact_conninfo(st.options.conninfo),
               *version);
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
  st.options.status->update([](pb::StorageStatus& s) {
    s.set_connected(false);
    s.set_reconnects(s.reconnects() + 1);
  });
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
  std::vector<submit_request> later;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto& r = requests[i];
    if (split) {
      // One bad submit must not fail the others merged with it.
      r.group = halves[i < requests.size() / 2 ? 0 : 1];
      st.submits.push_back(std::move(r));
    } else if (retryable(err) && r.tries + 1 < max_tries) {
      ++r.tries;
      later.push_back(std::move(r));
    } else {
      r.promise.deliver(err);
    }
  }
  retry_later(self, std::move(later), &storage_state::submits);
  if (split) schedule_flush(self);
}

/// The callbacks of a request (alone in its part) are answered after its
/// tasks, on_finish then on_success.
part submit_part(self_ptr self, std::vector<submit_request> requests) {
  auto shared = std::make_shared<std::vector<submit_request>>(std::move(requests));
  std::vector<const pb::SubmitTask*> tasks;
  for (const auto& r : *shared)
    for (const auto& t : r.tasks.tasks()) tasks.push_back(&t);
  part p;
  const auto& first = shared->front().tasks;
  if (has_callbacks(first)) {
    auto params = db::submit_params(tasks);
    auto callback = [](bool has, const pb::SubmitTask& t) {
      return has ? db::param{json::encode_callback(t)} : db::param{};
    };
    params.push_back(callback(first.has_on_finish(), first.on_finish()));
    params.push_back(callback(first.has_on_success(), first.on_success()));
    p.calls.push_back(db::call{&db::sql::submit_batch_with_callbacks, std::move(params)});
  } else {
    p.calls.push_back(db::call{&db::sql::submit_batch, db::submit_params(tasks)});
  }
  p.on_results = [self, shared, total = tasks.size()](results&& rs) {
    if (!rs[0]) {
      requeue_submits(self, *shared, rs[0].error());
      return;
    }
    std::vector<pb::SubmitResult> by_ordinal(total + 2);
    read_submit_results(*rs[0], by_ordinal);
    size_t next = 0;
    for (auto& r : *shared) {
      pb::SubmitResults answer;
      for (int i = 0; i < r.tasks.tasks_size(); ++i)
        *answer.add_results() = std::move(by_ordinal[next++]);
      if (r.tasks.has_on_finish()) *answer.mutable_on_finish() = std::move(by_ordinal[total]);
      if (r.tasks.has_on_success()) *answer.mutable_on_success() = std::move(by_ordinal[total + 1]);
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
  std::vector<complete_request> later;
  for (auto& r : requests) {
    if (retryable(err) && r.tries + 1 < max_tries) {
      ++r.tries;
      later.push_back(std::move(r));
    } else {
      r.promise.deliver(err);
    }
  }
  retry_later(self, std::move(later), &storage_state::completes);
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
          std::vector<plain_request> later;
          later.push_back(std::move(*shared));
          retry_later(self, std::move(later), &storage_state::plains);
          return;
        }
      }
      shared->answer(std::move(rs));
    };
    parts.push_back(std::move(p));
  }
  self->state.plains.clear();
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
  take_back_retries(self, !st.conn);
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
  st.options.status->update([&](pb::StorageStatus& s) {
    s.set_round_trips(s.round_trips() + 1);
    s.set_statements(s.statements() + static_cast<int64_t>(calls.size()));
    s.set_requests(s.requests() + static_cast<int64_t>(parts.size()));
  });
  if (st.conn->broken()) {
    std::string last_error;
    for (const auto& [index, rs] : after_disconnect)
      for (const auto& r : rs)
        if (!r) last_error = error_message(r.error());
    if (last_error.empty()) last_error = "the connection to PostgreSQL was lost";
    st.options.status->update([&](pb::StorageStatus& s) { s.set_last_error(last_error); });
    spdlog::warn("storage: {}", last_error);
    disconnect(self);
  }
  for (auto& [index, rs] : after_disconnect) parts[index].on_results(std::move(rs));
}

// -- submits and outcomes: queued, merged across callers at the flush ------------

caf::result<pb::SubmitResults> queue_submit(self_ptr self, pb::SubmitTasks&& tasks) {
  if (!self->state.conn) return unavailable(self);
  auto promise = self->make_response_promise<pb::SubmitResults>();
  // A batch with callbacks goes alone: they wait for its tasks only.
  int group = has_callbacks(tasks) ? ++self->state.last_group : 0;
  self->state.submits.push_back(submit_request{std::move(tasks), promise, 0, group});
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

void reconnect(self_ptr self) {
  self->state.reconnect_scheduled = false;
  if (self->state.conn) return;
  if (!connect(self)) schedule_reconnect(self);
}

storage_actor::behavior_type storage(self_ptr self, storage_options options) {
  auto& st = self->state;
  st.options = std::move(options);
  if (!st.options.status) st.options.status = std::make_shared<shared_storage_status>();
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
      [self](make_offer_atom, const pb::ClaimRequest& r) { return make_offer(self, r); },
      [self](top_up_atom, const std::string& node, int64_t generation, int32_t permits) {
        return top_up_offer(self, node, generation, permits);
      },
      [self](take_back_atom, const std::string& node, int32_t offered) {
        return take_back_offer(self, node, offered);
      },
      [self](running_atom, const std::string& node) { return running_on_node(self, node); },
      [self](running_atom, const pb::Executions& e) { return still_running(self, e); },
      [self](caf::get_atom, int64_t id) { return task_with_waiting(self, id); },
      [self](reload_atom, const pb::TypeSettingsList& settings) {
        self->state.options.waiting.global_limit = settings.global_limit();
      },
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
      [self](status_atom) { return self->state.options.status->read(); },
      [self](register_atom, const pb::NodeRegistration& n) { return register_node(self, n); },
      [self](heartbeat_atom, const pb::Heartbeat& beat) { return heartbeat(self, beat); },
      [self](lead_atom, const pb::Lead& req) { return lead(self, req); },
      [self](leave_atom, const pb::Heartbeat& n) {
        return ask_count(self, {&db::sql::leave, {n.name(), n.incarnation()}});
      },
      [self](sweep_atom, const pb::SweepRequest& r) { return sweep(self, r); },
      [self](check_atom, const pb::Executions& e) { return finished_executions(self, e); },
      [self](take_cancels_atom, const pb::TakeCancels& r) { return take_cancels(self, r); },
      [self](cancels_told_atom, const pb::CancelNotices& told) { return cancels_told(self, told); },
      [self](log_atom, const pb::LogBatch& batch) { return append_logs(self, batch); },
      [self](read_log_atom, const pb::TaskLogRequest& req) { return read_log(self, req); },
      [self](deadline_atom, int64_t id, int32_t attempt) {
        return attempt_deadline(self, id, attempt);
      },
      [self](progress_atom, const pb::ProgressReports& r) { return report_progress(self, r); },
      [self](cancel_atom, caf::subscribe_atom, cancel_listener_actor target) {
        subscribe(self, self->state.cancel_listener, {"taskmill_cancels"},
                  [target](const std::vector<db::notification>&, bool) {
                    caf::anon_send(target, cancel_atom_v);
                  });
      },
      [self](compensate_atom, int32_t rule, int64_t term) { return compensate(self, rule, term); },
      [self](configure_atom, const pb::TypeSettingsList& s) { return put_type_settings(self, s); },
      [self](caf::subscribe_atom, claim_waker_actor pusher, const std::string& node) {
        subscribe_claims(self, pusher, node);
      },
      [self](job_atom, const pb::Job& job) { return put_job(self, job); },
      [self](check_job_atom, const pb::Job& job) { return put_job_problem(self, job); },
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
      [self](key_spaces_atom) { return list_key_spaces(self); },
      [self](key_space_atom, const std::string& name, int32_t top) {
        return get_key_space(self, name, top);
      },
      [self](put_key_space_atom, const pb::KeySpace& space) { return put_key_space(self, space); },
      [self](drop_key_space_atom, const std::string& name) { return delete_key_space(self, name); },
      [self](key_atom, const std::string& space, const std::string& key, int32_t tasks) {
        return get_key(self, space, key, tasks);
      },
      [self](alerts_atom, const pb::AlertCheck& c) { return alert_round(self, c); },
      [self](deliver_atom, const pb::DeliveryResults& r) {
        return ask_count(self,
                         {&db::sql::record_alert_deliveries, db::record_deliveries_params(r)});
      },
      [self](alerts_atom, const pb::ListAlertsRequest& r) { return list_alerts(self, r); },
      [self](alerts_atom, stats_atom) { return alert_metrics(self); },
      [self](submit_workflow_atom, const pb::SubmitWorkflow& wf, int64_t lease_ms) {
        return submit_workflow(self, wf, lease_ms);
      },
      [self](workflow_atom, int64_t id) { return get_workflow(self, id); },
      [self](workflows_atom, int32_t limit, int64_t before) {
        return list_workflows(self, limit, before);
      },
      [self](cancel_workflow_atom, int64_t id) {
        return ask_count(self, {&db::sql::cancel_workflow, {std::to_string(id)}});
      },
      [self](retry_workflow_atom, int64_t id) {
        return ask_count(self, {&db::sql::retry_workflow, {std::to_string(id)}});
      },
      [self](caf::flush_atom) { flush(self); },
      [self](reconnect_atom) { reconnect(self); },
  };
}

}  // namespace

}  // namespace taskmill::storage_internal

namespace taskmill {

storage_actor spawn_storage(caf::actor_system& sys, storage_options options) {
  return sys.spawn<caf::detached>(storage_internal::storage, std::move(options));
}

}  // namespace taskmill
