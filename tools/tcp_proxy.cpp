#include "tools/tcp_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

namespace taskmill {

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

/// One forwarded connection: bytes from each side are written to the other.
struct pair {
  int client;
  int server;
};

int connect_to(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  auto addr = loopback(port);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (fd >= 0) close(fd);
  return -1;
}

/// Copies what `from` has to `to`; false when either side is done.
bool forward(int from, int to) {
  char buffer[16384];
  auto n = read(from, buffer, sizeof buffer);
  if (n <= 0) return false;
  for (ssize_t done = 0; done < n;) {
    auto w = write(to, buffer + done, static_cast<size_t>(n - done));
    if (w <= 0) return false;
    done += w;
  }
  return true;
}

}  // namespace

tcp_proxy::tcp_proxy(const std::string& target) {
  target_port_ = static_cast<uint16_t>(std::stoi(target.substr(target.rfind(':') + 1)));
  // Close on exec: a child process started later must not hold a forwarded
  // connection open after cut() closed it here.
  listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int on = 1;
  setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  auto addr = loopback(0);
  if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listener_, 64) != 0 || pipe2(wake_pipe_, O_CLOEXEC) != 0)
    throw std::runtime_error{"tcp_proxy: cannot listen on loopback"};
  socklen_t len = sizeof addr;
  getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  loop_ = std::thread{[this] { run(); }};
}

tcp_proxy::~tcp_proxy() {
  stopping_ = true;
  wake();
  loop_.join();
  close(listener_);
  close(wake_pipe_[0]);
  close(wake_pipe_[1]);
}

std::string tcp_proxy::address() const {
  return "127.0.0.1:" + std::to_string(port_);
}

void tcp_proxy::cut() {
  cut_ = true;
  wake();
}

void tcp_proxy::hold_answers() {
  holding_ = true;
  wake();
}

void tcp_proxy::go_silent() {
  silent_ = true;
  wake();
}

void tcp_proxy::restore() {
  silent_ = false;
  holding_ = false;
  cut_ = false;
  wake();
}

void tcp_proxy::wake() {
  char c = 0;
  (void)!write(wake_pipe_[1], &c, 1);
}

void tcp_proxy::run() {
  std::vector<pair> pairs;
  auto close_pair = [](const pair& p) {
    close(p.client);
    close(p.server);
  };
  while (!stopping_) {
    if (cut_) {
      for (const auto& p : pairs) close_pair(p);
      pairs.clear();
    }
    if (silent_) {
      // Not even a hang-up is looked at: the other ends learn nothing.
      pollfd woken{wake_pipe_[0], POLLIN, 0};
      if (poll(&woken, 1, 1000) > 0) {
        char drain[64];
        (void)!read(wake_pipe_[0], drain, sizeof drain);
      }
      continue;
    }
    std::vector<pollfd> fds{{listener_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    for (const auto& p : pairs) {
      fds.push_back({p.client, POLLIN, 0});
      fds.push_back({p.server, static_cast<short>(holding_ ? 0 : POLLIN), 0});
    }
    if (poll(fds.data(), fds.size(), 1000) <= 0) continue;
    if (fds[1].revents) {
      char drain[64];
      (void)!read(wake_pipe_[0], drain, sizeof drain);
    }
    auto polled = pairs.size();
    if (fds[0].revents & POLLIN) {
      int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      int server = client >= 0 && !cut_ ? connect_to(target_port_) : -1;
      if (server >= 0) {
        pairs.push_back({client, server});
        ++forwarded_;
      } else if (client >= 0) {
        close(client);
      }
    }
    std::vector<pair> kept(pairs.begin() + static_cast<std::ptrdiff_t>(polled), pairs.end());
    for (size_t i = 0; i < polled; ++i) {
      const auto& client = fds[2 + 2 * i];
      const auto& server = fds[3 + 2 * i];
      bool open = true;
      if (client.revents) open = forward(pairs[i].client, pairs[i].server);
      if (open && server.revents && !holding_) open = forward(pairs[i].server, pairs[i].client);
      if (open)
        kept.push_back(pairs[i]);
      else
        close_pair(pairs[i]);
    }
    pairs = std::move(kept);
  }
  for (const auto& p : pairs) close_pair(p);
}

}  // namespace taskmill
