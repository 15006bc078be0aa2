#include "tools/node_process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace taskmill {

node_process::node_process(const std::string& binary, const std::string& name,
                           const std::string& conninfo, const std::vector<std::string>& options,
                           const std::string& config_file)
    : name_(name),
      log_file_((std::filesystem::temp_directory_path() /
                 ("taskmill-" + name + "-" + std::to_string(getpid()) + ".log"))
                    .string()) {
  std::vector<std::string> args{binary, "node"};
  if (!config_file.empty()) {
    args.push_back("--config");
    args.push_back(config_file);
  }
  if (!conninfo.empty()) {
    args.push_back("--database");
    args.push_back(conninfo);
  }
  for (const auto& o : {"node.name=" + name, std::string{"api.listen=127.0.0.1:0"},
                        std::string{"cluster.listen=127.0.0.1:0"}}) {
    args.push_back("--set");
    args.push_back(o);
  }
  for (const auto& o : options) {
    args.push_back("--set");
    args.push_back(o);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // A node started by a harness, the bench or a test goes with it, even
    // when that one is killed with SIGKILL and stops nothing itself.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int out = open(log_file_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
}

node_process::~node_process() {
  if (pid_ > 0) stop();
  std::filesystem::remove(log_file_);
}

void node_process::kill_hard() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

int node_process::stop(int signal, std::chrono::seconds patience) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, signal);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + patience;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

namespace {

/// A memory field of /proc/<pid>/status ("VmHWM:"), in bytes; 0 if unknown.
int64_t status_bytes(pid_t pid, const std::string& field) {
  if (pid <= 0) return 0;
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0) return std::atoll(line.c_str() + field.size()) * 1024;
  return 0;
}

}  // namespace

int64_t node_process::peak_rss() const {
  return status_bytes(pid_, "VmHWM:");
}

int64_t node_process::rss() const {
  return status_bytes(pid_, "VmRSS:");
}

int node_process::open_fds() const {
  if (pid_ <= 0) return 0;
  std::error_code ec;
  std::filesystem::directory_iterator fds{"/proc/" + std::to_string(pid_) + "/fd", ec};
  return ec ? 0 : static_cast<int>(std::distance(fds, std::filesystem::directory_iterator{}));
}

double node_process::cpu_seconds() const {
  if (pid_ <= 0) return 0;
  std::ifstream in{"/proc/" + std::to_string(pid_) + "/stat"};
  std::string stat{std::istreambuf_iterator<char>{in}, {}};
  // The name, in parentheses, may hold spaces: fields count from its end.
  auto end_of_name = stat.rfind(')');
  if (end_of_name == std::string::npos) return 0;
  std::istringstream fields{stat.substr(end_of_name + 2)};
  std::string field;
  // utime and stime are fields 14 and 15, the state (field 3) the first here.
  for (int i = 3; i < 14 && fields >> field; ++i) {
  }
  long long utime = 0, stime = 0;
  fields >> utime >> stime;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string node_process::log_tail() const {
  std::ifstream in{log_file_};
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > 20 ? lines.size() - 20 : 0; i < lines.size(); ++i)
    out += lines[i] + "\n";
  return out;
}

uint16_t free_loopback_port() {
  // Below the kernel's range for outgoing connections: a port found free
  // here stays free for a node that binds it later, or again after a
  // restart, where one from that range could meanwhile be the local end of
  // any connection this machine makes.
  int outgoing_from = 32768;
  std::ifstream{"/proc/sys/net/ipv4/ip_local_port_range"} >> outgoing_from;
  static std::mutex handed_out_mutex;
  static std::set<uint16_t> handed_out;
  static std::mt19937 rng{std::random_device{}()};
  std::lock_guard<std::mutex> guard{handed_out_mutex};
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto port = static_cast<uint16_t>(
        std::uniform_int_distribution<int>{10000, std::max(10001, outgoing_from - 1)}(rng));
    // Handed out already: bound by now, or about to be.
    if (handed_out.count(port)) continue;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) break;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (!bound) continue;
    handed_out.insert(port);
    return port;
  }
  throw std::runtime_error("cannot find a free loopback port");
}

}  // namespace taskmill
