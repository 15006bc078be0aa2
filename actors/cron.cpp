#include "actors/cron.hpp"

#include "actors/logging/log_format.hpp"

#include "config/config.hpp"

#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

namespace taskmill {

struct cron_state {
  static inline const char* name = "cron";
  cron_options options;
  /// The term of the lead this node holds (0: it does not lead).
  int64_t term = 0;
  uint64_t generation = 0;
  bool firing = false;      // a round is under way
  bool look_again = false;  // woken during the round
};

namespace {

using self_ptr = cron_actor::stateful_pointer<cron_state>;

constexpr auto storage_timeout = std::chrono::seconds{60};
constexpr auto retry_delay = std::chrono::seconds{1};

void arm(self_ptr self, std::chrono::milliseconds delay) {
  delay = std::min(delay, self->state.options.longest_sleep);
  self->delayed_send(self, delay, caf::tick_atom_v, ++self->state.generation);
}

void fire_due(self_ptr self);

void end_round(self_ptr self, std::chrono::milliseconds next) {
  auto& st = self->state;
  st.firing = false;
  if (st.term == 0) return;
  if (st.look_again) {
    st.look_again = false;
    return fire_due(self);
  }
  arm(self, next);
}

/// When to look again, as storage answered: at once if a job is due.
template <class Answer>
std::chrono::milliseconds next_due(self_ptr self, const Answer& answer) {
  return answer.has_next_due_in_ms() ? std::chrono::milliseconds{answer.next_due_in_ms()}
                                     : self->state.options.longest_sleep;
}

/// One line per round at info (a thousand jobs a second would otherwise
/// write a thousand lines); each firing at debug, skipped and missed ones at
/// warn.
void log_firings(const pb::JobFirings& firings) {
  int fired = 0;
  for (const auto& f : firings.firings()) {
    log_scope about{log_fields::of_job(f.job())};
    if (f.outcome() == "fired") {
      ++fired;
      spdlog::debug("cron: job {} fired ({})", f.job(), f.batch());
    } else if (f.outcome() == "skipped" || f.outcome() == "missed") {
      spdlog::warn("cron: job {}: firing {} {}", f.job(), f.batch(), f.outcome());
    } else if (f.outcome() == "taken") {
      spdlog::debug("cron: job {} was fired or changed elsewhere", f.job());
    }
  }
  if (fired > 0) spdlog::info("cron: {} firings", fired);
}

/// Fires the jobs due by now; storage answers when the next job is due once
/// the firings moved their next fire times.
void fire(self_ptr self, const pb::DueJobs& due) {
  auto& st = self->state;
  pb::JobPlans plans;
  plans.set_lease_ms(st.options.lease.count());
  plans.set_term(st.term);
  for (const auto& job : due.jobs()) {
    auto plan = plan_firings(job, due.db_now_us(), st.options.misfire);
    if (plan) {
      *plans.add_jobs() = std::move(*plan);
      continue;
    }
    // Its schedule or zone no longer parses (say, a zone gone from the tz
    // database): it stops firing until it is put again.
    log_scope about{log_fields::of_job(job.name())};
    spdlog::error("cron: job {} stops firing: {}", job.name(), error_message(plan.error()));
    auto stop = plans.add_jobs();
    stop->set_job(job.name());
    stop->set_expected_next_us(job.next_fire_at_us());
  }
  self->request(st.options.storage, storage_timeout, fire_atom_v, std::move(plans))
      .then(
          [self](const pb::FiringRound& round) {
            log_firings(round.firings());
            end_round(self, next_due(self, round));
          },
          [self](const caf::error& err) {
            spdlog::warn("cron: cannot fire jobs: {}", error_message(err));
            end_round(self, retry_delay);
          });
}

void fire_due(self_ptr self) {
  auto& st = self->state;
  if (st.term == 0) return;
  if (st.firing) {
    st.look_again = true;
    return;
  }
  st.firing = true;
  self->request(st.options.storage, storage_timeout, due_atom_v, st.options.batch_size)
      .then(
          [self](const pb::DueJobs& due) {
            if (self->state.term == 0) {
              self->state.firing = false;
              return;
            }
            if (due.jobs().empty()) return end_round(self, next_due(self, due));
            fire(self, due);
          },
          [self](const caf::error& err) {
            spdlog::warn("cron: cannot read due jobs: {}", error_message(err));
            end_round(self, retry_delay);
          });
}

cron_actor::behavior_type cron(self_ptr self, cron_options options) {
  self->state.options = std::move(options);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](lead_atom, int64_t term) {
        auto& st = self->state;
        st.term = term;
        ++st.generation;
        if (term != 0) fire_due(self);
      },
      [self](wake_atom) { fire_due(self); },
      [self](caf::tick_atom, uint64_t generation) {
        if (generation == self->state.generation) fire_due(self);
      },
  };
}

}  // namespace

cron_options cron_options_from(const config& cfg) {
  cron_options o;
  o.lease = cfg.lease();
  o.batch_size = 1000;
  // Without LISTEN no change of jobs is heard of: look as often as claims
  // do; with it, a NOTIFY lost with a connection is made up within 30 s.
  o.longest_sleep = cfg.database.listen ? std::chrono::milliseconds{std::chrono::seconds{30}}
                                        : cfg.scheduling.poll_interval;
  o.misfire.threshold = cfg.cron.misfire_after;
  return o;
}

cron_actor spawn_cron(caf::actor_system& sys, cron_options options) {
  return sys.spawn(cron, std::move(options));
}

}  // namespace taskmill
