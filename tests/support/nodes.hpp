#pragma once

// Nodes running in the test process on a real PostgreSQL.

#include "tests/support/task_sql.hpp"
#include "tools/node/node.hpp"

#include <chrono>
#include <deque>
#include <optional>
#include <string>

namespace taskmill::test {

/// A node's configuration for tests: the API on a free loopback port, quick
/// polling, and the built-in types NOOP, SLEEP and FAIL with short fixed
/// backoff.
config test_node_config(const std::string& name);

/// The tasks in flight on a node, as its limiter's stats tell them; none
/// when the limiter does not answer.
std::optional<int64_t> in_flight(caf::actor_system& sys, const limiter_actor& limiter);

/// Nodes in this process on a database of their own, stopped at the end.
struct nodes_fixture : actor_system_fixture {
  explicit nodes_fixture(const std::string& label);
  ~nodes_fixture();

  /// On the fixture's database, or through `conninfo` when given.
  caf::expected<node_actors> try_start(
      const config& cfg, std::chrono::milliseconds patience = std::chrono::seconds{30},
      const std::string& conninfo = {});
  node_actors& start(const config& cfg, const std::string& conninfo = {});
  /// Stops every node (fixtures that own what nodes use call it first).
  void stop_nodes();
  /// http://127.0.0.1:<port> of a node's API.
  static std::string api_url(const node_actors& node);

  task_database db;
  std::deque<node_actors> nodes;
};

}  // namespace taskmill::test
