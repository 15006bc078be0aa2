#pragma once

// The client library for remote executors (SPEC §7): a process on any host
// links to a node's cluster port, proves cluster.secret, and offers to run
// tasks of some types, so many at a time. The node pushes tasks to it; when
// the link drops, the node fails the tasks it had in flight there at once
// (fenced by attempt) and runs them again elsewhere. It is a library of its
// own, taskmill_remote_executor; the actor system it runs in needs the
// message types (register_message_types in messages/types.hpp) and CAF's
// middleman, and for TLS CAF's openssl manager with the certificates, as
// configure_actor_system in tools/node/node.hpp sets them up for a node.

#include "node.pb.h"

#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace taskmill {

/// What a running task may ask of its execution: whether it was cancelled
/// (the task was, through any of the node's ways, or the link to the node
/// dropped, which runs the task again elsewhere; its outcome is then no
/// longer waited for: stop, and answer anything), and to tell the node how
/// far it got and what it logs.
class remote_execution {
 public:
  /// `report` sends a progress report of this attempt to the node, `log`
  /// its log lines.
  explicit remote_execution(std::function<void(pb::Progress)> report = {},
                            std::function<void(pb::AttemptLog)> log = {});
  bool cancelled() const;
  /// Waits up to `wait` for a cancel; true if one came.
  bool cancelled_within(std::chrono::milliseconds wait) const;
  void cancel() const;
  /// How far the task got (see POST /v1/tasks/{id}/progress; the attempt is
  /// filled in). The node keeps the latest report; none is waited for.
  void report(pb::Progress progress) const;
  /// Lines for the attempt's log (see POST /v1/tasks/{id}/logs: 1 to 1,000
  /// a call); none is waited for.
  void log(std::vector<std::string> lines) const;

 private:
  std::function<void(pb::Progress)> report_;
  std::function<void(pb::AttemptLog)> log_;
  struct flag {
    std::mutex mutex;
    std::condition_variable changed;
    bool cancelled = false;
  };
  std::shared_ptr<flag> flag_;
};

/// Runs one task and says how it went (see outcome_of in
/// actors/executors/outcome.hpp); called on a thread of its own, so it may
/// block.
using remote_task_handler =
    std::function<pb::TaskOutcome(const pb::Task&, const remote_execution&)>;

struct remote_executor_options {
  /// host:port of a node's cluster.listen.
  std::string node;
  std::string secret;
  /// How the node shows this executor among its links.
  std::string name;
  std::vector<std::string> types;
  int32_t capacity = 1;
  /// With the node's TLS: this executor's certificate and key, and the CA
  /// that signed the node's (the actor system must be set up with them, see
  /// configure_actor_system).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

/// Links to the node, registers, and runs `handler` for every task pushed.
/// Answers once registered, with an actor that ends when the link drops (or
/// an error saying why it could not link).
caf::expected<caf::actor> start_remote_executor(
    caf::actor_system& sys, const remote_executor_options& options, remote_task_handler handler,
    std::chrono::milliseconds patience = std::chrono::seconds{10});

}  // namespace taskmill
