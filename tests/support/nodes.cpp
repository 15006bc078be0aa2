#include "tests/support/nodes.hpp"

#include "actors/limiter.hpp"

#include <boost/test/unit_test.hpp>

namespace taskmill::test {

using namespace std::chrono_literals;

std::optional<int64_t> in_flight(caf::actor_system& sys, const limiter_actor& limiter) {
  auto stats = ask<pb::Stats>(sys, limiter, stats_atom_v);
  if (!stats) return std::nullopt;
  return tasks_in_flight(*stats);
}

config test_node_config(const std::string& name) {
  config cfg;
  cfg.node.name = name;
  cfg.api.listen = "127.0.0.1:0";
  cfg.cluster.listen = "127.0.0.1:0";
  cfg.scheduling.poll_interval = 500ms;
  if (behind_pooler()) {
    cfg.database.pooler = "transaction";
    cfg.database.listen = false;
  }
  for (auto [type, executor] : {std::pair{"NOOP", executor_kind::noop},
                                {"SLEEP", executor_kind::sleep},
                                {"FAIL", executor_kind::fail}}) {
    task_type_config t;
    t.name = type;
    t.executor = executor;
    t.backoff.exponential = false;
    t.backoff.base = 10ms;
    t.backoff.jitter = 0;
    cfg.types[type] = t;
  }
  return cfg;
}

nodes_fixture::nodes_fixture(const std::string& label) : db(label) {}

nodes_fixture::~nodes_fixture() {
  stop_nodes();
}

caf::expected<node_actors> nodes_fixture::try_start(const config& cfg,
                                                    std::chrono::milliseconds limit,
                                                    const std::string& conninfo) {
  return start_node(*sys, std::make_shared<const config>(cfg),
                    conninfo.empty() ? db.conninfo() : conninfo, patience(limit));
}

node_actors& nodes_fixture::start(const config& cfg, const std::string& conninfo) {
  auto node = try_start(cfg, std::chrono::seconds{30}, conninfo);
  BOOST_REQUIRE_MESSAGE(node, describe(node));
  nodes.push_back(std::move(*node));
  return nodes.back();
}

void nodes_fixture::stop_nodes() {
  for (auto& n : nodes) stop_node(*sys, n);
  nodes.clear();
}

std::string nodes_fixture::api_url(const node_actors& node) {
  return "http://127.0.0.1:" + std::to_string(node.api_port());
}

}  // namespace taskmill::test
