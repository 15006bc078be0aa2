#include "actors/alerter.hpp"

#include "config/config.hpp"

#include "actors/http/http_client.hpp"
#include "messages/errors.hpp"
#include "messages/json_codec.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

namespace taskmill {

struct alerter_state {
  static inline const char* name = "alerter";
  alerter_options options;
  /// The term of the lead this node holds (0: it does not lead).
  int64_t term = 0;
  uint64_t generation = 0;
  bool passing = false;  // a pass is under way
  caf::actor_clock::time_point next_overdue_check;
  /// The deliveries of this pass still waiting for their webhook.
  size_t outstanding = 0;
  pb::DeliveryResults results;
  /// Whether the pass took a full batch: more may be waiting.
  bool full = false;
};

namespace {

using self_ptr = alerter_actor::stateful_pointer<alerter_state>;

constexpr auto storage_timeout = std::chrono::seconds{60};

void schedule(self_ptr self, std::chrono::milliseconds delay) {
  self->delayed_send(self, delay, caf::tick_atom_v, ++self->state.generation);
}

void end_pass(self_ptr self) {
  auto& st = self->state;
  st.passing = false;
  if (st.term != 0) schedule(self, st.full ? std::chrono::milliseconds{0} : st.options.interval);
}

void log_raised(const pb::AlertRound& round) {
  for (const auto& a : round.raised())
    spdlog::warn("alert {} ({}): {}", a.id(), a.kind(), a.message());
}

/// A taken delivery is due again after this, should this node die with it.
std::chrono::milliseconds delivery_lease(const alerter_options& o) {
  return 2 * o.delivery_timeout + std::chrono::seconds{5};
}

void record_deliveries(self_ptr self) {
  auto& st = self->state;
  auto results = std::move(st.results);
  st.results = {};
  results.set_max_attempts(st.options.delivery_attempts);
  results.set_backoff_base_ms(st.options.delivery_backoff.count());
  results.set_backoff_cap_ms(st.options.delivery_backoff_cap.count());
  self->request(st.options.storage, storage_timeout, deliver_atom_v, std::move(results))
      .then([self](int32_t) { end_pass(self); },
            [self](const caf::error& err) {
              // The deliveries stay taken until their lease ends, then go again.
              spdlog::warn("alerter: cannot record deliveries: {}", error_message(err));
              end_pass(self);
            });
}

void deliver(self_ptr self, const pb::DueDelivery& due) {
  http_call call;
  call.url = due.url();
  call.body = json::encode(due.alert());
  call.timeout = self->state.options.delivery_timeout;
  call.headers.emplace_back("Idempotency-Key",
                            "taskmill-alert-" + std::to_string(due.alert().id()));
  self->state.options.http->send(
      std::move(call), [alerter = caf::actor_cast<alerter_actor>(self), id = due.alert().id(),
                        url = due.url()](http_answer answer) {
        std::string error;
        if (answer.status == 0)
          error = answer.error.empty() ? "no answer" : answer.error;
        else if (answer.status < 200 || answer.status >= 300)
          error = "HTTP " + std::to_string(answer.status);
        caf::anon_send(alerter, deliver_atom_v, id, url, std::move(error));
      });
}

void on_delivered(self_ptr self, int64_t alert_id, const std::string& url,
                  const std::string& error) {
  auto& st = self->state;
  if (!error.empty())
    spdlog::info("alerter: delivering alert {} to {} failed: {}", alert_id, url, error);
  auto r = st.results.add_results();
  r->set_alert_id(alert_id);
  r->set_url(url);
  r->set_error(error);
  if (st.outstanding > 0 && --st.outstanding == 0) record_deliveries(self);
}

void pass(self_ptr self) {
  auto& st = self->state;
  st.passing = true;
  const auto& o = st.options;
  pb::AlertCheck check;
  check.set_rules(o.rules);
  for (const auto& url : o.webhooks) check.add_webhooks(url);
  check.set_batch_size(o.batch_size);
  check.set_delivery_lease_ms(delivery_lease(o).count());
  check.set_term(self->state.term);
  auto now = self->clock().now();
  if (now >= st.next_overdue_check) {
    check.set_check_overdue(true);
    st.next_overdue_check = now + o.overdue_check_interval;
  }
  self->request(o.storage, storage_timeout, alerts_atom_v, std::move(check))
      .then(
          [self](const pb::AlertRound& round) {
            auto& st = self->state;
            log_raised(round);
            st.full = round.raised_size() >= st.options.batch_size ||
                      round.due_size() >= st.options.batch_size;
            if (round.due().empty()) return end_pass(self);
            st.outstanding = static_cast<size_t>(round.due_size());
            for (const auto& due : round.due()) deliver(self, due);
          },
          [self](const caf::error& err) {
            spdlog::warn("alerter: alert pass failed: {}", error_message(err));
            self->state.full = false;
            end_pass(self);
          });
}

alerter_actor::behavior_type alerter(self_ptr self, alerter_options options) {
  self->state.options = std::move(options);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](lead_atom, int64_t term) {
        auto& st = self->state;
        st.term = term;
        if (term != 0 && !st.passing) schedule(self, std::chrono::milliseconds{0});
      },
      [self](caf::tick_atom, uint64_t generation) {
        auto& st = self->state;
        if (st.term != 0 && !st.passing && generation == st.generation) pass(self);
      },
      [self](deliver_atom, int64_t alert_id, const std::string& url, const std::string& error) {
        on_delivered(self, alert_id, url, error);
      },
      [self](reload_atom, std::string& rules) { self->state.options.rules = std::move(rules); },
  };
}

}  // namespace

alerter_options alerter_options_from(const config& cfg) {
  const auto& a = cfg.alerts;
  alerter_options o;
  o.rules = alert_rules_json(a);
  o.webhooks = a.webhooks;
  o.interval = a.interval;
  o.overdue_check_interval = a.overdue_check_interval;
  o.delivery_timeout = a.delivery_timeout;
  o.delivery_attempts = a.delivery_attempts;
  o.delivery_backoff = a.delivery_backoff;
  o.delivery_backoff_cap = a.delivery_backoff_cap;
  // Enough for a pass to keep up with a burst of dead tasks, few enough
  // for one statement to stay short.
  o.batch_size = 100;
  return o;
}

alerter_actor spawn_alerter(caf::actor_system& sys, alerter_options options) {
  return sys.spawn(alerter, std::move(options));
}

}  // namespace taskmill
