#pragma once

// systemd's notify protocol (sd_notify(3)): a node run by a service manager
// with Type=notify says when it is ready and when it stops, and, given a
// WatchdogSec, that it is alive; elsewhere none of this does anything.

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace taskmill {

/// Whether a service manager listens for this process's notifications
/// ($NOTIFY_SOCKET).
bool under_service_manager();

/// Sends the service manager `state`: newline-separated assignments such as
/// "READY=1", "STOPPING=1"; nothing without one.
void notify_service_manager(const std::string& state);

/// Sends the service manager STATUS=`status` (systemctl status shows it),
/// on one line whatever `status` holds.
void tell_service_status(const std::string& status);

/// How often the service manager wants to be told the node is alive
/// ($WATCHDOG_USEC, for this process), if it does.
std::optional<std::chrono::microseconds> service_watchdog();

struct service_notifier_options {
  readiness_actor readiness;
  std::string node;
  /// The longest a storage connection may be busy with one statement
  /// (database.statement_timeout), which the watchdog must outlast.
  std::chrono::milliseconds statement_timeout{0};
};

/// Tells the service manager READY=1 once the node is ready (as /readyz
/// says), and under a watchdog WATCHDOG=1 every quarter of its interval
/// while every actor of the node answers within half of it: a node with a
/// wedged actor goes untold and the service manager restarts it.
service_notifier_actor spawn_service_notifier(caf::actor_system& sys,
                                              service_notifier_options options);

}  // namespace taskmill
