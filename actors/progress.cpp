#include "actors/progress.hpp"

#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace taskmill {

namespace {

/// The latest report of one task not yet sent, and who waits for its answer.
struct waiting_report {
  pb::Progress report;
  std::vector<caf::typed_response_promise<pb::ResultAck>> promises;
};

/// Log lines not yet sent, in order, and who waits for their answer.
struct waiting_lines {
  struct waiter {
    int64_t task_id;
    int32_t attempt;
    caf::typed_response_promise<pb::ResultAck> promise;
  };
  pb::LogBatch batch;
  size_t bytes = 0;
  std::vector<waiter> waiters;
};

/// Bytes of lines waiting to be stored at most: past them, a log is refused
/// (the database is slower than the executors log) rather than held in
/// memory; they also bound the statement that stores them.
constexpr size_t max_waiting_bytes = 16 << 20;

/// A line is kept to this many characters (storage/sql/logs.sql cuts the
/// same); cut here, a long line costs no memory while it waits.
constexpr size_t max_line_chars = 4096;

/// `line` cut to max_line_chars code points (it is valid UTF-8).
void cut(std::string& line) {
  size_t chars = 0;
  for (size_t i = 0; i < line.size(); ++i)
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80 && ++chars > max_line_chars) {
      line.resize(i);
      return;
    }
}

/// At most one statement of each kind a round: a report that comes alone is
/// stored at once, those of many tasks reporting often wait for the round's
/// end and go together.
constexpr auto store_round = std::chrono::milliseconds{100};

/// One kind of statement: whether one is under way, when the last began,
/// and whether the round's end is awaited.
struct statement_pace {
  bool storing = false;
  caf::actor_clock::time_point last{};
  bool awaiting_round = false;
};

}  // namespace

struct progress_state {
  static inline const char* name = "progress";
  progress_options options;
  std::unordered_map<int64_t, waiting_report> waiting;
  statement_pace reports;
  waiting_lines lines;
  statement_pace logs;
};

namespace {

using self_ptr = progress_actor::stateful_pointer<progress_state>;

/// A newer report of the same attempt keeps what it leaves out.
void merge(pb::Progress& kept, const pb::Progress& newer) {
  if (kept.attempt() != newer.attempt()) {
    kept = newer;
    return;
  }
  auto older = std::move(kept);
  kept = newer;
  if (!kept.has_progress() && older.has_progress()) kept.set_progress(older.progress());
  if (!kept.has_processed() && older.has_processed()) kept.set_processed(older.processed());
  if (!kept.has_failed() && older.has_failed()) kept.set_failed(older.failed());
  if (!kept.has_message() && older.has_message()) kept.set_message(older.message());
  if (older.has_deadline_in_ms() &&
      (!kept.has_deadline_in_ms() || kept.deadline_in_ms() < older.deadline_in_ms()))
    kept.set_deadline_in_ms(older.deadline_in_ms());
}

void answer(std::vector<caf::typed_response_promise<pb::ResultAck>>& promises, bool applied,
            int32_t attempt) {
  pb::ResultAck ack;
  ack.set_accepted(applied);
  if (!applied)
    ack.set_reason("stale: the task is not running under attempt " + std::to_string(attempt));
  for (auto& p : promises) p.deliver(ack);
}

/// Whether a statement may begin now; if not, the round's end is awaited.
bool may_store(self_ptr self, statement_pace& pace) {
  if (pace.storing) return false;
  auto now = self->clock().now();
  if (now - pace.last < store_round) {
    if (!pace.awaiting_round) {
      pace.awaiting_round = true;
      self->delayed_send(self, store_round - (now - pace.last), caf::flush_atom_v);
    }
    return false;
  }
  pace.storing = true;
  pace.last = now;
  return true;
}

/// Sends the lines that wait, one statement at a time.
void store_lines(self_ptr self) {
  auto& st = self->state;
  if (st.lines.waiters.empty() || !may_store(self, st.logs)) return;
  auto sent = std::make_shared<waiting_lines>(std::move(st.lines));
  st.lines = waiting_lines{};
  self->request(st.options.storage, local_request_timeout, log_atom_v, sent->batch)
      .then(
          [self, sent](const pb::LogAcks& acks) {
            for (auto& w : sent->waiters) {
              pb::ResultAck ack;
              bool taken = false;
              for (int i = 0; i < acks.task_ids_size() && !taken; ++i)
                taken = acks.task_ids(i) == w.task_id && acks.attempts(i) == w.attempt;
              ack.set_accepted(taken);
              if (!ack.accepted())
                ack.set_reason("stale: attempt " + std::to_string(w.attempt) +
                               " is not the task's latest");
              w.promise.deliver(ack);
            }
            self->state.logs.storing = false;
            store_lines(self);
          },
          [self, sent](const caf::error& err) {
            for (auto& w : sent->waiters) w.promise.deliver(err);
            self->state.logs.storing = false;
            store_lines(self);
          });
}

/// Sends what waits, one statement at a time.
void store(self_ptr self) {
  auto& st = self->state;
  if (st.waiting.empty() || !may_store(self, st.reports)) return;
  auto sent = std::make_shared<std::unordered_map<int64_t, waiting_report>>();
  sent->swap(st.waiting);
  pb::ProgressReports reports;
  for (const auto& [id, w] : *sent) {
    reports.add_task_ids(id);
    *reports.add_reports() = w.report;
  }
  self->request(st.options.storage, local_request_timeout, progress_atom_v, std::move(reports))
      .then(
          [self, sent](const pb::ProgressAcks& acks) {
            for (int i = 0; i < acks.task_ids_size(); ++i) {
              auto it = sent->find(acks.task_ids(i));
              if (it == sent->end()) continue;
              answer(it->second.promises, acks.applied(i), it->second.report.attempt());
            }
            self->state.reports.storing = false;
            store(self);
          },
          [self, sent](const caf::error& err) {
            for (auto& [id, w] : *sent)
              for (auto& p : w.promises) p.deliver(err);
            self->state.reports.storing = false;
            store(self);
          });
}

progress_actor::behavior_type progress(self_ptr self, progress_options options) {
  self->state.options = std::move(options);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](progress_atom, int64_t id, pb::Progress& report) -> caf::result<pb::ResultAck> {
        auto promise = self->make_response_promise<pb::ResultAck>();
        auto [it, fresh] = self->state.waiting.try_emplace(id);
        if (fresh)
          it->second.report = std::move(report);
        else
          merge(it->second.report, report);
        it->second.promises.push_back(promise);
        store(self);
        return promise;
      },
      [self](log_atom, int64_t id, pb::AttemptLog& log) -> caf::result<pb::ResultAck> {
        auto& lines = self->state.lines;
        size_t bytes = 0;
        for (auto& line : *log.mutable_lines()) {
          cut(line);
          bytes += line.size();
        }
        if (lines.bytes + bytes > max_waiting_bytes)
          return make_error(errc::unavailable,
                            "too many log lines wait to be stored: try again shortly");
        lines.bytes += bytes;
        for (auto& line : *log.mutable_lines()) {
          lines.batch.add_task_ids(id);
          lines.batch.add_attempts(log.attempt());
          lines.batch.add_lines(std::move(line));
        }
        auto promise = self->make_response_promise<pb::ResultAck>();
        lines.waiters.push_back({id, log.attempt(), promise});
        store_lines(self);
        return promise;
      },
      [self](caf::flush_atom) {
        self->state.reports.awaiting_round = false;
        self->state.logs.awaiting_round = false;
        store(self);
        store_lines(self);
      },
  };
}

}  // namespace

progress_actor spawn_progress(caf::actor_system& sys, progress_options options) {
  return sys.spawn(progress, std::move(options));
}

}  // namespace taskmill
