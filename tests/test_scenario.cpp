// `taskmill scenario` files, without running them: the reference scenarios
// parse, and a bad file is refused with its line and key named.
#define BOOST_TEST_MODULE scenario
#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "tools/scenario/scenario.hpp"

#include <algorithm>
#include <filesystem>
#include <random>

using namespace taskmill;
using namespace taskmill::scenario;

namespace {

std::string refusal(const std::string& text) {
  auto sc = parse_scenario(text, "s.toml");
  return sc ? std::string{"accepted"} : error_message(sc.error());
}

void check_refused(const std::string& text, const std::string& expected) {
  auto got = refusal(text);
  BOOST_CHECK_MESSAGE(got.find(expected) != std::string::npos,
                      "expected an error with '" << expected << "', got: " << got);
}

const std::string head = R"(name = "t"
[[executor]]
name = "work"
[[node]]
name = "n1"
)";

}  // namespace

BOOST_AUTO_TEST_CASE(the_reference_scenarios_parse) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator{std::string{TASKMILL_SOURCE_DIR} + "/tests/scenarios"}) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    auto sc = parse_scenario_file(entry.path().string());
    BOOST_CHECK_MESSAGE(sc, entry.path() << ": " << (sc ? "" : error_message(sc.error())));
  }
  BOOST_CHECK_GE(files, 2);
}

BOOST_AUTO_TEST_CASE(a_scenario_reads_executors_nodes_and_steps) {
  auto sc = parse_scenario(R"(name = "crash"
[[executor]]
name = "work"
latency_ms = [10, 50]
failure_rate = 0.25
answers = [503, 200]
late_rate = 0.1
late_ms = 6000
[[node]]
name = "n1"
set = ["types.W.executor=http", "types.W.url={executor.work}"]
[[step]]
do = "start"
node = "n1"
[[step]]
do = "submit"
count = 1000
batch = 100
task = { type = "W", key = "k-{i}", payload = '{"n": {i}}', execute_at = "+2s", max_retries = 3 }
[[step]]
do = "wait"
timeout = "30s"
tasks = { status = "succeeded", equals = 1000 }
[[step]]
do = "assert"
no_duplicate_deliveries = true
every_task_ran = "W"
latency = { executor = "work", percentile = 99, at_most_ms = 200 }
recovered_within = "2s"
)",
                           "crash.toml");
  BOOST_REQUIRE_MESSAGE(sc, (sc ? "" : error_message(sc.error())));
  BOOST_CHECK_EQUAL(sc->executors.at(0).latency_max_ms, 50);
  BOOST_CHECK_EQUAL(sc->executors.at(0).answers.size(), 2u);
  BOOST_CHECK_EQUAL(sc->nodes.at(0).set.size(), 2u);
  BOOST_REQUIRE_EQUAL(sc->steps.size(), 4u);
  BOOST_CHECK_EQUAL(sc->steps[0].nodes.at(0), "n1");
  BOOST_CHECK_EQUAL(sc->steps[1].count, 1000);
  BOOST_CHECK_EQUAL(sc->steps[1].task.json_fields.at("max_retries"), "3");
  BOOST_CHECK_EQUAL(sc->steps[1].line, 15);
  BOOST_CHECK_EQUAL(sc->steps[2].timeout.count(), 30000);
  BOOST_CHECK_EQUAL(*sc->steps[2].tasks->equals, 1000);
  BOOST_CHECK(sc->steps[3].no_duplicate_deliveries);
  BOOST_CHECK_EQUAL(*sc->steps[3].every_task_ran_type, "W");
  BOOST_CHECK_EQUAL(sc->steps[3].recovered_within->count(), 2000);
}

BOOST_AUTO_TEST_CASE(a_cut_is_from_postgres_and_peers_unless_it_says_which) {
  auto sc = parse_scenario(head + R"([[step]]
do = "cut"
node = "n1"
[[step]]
do = "cut"
node = "n1"
from = ["peers"]
[[step]]
do = "cut"
node = "n1"
from = ["postgres"]
)",
                           "cut.toml");
  BOOST_REQUIRE_MESSAGE(sc, (sc ? "" : error_message(sc.error())));
  BOOST_REQUIRE_EQUAL(sc->steps.size(), 3u);
  BOOST_CHECK(sc->steps[0].cut_postgres && sc->steps[0].cut_peers);
  BOOST_CHECK(!sc->steps[1].cut_postgres && sc->steps[1].cut_peers);
  BOOST_CHECK(sc->steps[2].cut_postgres && !sc->steps[2].cut_peers);
}

BOOST_AUTO_TEST_CASE(executor_delays_follow_the_configured_distribution) {
  std::mt19937_64 random{7};
  executor_behaviour tail;
  tail.latency_p50_ms = 40;
  tail.latency_p99_ms = 400;
  executor_behaviour range;
  range.latency_min_ms = 10;
  range.latency_max_ms = 20;
  std::vector<double> tails, ranges;
  for (int i = 0; i < 20000; ++i) {
    tails.push_back(draw_delay_ms(tail, random));
    ranges.push_back(draw_delay_ms(range, random));
  }
  std::sort(tails.begin(), tails.end());
  BOOST_CHECK_CLOSE(tails[10000], 40.0, 5.0);
  BOOST_CHECK_CLOSE(tails[19800], 400.0, 15.0);
  BOOST_CHECK_EQUAL(*std::min_element(ranges.begin(), ranges.end()), 10.0);
  BOOST_CHECK_EQUAL(*std::max_element(ranges.begin(), ranges.end()), 20.0);
}

BOOST_AUTO_TEST_CASE(bad_files_are_refused_naming_the_line_and_the_key) {
  check_refused("name = \"t\"\ncolour = \"red\"\n[[step]]\ndo = \"sleep\"\nfor = \"1s\"\n",
                "s.toml:2: scenario: unknown key 'colour'");
  check_refused(head + "[[step]]\ndo = \"submit\"\ncount = 5\nspeed = 3\n",
                "s.toml:9: step: speed is not a key of a 'submit' step");
  check_refused(head + "[[step]]\ndo = \"fly\"\n", "s.toml:7: step: do 'fly' is not a step");
  check_refused(head + "[[step]]\nfor = \"1s\"\n", "step: do is required");
  check_refused(head + "[[step]]\ndo = \"wait\"\ntimeout = \"soon\"\nsql = \"SELECT 1\"\n",
                "s.toml:8: step: timeout must be a duration");
  check_refused(head + "[[step]]\ndo = \"submit\"\ncount = \"many\"\n",
                "s.toml:8: step: count must be an integer");
  check_refused(head + "[[step]]\ndo = \"submit\"\ncount = 0\n",
                "step: count must be between 1 and");
  check_refused(head + "[[step]]\ndo = \"submit\"\ntask = { type = \"W\" }\n",
                "a 'submit' step needs task with type and key");
  check_refused(
      head + "[[step]]\ndo = \"submit\"\ntask = { type = \"W\", key = \"k\", colour = 1 }\n",
      "s.toml:8: task: unknown key 'colour'");
  check_refused(head + "[[step]]\ndo = \"kill\"\nnode = \"n9\"\n",
                "node 'n9' is not a [[node]] of this scenario");
  check_refused(head + "[[step]]\ndo = \"cut\"\n", "a 'cut' step needs node or nodes");
  check_refused(head + "[[step]]\ndo = \"freeze\"\nnodes = [\"n1\", \"n7\"]\n",
                "node 'n7' is not a [[node]] of this scenario");
  check_refused(head + "[[step]]\ndo = \"cut\"\nnode = \"n1\"\nfrom = [\"disk\"]\n",
                "s.toml:9: step: from must list \"postgres\", \"peers\" or both");
  check_refused(head + "[[step]]\ndo = \"cut\"\nnode = \"n1\"\nfrom = []\n",
                "step: from must list");
  check_refused(head + "[[step]]\ndo = \"heal\"\nfrom = [\"peers\"]\n",
                "step: from is not a key of a 'heal' step");
  check_refused(head + "[[step]]\ndo = \"heal\"\nnode = \"{leader}\"\n",
                "a 'heal' step takes {leader} only to cut or freeze");
  BOOST_CHECK_EQUAL(refusal(head + "[[step]]\ndo = \"cut\"\nnode = \"{leader}\"\n[[step]]\ndo = "
                                   "\"heal\"\n[[step]]\ndo = \"freeze\"\nnode = \"n1\"\n"
                                   "[[step]]\ndo = \"thaw\"\nnode = \"n1\"\n"),
                    "accepted");
  check_refused(head + "[[step]]\ndo = \"postgres\"\naction = \"explode\"\n",
                "action must be stop, crash, start or restart");
  check_refused(head + "[[step]]\ndo = \"assert\"\n", "an 'assert' step needs something to check");
  check_refused(head + "[[step]]\ndo = \"assert\"\nlatency = { executor = \"nobody\" }\n",
                "executor 'nobody' is not an [[executor]]");
  check_refused(R"(name = "t"
[[executor]]
name = "work"
failure_rate = 2
)",
                "s.toml:4: executor: failure_rate must be between");
  check_refused(R"(name = "t"
[[executor]]
name = "work"
latency_ms = [50, 10]
)",
                "latency_ms must be [min, max] with min <= max");
  check_refused(R"(name = "t"
[[executor]]
name = "work"
latency_ms = { p50 = 100, p99 = 10 }
)",
                "latency_ms must be {p50 = ms, p99 = ms} with p50 <= p99");
  check_refused(R"(name = "t"
[[executor]]
name = "work"
latency_ms = { p50 = 10, p90 = 100 }
)",
                "s.toml:4: latency_ms: unknown key 'p90'");
  check_refused(R"(name = "t"
[[node]]
name = "n1"
[[node]]
name = "n1"
)",
                "s.toml:4: node: name 'n1' is taken");
  check_refused("name = \"t\"\n[[step]]\ndo = \"sleep\"\nfor = [1s\n", "s.toml:4:");
  check_refused("[[step]]\ndo = \"sleep\"\nfor = \"1s\"\n", "name is required");
}
