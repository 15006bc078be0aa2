// The CTest fixture around the test suite: `start DIR` runs a throwaway
// PostgreSQL (initdb in a temp directory, a free loopback port) and writes its
// connection string to DIR/server.conninfo, and a PgBouncer in transaction
// mode in front of it, with a small server pool, to DIR/pooler.conninfo;
// `stop DIR` stops and removes both.

#include "messages/errors.hpp"
#include "tools/node_process.hpp"
#include "tools/postgres/embedded_postgres.hpp"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>

namespace fs = std::filesystem;
using taskmill::error_message;

namespace {

/// The value of `key` in a connection string.
std::string conninfo_value(const std::string& conninfo, const std::string& key) {
  std::smatch m;
  return std::regex_search(conninfo, m, std::regex{key + "=(\\S+)"}) ? m[1].str() : "";
}

/// PgBouncer in transaction mode in front of the server at `conninfo`, its
/// files in `dir`, run as the server's user (it refuses root).
bool start_pooler(const fs::path& state, const std::string& dir, const std::string& conninfo) {
  auto port = taskmill::free_loopback_port();
  auto ini = fs::path{dir} / "pgbouncer.ini";
  std::ofstream{ini} << "[databases]\n* = host=127.0.0.1 port=" << conninfo_value(conninfo, "port")
                     << "\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = " << port
                     << "\nunix_socket_dir =\nauth_type = plain\nauth_file = " << dir
                     << "/pgbouncer.users\npool_mode = transaction\ndefault_pool_size = 6\n"
                        "max_client_conn = 500\nignore_startup_parameters = "
                        "extra_float_digits,options\nlogfile = "
                     << dir << "/pgbouncer.log\npidfile = " << dir << "/pgbouncer.pid\n";
  std::ofstream{fs::path{dir} / "pgbouncer.users"}
      << '"' << conninfo_value(conninfo, "user") << "\" \"" << conninfo_value(conninfo, "password")
      << "\"\n";
  std::string as_user;
  if (geteuid() == 0) {
    struct stat st {};
    if (stat(dir.c_str(), &st) == 0)
      if (auto* pw = getpwuid(st.st_uid))
        as_user = std::string{"runuser -u "} + pw->pw_name + " -- ";
    for (const auto* file : {"pgbouncer.ini", "pgbouncer.users"})
      (void)!chown((fs::path{dir} / file).c_str(), st.st_uid, st.st_gid);
  }
  if (std::system((as_user + "pgbouncer -d " + ini.string()).c_str()) != 0) {
    std::cerr << "cannot start PgBouncer (the Debian package pgbouncer): the pooled tests will "
                 "fail\n";
    return false;
  }
  std::ofstream{state / "pooler.conninfo"}
      << std::regex_replace(conninfo, std::regex{"port=\\d+"}, "port=" + std::to_string(port))
      << "\n";
  std::cout << "test PgBouncer (transaction mode) on 127.0.0.1:" << port << "\n";
  return true;
}

void stop_pooler(const std::string& dir) {
  std::string pid;
  std::getline(std::ifstream{fs::path{dir} / "pgbouncer.pid"}, pid);
  if (!pid.empty()) kill(std::stoi(pid), SIGTERM);
}

int start(const fs::path& state) {
  fs::create_directories(state);
  std::string tmpl = (fs::temp_directory_path() / "taskmill-test-pg-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) {
    std::cerr << "cannot create a temporary directory\n";
    return 1;
  }
  taskmill::db::embedded_postgres_options opts;
  opts.dir = tmpl;
  opts.throwaway = true;
  auto pg = taskmill::db::embedded_postgres::start(opts);
  if (!pg) {
    std::cerr << error_message(pg.error()) << "\n";
    fs::remove_all(tmpl);
    return 1;
  }
  std::ofstream{state / "cluster_dir"} << pg->dir() << "\n";
  std::ofstream{state / "server.conninfo"} << pg->server_conninfo() << "\n";
  std::cout << "test PostgreSQL running on 127.0.0.1:" << pg->port() << " in " << pg->dir() << "\n";
  start_pooler(state, pg->dir(), pg->server_conninfo());
  pg->release();
  return 0;
}

int stop(const fs::path& state) {
  std::string dir;
  std::getline(std::ifstream{state / "cluster_dir"}, dir);
  if (dir.empty()) {
    std::cout << "no test PostgreSQL recorded in " << state << "\n";
    return 0;
  }
  stop_pooler(dir);
  taskmill::db::embedded_postgres_options opts;
  opts.dir = dir;
  auto err = taskmill::db::stop_embedded_postgres(opts);
  if (err) std::cerr << error_message(err) << "\n";
  fs::remove_all(dir);
  fs::remove_all(state);
  std::cout << "test PostgreSQL stopped\n";
  return err ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc == 3 ? argv[1] : "";
  if (cmd == "start") return start(argv[2]);
  if (cmd == "stop") return stop(argv[2]);
  std::cerr << "usage: taskmill-test-postgres start|stop STATE_DIR\n";
  return 2;
}
