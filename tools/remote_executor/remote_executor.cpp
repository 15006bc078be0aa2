#include "tools/remote_executor/remote_executor.hpp"

#include "config/config.hpp"
#include "messages/actors.hpp"
#include "messages/errors.hpp"
#include "messages/peer_proof.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <map>
#include <set>
#include <thread>

namespace taskmill {

remote_execution::remote_execution(std::function<void(pb::Progress)> report,
                                   std::function<void(pb::AttemptLog)> log)
    : report_(std::move(report)), log_(std::move(log)), flag_(std::make_shared<flag>()) {}

void remote_execution::report(pb::Progress progress) const {
  if (report_) report_(std::move(progress));
}

void remote_execution::log(std::vector<std::string> lines) const {
  if (!log_ || lines.empty()) return;
  pb::AttemptLog log;
  for (auto& line : lines) log.add_lines(std::move(line));
  log_(std::move(log));
}

bool remote_execution::cancelled() const {
  std::lock_guard<std::mutex> lock{flag_->mutex};
  return flag_->cancelled;
}

bool remote_execution::cancelled_within(std::chrono::milliseconds wait) const {
  std::unique_lock<std::mutex> lock{flag_->mutex};
  return flag_->changed.wait_for(lock, wait, [this] { return flag_->cancelled; });
}

void remote_execution::cancel() const {
  {
    std::lock_guard<std::mutex> lock{flag_->mutex};
    flag_->cancelled = true;
  }
  flag_->changed.notify_all();
}

namespace {

/// A task pushed here and not yet answered.
struct pushed {
  int64_t task_id;
  int32_t attempt;
  remote_execution execution;
  caf::typed_response_promise<pb::TaskOutcome> promise;
};

/// Links to a node, proves cluster.secret and registers (each message must
/// come from this actor: the node admits its sender), then runs the pushed
/// tasks, each on a thread of its own; ends with the link.
struct remote_runner_state {
  static inline const char* name = "remote-executor";
  remote_executor_options options;
  remote_task_handler handler;
  peer_actor node;
  int64_t next_id = 0;
  std::map<int64_t, pushed> running;
};

using runner_actor =
    executor_actor::extend<caf::reacts_to<finished_atom, int64_t, pb::TaskOutcome>,
                           caf::reacts_to<progress_atom, int64_t, pb::Progress>,
                           caf::reacts_to<log_atom, int64_t, pb::AttemptLog>,
                           caf::replies_to<join_atom>::with<int32_t>, caf::reacts_to<check_atom>>;
using runner_ptr = runner_actor::stateful_pointer<remote_runner_state>;

caf::error link_failed(const std::string& node, const std::string& why) {
  return make_error(errc::unavailable, "cannot link to " + node + ": " + why);
}

/// hello, join, register; answers how many types the node took.
caf::result<int32_t> join(runner_ptr self) {
  auto promise = self->make_response_promise<int32_t>();
  const auto& o = self->state.options;
  auto nonce = new_nonce();
  constexpr auto patience = std::chrono::seconds{10};
  auto fail = [promise, node = o.node](const std::string& why) mutable {
    promise.deliver(link_failed(node, why));
  };
  self->request(self->state.node, patience, hello_atom_v, o.name, nonce)
      .then(
          [self, promise, nonce, fail](const std::string& name, const std::string& their_nonce,
                                       const std::string& proof) mutable {
            const auto& o = self->state.options;
            if (!same_secret(proof, peer_proof(o.secret, proof_role::answer, nonce, name)))
              return fail("the node does not know cluster.secret");
            self->request(self->state.node, patience, join_atom_v, o.name, std::string{"executor"},
                          peer_proof(o.secret, proof_role::join, their_nonce, o.name))
                .then(
                    [self, promise, fail](bool admitted) mutable {
                      if (!admitted) return fail("the node refused this executor's proof");
                      const auto& o = self->state.options;
                      pb::ExecutorRegistration reg;
                      for (const auto& type : o.types) reg.add_types(type);
                      reg.set_capacity(o.capacity);
                      self->request(self->state.node, patience, register_atom_v,
                                    caf::actor_cast<caf::actor>(self), reg)
                          .then(
                              [self, promise](int32_t n) mutable {
                                promise.deliver(n);
                                self->delayed_send(self, link_heartbeat_interval, check_atom_v);
                              },
                              [fail](const caf::error& err) mutable { fail(error_message(err)); });
                    },
                    [fail](const caf::error& err) mutable { fail(error_message(err)); });
          },
          [fail](const caf::error& err) mutable { fail(error_message(err)); });
  return promise;
}

/// Asks the node whether it still admits this executor: a node that dropped
/// its side of the link (while CAF's connection stayed up) no longer sends
/// tasks here, and this executor must link again rather than wait for them.
void check_admitted(runner_ptr self) {
  self->request(self->state.node, link_silence_bound, admitted_atom_v)
      .then(
          [self](bool admitted) {
            if (admitted) return self->delayed_send(self, link_heartbeat_interval, check_atom_v);
            self->quit(make_error(errc::unavailable, "the node no longer admits this executor"));
          },
          [self](const caf::error& err) {
            self->quit(make_error(
                errc::unavailable,
                "the node did not say whether it admits this executor: " + error_message(err)));
          });
}

runner_actor::behavior_type remote_runner(runner_ptr self, remote_executor_options options,
                                          remote_task_handler handler, peer_actor node) {
  auto& st = self->state;
  st.options = std::move(options);
  st.handler = std::move(handler);
  st.node = node;
  self->monitor(node);
  self->set_down_handler([self](caf::down_msg&) {
    // The node runs them again elsewhere.
    for (auto& [id, task] : self->state.running) task.execution.cancel();
    self->quit(caf::exit_reason::remote_link_unreachable);
  });
  return {
      [self](join_atom) { return join(self); },
      [self](check_atom) { check_admitted(self); },
      [self](execute_atom, pb::Task& task) -> caf::result<pb::TaskOutcome> {
        auto& st = self->state;
        auto id = ++st.next_id;
        auto promise = self->make_response_promise<pb::TaskOutcome>();
        auto runner = caf::actor_cast<runner_actor>(self);
        remote_execution execution{
            [runner, task_id = task.id(), attempt = task.attempt()](pb::Progress p) {
              p.set_attempt(attempt);
              caf::anon_send(runner, progress_atom_v, task_id, std::move(p));
            },
            [runner, task_id = task.id(), attempt = task.attempt()](pb::AttemptLog log) {
              log.set_attempt(attempt);
              caf::anon_send(runner, log_atom_v, task_id, std::move(log));
            }};
        st.running.emplace(id, pushed{task.id(), task.attempt(), execution, promise});
        std::thread{[runner = caf::actor_cast<runner_actor>(self), handler = st.handler, id,
                     execution, task = std::move(task)] {
          caf::anon_send(runner, finished_atom_v, id, handler(task, execution));
        }}.detach();
        return promise;
      },
      [self](progress_atom, int64_t task_id, pb::Progress& progress) {
        self->request(self->state.node, link_silence_bound, progress_atom_v, task_id,
                      std::move(progress))
            .then([](const pb::ResultAck&) {}, [](const caf::error&) {});
      },
      [self](log_atom, int64_t task_id, pb::AttemptLog& log) {
        self->request(self->state.node, link_silence_bound, log_atom_v, task_id, std::move(log))
            .then([](const pb::ResultAck&) {}, [](const caf::error&) {});
      },
      [self](cancel_atom, int64_t task_id, int32_t attempt) {
        for (auto& [id, task] : self->state.running)
          if (task.task_id == task_id && task.attempt == attempt) task.execution.cancel();
      },
      [self](finished_atom, int64_t id, pb::TaskOutcome& outcome) {
        auto it = self->state.running.find(id);
        if (it == self->state.running.end()) return;
        it->second.promise.deliver(std::move(outcome));
        self->state.running.erase(it);
      },
  };
}

}  // namespace

caf::expected<caf::actor> start_remote_executor(caf::actor_system& sys,
                                                const remote_executor_options& o,
                                                remote_task_handler handler,
                                                std::chrono::milliseconds patience) {
  auto target = parse_listen_address(o.node, "the node's address");
  if (!target) return target.error();
  auto& [host, port] = *target;
  // Through the middleman actor rather than remote_actor, which waits
  // without end for a node that never answers (a plain node dialled over
  // TLS, or the other way round, each waiting for the other to speak).
  auto mm =
      o.tls_cert.empty() ? sys.middleman().actor_handle() : sys.openssl_manager().actor_handle();
  caf::scoped_actor self{sys};
  caf::error err;
  peer_actor node;
  self->request(mm, patience, caf::connect_atom_v, host, port)
      .receive(
          [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>& ifs) {
            if (!ptr || !sys.assignable<peer_actor>(ifs))
              err = link_failed(o.node, "no taskmill node of this release listens there");
            else
              node = caf::actor_cast<peer_actor>(std::move(ptr));
          },
          [&](caf::error& e) { err = link_failed(o.node, error_message(e)); });
  if (err) return err;
  auto runner = sys.spawn(remote_runner, o, std::move(handler), node);
  self->request(runner, patience, join_atom_v)
      .receive([](int32_t) {}, [&](caf::error& e) { err = std::move(e); });
  if (err) {
    self->send_exit(runner, caf::exit_reason::user_shutdown);
    return err;
  }
  return caf::actor_cast<caf::actor>(runner);
}

}  // namespace taskmill
