#include "actors/logging/log_format.hpp"
#include "actors/service_notifier.hpp"
#include "messages/errors.hpp"
#include "messages/types.hpp"
#include "tools/commands.hpp"
#include "tools/node/config_check.hpp"
#include "tools/node/config_reload.hpp"
#include "tools/node/node.hpp"
#include "tools/postgres/embedded_postgres.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>

namespace taskmill {

namespace {

using namespace std::chrono_literals;

/// SIGINT and SIGTERM stop the node, SIGHUP reloads its config.
sigset_t node_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

/// The signal that came within `timeout`, if one did.
std::optional<int> signal_within(std::chrono::milliseconds timeout) {
  auto set = node_signals();
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>((timeout.count() % 1000) * 1'000'000)};
  int sig = sigtimedwait(&set, nullptr, &ts);
  if (sig > 0) return sig;
  return std::nullopt;
}

}  // namespace

int check_node_config(const std::string& file, const std::vector<std::string>& overrides) {
  auto cfg = load_config(file, overrides);
  if (!cfg) {
    std::cout << error_message(cfg.error()) << "\n";
    return 1;
  }
  auto check = check_config(*cfg);
  for (const auto& note : check.notes) std::cout << "note: " << note << "\n";
  for (const auto& problem : check.problems) std::cout << "problem: " << problem << "\n";
  auto where = file.empty() ? std::string{"the defaults"} : file;
  if (!check.problems.empty()) {
    std::cout << where << ": " << check.problems.size() << " problem"
              << (check.problems.size() == 1 ? "" : "s") << "\n";
    return 1;
  }
  std::cout << where << ": OK (node " << cfg->node.name << ")\n";
  return 0;
}

int print_node_config(const std::string& file, const std::vector<std::string>& overrides) {
  std::string effective;
  auto cfg = load_config(file, overrides, &effective);
  if (!cfg) {
    std::cerr << error_message(cfg.error()) << "\n";
    return 2;
  }
  std::cout << effective;
  return 0;
}

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("taskmill");
  logger->set_formatter(make_log_formatter({}));
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

void setup_node_logging(const config& cfg) {
  setup_logging(cfg.node.log_level);
  spdlog::default_logger()->set_formatter(
      make_log_formatter({cfg.node.log_format, cfg.node.name, stderr_is_journal()}));
}

namespace {

/// Reads the config again and takes what a running node takes of it
/// (reload_node), saying in the log what it took, what needs a restart and
/// what stays in the database; a config refused changes nothing. `applied`
/// is the config as last taken (load_config's effective text), updated.
void reload(caf::actor_system& sys, node_actors& node, const config_source& source,
            std::string& applied) {
  const auto& name = node.cfg->node.name;
  notify_service_manager("RELOADING=1");
  std::string effective;
  auto fresh = load_config(source.file, source.overrides, &effective, secrets::shown);
  if (!fresh) {
    spdlog::error("node {}: SIGHUP: the config is refused, nothing changes:\n{}", name,
                  error_message(fresh.error()));
  } else if (auto changes = compare_configs(source.started, applied, effective); changes.empty()) {
    spdlog::info("node {}: SIGHUP: the config is as the node runs it", name);
  } else if (auto err = reload_node(sys, node, *fresh, changes)) {
    spdlog::error("node {}: SIGHUP: {}", name, error_message(err));
  } else {
    applied = std::move(effective);
    if (!changes.taken.empty())
      spdlog::info("node {}: SIGHUP: took {}", name, fmt::join(changes.taken, ", "));
    if (!changes.stay.empty())
      spdlog::warn(
          "node {}: SIGHUP: gone from the file, kept in the database (delete them "
          "through the API): {}",
          name, fmt::join(changes.stay, ", "));
    if (!changes.need_restart.empty())
      spdlog::warn("node {}: SIGHUP: a restart takes {}", name,
                   fmt::join(changes.need_restart, ", "));
  }
  notify_service_manager("READY=1");
}

}  // namespace

int run_node(const config& cfg, const config_source& source) {
  // Every thread started from here on inherits the mask; only sigtimedwait
  // takes these signals.
  auto signals = node_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::string applied = source.started;

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

  int exit_code = 0;
  {
    caf::actor_system_config sys_cfg;
    configure_actor_system(sys_cfg, cfg.cluster);
    sys_cfg.set("scheduler.max-threads",
                static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
    caf::actor_system sys{sys_cfg};
    auto shared_cfg = std::make_shared<const config>(cfg);
    // PostgreSQL may take its time to come up: the node waits until it does
    // or it is told to stop. (A service manager's watchdog starts with the
    // first WATCHDOG=1, which the node sends once ready; TimeoutStartSec
    // bounds the wait.)
    auto node = start_node(sys, shared_cfg, conninfo, [&] {
      auto sig = signal_within(500ms);
      if (sig == SIGHUP)
        spdlog::warn("node {}: SIGHUP while starting: the config is read as it was", cfg.node.name);
      return !sig || sig == SIGHUP;
    });
    if (!node) {
      spdlog::error("node {}: {}", cfg.node.name, error_message(node.error()));
      exit_code = 1;
    } else {
      spdlog::info("node {}: running; stop with Ctrl-C or SIGTERM", cfg.node.name);
      exit_code = run_until_stopped(sys, *node, [&] {
        auto sig = signal_within(200ms);
        if (sig == SIGHUP) {
          reload(sys, *node, source, applied);
          return false;
        }
        if (sig) spdlog::info("node {}: {} received, stopping", cfg.node.name, strsignal(*sig));
        return sig.has_value();
      });
    }
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
