#include "tools/node/node.hpp"

#include "actors/alerter.hpp"
#include "actors/api.hpp"
#include "actors/cluster.hpp"
#include "actors/cron.hpp"
#include "actors/dispatcher.hpp"
#include "actors/http/http_client.hpp"
#include "actors/http/http_server.hpp"
#include "actors/inserter.hpp"
#include "actors/jobs/job_times.hpp"
#include "actors/limiter.hpp"
#include "actors/metrics/node_metrics.hpp"
#include "actors/peers.hpp"
#include "actors/progress.hpp"
#include "actors/pusher.hpp"
#include "actors/readiness.hpp"
#include "actors/reconciler.hpp"
#include "actors/service_notifier.hpp"
#include "actors/supervisor.hpp"
#include "actors/watcher.hpp"
#include "messages/cluster_port.hpp"
#include "messages/cluster_tls.hpp"
#include "messages/errors.hpp"
#include "messages/refusal_log.hpp"
#include "messages/types.hpp"
#include "storage/storage.hpp"
#include "tools/node/config_reload.hpp"
#include "tools/node_process.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <spdlog/spdlog.h>

#include <thread>

namespace taskmill {

namespace {

using namespace std::chrono_literals;

/// Errors that waiting cures: PostgreSQL is away or busy, or the name is
/// still held by the lease of an earlier run.
bool passes(const caf::error& err) {
  return is(err, errc::storage_unavailable) || is(err, errc::retryable) ||
         is(err, errc::conflict) || err == caf::sec::request_timeout;
}

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
    if (failure && !passes(failure)) return failure;
    if (!failure && status.connected()) return caf::none;
    auto why = failure ? error_message(failure) : status.last_error();
    if (!announced) {
      spdlog::info("node: waiting for PostgreSQL ({})", why);
      tell_service_status("waiting for PostgreSQL: " + why);
      announced = true;
    }
    if (!keep_waiting())
      return make_error(errc::storage_unavailable, "PostgreSQL is not ready: " + why);
  }
}

/// Asks storage until the answer is not an error that waiting cures.
template <class Result, class... Ts>
caf::expected<Result> ask_patiently(caf::actor_system& sys, const storage_actor& storage,
                                    const std::function<bool()>& keep_waiting, const char* what,
                                    const Ts&... xs) {
  caf::scoped_actor self{sys};
  for (bool announced = false;;) {
    caf::expected<Result> out = caf::error{};
    self->request(storage, 60s, xs...)
        .receive([&](Result& r) { out = std::move(r); },
                 [&](caf::error& err) { out = std::move(err); });
    if (out || !passes(out.error())) return out;
    if (!announced) spdlog::info("node: {}: {}; waiting", what, error_message(out.error()));
    announced = true;
    if (!keep_waiting()) return out;
  }
}

/// A job of the config as the API would put it.
pb::Job job_of(const job_config& j) {
  pb::Job job;
  job.set_name(j.name);
  job.set_schedule(j.schedule);
  job.set_time_zone(j.time_zone);
  job.set_type(j.type);
  if (!j.payload.empty()) job.set_payload(j.payload);
  if (j.priority) job.set_priority(*j.priority);
  if (j.max_retries) job.set_max_retries(*j.max_retries);
  if (j.timeout) job.set_timeout_ms(static_cast<int32_t>(j.timeout->count()));
  job.set_enabled(j.enabled);
  if (!j.routing.empty()) job.set_routing(j.routing);
  if (j.shards) job.set_shards(*j.shards);
  if (!j.overlap.empty()) job.set_overlap(j.overlap);
  if (!j.misfire.empty()) job.set_misfire(j.misfire);
  if (!j.dialect.empty()) job.set_dialect(j.dialect);
  if (j.catch_up_limit) job.set_catch_up_limit(*j.catch_up_limit);
  job.set_description(j.description);
  for (const auto& child : j.child_jobs) job.add_child_jobs(child);
  for (const auto& child : j.child_jobs_on_failure) job.add_child_jobs_on_failure(child);
  if (!j.on_finish.empty()) job.set_on_finish(j.on_finish);
  if (!j.on_success.empty()) job.set_on_success(j.on_success);
  job.set_source("config");
  return job;
}

/// The config's jobs, each checked by the database before anything is
/// written, so that a bad one leaves the database as it was.
caf::expected<std::vector<pb::Job>> checked_jobs(caf::actor_system& sys,
                                                 const storage_actor& storage, const config& cfg,
                                                 const std::function<bool()>& keep_waiting) {
  auto jobs = config_jobs(cfg);
  if (!jobs) return jobs.error();
  for (const auto& job : *jobs) {
    auto problem = ask_patiently<std::string>(sys, storage, keep_waiting,
                                              "checking the config's jobs", check_job_atom_v, job);
    if (!problem || !problem->empty())
      return make_error(
          errc::invalid_argument,
          "jobs: " + job.name() + ": " + (problem ? *problem : error_message(problem.error())));
  }
  return jobs;
}

/// Writes the config's type settings and key spaces.
caf::error write_type_settings(caf::actor_system& sys, const storage_actor& storage,
                               const config& cfg, const std::function<bool()>& keep_waiting) {
  auto configured = ask_patiently<int32_t>(sys, storage, keep_waiting, "writing the type settings",
                                           configure_atom_v, type_settings(cfg));
  // The database owns the ranges; its refusal names the type ("any": the
  // defaults) and the field.
  if (!configured && is(configured.error(), errc::invalid_argument))
    return make_error(errc::invalid_argument,
                      "[defaults] or [types.*]: " + error_message(configured.error()));
  return configured ? caf::none : configured.error();
}

caf::error put_jobs(caf::actor_system& sys, const storage_actor& storage,
                    const std::vector<pb::Job>& jobs, const std::function<bool()>& keep_waiting) {
  for (const auto& job : jobs) {
    auto put = ask_patiently<pb::JobPutResult>(sys, storage, keep_waiting,
                                               "writing the config's jobs", job_atom_v, job);
    if (!put)
      return make_error(errc::invalid_argument,
                        "jobs: " + job.name() + ": " + error_message(put.error()));
  }
  return caf::none;
}

/// Writes the per-type settings and takes the node's name, before it claims
/// anything. A run of the same name that just crashed holds the name until
/// its lease ends.
caf::error configure_and_register(caf::actor_system& sys, node_actors& node,
                                  const std::function<bool()>& keep_waiting) {
  const auto& cfg = *node.cfg;
  auto jobs = checked_jobs(sys, node.storage, cfg, keep_waiting);
  if (!jobs) return jobs.error();
  if (auto err = write_type_settings(sys, node.storage, cfg, keep_waiting)) return err;
  if (auto err = put_jobs(sys, node.storage, *jobs, keep_waiting)) return err;
  pb::NodeRegistration reg;
  node.incarnation = new_incarnation();
  reg.set_name(cfg.node.name);
  reg.set_incarnation(node.incarnation);
  reg.set_address(node.cluster_address);
  reg.set_lease_ms(cfg.lease().count());
  auto run_here = types_run_here(cfg);
  reg.set_any_type(run_here.any);
  for (const auto& type : run_here.types) reg.add_types(type);
  auto lost =
      ask_patiently<int32_t>(sys, node.storage, keep_waiting,
                             ("taking the name " + cfg.node.name).c_str(), register_atom_v, reg);
  if (!lost) return lost.error();
  if (*lost > 0)
    spdlog::info("node {}: {} tasks of its earlier run are retried", cfg.node.name, *lost);
  return caf::none;
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
  s.set_heartbeat_timeout_ms(t.heartbeat_timeout.count());
  s.set_max_timeout_ms(static_cast<int32_t>(t.max_timeout.count()));
  s.set_key_space(t.key_space);
  s.set_key_path(t.key_path);
  s.set_key_separator(t.key_separator);
  if (t.rate_units) s.set_rate_units(*t.rate_units);
  return s;
}

}  // namespace

void configure_actor_system(caf::actor_system_config& cfg) {
  register_message_types(cfg);
  cfg.load<caf::io::middleman>();
  cfg.set("middleman.heartbeat-interval", caf::timespan{link_heartbeat_interval});
  cfg.set("middleman.connection-timeout", caf::timespan{link_silence_bound});
  // A worker without work naps 50 us at a time for 25 ms before it waits to
  // be woken. A message from outside the scheduler (the storage actor's
  // thread, the listener's, the HTTP client's) then waits for the nap to end
  // on every such hop of a pickup; without naps the worker soon waits and is
  // woken by the message itself.
  cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{0});
}

void configure_actor_system(caf::actor_system_config& cfg, const config::cluster_section& cluster) {
  configure_actor_system(cfg);
  if (!cluster.tls()) return;
  cfg.load<caf::openssl::manager>();
  cfg.set("openssl.certificate", cluster.tls_cert);
  cfg.set("openssl.key", cluster.tls_key);
  cfg.set("openssl.cafile", cluster.tls_ca);
}

caf::expected<std::vector<pb::Job>> config_jobs(const config& cfg) {
  std::vector<pb::Job> jobs;
  for (const auto& j : cfg.jobs) {
    auto job = job_of(j);
    // Children may be jobs of the config written after this one.
    if (!j.child_jobs.empty() || !j.child_jobs_on_failure.empty())
      for (const auto& other : cfg.jobs) job.add_known_jobs(other.name);
    if (auto err = schedule_job(job, seconds_now()))
      return make_error(errc::invalid_argument, "jobs: " + j.name + ": " + error_message(err));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

pb::TypeSettingsList type_settings(const config& cfg) {
  pb::TypeSettingsList out;
  *out.add_types() = settings_of("", cfg.default_type);
  for (const auto& [name, t] : cfg.types) *out.add_types() = settings_of(name, t);
  out.set_global_limit(cfg.scheduling.global_limit);
  for (const auto& [name, space] : cfg.key_spaces) {
    auto& k = *out.add_key_spaces();
    k.set_name(name);
    k.set_limit(space.limit);
    k.mutable_keys()->insert(space.keys.begin(), space.keys.end());
    k.set_class_path(space.class_path);
    k.mutable_classes()->insert(space.classes.begin(), space.classes.end());
    if (space.rate) k.set_rate(*space.rate);
    if (space.period) k.set_period_ms(space.period->count());
  }
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
  storage_opts.transaction_pooler = cfg->database.transaction_pooler();
  storage_opts.next_due_horizon = cfg->scheduling.poll_interval;
  storage_opts.rules = cfg->reconciler.rules;
  storage_opts.compensation_batch = cfg->watcher.batch_size;
  storage_opts.waiting = {cfg->lease(), cfg->heartbeat.interval, cfg->scheduling.global_limit,
                          cfg->scheduling.weights};
  node.cfg = cfg;
  node.health = std::make_shared<node_health>();
  node.supervisor = spawn_supervisor(sys, cfg->node.name, node.health);
  auto watch = [&](const char* name, const auto& actor) {
    caf::anon_send(node.supervisor, watch_atom_v, std::string{name},
                   caf::actor_cast<caf::actor>(actor));
  };
  // Readiness reads each storage actor's status where the actor keeps it.
  std::vector<watched_storage> storages;
  auto spawn_watched_storage = [&](storage_actor& actor, storage_options opts, const char* name) {
    auto status = std::make_shared<shared_storage_status>();
    opts.status = status;
    actor = spawn_storage(sys, std::move(opts));
    watch(name, actor);
    storages.push_back({name, actor, std::move(status)});
  };
  spawn_watched_storage(node.storage, storage_opts, "storage");

  auto stop_storage = [&] { stop_node(sys, node); };
  auto cluster_listen = parse_listen_address(cfg->cluster.listen, "cluster.listen");
  if (!cluster_listen) return cluster_listen.error();
  if (cluster_listen->second == 0) cluster_listen->second = free_loopback_port();
  node.cluster_address = !cfg->cluster.advertise.empty()
                             ? cfg->cluster.advertise
                             : cluster_listen->first + ":" + std::to_string(cluster_listen->second);
  if (auto err = wait_until_ready(sys, node.storage, keep_waiting)) {
    stop_storage();
    return err;
  }
  if (auto err = configure_and_register(sys, node, keep_waiting)) {
    stop_storage();
    return err;
  }

  auto helper_opts = storage_opts;
  helper_opts.listen = false;
  helper_opts.rules.clear();
  for (auto [helper, name] : {std::pair{&node.submit_storage, "submit storage"},
                              std::pair{&node.claim_storage, "claim storage"},
                              std::pair{&node.outcome_storage, "outcome storage"},
                              std::pair{&node.lease_storage, "lease storage"}}) {
    spawn_watched_storage(*helper, helper_opts, name);
    if (auto err = wait_until_ready(sys, *helper, keep_waiting)) {
      stop_storage();
      return err;
    }
  }

  auto limiter_opts = limiter_options_from(*cfg);
  set_limits(limiter_opts, type_settings(*cfg));
  node.limiter = spawn_limiter(sys, std::move(limiter_opts));
  watch("limiter", node.limiter);

  node.metrics = std::make_shared<node_metrics>();
  node.http = std::make_shared<http_client>();
  node.progress = spawn_progress(sys, {node.outcome_storage});
  watch("progress", node.progress);
  node.dispatcher = spawn_dispatcher(sys, {cfg->node.name, cfg, node.outcome_storage, node.limiter,
                                           node.progress, node.http, node.metrics});
  watch("dispatcher", node.dispatcher);

  auto pusher_opts = pusher_options_from(*cfg);
  pusher_opts.storage = node.claim_storage;
  pusher_opts.limiter = node.limiter;
  pusher_opts.dispatcher = node.dispatcher;
  pusher_opts.metrics = node.metrics;
  node.pusher = spawn_pusher(sys, pusher_opts);
  watch("pusher", node.pusher);

  caf::anon_send(node.limiter, caf::subscribe_atom_v,
                 caf::actor_cast<wake_listener_actor>(node.pusher));
  caf::anon_send(node.storage, caf::subscribe_atom_v,
                 caf::actor_cast<claim_waker_actor>(node.pusher), cfg->node.name);
  caf::anon_send(node.storage, cancel_atom_v, caf::subscribe_atom_v,
                 caf::actor_cast<cancel_listener_actor>(node.dispatcher));

  auto peers_opts = peers_options_from(*cfg);
  peers_opts.address = node.cluster_address;
  if (peers_opts.tls && !sys.has_openssl_manager()) {
    stop_node(sys, node);
    return make_error(errc::invalid_argument,
                      "cluster.tls_cert is set, but the actor system has no TLS (set it up "
                      "with configure_actor_system(cfg, cluster))");
  }
  peers_opts.storage = node.storage;
  peers_opts.pusher = caf::actor_cast<wake_listener_actor>(node.pusher);
  peers_opts.dispatcher = node.dispatcher;
  peers_opts.metrics = node.metrics;
  peers_opts.refusals = std::make_shared<refusal_log>(std::chrono::minutes{1});
  node.peers = spawn_peers(sys, peers_opts);
  watch("peers", node.peers);
  // Published as what callers may ask of it, so that remote executors can
  // check the interface they link to.
  auto callers_view = caf::actor_cast<peer_actor>(node.peers);
  // Guarded before it opens: no caller's frames go unchecked.
  node.cluster_watch = guard_cluster_port(
      cluster_listen->second, max_frame_payload(cfg->api.max_payload_bytes),
      [metrics = node.metrics, refusals = peers_opts.refusals](const cluster_refusal& refusal) {
        report_refusal(metrics.get(), *refusals, refusal);
      });
  if (!cluster_frames_checked() || (peers_opts.tls && !tls_error_queue_guarded()))
    spdlog::warn(
        "node {}: this program was linked so that libc's or libssl's definitions win over its "
        "own: a caller of the cluster port can drop other links or stall the node",
        cfg->node.name);
  auto published = peers_opts.tls ? caf::openssl::publish(callers_view, cluster_listen->second,
                                                          cluster_listen->first.c_str(), true)
                                  : sys.middleman().publish(callers_view, cluster_listen->second,
                                                            cluster_listen->first.c_str(), true);
  if (!published) {
    stop_node(sys, node);
    return make_error(errc::unavailable, "cannot listen on cluster.listen " +
                                             cluster_listen->first + ":" +
                                             std::to_string(cluster_listen->second) + ": " +
                                             error_message(published.error()));
  }
  node.cluster_port = *published;
  auto peers_wake = caf::actor_cast<wake_listener_actor>(node.peers);
  caf::anon_send(node.limiter, caf::subscribe_atom_v, peers_wake);
  for (const auto& target : {caf::actor_cast<wake_listener_actor>(node.pusher), peers_wake})
    caf::anon_send(node.dispatcher, caf::subscribe_atom_v, target);

  node.inserter =
      spawn_inserter(sys, {input_limits{cfg->api.max_payload_bytes},
                           node.submit_storage,
                           {caf::actor_cast<wake_listener_actor>(node.pusher), peers_wake},
                           node.metrics});
  watch("inserter", node.inserter);

  auto watcher_opts = watcher_options_from(*cfg);
  watcher_opts.storage = node.storage;
  node.watcher = spawn_watcher(sys, watcher_opts);
  watch("watcher", node.watcher);

  auto reconciler_opts = reconciler_options_from(*cfg);
  reconciler_opts.storage = node.storage;
  reconciler_opts.dispatcher = node.dispatcher;
  node.reconciler = spawn_reconciler(sys, reconciler_opts);
  watch("reconciler", node.reconciler);

  auto cron_opts = cron_options_from(*cfg);
  cron_opts.storage = node.storage;
  node.cron = spawn_cron(sys, cron_opts);
  watch("cron", node.cron);
  caf::anon_send(node.storage, jobs_atom_v, caf::subscribe_atom_v,
                 caf::actor_cast<wake_listener_actor>(node.cron));

  auto alerter_opts = alerter_options_from(*cfg);
  alerter_opts.storage = node.storage;
  alerter_opts.http = node.http;
  node.alerter = spawn_alerter(sys, alerter_opts);
  watch("alerter", node.alerter);

  auto cluster_opts = cluster_options_from(*cfg);
  cluster_opts.incarnation = node.incarnation;
  cluster_opts.address = node.cluster_address;
  cluster_opts.storage = node.lease_storage;
  cluster_opts.lead_storage = node.storage;
  cluster_opts.pusher = node.pusher;
  cluster_opts.metrics = node.metrics;
  cluster_opts.leader_duties = {caf::actor_cast<leader_duty_actor>(node.watcher),
                                caf::actor_cast<leader_duty_actor>(node.reconciler),
                                caf::actor_cast<leader_duty_actor>(node.cron),
                                caf::actor_cast<leader_duty_actor>(node.alerter)};
  node.cluster = spawn_cluster(sys, cluster_opts);
  watch("cluster", node.cluster);

  api_options api_opts;
  api_opts.cfg = cfg;
  api_opts.metrics = node.metrics;
  api_opts.lease = cfg->lease();
  api_opts.storage = node.storage;
  api_opts.jobs = node.storage;
  api_opts.workflows = node.storage;
  api_opts.keys = node.storage;
  api_opts.inserter = node.inserter;
  api_opts.dispatcher = node.dispatcher;
  api_opts.progress = node.progress;
  api_opts.limiter = node.limiter;
  api_opts.pusher = caf::actor_cast<wake_listener_actor>(node.pusher);
  api_opts.peers = node.peers;
  readiness_options readiness_opts;
  readiness_opts.storages = std::move(storages);
  auto pingable = [](const auto& actor) { return caf::actor_cast<pingable_actor>(actor); };
  readiness_opts.pingables = {
      {"inserter", pingable(node.inserter)}, {"limiter", pingable(node.limiter)},
      {"pusher", pingable(node.pusher)},     {"dispatcher", pingable(node.dispatcher)},
      {"watcher", pingable(node.watcher)},   {"reconciler", pingable(node.reconciler)},
      {"cron", pingable(node.cron)},         {"alerter", pingable(node.alerter)},
      {"peers", pingable(node.peers)},       {"cluster", pingable(node.cluster)},
      {"progress", pingable(node.progress)}};
  node.readiness = spawn_readiness(sys, std::move(readiness_opts));
  watch("readiness", node.readiness);
  api_opts.storage_status = node.storage;
  api_opts.readiness = node.readiness;
  node.api = spawn_api(sys, api_opts);
  watch("api", node.api);
  auto listen = parse_listen_address(cfg->api.listen, "api.listen");
  if (!listen) {
    stop_node(sys, node);
    return listen.error();
  }
  auto server = http_server::start(
      listen->first, listen->second, static_cast<uint64_t>(cfg->api.max_body_bytes),
      [api = node.api](http_request req, http_reply reply) {
        caf::anon_send(api, http_atom_v, http_exchange{std::move(req), std::move(reply)});
      });
  if (!server) {
    stop_node(sys, node);
    return server.error();
  }
  node.server = std::move(*server);
  if (under_service_manager()) {
    node.service_notifier = spawn_service_notifier(
        sys, {node.readiness, cfg->node.name, cfg->database.statement_timeout});
    watch("service notifier", node.service_notifier);
  }
  return node;
}

node_actors::node_actors() = default;
node_actors::node_actors(node_actors&&) noexcept = default;
node_actors& node_actors::operator=(node_actors&&) noexcept = default;
node_actors::~node_actors() = default;

uint16_t node_actors::api_port() const {
  return server ? server->port() : 0;
}

namespace {

/// What the node still runs goes back to pending. Should PostgreSQL be away,
/// it tries again until the node's lease is over: from then on the leader
/// recovers the tasks anyway.
void hand_back_tasks(caf::scoped_actor& self, const node_actors& node) {
  const auto& cfg = *node.cfg;
  pb::Heartbeat me;
  me.set_name(cfg.node.name);
  me.set_incarnation(node.incarnation);
  auto deadline = std::chrono::steady_clock::now() + cfg.lease();
  auto backoff = cfg.database.reconnect_min;
  // From here the cluster asks for the lead no more, nor registers the node
  // again, so that leave's release of the lead and of the name holds.
  if (node.cluster)
    self->request(node.cluster, 5s, leave_atom_v)
        .receive([](caf::ok_atom) {},
                 [&](caf::error& err) {
                   spdlog::warn("node {}: cluster did not take the leave: {}", cfg.node.name,
                                error_message(err));
                 });
  for (;;) {
    caf::error failure;
    self->request(node.storage, 30s, leave_atom_v, me)
        .receive(
            [&](int32_t released) {
              if (released > 0)
                spdlog::info("node {}: {} running tasks go back to pending", cfg.node.name,
                             released);
            },
            [&](caf::error& err) { failure = std::move(err); });
    if (!failure) return;
    if (!passes(failure) || std::chrono::steady_clock::now() + backoff > deadline) {
      spdlog::warn("node {}: could not hand back its tasks (the watcher will): {}", cfg.node.name,
                   error_message(failure));
      return;
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, cfg.database.reconnect_max);
  }
}

}  // namespace

int run_until_stopped(caf::actor_system& sys, node_actors& node,
                      const std::function<bool()>& stop_requested) {
  int status = 0;
  while (!stop_requested()) {
    if (node.health->failed()) {
      spdlog::error("node {}: stopping because {}", node.cfg->node.name, node.health->failure());
      status = 1;
      break;
    }
  }
  stop_node(sys, node);
  return status;
}

caf::error reload_node(caf::actor_system& sys, node_actors& node, const config& fresh,
                       const config_changes& changes) {
  // Nothing is waited for: a refusal or an outage is the reload's to report.
  auto no_waiting = [] { return false; };
  if (changes.takes_database_settings()) {
    auto jobs = checked_jobs(sys, node.storage, fresh, no_waiting);
    if (!jobs) return jobs.error();
    if (auto err = write_type_settings(sys, node.storage, fresh, no_waiting)) return err;
    auto settings = type_settings(fresh);
    caf::anon_send(node.limiter, reload_atom_v, settings);
    caf::anon_send(node.storage, reload_atom_v, std::move(settings));
    if (auto err = put_jobs(sys, node.storage, *jobs, no_waiting)) return err;
  }
  if (changes.takes_alert_rules())
    caf::anon_send(node.alerter, reload_atom_v, alert_rules_json(fresh.alerts));
  if (changes.takes_log_level())
    spdlog::default_logger()->set_level(spdlog::level::from_str(fresh.node.log_level));
  return caf::none;
}

void stop_node(caf::actor_system& sys, node_actors& node) {
  auto reason = caf::exit_reason::user_shutdown;
  caf::scoped_actor self{sys};
  auto stop = [&](auto& handle) {
    if (!handle) return;
    self->send_exit(handle, reason);
    self->wait_for(handle);
    handle = nullptr;
  };
  notify_service_manager("STOPPING=1\nSTATUS=stopping: draining what runs here");
  // Actors end on purpose from here on.
  stop(node.supervisor);
  stop(node.service_notifier);
  // Claiming and the leader's duties end first; the heartbeat goes on until
  // the node has handed back its work, so nobody takes it meanwhile.
  stop(node.pusher);
  // Submits hand this node nothing more while it drains.
  if (node.claim_storage && node.cfg)
    self->request(node.claim_storage, 5s, take_back_atom_v, node.cfg->node.name, int32_t{0})
        .receive([](int32_t) {},
                 [&](caf::error& err) {
                   spdlog::warn("node {}: could not take its offer back: {}", node.cfg->node.name,
                                error_message(err));
                 });
  // A claim under way commits before its connection closes, so that no task
  // this node claimed turns running after it handed back its work.
  stop(node.claim_storage);
  stop(node.watcher);
  stop(node.reconciler);
  stop(node.cron);
  stop(node.alerter);
  stop(node.api);
  node.server.reset();
  stop(node.readiness);
  stop(node.progress);
  if (node.dispatcher && node.storage && node.cfg) {
    auto grace = node.cfg->node.shutdown_grace;
    self->request(node.dispatcher, grace + 5s, drain_atom_v, static_cast<int64_t>(grace.count()))
        .receive(
            [&](int32_t unfinished) {
              if (unfinished > 0)
                spdlog::info("node {}: {} executions did not finish within {} ms",
                             node.cfg->node.name, unfinished, grace.count());
            },
            [&](const caf::error& err) {
              spdlog::warn("node: drain failed: {}", error_message(err));
            });
    hand_back_tasks(self, node);
  }
  stop(node.cluster);
  stop(node.lease_storage);
  if (node.cluster_watch != 0) release_cluster_watch(node.cluster_watch);
  node.cluster_watch = 0;
  // A TLS port closes with the actor system (CAF 0.17's openssl::unpublish
  // does not compile); only test processes stop nodes and go on.
  if (node.peers && node.cluster_port != 0 && !node.cfg->cluster.tls())
    sys.middleman().unpublish(node.peers, node.cluster_port);
  stop(node.peers);
  stop(node.inserter);
  stop(node.submit_storage);
  stop(node.dispatcher);
  stop(node.outcome_storage);
  stop(node.limiter);
  stop(node.storage);
}

}  // namespace taskmill
