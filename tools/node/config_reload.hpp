#pragma once

// What a running node takes on SIGHUP, and what needs a restart.

#include <string>
#include <vector>

namespace taskmill {

/// The options that differ between configurations as load_config writes them
/// (`effective`, secrets shown), named as in the file ("types.A.running_limit";
/// a job by its name: "jobs[nightly].schedule"), split by what a running node
/// does with them.
struct config_changes {
  /// What the node takes now.
  std::vector<std::string> taken;
  /// What only a restart takes.
  std::vector<std::string> need_restart;
  /// Jobs and key spaces gone from the file: they stay in the database, as
  /// at a restart, until deleted through the API.
  std::vector<std::string> stay;
  bool empty() const { return taken.empty() && need_restart.empty() && stay.empty(); }
  /// Whether the log level is taken.
  bool takes_log_level() const;
  /// Whether what the database holds is taken: type settings, key spaces,
  /// the global limit, jobs.
  bool takes_database_settings() const;
  /// Whether the alert rules are taken.
  bool takes_alert_rules() const;
};

/// The changes from `started` (what the node started with: what a restart
/// would change is against it) and `applied` (what it took last: what it
/// takes now is against it) to `fresh`.
config_changes compare_configs(const std::string& started, const std::string& applied,
                               const std::string& fresh);

/// Whether a running node takes a change of `option`: the log level, what
/// the database holds (the global limit; the defaults and types but for
/// how they are executed; key spaces; jobs) and the alert rules.
bool taken_on_reload(const std::string& option);

}  // namespace taskmill
