#include "tools/postgres/pgbouncer.hpp"

#include "messages/errors.hpp"
#include "tools/node_process.hpp"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

namespace taskmill::db {

namespace {

namespace fs = std::filesystem;

std::string conninfo_value(const std::string& conninfo, const std::string& key) {
  std::smatch m;
  return std::regex_search(conninfo, m, std::regex{key + "=(\\S+)"}) ? m[1].str() : "";
}

}  // namespace

caf::expected<std::string> start_pgbouncer(const std::string& dir,
                                           const std::string& server_conninfo, int pool_size) {
  auto port = free_loopback_port();
  auto ini = fs::path{dir} / "pgbouncer.ini";
  auto users = fs::path{dir} / "pgbouncer.users";
  std::ofstream{ini} << "[databases]\n* = host=127.0.0.1 port="
                     << conninfo_value(server_conninfo, "port")
                     << "\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port
                     << "\nunix_socket_dir =\nauth_type = plain\nauth_file = " << users.string()
                     << "\npool_mode = transaction\ndefault_pool_size = " << pool_size
                     << "\nmax_client_conn = 1000\n"
                        "ignore_startup_parameters = extra_float_digits,options\nlogfile = "
                     << dir << "/pgbouncer.log\npidfile = " << dir << "/pgbouncer.pid\n";
  std::ofstream{users} << '"' << conninfo_value(server_conninfo, "user") << "\" \""
                       << conninfo_value(server_conninfo, "password") << "\"\n";
  std::string as_owner;
  struct stat st {};
  if (geteuid() == 0 && stat(dir.c_str(), &st) == 0) {
    if (auto* pw = getpwuid(st.st_uid); pw && st.st_uid != 0)
      as_owner = std::string{"runuser -u "} + pw->pw_name + " -- ";
    for (const auto& file : {ini, users}) (void)!chown(file.c_str(), st.st_uid, st.st_gid);
  }
  auto command = as_owner + "pgbouncer -q -d " + ini.string();
  if (std::system(command.c_str()) != 0)
    return make_error(errc::unavailable, "cannot start PgBouncer (Debian's pgbouncer): " + command);
  // -d returns once it forked; it listens a moment later.
  auto through =
      std::regex_replace(server_conninfo, std::regex{"port=\\d+"}, "port=" + std::to_string(port));
  for (int i = 0; i < 100 && !fs::exists(fs::path{dir} / "pgbouncer.pid"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  return through;
}

void stop_pgbouncer(const std::string& dir) {
  std::string pid;
  std::getline(std::ifstream{fs::path{dir} / "pgbouncer.pid"}, pid);
  if (!pid.empty()) kill(std::stoi(pid), SIGTERM);
}

}  // namespace taskmill::db
