// The CTest fixture around the test suite: `start DIR` runs a throwaway
// PostgreSQL (initdb in a temp directory, a free loopback port) and writes its
// connection string to DIR/server.conninfo, and a PgBouncer in transaction
// mode in front of it, with a small server pool, to DIR/pooler.conninfo;
// `stop DIR` stops and removes both.

#include "messages/errors.hpp"
#include "tools/postgres/embedded_postgres.hpp"
#include "tools/postgres/pgbouncer.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

namespace fs = std::filesystem;
using taskmill::error_message;

namespace {

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
  if (auto pooler = taskmill::db::start_pgbouncer(pg->dir(), pg->server_conninfo(), 6)) {
    std::ofstream{state / "pooler.conninfo"} << *pooler << "\n";
    std::cout << "test PgBouncer (transaction mode, 6 server connections): " << *pooler << "\n";
  } else {
    std::cerr << error_message(pooler.error()) << ": the pooled tests will fail\n";
  }
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
  taskmill::db::stop_pgbouncer(dir);
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
