#include "messages/errors.hpp"
#include "tools/commands.hpp"

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <iostream>

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"taskmill: a PostgreSQL-backed distributed task scheduler"};
  app.require_subcommand(1);

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

  CLI11_PARSE(app, argc, argv);

  if (node->parsed()) {
    // A value that is not TOML is taken as a bare string.
    if (!database_url.empty()) overrides.push_back("database.url=" + database_url);
    if (!data_dir.empty()) overrides.push_back("node.data_dir=" + data_dir);
    auto cfg = taskmill::load_config(config_file, overrides);
    if (!cfg) {
      std::cerr << taskmill::error_message(cfg.error()) << "\n";
      return 2;
    }
    taskmill::setup_logging(cfg->node.log_level);
    return taskmill::run_node(*cfg);
  }
  return 0;
}
