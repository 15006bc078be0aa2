#include "actors/watcher.hpp"

#include "config/config.hpp"

#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

namespace taskmill {

struct watcher_state {
  static inline const char* name = "watcher";
  watcher_options options;
  /// The term of the lead this node holds (0: it does not lead).
  int64_t term = 0;
  uint64_t generation = 0;
};

namespace {

using self_ptr = watcher_actor::stateful_pointer<watcher_state>;

void schedule(self_ptr self, std::chrono::milliseconds delay) {
  self->delayed_send(self, delay, caf::tick_atom_v, ++self->state.generation);
}

void sweep(self_ptr self) {
  const auto& o = self->state.options;
  pb::SweepRequest req;
  req.set_lease_ms(o.lease.count());
  req.set_timeout_grace_ms(o.lease.count());
  req.set_success_retention_ms(o.success_retention.count());
  req.set_purge_retention_ms(o.purge_retention.count());
  req.set_batch_size(o.batch_size);
  req.set_term(self->state.term);
  self->request(o.storage, std::chrono::seconds{120}, sweep_atom_v, req)
      .then(
          [self](const pb::SweepResult& r) {
            if (r.lost() + r.timed_out() + r.silent() + r.expired() > 0)
              spdlog::info(
                  "watcher: {} lost to dead nodes, {} timed out, {} silent past their "
                  "heartbeat timeout, {} past their pending deadline",
                  r.lost(), r.timed_out(), r.silent(), r.expired());
            if (r.repinned() > 0)
              spdlog::info("watcher: {} broadcast shards moved off nodes no longer alive",
                           r.repinned());
            if (r.tally_off() > 0)
              spdlog::info(
                  "watcher: the tally of running tasks under limits was off by {}, "
                  "now set to the tasks running",
                  r.tally_off());
            if (r.stopped() + r.purged() > 0)
              spdlog::debug("watcher: {} stopped after retention, {} purged", r.stopped(),
                            r.purged());
            auto batch = self->state.options.batch_size;
            bool more = r.lost() >= batch || r.timed_out() >= batch || r.silent() >= batch ||
                        r.expired() >= batch || r.stopped() >= batch || r.purged() >= batch ||
                        r.repinned() >= batch;
            // A full batch means more is waiting: go on at once.
            schedule(self, more ? std::chrono::milliseconds{0} : self->state.options.interval);
          },
          [self](const caf::error& err) {
            spdlog::warn("watcher: sweep failed: {}", error_message(err));
            schedule(self, self->state.options.interval);
          });
}

watcher_actor::behavior_type watcher(self_ptr self, watcher_options options) {
  self->state.options = std::move(options);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](lead_atom, int64_t term) {
        self->state.term = term;
        if (term != 0) schedule(self, std::chrono::milliseconds{0});
      },
      [self](caf::tick_atom, uint64_t generation) {
        if (self->state.term != 0 && generation == self->state.generation) sweep(self);
      },
  };
}

}  // namespace

watcher_options watcher_options_from(const config& cfg) {
  watcher_options o;
  o.interval = cfg.watcher.interval;
  o.lease = cfg.lease();
  o.success_retention = cfg.watcher.success_retention;
  o.purge_retention = cfg.watcher.purge_retention;
  o.batch_size = cfg.watcher.batch_size;
  return o;
}

watcher_actor spawn_watcher(caf::actor_system& sys, watcher_options options) {
  return sys.spawn(watcher, std::move(options));
}

}  // namespace taskmill
