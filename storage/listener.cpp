#include "storage/listener.hpp"

#include "storage/pg.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

namespace taskmill::db {

notification_listener::notification_listener(std::string conninfo,
                                             std::vector<std::string> channels, callback on_notify,
                                             std::chrono::milliseconds reconnect_min,
                                             std::chrono::milliseconds reconnect_max)
    : conninfo_(std::move(conninfo)),
      channels_(std::move(channels)),
      on_notify_(std::move(on_notify)),
      reconnect_min_(reconnect_min),
      reconnect_max_(reconnect_max),
      stop_fd_(eventfd(0, EFD_CLOEXEC)),
      thread_([this] { run(); }) {}

notification_listener::~notification_listener() {
  uint64_t one = 1;
  [[maybe_unused]] auto written = write(stop_fd_, &one, sizeof(one));
  thread_.join();
  close(stop_fd_);
}

bool notification_listener::stop_requested(std::chrono::milliseconds timeout) {
  pollfd pfd{stop_fd_, POLLIN, 0};
  return ::poll(&pfd, 1, static_cast<int>(timeout.count())) > 0;
}

bool notification_listener::listen(connection& conn) {
  return std::all_of(channels_.begin(), channels_.end(), [&conn](const std::string& channel) {
    return static_cast<bool>(conn.exec("LISTEN " + channel));
  });
}

bool notification_listener::takes_writes(connection& conn) {
  auto state = conn.exec("SELECT current_setting('transaction_read_only')");
  return state && state->rows() == 1 && state->string(0, 0) == "off";
}

void notification_listener::run() {
  auto delay = reconnect_min_;
  for (;;) {
    auto conn = connection::open(conninfo_, std::chrono::seconds{30}, std::chrono::seconds{5});
    if (conn && listen(*conn)) {
      delay = reconnect_min_;
      on_notify_({}, true);
      auto probe_at = std::chrono::steady_clock::now() + probe_interval;
      for (;;) {
        auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
            probe_at - std::chrono::steady_clock::now());
        pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {conn->socket(), POLLIN, 0}};
        int ready = ::poll(fds, 2, static_cast<int>(std::max<int64_t>(wait.count(), 0)));
        if (ready < 0) {
          if (errno == EINTR) continue;
          break;
        }
        if (fds[0].revents) return;
        // A listener only reads: a server demoted under it (a failover)
        // would keep it, deaf, while the node's writes went elsewhere.
        if (ready == 0) {
          if (!takes_writes(*conn)) break;
          probe_at = std::chrono::steady_clock::now() + probe_interval;
        } else if (conn->consume_input()) {
          break;
        }
        auto burst = conn->take_notifications();
        if (!burst.empty()) on_notify_(burst, false);
      }
    }
    if (stop_requested(delay)) return;
    delay = std::min(delay * 2, reconnect_max_);
  }
}

}  // namespace taskmill::db
