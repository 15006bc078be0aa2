#include "messages/cluster_port.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

namespace taskmill {

namespace {

struct watch {
  int id;
  /// The guarded port, or 0 for links dialled from here.
  uint16_t port;
  uint32_t max_payload;
  cluster_watcher watcher;
};

struct guarded_connection {
  uint16_t port;
  basp_frame_check check;
  bool refused = false;
};

/// Every mutable thing below is behind this one mutex; `tracked` lets
/// recv and close of every other socket (libpq's, the HTTP server's) pass
/// without taking it.
std::mutex mutex;
int last_watch_id = 0;

// Never destroyed: sockets may close while the program exits.
std::vector<watch>& watches = *new std::vector<watch>;
std::unordered_map<int, guarded_connection>& connections =
    *new std::unordered_map<int, guarded_connection>;

constexpr int tracked_fds = 1 << 16;
std::array<std::atomic<bool>, tracked_fds> tracked{};
/// Guarded connections at or above tracked_fds (no flag of their own).
std::atomic<int> tracked_high{0};
std::atomic<bool> any_guard{false};

bool maybe_tracked(int fd) {
  if (fd < 0) return false;
  if (fd < tracked_fds) return tracked[static_cast<size_t>(fd)].load(std::memory_order_relaxed);
  return tracked_high.load(std::memory_order_relaxed) > 0;
}

template <class F>
F libc(const char* name) {
  auto f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  if (!f) throw std::runtime_error(std::string{"libc has no "} + name);
  return f;
}

/// After `listener` accepted `fd`: starts checking its frames if the
/// listener's port is guarded.
void track_if_guarded(int listener, int fd) {
  sockaddr_storage local{};
  socklen_t local_len = sizeof local;
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return;
  auto port = detail::port_number(&local);
  std::lock_guard<std::mutex> guard{mutex};
  auto w = std::find_if(watches.begin(), watches.end(),
                        [port](const watch& w) { return w.port == port && w.max_payload > 0; });
  if (w == watches.end()) return;
  auto [it, added] =
      connections.insert_or_assign(fd, guarded_connection{port, basp_frame_check{w->max_payload}});
  if (fd < tracked_fds)
    tracked[static_cast<size_t>(fd)] = true;
  else if (added)
    ++tracked_high;
}

void untrack(int fd) {
  std::lock_guard<std::mutex> guard{mutex};
  if (connections.erase(fd) == 0) return;
  if (fd < tracked_fds)
    tracked[static_cast<size_t>(fd)] = false;
  else
    --tracked_high;
}

int add_watch(uint16_t port, uint32_t max_payload, cluster_watcher watcher) {
  std::lock_guard<std::mutex> guard{mutex};
  watches.push_back({++last_watch_id, port, max_payload, std::move(watcher)});
  if (max_payload > 0) any_guard = true;
  return last_watch_id;
}

}  // namespace

uint32_t max_frame_payload(int64_t max_payload_bytes) {
  auto bound = 4 * max_payload_bytes + (int64_t{1} << 20);
  return static_cast<uint32_t>(std::min<int64_t>(bound, UINT32_MAX));
}

int guard_cluster_port(uint16_t port, uint32_t max_payload, cluster_watcher watcher) {
  return add_watch(port, std::max<uint32_t>(max_payload, 1), std::move(watcher));
}

int watch_dialled_links(cluster_watcher watcher) {
  return add_watch(0, 0, std::move(watcher));
}

void release_cluster_watch(int id) {
  std::lock_guard<std::mutex> guard{mutex};
  std::erase_if(watches, [id](const watch& w) { return w.id == id; });
  any_guard =
      std::any_of(watches.begin(), watches.end(), [](const watch& w) { return w.max_payload > 0; });
}

bool cluster_frames_checked() {
  return dlsym(RTLD_DEFAULT, "recv") == reinterpret_cast<void*>(&::recv) &&
         dlsym(RTLD_DEFAULT, "accept") == reinterpret_cast<void*>(&::accept) &&
         dlsym(RTLD_DEFAULT, "close") == reinterpret_cast<void*>(&::close);
}

std::optional<std::pair<std::string, std::string>> basp_frame_check::take(const unsigned char* data,
                                                                          size_t size) {
  while (size > 0) {
    if (payload_left_ > 0) {
      auto n = static_cast<size_t>(std::min<uint64_t>(payload_left_, size));
      payload_left_ -= n;
      data += n;
      size -= n;
      continue;
    }
    auto n = std::min(header_size - header_filled_, size);
    std::memcpy(header_ + header_filled_, data, n);
    header_filled_ += n;
    data += n;
    size -= n;
    if (header_filled_ < header_size) break;
    header_filled_ = 0;
    // CAF 0.17's operations: server and client handshake, direct and
    // routed message, monitor, down, heartbeat.
    if (header_[0] > 6)
      return std::pair{std::string{"bad_frame"}, "it sent a frame of unknown operation " +
                                                     std::to_string(header_[0]) +
                                                     " (it does not speak CAF's BASP)"};
    uint32_t length = 0;
    for (int i = 4; i < 8; ++i) length = (length << 8) | header_[i];
    if (length > max_payload_)
      return std::pair{std::string{"oversized_frame"},
                       "it announced a frame of " + std::to_string(length) +
                           " bytes, more than the " + std::to_string(max_payload_) +
                           " this port takes (4 × api.max_payload_bytes + 1 MiB)"};
    payload_left_ = length;
  }
  return std::nullopt;
}

namespace detail {

std::string address_text(const void* sockaddr_storage_ptr) {
  const auto& addr = *static_cast<const sockaddr_storage*>(sockaddr_storage_ptr);
  char text[INET6_ADDRSTRLEN] = "";
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof text);
  else if (addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof text);
  return text;
}

uint16_t port_number(const void* sockaddr_storage_ptr) {
  const auto& addr = *static_cast<const sockaddr_storage*>(sockaddr_storage_ptr);
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return 0;
}

void tell_cluster_watchers(uint16_t local_port, const cluster_refusal& refusal) {
  std::vector<cluster_watcher> to_tell;
  {
    std::lock_guard<std::mutex> guard{mutex};
    for (const auto& w : watches)
      if (w.port == local_port) to_tell.push_back(w.watcher);
  }
  for (const auto& tell : to_tell) tell(refusal);
}

bool cluster_frames_pass(int fd, const void* data, size_t size) {
  if (!maybe_tracked(fd)) return true;
  cluster_refusal refusal;
  uint16_t port = 0;
  {
    std::lock_guard<std::mutex> guard{mutex};
    auto it = connections.find(fd);
    if (it == connections.end()) return true;
    if (it->second.refused) return false;
    auto verdict = it->second.check.take(static_cast<const unsigned char*>(data), size);
    if (!verdict) return true;
    it->second.refused = true;
    port = it->second.port;
    refusal.reason = std::move(verdict->first);
    refusal.detail = std::move(verdict->second);
  }
  sockaddr_storage remote{};
  socklen_t remote_len = sizeof remote;
  getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len);
  refusal.address = address_text(&remote);
  if (refusal.address.empty()) refusal.address = "an unknown address (the caller left)";
  shutdown(fd, SHUT_RDWR);
  tell_cluster_watchers(port, refusal);
  return false;
}

}  // namespace detail

}  // namespace taskmill

// The definitions ahead of libc's. C linkage and libc's exact declarations:
// the dynamic linker binds CAF's calls (and everyone else's) to these.

extern "C" int accept(int fd, sockaddr* __restrict addr, socklen_t* __restrict len) {
  static auto real = taskmill::libc<int (*)(int, sockaddr*, socklen_t*)>("accept");
  int accepted = real(fd, addr, len);
  if (accepted >= 0 && taskmill::any_guard.load(std::memory_order_relaxed))
    taskmill::track_if_guarded(fd, accepted);
  return accepted;
}

extern "C" ssize_t recv(int fd, void* buf, size_t n, int flags) {
  static auto real = taskmill::libc<ssize_t (*)(int, void*, size_t, int)>("recv");
  auto got = real(fd, buf, n, flags);
  if (got > 0 && (flags & MSG_PEEK) == 0 &&
      !taskmill::detail::cluster_frames_pass(fd, buf, static_cast<size_t>(got))) {
    errno = ECONNRESET;
    return -1;
  }
  return got;
}

extern "C" int close(int fd) {
  static auto real = taskmill::libc<int (*)(int)>("close");
  // Before the descriptor is free for another socket to take.
  if (taskmill::maybe_tracked(fd)) taskmill::untrack(fd);
  return real(fd);
}
