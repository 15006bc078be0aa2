#include "tools/tcp_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
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

/// One forwarded connection: bytes from each side are written to the other,
/// unless it is silent.
struct pair {
  int client;
  int server;
  bool silent = false;
};

/// The socket inode of the client end of `fd`, a connection accepted from
/// loopback: in /proc/net/tcp, the line whose local address is the peer's
/// and whose remote address is ours.
std::string client_inode(int fd) {
  sockaddr_in self{}, peer{};
  socklen_t len = sizeof self;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) != 0) return {};
  len = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return {};
  char local[32], remote[32];
  std::snprintf(local, sizeof local, "%08X:%04X", peer.sin_addr.s_addr, ntohs(peer.sin_port));
  std::snprintf(remote, sizeof remote, "%08X:%04X", self.sin_addr.s_addr, ntohs(self.sin_port));
  std::ifstream in{"/proc/net/tcp"};
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields{line};
    std::string slot, l, r, state, queues, timer, retransmits, uid, timeout, inode;
    fields >> slot >> l >> r >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (l == local && r == remote) return inode;
  }
  return {};
}

/// Whether one of `pids` holds the client end of `fd`.
bool held_by(int fd, const std::set<pid_t>& pids) {
  if (pids.empty()) return false;
  auto inode = client_inode(fd);
  if (inode.empty()) return false;
  auto wanted = "socket:[" + inode + "]";
  for (auto pid : pids) {
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator{"/proc/" + std::to_string(pid) + "/fd", ec}) {
      std::error_code unreadable;
      if (std::filesystem::read_symlink(entry.path(), unreadable).string() == wanted) return true;
    }
  }
  return false;
}

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

void tcp_proxy::go_silent_for(pid_t client) {
  std::lock_guard guard{silenced_mutex_};
  silenced_.insert(client);
  silenced_changed_ = true;
  wake();
}

void tcp_proxy::restore_for(pid_t client) {
  std::lock_guard guard{silenced_mutex_};
  silenced_.erase(client);
  silenced_changed_ = true;
  wake();
}

void tcp_proxy::restore() {
  {
    std::lock_guard guard{silenced_mutex_};
    silenced_.clear();
    silenced_changed_ = true;
  }
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
    std::set<pid_t> silenced;
    {
      std::lock_guard guard{silenced_mutex_};
      silenced = silenced_;
    }
    if (silenced_changed_.exchange(false))
      for (auto& p : pairs) p.silent = held_by(p.client, silenced);
    // Silent pairs are not polled at all: a hang-up on one would wake the
    // loop for ever, and the other ends must learn nothing.
    std::vector<pollfd> fds{{listener_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    std::vector<size_t> polled;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (pairs[i].silent) continue;
      polled.push_back(i);
      fds.push_back({pairs[i].client, POLLIN, 0});
      fds.push_back({pairs[i].server, static_cast<short>(holding_ ? 0 : POLLIN), 0});
    }
    if (poll(fds.data(), fds.size(), 1000) <= 0) continue;
    if (fds[1].revents) {
      char drain[64];
      (void)!read(wake_pipe_[0], drain, sizeof drain);
    }
    std::vector<bool> closed(pairs.size(), false);
    for (size_t j = 0; j < polled.size(); ++j) {
      auto& p = pairs[polled[j]];
      const auto& client = fds[2 + 2 * j];
      const auto& server = fds[3 + 2 * j];
      bool open = true;
      if (client.revents) open = forward(p.client, p.server);
      if (open && server.revents && !holding_) open = forward(p.server, p.client);
      if (!open) {
        close_pair(p);
        closed[polled[j]] = true;
      }
    }
    std::vector<pair> kept;
    for (size_t i = 0; i < pairs.size(); ++i)
      if (!closed[i]) kept.push_back(pairs[i]);
    if (fds[0].revents & POLLIN) {
      int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      int server = client >= 0 && !cut_ ? connect_to(target_port_) : -1;
      if (server >= 0) {
        kept.push_back({client, server, held_by(client, silenced)});
        ++forwarded_;
      } else if (client >= 0) {
        close(client);
      }
    }
    pairs = std::move(kept);
  }
  for (const auto& p : pairs) close_pair(p);
}

}  // namespace taskmill
