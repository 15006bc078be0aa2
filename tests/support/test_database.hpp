#pragma once

// Helpers for tests that need PostgreSQL: every test gets a database of its
// own on the throwaway server that CTest starts around the suite.

#include "storage/pg.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>
#include <functional>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace taskmill::test {

/// The connection string of the throwaway server (from the CTest fixture).
std::string server_conninfo();

/// Behind PgBouncer in transaction mode (TASKMILL_TEST_POOLER names its
/// connection string): test databases are reached through it, and nodes run
/// with database.pooler = "transaction".
bool behind_pooler();

/// A fresh, empty database, dropped when this goes away.
class scratch_database {
 public:
  explicit scratch_database(const std::string& label = "t");
  ~scratch_database();
  scratch_database(const scratch_database&) = delete;
  scratch_database& operator=(const scratch_database&) = delete;

  const std::string& conninfo() const { return conninfo_; }
  const std::string& name() const { return name_; }

  /// A plain connection (not in pipeline mode).
  db::connection connect() const;
  /// The same straight to the server, past any pooler (to LISTEN, and for
  /// the test's own statements).
  db::connection connect_direct() const;

  /// Runs SQL on a connection of its own, straight to the server: a test's
  /// own statements observe, and a pooler that a killed node's sessions left
  /// answering with their results must not fail them. Fails the test on error.
  db::result exec(const std::string& sql, const std::vector<db::param>& params = {}) const;

  /// The first column of the first row as text.
  std::string scalar(const std::string& sql, const std::vector<db::param>& params = {}) const;

 private:
  std::string name_;
  std::string conninfo_;
  mutable std::unique_ptr<db::connection> conn_;
};

/// An actor system set up like a node's, for tests.
struct actor_system_fixture {
  actor_system_fixture();
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
};

std::string error_message_of(const caf::error& err);

/// "ok", or the error's message: safe to use in a test message either way.
template <class T>
std::string describe(const caf::expected<T>& x) {
  return x ? std::string{"ok"} : error_message_of(x.error());
}

/// Sends a request and waits for the answer (or the error).
template <class Result, class Handle, class... Ts>
caf::expected<Result> ask(caf::actor_system& sys, const Handle& handle, Ts&&... xs) {
  caf::scoped_actor self{sys};
  caf::expected<Result> out = caf::error{};
  self->request(handle, std::chrono::seconds{60}, std::forward<Ts>(xs)...)
      .receive([&](Result& r) { out = std::move(r); }, [&](caf::error& e) { out = std::move(e); });
  return out;
}

/// For start_node's keep_waiting: waits 100 ms, then says whether `limit`
/// (from now) has not passed yet.
std::function<bool()> patience(std::chrono::milliseconds limit);

/// Polls `condition` every 10 ms until it holds or `timeout` passes.
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds{10});

/// A failure message written when it is printed, after its condition was
/// worked out. Boost passes a message's values and its condition to one
/// call, in an order C++ leaves open (GCC works out the message first), so
/// a log read there for a wait (eventually) could be the one from before
/// the wait began: empty, for a node just started.
struct later {
  std::function<void(std::ostream&)> write;
};

inline std::ostream& operator<<(std::ostream& out, const later& message) {
  message.write(out);
  return out;
}

}  // namespace taskmill::test
