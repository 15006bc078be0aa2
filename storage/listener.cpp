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

void notification_listener::run() {
  auto delay = reconnect_min_;
  for (;;) {
    auto conn = connection::open(conninfo_, std::chrono::seconds{30}, std::chrono::seconds{5});
    if (conn && listen(*conn)) {
      delay = reconnect_min_;
      on_notify_({}, true);
      for (;;) {
        pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {conn->socket(), POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
          if (errno == EINTR) continue;
          break;
        }
        if (fds[0].revents) return;
        if (conn->consume_input()) break;
        auto burst = conn->take_notifications();
        if (!burst.empty()) on_notify_(burst, false);
      }
    }
    if (stop_requested(delay)) return;
    delay = std::min(delay * 2, reconnect_max_);
  }
}

}  // namespace taskmill::db
