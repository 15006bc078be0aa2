#pragma once

// What a running node takes on SIGHUP, and what needs a restart.

#include <string>
#include <vector>

namespace taskmill {

/// The options that differ between two configurations as load_config writes
/// them (`effective`), named as in the file ("types.A.running_limit",
/// "jobs[0].schedule"), split by whether a running node takes the change.
struct config_changes {
  std::vector<std::string> taken;
  std::vector<std::string> need_restart;
  bool empty() const { return taken.empty() && need_restart.empty(); }
  /// Whether an option under `prefix` ("types.", "node.log_level") is taken.
  bool takes(const std::string& prefix) const;
};

config_changes compare_configs(const std::string& before, const std::string& after);

/// Whether a running node takes a change of `option`: the log level, what
/// the database holds (the global limit; the defaults and types but for
/// how they are executed; key spaces; jobs) and the alert rules.
bool taken_on_reload(const std::string& option);

}  // namespace taskmill
