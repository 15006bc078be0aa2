#pragma once

// The dispatcher's state and the rooms its behavior (actors/dispatcher.cpp)
// calls: the outcomes on their way to storage (outcomes.cpp), executions and
// their deadlines (executions.cpp), cancels (cancels.cpp) and adopting tasks
// the database has running here unknown to it (adoption.cpp).

#include "actors/dispatcher.hpp"
#include "actors/dispatcher/outcome_batches.hpp"
#include "actors/executors/caf_executors.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <deque>
#include <optional>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

namespace taskmill {

/// An execution that finishes later: on an HTTP or CAF executor, or asleep.
struct execution {
  int32_t attempt;
  std::string type;
  caf::actor_clock::time_point started;
  // When its timeout comes (a timeout_atom is scheduled for it then).
  caf::actor_clock::time_point times_out;
  caf::actor_addr executor;  // the CAF executor running it, if any
  bool accepted = false;     // an HTTP executor answered 202
  // Its type lets it move its deadline: at its timeout, the database says
  // whether it did.
  bool may_move_deadline = false;
  std::string trace_id;  // for the lines logged about it
};

struct dispatcher_state {
  static inline const char* name = "dispatcher";

  dispatcher_options options;
  std::unordered_map<int64_t, execution> running;
  caf_executor_pool executors;
  outcome_batches outcomes;
  bool flush_scheduled = false;
  bool storage_failing = false;
  /// Woken when a retry is stored: the pusher, and the peers.
  std::vector<wake_listener_actor> retry_listeners;
  // Answered once nothing runs here any more (graceful stop).
  std::optional<caf::typed_response_promise<int32_t>> drain;
  // Asked to drain: the node hands back what runs here, so nothing more is
  // adopted.
  bool stopping = false;
  // Cancels being taken from storage, and whether another notice came
  // meanwhile.
  bool taking_cancels = false;
  bool cancels_again = false;
  // Attempts of this node cancelled before they ran here (a hand-off's
  // notification can trail its cancel): not run should they come. Newest
  // last, bounded.
  std::deque<std::pair<int64_t, int32_t>> cancelled_before;
  std::mt19937_64 rng{std::random_device{}()};
};

namespace dispatching {

using self_ptr = dispatcher_actor::stateful_pointer<dispatcher_state>;

/// How long the dispatcher waits before asking storage again.
constexpr auto retry_delay = std::chrono::milliseconds{500};

// -- outcomes on their way to storage (outcomes.cpp) -------------------------

/// Records the outcome of an execution that ended (counted in the metrics).
void record(self_ptr self, pb::TaskOutcome outcome);
/// Records the outcome of an execution that ended as it began.
void record_at_once(self_ptr self, pb::TaskOutcome outcome);
/// Sends the outcomes recorded since the last batch.
void flush(self_ptr self);
/// Sends again the first batch storage did not take.
void send_again(self_ptr self);
/// Answers a drain once nothing runs here and every outcome is stored.
void check_drained(self_ptr self);
/// Executions and outcomes a drain still waits for.
int32_t left_to_drain(const dispatcher_state& st);
/// A result sent to POST /v1/tasks/{id}/result: stored at once, fenced by its
/// attempt; answered once storage says whether it applied.
caf::result<pb::ResultAck> take_result(self_ptr self, int64_t id, const pb::ResultReport& report);

// -- executions and their deadlines (executions.cpp) -------------------------

/// Logs an attempt that failed or is to be retried, at debug level (a line
/// per task is never info: actors/logging/log_format.hpp).
void log_end(const pb::TaskOutcome& outcome, std::string_view type, std::string_view trace_id);
/// Runs a task claimed for, or handed to, this node.
void execute(self_ptr self, const pb::Task& task);
/// An asynchronous execution ended with `outcome`, if it is still waited for.
void finish(self_ptr self, pb::TaskOutcome outcome);
/// Forgets an execution (and frees its place on a CAF executor).
void forget(self_ptr self, std::unordered_map<int64_t, execution>::iterator it);
/// An execution's timeout came: it times out, or runs on to a deadline it moved.
void timeout_reached(self_ptr self, int64_t id, int32_t attempt);
/// Executions the database says are over no longer hold a permit here.
void reconcile(self_ptr self);
/// A CAF or remote executor offers to run types.
caf::result<int32_t> add_executor(self_ptr self, executor_actor executor,
                                  const pb::ExecutorRegistration& registration);
/// A CAF or remote executor went away: what ran on it is to be retried.
void forget_executor(self_ptr self, const caf::actor_addr& gone);

// -- cancels (cancels.cpp) ----------------------------------------------------

/// Whether this node's attempt was cancelled before it ran here.
bool cancelled_before(const dispatcher_state& st, int64_t id, int32_t attempt);
/// A permit of `type` that no execution holds any more goes back.
void give_back_permit(self_ptr self, const std::string& type);
/// Takes this node's cancels from storage and stops their executions.
void take_cancels(self_ptr self);

// -- adopting what runs here unknown to the dispatcher (adoption.cpp) -------

/// Runs the executions the database has running here that this dispatcher
/// does not know: after a claim's answer was lost, or handed off by submits.
void adopt(self_ptr self, const pb::Executions& running);

}  // namespace dispatching

}  // namespace taskmill
