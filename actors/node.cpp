#include "actors/node.hpp"

#include "actors/dispatcher.hpp"
#include "actors/inserter.hpp"
#include "actors/limiter.hpp"
#include "actors/pusher.hpp"
#include "messages/errors.hpp"
#include "storage/storage.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <spdlog/spdlog.h>

#include <thread>

namespace taskmill {

namespace {

using namespace std::chrono_literals;

caf::error wait_until_ready(caf::actor_system& sys, const storage_actor& storage,
                            const std::function<bool()>& keep_waiting) {
  caf::scoped_actor self{sys};
  bool announced = false;
  for (;;) {
    pb::StorageStatus status;
    caf::error failure;
    self->request(storage, 30s, status_atom_v)
        .receive([&](pb::StorageStatus& s) { status = std::move(s); },
                 [&](caf::error& err) { failure = std::move(err); });
    if (failure) return failure;
    if (status.connected()) return caf::none;
    if (!announced) {
      spdlog::info("node: waiting for PostgreSQL ({})", status.last_error());
      announced = true;
    }
    if (!keep_waiting())
      return make_error(errc::storage_unavailable,
                        "PostgreSQL is not ready: " + status.last_error());
  }
}

pb::TypeSettings settings_of(const std::string& name, const task_type_config& t) {
  pb::TypeSettings s;
  s.set_type(name);
  s.set_timeout_ms(static_cast<int32_t>(t.timeout.count()));
  s.set_max_retries(t.max_retries);
  s.mutable_backoff()->set_kind(t.backoff.exponential ? pb::EXPONENTIAL : pb::FIXED);
  s.mutable_backoff()->set_base_ms(static_cast<int32_t>(t.backoff.base.count()));
  s.mutable_backoff()->set_cap_ms(static_cast<int32_t>(t.backoff.cap.count()));
  s.mutable_backoff()->set_jitter(t.backoff.jitter);
  s.set_pending_deadline_ms(t.pending_deadline.count());
  s.set_running_limit(t.running_limit);
  return s;
}

}  // namespace

pb::TypeSettingsList type_settings(const config& cfg) {
  pb::TypeSettingsList out;
  *out.add_types() = settings_of("", cfg.default_type);
  for (const auto& [name, t] : cfg.types) *out.add_types() = settings_of(name, t);
  return out;
}

caf::expected<node_actors> start_node(caf::actor_system& sys, std::shared_ptr<const config> cfg,
                                      const std::string& conninfo,
                                      const std::function<bool()>& keep_waiting) {
  node_actors node;
  storage_options storage_opts;
  storage_opts.conninfo = conninfo;
  storage_opts.node = cfg->node.name;
  storage_opts.statement_timeout = cfg->database.statement_timeout;
  storage_opts.lock_timeout = cfg->database.lock_timeout;
  storage_opts.reconnect_min = cfg->database.reconnect_min;
  storage_opts.reconnect_max = cfg->database.reconnect_max;
  storage_opts.listen = cfg->database.listen;
  node.storage = spawn_storage(sys, storage_opts);

  auto stop_storage = [&] { caf::anon_send_exit(node.storage, caf::exit_reason::user_shutdown); };
  if (auto err = wait_until_ready(sys, node.storage, keep_waiting)) {
    stop_storage();
    return err;
  }
  {
    caf::scoped_actor self{sys};
    caf::error failure;
    self->request(node.storage, 60s, configure_atom_v, type_settings(*cfg))
        .receive([](int32_t) {}, [&](caf::error& err) { failure = std::move(err); });
    if (failure) {
      stop_storage();
      return failure;
    }
  }

  limiter_options limiter_opts;
  limiter_opts.node_limit = cfg->scheduling.node_limit;
  limiter_opts.global_limit = cfg->scheduling.global_limit;
  for (const auto& [name, t] : cfg->types)
    if (t.running_limit > 0) limiter_opts.type_limits.emplace(name, t.running_limit);
  node.limiter = spawn_limiter(sys, limiter_opts);

  node.dispatcher = spawn_dispatcher(sys, {cfg->node.name, cfg, node.storage, node.limiter});

  pusher_options pusher_opts;
  pusher_opts.node = cfg->node.name;
  pusher_opts.batch_size = cfg->scheduling.batch_size;
  pusher_opts.poll_interval = cfg->scheduling.poll_interval;
  pusher_opts.weights = cfg->scheduling.weights;
  pusher_opts.any_type = !cfg->default_type.executor.empty();
  for (const auto& [name, t] : cfg->types)
    if (!t.executor.empty()) pusher_opts.types.push_back(name);
  pusher_opts.storage = node.storage;
  pusher_opts.limiter = node.limiter;
  pusher_opts.dispatcher = node.dispatcher;
  node.pusher = spawn_pusher(sys, pusher_opts);

  caf::anon_send(node.limiter, caf::subscribe_atom_v,
                 caf::actor_cast<wake_listener_actor>(node.pusher));
  caf::anon_send(node.storage, caf::subscribe_atom_v,
                 caf::actor_cast<wake_listener_actor>(node.pusher));

  node.inserter = spawn_inserter(sys, {input_limits{cfg->api.max_payload_bytes}, node.storage,
                                       caf::actor_cast<wake_listener_actor>(node.pusher)});
  return node;
}

void stop_node(const node_actors& node) {
  auto reason = caf::exit_reason::user_shutdown;
  caf::anon_send_exit(node.pusher, reason);
  caf::anon_send_exit(node.inserter, reason);
  caf::anon_send_exit(node.dispatcher, reason);
  caf::anon_send_exit(node.limiter, reason);
  caf::anon_send_exit(node.storage, reason);
}

}  // namespace taskmill
