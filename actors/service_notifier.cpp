#include "actors/service_notifier.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace taskmill {

bool under_service_manager() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  return socket != nullptr && *socket != '\0';
}

void notify_service_manager(const std::string& state) {
  if (!under_service_manager()) return;
  if (int rc = sd_notify(0, state.c_str()); rc < 0)
    spdlog::warn("node: cannot notify the service manager: {}", std::strerror(-rc));
}

void tell_service_status(const std::string& status) {
  auto line = status;
  std::replace(line.begin(), line.end(), '\n', ' ');
  notify_service_manager("STATUS=" + line);
}

std::optional<std::chrono::microseconds> service_watchdog() {
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::nullopt;
  return std::chrono::microseconds{usec};
}

struct service_notifier_state {
  static inline const char* name = "service notifier";
  service_notifier_options options;
  std::optional<std::chrono::microseconds> watchdog;
  /// What the last check of the node's life found wrong (empty: nothing).
  std::string not_alive;
};

namespace {

using namespace std::chrono_literals;
using self_ptr = service_notifier_actor::stateful_pointer<service_notifier_state>;

constexpr auto readiness_patience = 2s;
constexpr auto readiness_retry = 250ms;

void check_ready(self_ptr self) {
  self->request(self->state.options.readiness, readiness_patience + 1s, ready_atom_v,
                caf::timespan{readiness_patience})
      .then(
          [self](const std::string& problem) {
            if (problem.empty()) {
              notify_service_manager("READY=1\nSTATUS=ready");
              spdlog::info("node {}: told the service manager it is ready",
                           self->state.options.node);
              return;
            }
            tell_service_status("not ready: " + problem);
            self->delayed_send(self, readiness_retry, ready_atom_v);
          },
          [self](const caf::error&) { self->delayed_send(self, readiness_retry, ready_atom_v); });
}

void check_alive(self_ptr self) {
  auto& st = self->state;
  auto patience = std::chrono::duration_cast<caf::timespan>(*st.watchdog / 2);
  auto next = [self] { self->delayed_send(self, *self->state.watchdog / 4, alive_atom_v); };
  auto judge = [self, next](std::string problem) {
    auto& st = self->state;
    if (problem.empty()) {
      notify_service_manager("WATCHDOG=1");
      if (!st.not_alive.empty())
        spdlog::info("node {}: every actor answers again; the watchdog is told so",
                     st.options.node);
    } else if (problem != st.not_alive) {
      spdlog::error("node {}: {}: the service manager's watchdog is not told it is alive",
                    st.options.node, problem);
    }
    st.not_alive = std::move(problem);
    next();
  };
  self->request(st.options.readiness, patience + 1s, alive_atom_v, patience)
      .then(judge, [judge](const caf::error&) { judge("the readiness actor does not answer"); });
}

service_notifier_actor::behavior_type service_notifier(self_ptr self,
                                                       service_notifier_options options) {
  self->state.options = std::move(options);
  auto& st = self->state;
  st.watchdog = service_watchdog();
  if (st.watchdog && *st.watchdog / 2 <= st.options.statement_timeout)
    spdlog::warn(
        "node {}: the watchdog ({} ms) is under twice database.statement_timeout ({} ms): a "
        "statement running to its timeout gets the node restarted",
        st.options.node,
        std::chrono::duration_cast<std::chrono::milliseconds>(*st.watchdog).count(),
        st.options.statement_timeout.count());
  self->send(self, ready_atom_v);
  if (self->state.watchdog) self->send(self, alive_atom_v);
  return {
      [self](ready_atom) { check_ready(self); },
      [self](alive_atom) { check_alive(self); },
  };
}

}  // namespace

service_notifier_actor spawn_service_notifier(caf::actor_system& sys,
                                              service_notifier_options options) {
  return sys.spawn(service_notifier, std::move(options));
}

}  // namespace taskmill
