#include "actors/supervisor.hpp"

#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include <map>

namespace taskmill {

void node_health::fail(std::string why) {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    if (failure_) return;
    failure_ = std::move(why);
  }
  changed_.notify_all();
}

bool node_health::failed() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return failure_.has_value();
}

std::string node_health::failure() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return failure_.value_or("");
}

bool node_health::wait_for_failure(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock{mutex_};
  return changed_.wait_for(lock, timeout, [this] { return failure_.has_value(); });
}

struct supervisor_state {
  static inline const char* name = "supervisor";
  std::string node;
  std::shared_ptr<node_health> health;
  std::map<caf::actor_addr, std::string> watched;
};

namespace {

using self_ptr = supervisor_actor::stateful_pointer<supervisor_state>;

supervisor_actor::behavior_type supervisor(self_ptr self, std::string node,
                                           std::shared_ptr<node_health> health) {
  self->state.node = std::move(node);
  self->state.health = std::move(health);
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    auto it = st.watched.find(msg.source);
    if (it == st.watched.end()) return;
    auto why = "the " + it->second + " actor ended (" + caf::to_string(msg.reason) + ")";
    st.watched.erase(it);
    spdlog::error("node {}: {}; the node stops", st.node, why);
    st.health->fail(std::move(why));
  });
  return {
      [self](watch_atom, const std::string& name, const caf::actor& actor) {
        self->state.watched.emplace(actor.address(), name);
        self->monitor(actor);
      },
  };
}

}  // namespace

supervisor_actor spawn_supervisor(caf::actor_system& sys, std::string node,
                                  std::shared_ptr<node_health> health) {
  return sys.spawn(supervisor, std::move(node), std::move(health));
}

}  // namespace taskmill
