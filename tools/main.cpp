#include "messages/errors.hpp"
#include "tools/bench/bench.hpp"
#include "tools/bench/soak.hpp"
#include "tools/client_commands.hpp"
#include "tools/commands.hpp"
#include "tools/example_executor.hpp"
#include "tools/remote_executor/example.hpp"
#include "tools/scenario/scenario.hpp"

#include <unistd.h>

#include <cstdlib>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <filesystem>
#include <iostream>

namespace {

/// Prints CLI11's message; a bad command line exits 2 (CLI11's own codes are
/// 100 and up), help exits 0.
int exit_code_for(const CLI::App& app, const CLI::ParseError& e) {
  return app.exit(e) == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"taskmill: a PostgreSQL-backed distributed task scheduler"};
  // At most one here; "none" is checked after parsing, so that a misspelt
  // command is reported as not expected rather than as a missing one.
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string{"taskmill "} + TASKMILL_VERSION);

  std::string config_file;
  std::vector<std::string> overrides;
  std::string database_url;
  std::string data_dir;
  auto node = app.add_subcommand(
      "node", "Run a node (embedded PostgreSQL unless a database is configured)");
  node->add_option("-c,--config", config_file, "TOML configuration file")->check(CLI::ExistingFile);
  node->add_option("-s,--set", overrides, "Override an option: section.key=value (repeatable)");
  node->add_option("--database", database_url, "PostgreSQL connection string (database.url)");
  node->add_option("--data-dir", data_dir, "Data directory (node.data_dir)");
  bool check_config = false;
  bool print_config = false;
  node->add_flag("--check-config", check_config,
                 "Check everything a start would (through the database, in a transaction rolled "
                 "back), print each problem, exit 1 if there is one");
  node->add_flag("--print-config", print_config,
                 "Print the configuration a node would run with, defaults filled in, secrets "
                 "masked");

  std::string executor_listen = "127.0.0.1:8490";
  std::string executor_callback = "http://127.0.0.1:8480";
  auto example = app.add_subcommand(
      "example-executor", "Run an HTTP executor to try taskmill with (see config/demo.toml)");
  example->add_option("--listen", executor_listen, "host:port to listen on")->capture_default_str();
  example->add_option("--callback", executor_callback, "The node API that 202 results go to")
      ->capture_default_str();

  taskmill::remote_executor_options remote;
  remote.name = "remote-executor-" + std::to_string(getpid());
  auto remote_cmd = app.add_subcommand(
      "remote-executor",
      "Run an example remote executor: link to a node's cluster port and run tasks pushed to it");
  remote_cmd->add_option("--node", remote.node, "host:port of a node's cluster.listen")->required();
  remote_cmd->add_option("--type", remote.types, "A task type to run (repeatable)")->required();
  remote_cmd->add_option("--capacity", remote.capacity, "Tasks at a time")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  remote_cmd->add_option("--name", remote.name, "How the node shows this executor");
  remote_cmd->add_option("--tls-cert", remote.tls_cert, "PEM certificate, for a node with TLS")
      ->check(CLI::ExistingFile);
  remote_cmd->add_option("--tls-key", remote.tls_key, "PEM key of --tls-cert")
      ->check(CLI::ExistingFile);
  remote_cmd->add_option("--tls-ca", remote.tls_ca, "PEM CA that signed the node's certificate")
      ->check(CLI::ExistingFile);

  taskmill::bench_options bench_opts;
  auto bench = app.add_subcommand(
      "bench", "Measure a node against the raw-SQL ceiling on the same PostgreSQL");
  bench->add_flag_callback(
      "--quick", [&] { bench_opts.size = taskmill::bench_size::quick; },
      "The same measurements smaller, one run each (about three minutes)");
  bench->add_flag_callback(
      "--smoke", [&] { bench_opts.size = taskmill::bench_size::smoke; },
      "Check in about a minute that every measurement runs and loses nothing (the suite's run)");
  bench->add_option("--database", bench_opts.database,
                    "A PostgreSQL server to create a throwaway database on (default: start a "
                    "private server)");
  bench->add_option("--output", bench_opts.output, "Where the JSON report goes (empty: nowhere)")
      ->capture_default_str();
  bench->add_option("--only", bench_opts.only, "Run only these phases (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember(taskmill::bench_phases));
  bench
      ->add_option("--runs", bench_opts.runs,
                   "Runs of each measurement (default: 3 full, 1 otherwise)")
      ->check(CLI::Range(1, 100));
  bench
      ->add_option("--history-tasks", bench_opts.history_tasks,
                   "Finished tasks the history phase loads (default: 10,000,000 full, "
                   "1,000,000 quick); a million takes about 470 MB of disk")
      ->check(CLI::Range(1'000, 1'000'000'000));
  bench
      ->add_option("--purge-tasks", bench_opts.purge_tasks,
                   "Stopped tasks the purge phase purges, of a day and row by row (default: "
                   "1,000,000 full, 100,000 quick)")
      ->check(CLI::Range(1'000, 100'000'000));
  std::string soak_duration;
  taskmill::bench::soak_options soak_opts;
  bench->add_option("--soak", soak_duration,
                    "Instead of the measurements, a steady mixed load for this long (\"1h\"), "
                    "sampled every 10 s and judged at the end");
  bench
      ->add_option("--soak-prefix", soak_opts.prefix,
                   "The soak's samples go to PREFIX.csv, their chart to PREFIX.svg")
      ->capture_default_str();
  bench
      ->add_option("--node-binary", bench_opts.binary,
                   "The taskmill binary whose nodes are measured (default: this one), to "
                   "compare two builds under the same measurements")
      ->check(CLI::ExistingFile);

  taskmill::scenario::run_options scenario_opts;
  auto scenario_cmd = app.add_subcommand(
      "scenario", "Run TOML scenarios against real processes: PostgreSQL, nodes, executors");
  scenario_cmd->add_option("files", scenario_opts.files, "Scenario files (TOML)")
      ->required()
      ->check(CLI::ExistingFile);
  scenario_cmd->add_option("--database", scenario_opts.database,
                           "Use this PostgreSQL database (default: start a throwaway server per "
                           "scenario)");
  scenario_cmd->add_flag("--json", scenario_opts.json, "The report as JSON on stdout");
  scenario_cmd->add_flag("--keep-logs", scenario_opts.keep_logs,
                         "Keep the processes' logs even when every assertion held");

  taskmill::client_command client;
  taskmill::add_client_commands(app, client);

  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) throw CLI::RequiredError::Subcommand(1);
  } catch (const CLI::ParseError& e) {
    return exit_code_for(app, e);
  }

  if (example->parsed()) {
    auto listen = taskmill::parse_listen_address(executor_listen, "--listen");
    if (!listen) {
      std::cerr << taskmill::error_message(listen.error()) << "\n";
      return 2;
    }
    return taskmill::run_example_executor(listen->first, listen->second, executor_callback);
  }
  if (remote_cmd->parsed()) {
    // The secret stays out of the process list.
    if (auto secret = std::getenv("TASKMILL_CLUSTER_SECRET")) remote.secret = secret;
    taskmill::setup_logging("warn");
    return taskmill::run_remote_executor_example(remote);
  }
  if (bench->parsed()) {
    taskmill::setup_logging("warn");
    if (bench_opts.binary.empty())
      bench_opts.binary = std::filesystem::read_symlink("/proc/self/exe").string();
    if (!soak_duration.empty()) {
      auto duration = taskmill::parse_duration(soak_duration);
      if (!duration || duration->count() <= 0) {
        std::cerr << "--soak must be a duration such as \"30m\" or \"2h\"\n";
        return 2;
      }
      soak_opts.duration = *duration;
      soak_opts.database = bench_opts.database;
      soak_opts.binary = bench_opts.binary;
      return taskmill::bench::run_soak(soak_opts);
    }
    return taskmill::run_bench(bench_opts);
  }
  if (scenario_cmd->parsed()) {
    taskmill::setup_logging("warn");
    scenario_opts.binary = std::filesystem::read_symlink("/proc/self/exe").string();
    return taskmill::scenario::run_scenarios(scenario_opts);
  }
  if (node->parsed()) {
    // A value that is not TOML is taken as a bare string.
    if (!database_url.empty()) overrides.push_back("database.url=" + database_url);
    if (!data_dir.empty()) overrides.push_back("node.data_dir=" + data_dir);
    if (check_config) {
      taskmill::setup_logging("off");
      return taskmill::check_node_config(config_file, overrides);
    }
    if (print_config) return taskmill::print_node_config(config_file, overrides);
    std::string effective;
    auto cfg = taskmill::load_config(config_file, overrides, &effective, taskmill::secrets::shown);
    if (!cfg) {
      std::cerr << taskmill::error_message(cfg.error()) << "\n";
      return 2;
    }
    taskmill::setup_node_logging(*cfg);
    return taskmill::run_node(*cfg, {config_file, overrides, effective});
  }
  return client ? client() : 0;
}
