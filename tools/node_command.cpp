#include "messages/errors.hpp"
#include "messages/types.hpp"
#include "storage/embedded_postgres.hpp"
#include "storage/pg.hpp"
#include "storage/storage.hpp"
#include "tools/commands.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstring>
#include <optional>
#include <thread>

namespace taskmill {

namespace {

using namespace std::chrono_literals;

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

/// The signal that asked us to stop, if one came within `timeout`.
std::optional<int> stop_signal_within(std::chrono::milliseconds timeout) {
  auto set = stop_signals();
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>((timeout.count() % 1000) * 1'000'000)};
  int sig = sigtimedwait(&set, nullptr, &ts);
  if (sig > 0) return sig;
  return std::nullopt;
}

/// Waits until storage is connected and migrated; false if a stop signal came
/// first or it did not happen within `limit`.
bool wait_for_storage(caf::actor_system& sys, const storage_actor& storage,
                      std::chrono::seconds limit) {
  caf::scoped_actor self{sys};
  auto deadline = std::chrono::steady_clock::now() + limit;
  std::string last_error;
  bool announced = false;
  while (std::chrono::steady_clock::now() < deadline) {
    bool connected = false;
    self->request(storage, 10s, status_atom_v)
        .receive(
            [&](const pb::StorageStatus& status) {
              connected = status.connected();
              last_error = status.last_error();
            },
            [&](const caf::error& err) { last_error = error_message(err); });
    if (connected) return true;
    if (!announced) {
      spdlog::info("node: waiting for PostgreSQL ({})", last_error);
      announced = true;
    }
    if (stop_signal_within(500ms)) return false;
  }
  spdlog::error("node: PostgreSQL not ready after {}s: {}", limit.count(), last_error);
  return false;
}

}  // namespace

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("taskmill");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

int run_node(const config& cfg) {
  std::optional<db::embedded_postgres> embedded;
  std::string conninfo = cfg.database.url;
  if (conninfo.empty()) {
    auto dir = cfg.node.data_dir + "/postgres";
    spdlog::info("node: no database.url; starting the embedded PostgreSQL in {}", dir);
    auto pg = db::embedded_postgres::start({dir, cfg.embedded.bin_dir, cfg.embedded.user});
    if (!pg) {
      spdlog::error("{}", error_message(pg.error()));
      return 1;
    }
    spdlog::info("node: embedded PostgreSQL listening on 127.0.0.1:{} (data in {})", pg->port(),
                 pg->dir());
    embedded.emplace(std::move(*pg));
    conninfo = embedded->conninfo();
  }

  // Every thread started from here on inherits the mask; only sigtimedwait
  // takes these signals.
  auto signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  int exit_code = 0;
  {
    caf::actor_system_config sys_cfg;
    register_message_types(sys_cfg);
    sys_cfg.set("scheduler.max-threads",
                static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
    caf::actor_system sys{sys_cfg};

    storage_options storage_opts;
    storage_opts.conninfo = conninfo;
    storage_opts.node = cfg.node.name;
    storage_opts.statement_timeout = cfg.database.statement_timeout;
    storage_opts.lock_timeout = cfg.database.lock_timeout;
    storage_opts.reconnect_min = cfg.database.reconnect_min;
    storage_opts.reconnect_max = cfg.database.reconnect_max;
    storage_opts.listen = cfg.database.listen;
    auto storage = spawn_storage(sys, storage_opts);

    if (!wait_for_storage(sys, storage, 60s)) {
      exit_code = 1;
    } else {
      spdlog::info("node {}: running; stop with Ctrl-C or SIGTERM", cfg.node.name);
      std::optional<int> sig;
      while (!sig) sig = stop_signal_within(1h);
      spdlog::info("node {}: {} received, stopping", cfg.node.name, strsignal(*sig));
    }
    caf::anon_send_exit(storage, caf::exit_reason::user_shutdown);
  }
  if (embedded) {
    if (auto err = embedded->stop()) {
      spdlog::error("{}", error_message(err));
      exit_code = 1;
    }
  }
  spdlog::info("node {}: stopped", cfg.node.name);
  return exit_code;
}

}  // namespace taskmill
