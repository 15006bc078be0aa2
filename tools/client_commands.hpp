#pragma once

// The client subcommands of `taskmill` (submit, reschedule, cancel, show, list,
// attempts, retry, batch, stats, nodes): each makes calls to a node's HTTP API.

#include <CLI/CLI.hpp>

#include <functional>

namespace taskmill {

/// The client command chosen on the command line; returns the exit code.
using client_command = std::function<int()>;

/// Adds the client subcommands to `app`. Parsing one of them sets `chosen`,
/// which then runs it; commands run after parsing so that argument errors
/// never leave a call half made.
void add_client_commands(CLI::App& app, client_command& chosen);

/// Adds `taskmill jobs ...` and `taskmill alerts` (tools/job_commands.cpp).
void add_job_commands(CLI::App& app, client_command& chosen);

/// Adds `taskmill keys ...` (tools/key_commands.cpp).
void add_key_commands(CLI::App& app, client_command& chosen);

/// Adds `taskmill workflow ...` (tools/workflow_commands.cpp).
void add_workflow_commands(CLI::App& app, client_command& chosen);

/// Adds `taskmill logs` (tools/log_command.cpp).
void add_log_command(CLI::App& app, client_command& chosen);

}  // namespace taskmill
