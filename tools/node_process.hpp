#pragma once

// A `taskmill node` in a process of its own: for the benchmark (which reads
// its memory) and for tests that kill nodes.

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace taskmill {

class node_process {
 public:
  /// Starts `binary node --database conninfo --set node.name=name` (no
  /// --database if `conninfo` is empty: the embedded default) with each
  /// of `options` as a further `--set`, and `config_file` as --config if
  /// given; its output goes to `log_file`.
  node_process(const std::string& binary, const std::string& name, const std::string& conninfo,
               const std::vector<std::string>& options, const std::string& config_file = {});
  /// Stops it with SIGTERM if it still runs.
  ~node_process();

  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;

  const std::string& name() const { return name_; }
  const std::string& log_file() const { return log_file_; }

  /// SIGKILL: the node dies at once, as in a crash.
  void kill_hard();
  /// Sends `signal` and waits; answers the exit code, or -1 if it had to be
  /// killed because it did not exit within `patience`.
  int stop(int signal = SIGTERM, std::chrono::seconds patience = std::chrono::seconds{60});
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  /// Its peak resident memory so far (VmHWM), in bytes; 0 if unknown.
  int64_t peak_rss() const;
  /// Its resident memory now (VmRSS), in bytes; 0 if unknown.
  int64_t rss() const;
  /// The file descriptors it holds open now.
  int open_fds() const;
  /// The processor time it used so far, user and system, in seconds.
  double cpu_seconds() const;
  /// The last lines of its log, for failure messages.
  std::string log_tail() const;

 private:
  std::string name_;
  std::string log_file_;
  pid_t pid_ = -1;
};

/// A loopback port that nothing listened on a moment ago.
uint16_t free_loopback_port();

}  // namespace taskmill
