#pragma once

// A TCP forwarder on loopback, for tests and scenarios that cut the network
// between two live processes: while cut, every connection through it is closed and new
// ones are refused, as a partition that resets connections would do; while
// silent, nothing passes either way and nothing is closed, as a pulled
// cable, a crashed host or a firewall that drops packets looks (no FIN, no
// RST). Restored, it forwards again, what it held first. Silence can also
// be chosen by the process at the client end: a cut between two nodes that
// both dial (a cluster link) silences one node's connections to the other's
// port, not everyone's.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace taskmill {

class tcp_proxy {
 public:
  /// Forwards connections to `target` (host:port on loopback).
  explicit tcp_proxy(const std::string& target);
  ~tcp_proxy();

  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  /// Where to connect instead of the target: 127.0.0.1:port.
  std::string address() const;
  /// Closes every forwarded connection and refuses new ones.
  void cut();
  /// Stops passing on what the target sends (requests still go through),
  /// until cut: answers the target gave are lost with the connection.
  void hold_answers();
  /// Passes nothing on, either way, on any connection, new ones included
  /// (they are accepted by the kernel and wait), and closes nothing.
  void go_silent();
  /// The same for the connections whose client end process `client`
  /// holds, new ones included; others pass as before.
  void go_silent_for(pid_t client);
  /// Lifts go_silent_for(client).
  void restore_for(pid_t client);
  /// Lifts every cut, hold and silence.
  void restore();
  /// Connections accepted and forwarded so far.
  int forwarded() const { return forwarded_; }

 private:
  void run();
  void wake();

  uint16_t target_port_ = 0;
  uint16_t port_ = 0;
  int listener_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::atomic<bool> cut_{false};
  std::atomic<bool> holding_{false};
  std::atomic<bool> silent_{false};
  std::atomic<bool> stopping_{false};
  std::mutex silenced_mutex_;
  std::set<pid_t> silenced_;
  std::atomic<bool> silenced_changed_{false};
  std::atomic<int> forwarded_{0};
  std::thread loop_;
};

}  // namespace taskmill
