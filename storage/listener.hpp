#pragma once

// LISTENs on its own connection, in its own thread (libpq blocks), and calls
// `on_wake` once for each burst of notifications, and once after every
// (re)connect because notifications sent while disconnected are lost.

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace taskmill::db {

class notification_listener {
 public:
  notification_listener(std::string conninfo, std::string channel, std::function<void()> on_wake,
                        std::chrono::milliseconds reconnect_min,
                        std::chrono::milliseconds reconnect_max);
  ~notification_listener();

  notification_listener(const notification_listener&) = delete;
  notification_listener& operator=(const notification_listener&) = delete;

 private:
  void run();
  /// Waits up to `timeout` for the stop signal; true if it came.
  bool stop_requested(std::chrono::milliseconds timeout);

  std::string conninfo_;
  std::string channel_;
  std::function<void()> on_wake_;
  std::chrono::milliseconds reconnect_min_;
  std::chrono::milliseconds reconnect_max_;
  int stop_fd_;
  std::thread thread_;
};

}  // namespace taskmill::db
