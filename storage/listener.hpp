#pragma once

// LISTENs on its own connection, in its own thread (libpq blocks), and calls
// `on_notify` with each burst of notifications, and with none and
// `connected` set after every (re)connect, because notifications sent while
// disconnected are lost. Every `probe_interval` it asks whether the server
// still takes writes, and connects again when it does not.

#include "storage/pg.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace taskmill::db {

class notification_listener {
 public:
  using callback = std::function<void(const std::vector<notification>& burst, bool connected)>;

  notification_listener(std::string conninfo, std::vector<std::string> channels, callback on_notify,
                        std::chrono::milliseconds reconnect_min,
                        std::chrono::milliseconds reconnect_max);
  ~notification_listener();

  static constexpr std::chrono::seconds probe_interval{1};

  notification_listener(const notification_listener&) = delete;
  notification_listener& operator=(const notification_listener&) = delete;

 private:
  void run();
  /// Waits up to `timeout` for the stop signal; true if it came.
  bool stop_requested(std::chrono::milliseconds timeout);
  bool listen(connection& conn);
  static bool takes_writes(connection& conn);

  std::string conninfo_;
  std::vector<std::string> channels_;
  callback on_notify_;
  std::chrono::milliseconds reconnect_min_;
  std::chrono::milliseconds reconnect_max_;
  int stop_fd_;
  std::thread thread_;
};

}  // namespace taskmill::db
