#pragma once

// The subcommands of the taskmill command line.

#include "config/config.hpp"

namespace taskmill {

/// `taskmill node`: runs a node until SIGINT or SIGTERM; returns the exit code.
int run_node(const config& cfg);

/// Sets up logging to stderr at `level` (trace .. off).
void setup_logging(const std::string& level);

}  // namespace taskmill
