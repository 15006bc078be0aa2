#pragma once

// The subcommands of the taskmill command line.

#include "config/config.hpp"

#include <string>
#include <vector>

namespace taskmill {

/// Where a node's config comes from, to read it again on SIGHUP, and what
/// it read at start (load_config's effective text, secrets shown).
struct config_source {
  std::string file;
  std::vector<std::string> overrides;
  std::string started;
};

/// `taskmill node`: runs a node until SIGINT or SIGTERM, reading its config
/// again on SIGHUP; returns the exit code.
int run_node(const config& cfg, const config_source& source);

/// `taskmill node --check-config`: reads the config from `file` and
/// `overrides` as a start would, checks what a start would refuse
/// (tools/node/config_check.hpp), prints each problem and what was not
/// checked; returns 0 when there is no problem, 1 otherwise.
int check_node_config(const std::string& file, const std::vector<std::string>& overrides);

/// `taskmill node --print-config`: prints the configuration a node would
/// run with, every option with its value or default, secrets masked.
int print_node_config(const std::string& file, const std::vector<std::string>& overrides);

/// Sets up logging to stderr at `level` (trace .. off).
void setup_logging(const std::string& level);

/// Sets up a node's logging as its config says (node.log_level,
/// node.log_format), with journald's priorities when stderr is the journal.
void setup_node_logging(const config& cfg);

}  // namespace taskmill
