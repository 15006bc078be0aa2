#include "tests/support/test_database.hpp"

#include "messages/errors.hpp"
#include "messages/types.hpp"
#include "tools/node/node.hpp"

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace taskmill::test {

std::string server_conninfo() {
  const char* file = std::getenv("TASKMILL_TEST_POSTGRES");
  if (!file)
    throw std::runtime_error("TASKMILL_TEST_POSTGRES is not set: run the tests through ctest");
  std::string conninfo;
  std::getline(std::ifstream{file}, conninfo);
  if (conninfo.empty()) throw std::runtime_error(std::string{"no connection string in "} + file);
  return conninfo;
}

bool behind_pooler() {
  return std::getenv("TASKMILL_TEST_POOLER") != nullptr;
}

namespace {

std::string pooler_conninfo() {
  const char* file = std::getenv("TASKMILL_TEST_POOLER");
  std::string conninfo;
  std::getline(std::ifstream{file}, conninfo);
  if (conninfo.empty())
    throw std::runtime_error(std::string{"no connection string in "} + file +
                             ": is PgBouncer (the Debian package pgbouncer) installed?");
  return conninfo;
}

db::connection admin_connection() {
  auto conn =
      db::connection::open(server_conninfo(), std::chrono::seconds{60}, std::chrono::seconds{10});
  if (!conn) throw std::runtime_error(error_message(conn.error()));
  return std::move(*conn);
}

std::string replace_dbname(const std::string& conninfo, const std::string& name) {
  auto pos = conninfo.find("dbname=");
  return conninfo.substr(0, pos) + "dbname=" + name;
}

}  // namespace

scratch_database::scratch_database(const std::string& label) {
  static std::atomic<int> counter{0};
  name_ = "test_" + label + "_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  auto admin = admin_connection();
  if (auto res = admin.exec("CREATE DATABASE " + name_); !res)
    throw std::runtime_error(error_message(res.error()));
  conninfo_ = replace_dbname(behind_pooler() ? pooler_conninfo() : server_conninfo(), name_);
}

scratch_database::~scratch_database() {
  conn_.reset();
  auto admin = admin_connection();
  admin.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
}

db::connection scratch_database::connect() const {
  auto conn = db::connection::open(conninfo_, std::chrono::seconds{60}, std::chrono::seconds{10},
                                   behind_pooler());
  if (!conn) throw std::runtime_error(error_message(conn.error()));
  return std::move(*conn);
}

db::connection scratch_database::connect_direct() const {
  auto conn = db::connection::open(replace_dbname(server_conninfo(), name_),
                                   std::chrono::seconds{60}, std::chrono::seconds{10});
  if (!conn) throw std::runtime_error(error_message(conn.error()));
  return std::move(*conn);
}

db::result scratch_database::exec(const std::string& sql,
                                  const std::vector<db::param>& params) const {
  if (!conn_ || conn_->broken()) conn_ = std::make_unique<db::connection>(connect_direct());
  auto res = conn_->exec(sql, params);
  if (!res) BOOST_FAIL("SQL failed: " << error_message(res.error()) << "\n  in: " << sql);
  return std::move(*res);
}

std::string scratch_database::scalar(const std::string& sql,
                                     const std::vector<db::param>& params) const {
  auto res = exec(sql, params);
  BOOST_REQUIRE_MESSAGE(res.rows() > 0, "no row from: " << sql);
  return res.string(0, 0);
}

actor_system_fixture::actor_system_fixture() {
  configure_actor_system(cfg);
  cfg.set("scheduler.max-threads", 2);
  sys = std::make_unique<caf::actor_system>(cfg);
}

std::string error_message_of(const caf::error& err) {
  return error_message(err);
}

std::function<bool()> patience(std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  return [deadline] {
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
    return std::chrono::steady_clock::now() < deadline;
  };
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  return condition();
}

}  // namespace taskmill::test
