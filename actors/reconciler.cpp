#include "actors/reconciler.hpp"

#include "config/config.hpp"

#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

namespace taskmill {

struct reconciler_state {
  static inline const char* name = "reconciler";
  reconciler_options options;
  /// The term of the lead this node holds (0: it does not lead).
  int64_t term = 0;
  uint64_t generation = 0;
};

namespace {

using self_ptr = reconciler_actor::stateful_pointer<reconciler_state>;

void run_rules(self_ptr self) {
  const auto& o = self->state.options;
  for (int32_t i = 0; i < static_cast<int32_t>(o.rules.size()); ++i)
    self->request(o.storage, std::chrono::seconds{120}, compensate_atom_v, i, self->state.term)
        .then(
            [self, i](int32_t submitted) {
              if (submitted > 0)
                spdlog::info("reconciler: rule {} submitted {} missing tasks",
                             self->state.options.rules[i], submitted);
            },
            [self, i](const caf::error& err) {
              spdlog::warn("reconciler: rule {} failed: {}", self->state.options.rules[i],
                           error_message(err));
            });
}

reconciler_actor::behavior_type reconciler(self_ptr self, reconciler_options options) {
  self->state.options = std::move(options);
  self->delayed_send(self, self->state.options.interval, caf::tick_atom_v, self->state.generation);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](lead_atom, int64_t term) {
        auto& st = self->state;
        st.term = term;
        // A new leader repairs at once rather than an interval later.
        if (term != 0) self->send(self, caf::tick_atom_v, ++st.generation);
      },
      [self](caf::tick_atom, uint64_t generation) {
        auto& st = self->state;
        if (generation != st.generation) return;
        self->send(st.options.dispatcher, reconcile_atom_v);
        if (st.term != 0) run_rules(self);
        self->delayed_send(self, st.options.interval, caf::tick_atom_v, st.generation);
      },
  };
}

}  // namespace

reconciler_options reconciler_options_from(const config& cfg) {
  reconciler_options o;
  o.interval = cfg.reconciler.interval;
  for (const auto& rule : cfg.reconciler.rules) o.rules.push_back(rule.name);
  return o;
}

reconciler_actor spawn_reconciler(caf::actor_system& sys, reconciler_options options) {
  return sys.spawn(reconciler, std::move(options));
}

}  // namespace taskmill
