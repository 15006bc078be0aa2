// The requests of tasks: submits aside (the pipeline merges them), reschedules, cancels, claims,
// reads, and the type settings.

#include "storage/storage_internal.hpp"

#include "messages/errors.hpp"
#include "messages/names.hpp"
#include "messages/time.hpp"
#include "storage/rows.hpp"

#include <caf/send.hpp>

#include <charconv>

#include <spdlog/spdlog.h>

namespace taskmill::storage_internal {

namespace {

// Tasks a page of the task list scans at most, however few its filters
// match: a bounded, indexed read even among millions of tasks (SPEC §8). A
// page of one type reads that type's tasks instead (task_reads.sql).
constexpr int list_scan_rows = 50000;

// Counts in the stats and /metrics are exact up to this many rows in the
// task table (finished tasks) and this many waiting tasks (pending and
// failed), estimated beyond (SPEC §8).
constexpr int64_t exact_counts_up_to = 100000;

// -- reading rows ---------------------------------------------------------------

/// Task ids joined by commas (array_to_string of a bigint[]).
std::vector<int64_t> split_ids(std::string_view text) {
  std::vector<int64_t> ids;
  while (!text.empty()) {
    int64_t id = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (ec != std::errc{}) break;
    ids.push_back(id);
    text.remove_prefix(static_cast<size_t>(end - text.data()));
    if (!text.empty()) text.remove_prefix(1);
  }
  return ids;
}

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
  if (claimed.rows() > 0) out.set_keyed(claimed.boolean(0, claimed.column("keyed")));
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

/// Whether work came due that the claim did not take, and the milliseconds
/// until the next due time still to come, by the database's clock.
pb::NextDue read_next_due(const db::result& next) {
  pb::NextDue out;
  out.set_next_due_in_ms(-1);
  if (next.rows() == 0) return out;
  out.set_due_now(!next.is_null(0, 0) && next.boolean(0, 0));
  if (!next.is_null(0, 1)) {
    auto delay_us = next.micros(0, 1) - next.micros(0, 2);
    out.set_next_due_in_ms(std::max<int64_t>(0, (delay_us + 999) / 1000));
  }
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

caf::expected<pb::BatchCounts> read_batch_counts(const db::result& res, const std::string& batch) {
  if (res.rows() == 0) return make_error(errc::not_found, "no batch " + batch);
  pb::BatchCounts out;
  out.set_batch(batch);
  for (int row = 0; row < res.rows(); ++row) {
    (*out.mutable_counts())[res.string(row, 0)] = res.int64(row, 1);
    out.set_records_processed(out.records_processed() + res.int64(row, 2));
    out.set_records_failed(out.records_failed() + res.int64(row, 3));
  }
  return out;
}

/// A task_progress row: attempt, progress, processed, failed, message,
/// reported_at, deadline_at.
void read_progress(const db::result& res, pb::Progress& out) {
  out.set_attempt(res.int32(0, 0));
  if (!res.is_null(0, 1)) out.set_progress(res.float64(0, 1));
  out.set_processed(res.int64(0, 2));
  out.set_failed(res.int64(0, 3));
  if (!res.is_null(0, 4)) out.set_message(res.string(0, 4));
  set_micros(out.mutable_reported_at(), res.micros(0, 5));
  if (!res.is_null(0, 6)) set_micros(out.mutable_deadline_at(), res.micros(0, 6));
}

/// Row `row` of (type, status, count, estimated).
void read_status_count(const db::result& counts, int row, pb::StatusCount& out) {
  out.set_type(counts.string(row, 0));
  out.set_status(parse_status(counts.text(row, 1)).value_or(pb::TASK_STATUS_UNSPECIFIED));
  out.set_count(counts.int64(row, 2));
  out.set_estimated(counts.boolean(row, 3));
}

void read_status_counts(const db::result& counts, pb::Stats& out) {
  for (int row = 0; row < counts.rows(); ++row) read_status_count(counts, row, *out.add_counts());
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

/// What taskmill.finished_counts found, and its counts: past the rows
/// counted exactly, one row has no type, and its estimated column says
/// whether a sample came with it.
std::pair<db::finished_estimate::found, std::vector<pb::StatusCount>> read_finished_counts(
    const db::result& counts) {
  using found = db::finished_estimate::found;
  std::pair<found, std::vector<pb::StatusCount>> out{found::counted, {}};
  for (int row = 0; row < counts.rows(); ++row) {
    if (counts.is_null(row, 0)) {
      out.first = counts.boolean(row, 3) ? found::sampled : found::not_sampled;
      continue;
    }
    read_status_count(counts, row, out.second.emplace_back());
  }
  return out;
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

}  // namespace

// -- requests: each one pipelined call (or a few), answered from its rows --------

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

/// The types a grant lets this node claim; null: any.
db::param claimable_types(const pb::ClaimGrant& grant) {
  return grant.any_type() ? db::param{} : db::param{text_array(grant.types())};
}

caf::result<pb::ClaimedTasks> claim(self_ptr self, const pb::ClaimRequest& req) {
  return ask_db<pb::ClaimedTasks>(self, {claim_call(req, claimable_types(req.grant()))},
                                  [](results& rs) { return read_claim(*rs[0]); });
}

caf::result<pb::NextDue> next_due(self_ptr self, const pb::ClaimRequest& req) {
  db::call next{&db::sql::next_due,
                {claimable_types(req.grant()),
                 std::to_string(self->state.options.next_due_horizon.count()), req.node()}};
  return ask_db<pb::NextDue>(self, {std::move(next)},
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
      [](results& rs) { return db::read_task_page(*rs[0], std::numeric_limits<int>::max()); });
}

/// A task with its waiting reason, read in one round trip.
caf::result<pb::Task> task_with_waiting(self_ptr self, int64_t id) {
  const auto& w = self->state.options.waiting;
  auto weights = db::number_array_literal(w.weights, [](int v) { return v; });
  db::call reason{&db::sql::waiting_reason,
                  {std::to_string(id), std::to_string(w.lease.count()),
                   std::to_string(w.heartbeat_interval.count()), std::to_string(w.global_limit),
                   std::move(weights)}};
  return ask_db<pb::Task>(self,
                          {db::call{&db::sql::get_task, {std::to_string(id)}}, reason,
                           db::call{&db::sql::task_relatives, {std::to_string(id)}},
                           db::call{&db::sql::task_progress, {std::to_string(id)}}},
                          [id](results& rs) {
                            auto task =
                                single_task(*rs[0], "no task with id " + std::to_string(id));
                            if (task) {
                              for (auto parent : split_ids(rs[2]->text(0, 0)))
                                task->add_parents(parent);
                              for (auto child : split_ids(rs[2]->text(0, 1)))
                                task->add_children(child);
                            }
                            if (task && rs[1]->rows() > 0) {
                              const auto& r = *rs[1];
                              auto* waiting = task->mutable_waiting();
                              waiting->set_reason(r.string(0, 0));
                              waiting->set_message(r.string(0, 1));
                              if (!r.is_null(0, 2))
                                set_micros(waiting->mutable_until(), r.micros(0, 2));
                              for (auto id : split_ids(r.text(0, 3))) waiting->add_parents(id);
                            }
                            if (task && rs[3]->rows() > 0)
                              read_progress(*rs[3], *task->mutable_progress());
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
  db::call c{
      one_unit ? &db::sql::list_unit_tasks : &db::sql::list_tasks,
      {optional_text(req.type()), optional_text(req.key()),
       req.status() == pb::TASK_STATUS_UNSPECIFIED ? db::param{}
                                                   : db::param{status_name(req.status())},
       optional_text(req.batch()), optional_text(req.page_token()), std::to_string(limit + 1)}};
  if (one_unit)
    return ask_db<pb::TaskList>(self, {std::move(c)},
                                [limit](results& rs) { return db::read_task_page(*rs[0], limit); });
  c.params.emplace_back(std::to_string(list_scan_rows));
  return ask_db<pb::TaskList>(self, {std::move(c)}, [limit](results& rs) {
    return db::read_scanned_task_page(*rs[0], limit, list_scan_rows);
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

caf::result<pb::Stats> live_counts(self_ptr self) {
  // The keys /metrics shows of each key space; the others are summed.
  constexpr const char* keys_shown = "10";
  return ask_db<pb::Stats>(self,
                           {db::call{&db::sql::live_counts, {std::to_string(exact_counts_up_to)}},
                            db::call{&db::sql::key_use, {keys_shown}}},
                           [](results& rs) {
                             pb::Stats out;
                             read_status_counts(*rs[0], out);
                             const auto& keys = *rs[1];
                             for (int r = 0; r < keys.rows(); ++r) {
                               auto& k = *out.add_keys();
                               k.set_space(keys.string(r, 0));
                               k.set_key(keys.string(r, 1));
                               k.set_running(keys.int64(r, 2));
                               k.set_limit(keys.is_null(r, 3) ? 0 : keys.int64(r, 3));
                             }
                             return out;
                           });
}

caf::result<pb::Stats> stats(self_ptr self) {
  constexpr const char* recent_minutes = "15";
  using clock = db::finished_estimate::clock;
  bool sample = self->state.finished_estimate.ask_for_sample(clock::now());
  // Live and finished tasks are read one after the other: a task that
  // finishes in between may be counted in neither or both.
  return ask_db<pb::Stats>(
      self,
      {db::call{&db::sql::live_counts, {std::to_string(exact_counts_up_to)}},
       db::call{&db::sql::finished_counts,
                {std::to_string(exact_counts_up_to), sample ? "true" : "false"}},
       db::call{&db::sql::recent_outcomes, {recent_minutes}}},
      [self](results& rs) {
        auto out = read_stats(*rs[0], *rs[2]);
        auto [found, rows] = read_finished_counts(*rs[1]);
        for (auto& c : self->state.finished_estimate.answer(found, std::move(rows), clock::now()))
          *out.add_counts() = std::move(c);
        return out;
      });
}

caf::result<pb::Executions> finished_executions(self_ptr self, const pb::Executions& executions) {
  return ask_db<pb::Executions>(
      self, {db::call{&db::sql::finished_executions, execution_params(executions)}},
      [](results& rs) { return read_executions(*rs[0]); });
}

caf::result<pb::CancelNotices> take_cancels(self_ptr self, const pb::TakeCancels& request) {
  db::call c{
      &db::sql::take_cancels,
      {request.node(), text_array(request.reachable_types()), std::to_string(request.lease_ms())}};
  return ask_db<pb::CancelNotices>(self, {std::move(c)}, [](results& rs) {
    pb::CancelNotices out;
    const auto& res = *rs[0];
    for (int row = 0; row < res.rows(); ++row) {
      auto* n = out.add_cancels();
      n->set_task_id(res.int64(row, 0));
      n->set_attempt(res.int32(row, 1));
      n->set_type(res.string(row, 2));
      n->set_key(res.string(row, 3));
      n->set_node(res.string(row, 4));
    }
    return out;
  });
}

caf::result<int32_t> cancels_told(self_ptr self, const pb::CancelNotices& told) {
  std::vector<int64_t> ids;
  std::vector<int32_t> attempts;
  for (const auto& c : told.cancels()) {
    ids.push_back(c.task_id());
    attempts.push_back(c.attempt());
  }
  auto number = [](auto v) { return v; };
  return ask_count(
      self, {&db::sql::cancels_told,
             {db::number_array_literal(ids, number), db::number_array_literal(attempts, number)}});
}

caf::result<pb::ProgressAcks> report_progress(self_ptr self, const pb::ProgressReports& reports) {
  const auto& r = reports.reports();
  auto texts = [&](auto field) {
    return db::array_literal_of(r, [&](const pb::Progress& p) { return field(p); });
  };
  std::vector<db::param> params{
      db::number_array_literal(reports.task_ids(), [](int64_t id) { return id; }),
      db::number_array_literal(r, [](const pb::Progress& p) { return p.attempt(); }),
      texts([](const pb::Progress& p) {
        return p.has_progress() ? db::param{std::to_string(p.progress())} : db::param{};
      }),
      texts([](const pb::Progress& p) {
        return p.has_processed() ? db::param{std::to_string(p.processed())} : db::param{};
      }),
      texts([](const pb::Progress& p) {
        return p.has_failed() ? db::param{std::to_string(p.failed())} : db::param{};
      }),
      texts([](const pb::Progress& p) {
        return p.has_message() ? db::param{p.message()} : db::param{};
      }),
      texts([](const pb::Progress& p) {
        return p.has_deadline_in_ms() ? db::param{std::to_string(p.deadline_in_ms())} : db::param{};
      }),
  };
  return ask_db<pb::ProgressAcks>(self, {db::call{&db::sql::report_progress, std::move(params)}},
                                  [](results& rs) {
                                    pb::ProgressAcks out;
                                    const auto& res = *rs[0];
                                    for (int row = 0; row < res.rows(); ++row) {
                                      out.add_task_ids(res.int64(row, 0));
                                      out.add_applied(res.boolean(row, 1));
                                    }
                                    return out;
                                  });
}

caf::result<pb::LogAcks> append_logs(self_ptr self, const pb::LogBatch& batch) {
  std::vector<db::param> params{
      db::number_array_literal(batch.task_ids(), [](int64_t id) { return id; }),
      db::number_array_literal(batch.attempts(), [](int32_t a) { return a; }),
      db::array_literal_of(batch.lines(), [](const std::string& l) { return db::param{l}; }),
  };
  return ask_db<pb::LogAcks>(self, {db::call{&db::sql::append_logs, std::move(params)}},
                             [](results& rs) {
                               pb::LogAcks out;
                               for (int row = 0; row < rs[0]->rows(); ++row) {
                                 out.add_task_ids(rs[0]->int64(row, 0));
                                 out.add_attempts(rs[0]->int32(row, 1));
                               }
                               return out;
                             });
}

caf::result<pb::TaskLog> read_log(self_ptr self, const pb::TaskLogRequest& req) {
  auto id = std::to_string(req.task_id());
  return ask_db<pb::TaskLog>(
      self,
      {db::call{&db::sql::attempt_log,
                {id, std::to_string(req.after()), std::to_string(req.limit())}},
       db::call{&db::sql::task_status, {id}}},
      [req](results& rs) -> caf::expected<pb::TaskLog> {
        if (rs[1]->rows() == 0)
          return make_error(errc::not_found, "no task with id " + std::to_string(req.task_id()));
        pb::TaskLog out;
        out.set_status(parse_status(rs[1]->text(0, 0)).value_or(pb::TASK_STATUS_UNSPECIFIED));
        out.set_next_after(req.after());
        const auto& lines = *rs[0];
        for (int row = 0; row < lines.rows(); ++row) {
          auto* l = out.add_lines();
          l->set_id(lines.int64(row, 0));
          l->set_attempt(lines.int32(row, 1));
          set_micros(l->mutable_logged_at(), lines.micros(row, 2));
          l->set_line(lines.string(row, 3));
          out.set_next_after(l->id());
        }
        return out;
      });
}

caf::result<int64_t> attempt_deadline(self_ptr self, int64_t id, int32_t attempt) {
  return ask_db<int64_t>(
      self, {db::call{&db::sql::attempt_deadline, {std::to_string(id), std::to_string(attempt)}}},
      [](results& rs) -> int64_t {
        return rs[0]->is_null(0, 0) ? 0 : std::max<int64_t>(0, rs[0]->int64(0, 0));
      });
}

caf::result<int32_t> put_type_settings(self_ptr self, const pb::TypeSettingsList& settings) {
  db::call c{&db::sql::put_type_settings, db::type_settings_params(settings)};
  return ask_db<int32_t>(
      self, {std::move(c)},
      [n = settings.types_size()](results&) -> caf::expected<int32_t> { return n; });
}

}  // namespace taskmill::storage_internal
