// SPEC §7 over CAF's network layer, with real processes: nodes link after a
// challenge-response over cluster.secret and refuse a wrong one, show their
// links, fan wake-ups out so that a node that cannot LISTEN starts work at
// once, and remote executors run tasks; one killed with SIGKILL loses its
// tasks at once, fenced by attempt, and another runs them. Links cut by a
// partition (a proxy that drops every connection) lose no work and run
// none twice.
#define BOOST_TEST_MODULE cluster
#include <boost/test/unit_test.hpp>

#include "actors/executors/outcome.hpp"
#include "messages/actors.hpp"
#include "messages/peer_proof.hpp"
#include "messages/time.hpp"
#include "tests/support/certificates.hpp"
#include "tests/support/hostile_peers.hpp"
#include "tests/support/nodes.hpp"
#include "tests/support/scripted_executor.hpp"
#include "tests/support/task_sql.hpp"
#include "tests/support/test_database.hpp"
#include "tools/http_fetch.hpp"
#include "tools/node_process.hpp"
#include "tools/remote_executor/remote_executor.hpp"
#include "tools/tcp_proxy.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

using namespace taskmill;
using namespace std::chrono_literals;
using nlohmann::json;
using test::make_certificates;
using test::tls_options;

namespace {

const char* binary() {
  const char* path = std::getenv("TASKMILL_BINARY");
  BOOST_REQUIRE_MESSAGE(path, "TASKMILL_BINARY is not set: run the tests through ctest");
  return path;
}

/// `taskmill remote-executor ...` as a child process with the secret in its
/// environment; its output goes to a log file.
class executor_process {
 public:
  executor_process(const std::string& name, const std::string& node, const std::string& secret,
                   const std::string& type, int capacity, std::vector<std::string> extra = {})
      : log_((std::filesystem::temp_directory_path() /
              ("taskmill-exec-" + name + "-" + std::to_string(getpid()) + ".log"))
                 .string()) {
    std::vector<std::string> args{
        binary(),     "remote-executor",        "--node", node, "--type", type,
        "--capacity", std::to_string(capacity), "--name", name};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> env{"TASKMILL_CLUSTER_SECRET=" + secret};
    for (char** e = environ; *e; ++e)
      if (std::string{*e}.rfind("TASKMILL_CLUSTER_SECRET=", 0) != 0) env.emplace_back(*e);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    BOOST_REQUIRE_MESSAGE(rc == 0, "cannot start the remote executor");
  }

  ~executor_process() {
    stop(SIGTERM);
    std::filesystem::remove(log_);
  }

  void stop(int signal) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
  }

  std::string log() const {
    std::ifstream in{log_};
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }

 private:
  std::string log_;
  pid_t pid_ = 0;
};

/// A node process with its API and cluster ports known.
struct node_handle {
  std::unique_ptr<node_process> process;
  std::string api;
  std::string cluster;
};

node_handle start_node(const test::scratch_database& db, const std::string& name,
                       const std::string& secret, std::vector<std::string> options = {},
                       const std::string& cluster = "127.0.0.1:" +
                                                    std::to_string(free_loopback_port())) {
  auto api_port = std::to_string(free_loopback_port());
  options.insert(options.end(),
                 {"api.listen=127.0.0.1:" + api_port, "cluster.listen=" + cluster,
                  "cluster.secret=" + secret, "heartbeat.interval=200ms", "node.log_level=info"});
  node_handle n;
  // Named, so that links_report tells the nodes' sessions apart.
  n.process = std::make_unique<node_process>(binary(), name,
                                             db.conninfo() + " application_name=" + name, options);
  n.api = "http://127.0.0.1:" + api_port;
  n.cluster = cluster;
  return n;
}

json get_json(const std::string& url) {
  auto res = http_fetch("GET", url);
  if (!res || res->status != 200) return json::object();
  return json::parse(res->body, nullptr, false);
}

/// The link `from` has to the node `to`, as GET /v1/nodes shows it.
std::string link_of(const node_handle& from, const std::string& to) {
  auto doc = get_json(from.api + "/v1/nodes");
  if (!doc.contains("nodes")) return "no answer";
  for (const auto& n : doc["nodes"])
    if (n["name"] == to) return n["link"].is_string() ? n["link"].get<std::string>() : "null";
  return "absent";
}

/// Remote executors linked to `node`, as GET /v1/nodes shows them.
int executors_linked(const node_handle& node) {
  auto doc = get_json(node.api + "/v1/nodes");
  int up = 0;
  for (const auto& l : doc.value("links", json::array()))
    if (l["kind"] == "executor" && l["state"] == "up") ++up;
  return up;
}

/// For a wait on links that failed: how each node saw the others, its log,
/// and what the database's sessions were waiting on (a flake in CI once left
/// only an empty log of one node to go by).
std::string links_report(const test::scratch_database& db,
                         std::initializer_list<const node_handle*> nodes) {
  std::ostringstream out;
  for (const auto* from : nodes) {
    out << "\n--- node " << from->process->name() << ", links:";
    for (const auto* to : nodes)
      if (to != from)
        out << " " << to->process->name() << "=" << link_of(*from, to->process->name());
    out << "\n" << from->process->log_tail();
  }
  // Not through db.scalar: a failed assertion here, while Boost prints the
  // one this reports on, would take that report with it.
  auto conn = db::connection::open(db.conninfo(), 5s, 5s);
  auto sessions = conn
                      ? conn->exec(
                            "SELECT string_agg(format('%s %s %s/%s %s: %s', pid, application_name, "
                            "wait_event_type, wait_event, state, left(query, 80)), E'\\n') "
                            "FROM pg_stat_activity WHERE datname = current_database() AND pid <> "
                            "pg_backend_pid()")
                      : caf::expected<db::result>{conn.error()};
  out << "--- sessions:\n"
      << (sessions ? std::string{sessions->text(0, 0)}
                   : "(cannot read: " + test::describe(sessions) + ")");
  return out.str();
}

std::string last_error_of(const node_handle& from, const std::string& to) {
  auto doc = get_json(from.api + "/v1/nodes");
  for (const auto& l : doc.value("links", json::array()))
    if (l["name"] == to && l["last_error"].is_string()) return l["last_error"];
  return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(links)

BOOST_AUTO_TEST_CASE(nodes_link_with_the_secret_refuse_a_wrong_one_and_relink_after_a_crash) {
  test::task_database db{"clusterlinks"};
  auto a = start_node(db, "a", "right", {"types.LINKLESS.executor=noop"});
  auto b = start_node(db, "b", "right");
  auto c = start_node(db, "c", "wrong");
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return link_of(a, "b") == "up"; }, 30s),
                        test::later{[&](std::ostream& out) {
                          out << links_report(db, {&a, &b});
                        }});
  BOOST_REQUIRE(test::eventually([&] { return link_of(b, "a") == "up"; }, 30s));
  BOOST_CHECK_EQUAL(link_of(a, "a"), "self");
  // c is in the database, so a and b try it, and refuse it.
  BOOST_REQUIRE(test::eventually(
      [&] { return last_error_of(a, "c").find("cluster.secret") != std::string::npos; }, 30s));
  BOOST_CHECK_NE(link_of(a, "c"), "up");
  BOOST_CHECK_NE(link_of(c, "a"), "up");
  BOOST_CHECK_NE(link_of(c, "b"), "up");
  // A node row with an address that is not host:port is a failed link, not
  // a crash.
  db.exec(
      "INSERT INTO taskmill.nodes (name, incarnation, address) VALUES ('junk', 'x', 'junk:abc')");
  BOOST_CHECK(test::eventually(
      [&] { return last_error_of(a, "junk").find("bad port") != std::string::npos; }, 10s));
  BOOST_CHECK_EQUAL(link_of(a, "b"), "up");
  // Without a link work still flows, by NOTIFY: a task submitted on c runs
  // on a.
  auto submitted =
      http_fetch("POST", c.api + "/v1/tasks", R"({"type": "LINKLESS", "key": "by-notify"})");
  BOOST_REQUIRE(submitted && submitted->status == 200);
  BOOST_CHECK(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT status::text || ' ' || picked_by FROM taskmill.tasks WHERE key "
                   "= 'by-notify'") == "succeeded a";
      },
      10s));
  auto metrics = http_fetch("GET", a.api + "/metrics");
  BOOST_REQUIRE(metrics);
  BOOST_CHECK_MESSAGE(metrics->body.find("taskmill_cluster_links{kind=\"node\",state=\"up\"} 1") !=
                          std::string::npos,
                      metrics->body);
  // b crashes: a sees the link go down at once (not after the lease), and
  // up again when b is back.
  b.process->kill_hard();
  auto lost_at = std::chrono::steady_clock::now();
  BOOST_REQUIRE(test::eventually([&] { return link_of(a, "b") == "down"; }, 10s));
  BOOST_CHECK_LT(std::chrono::steady_clock::now() - lost_at, 3s);
  b.process = std::make_unique<node_process>(
      binary(), "b", db.conninfo(),
      std::vector<std::string>{"api.listen=127.0.0.1:" + b.api.substr(b.api.rfind(':') + 1),
                               "cluster.listen=" + b.cluster, "cluster.secret=right",
                               "heartbeat.interval=200ms"});
  BOOST_CHECK_MESSAGE(test::eventually([&] { return link_of(a, "b") == "up"; }, 30s),
                      test::later{[&](std::ostream& out) { out << a.process->log_tail(); }});
}

// A node reaches the cluster through cluster.seeds alone: a advertises an
// address where nothing listens, so the only way from b to a is b's seed, a
// proxy in front of a's cluster port.
BOOST_AUTO_TEST_CASE(a_seed_is_dialed_where_the_database_has_no_usable_address) {
  test::task_database db{"clusterseeds"};
  auto a_port = std::to_string(free_loopback_port());
  auto a = start_node(db, "a", "right",
                      {"cluster.advertise=127.0.0.1:" + std::to_string(free_loopback_port())},
                      "127.0.0.1:" + a_port);
  tcp_proxy seed{"127.0.0.1:" + a_port};
  auto b = start_node(db, "b", "right", {"cluster.seeds=[\"" + seed.address() + "\"]"});
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return seed.forwarded() > 0; }, 30s),
                        test::later{[&](std::ostream& out) { out << b.process->log_tail(); }});
  BOOST_CHECK_MESSAGE(test::eventually([&] { return link_of(b, "a") == "up"; }, 30s),
                      test::later{[&](std::ostream& out) { out << b.process->log_tail(); }});
}

// A caller without the secret that speaks the protocol itself gets nowhere:
// a join it was not challenged for, a made-up proof, and one node's answer
// to another node's challenge (a reflection, which would otherwise pass as
// that node's join) are refused, and executors it offers are not taken.
BOOST_AUTO_TEST_CASE(a_caller_without_the_secret_cannot_join_even_by_reflecting_a_nodes_answer) {
  test::task_database db{"clusterreflect"};
  auto a = start_node(db, "a", "right");
  auto b = start_node(db, "b", "right");
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return link_of(a, "b") == "up"; }, 30s),
                        test::later{[&](std::ostream& out) {
                          out << links_report(db, {&a, &b});
                        }});
  test::actor_system_fixture caller;
  auto connect = [&](const node_handle& n) {
    auto colon = n.cluster.rfind(':');
    auto port = static_cast<uint16_t>(std::stoi(n.cluster.substr(colon + 1)));
    auto peer = caller.sys->middleman().remote_actor<peer_actor>(n.cluster.substr(0, colon), port);
    if (!peer)
      BOOST_FAIL("cannot reach " << n.cluster << ": " << test::error_message_of(peer.error()));
    return *peer;
  };
  auto to_a = connect(a);
  auto to_b = connect(b);
  caf::scoped_actor self{*caller.sys};
  // (name, nonce, proof) of a node's answer to hello.
  auto hello = [&](const peer_actor& peer, const std::string& nonce) {
    std::vector<std::string> out;
    self->request(peer, 5s, hello_atom_v, std::string{"mallory"}, nonce)
        .receive(
            [&](const std::string& name, const std::string& their_nonce, const std::string& proof) {
              out = {name, their_nonce, proof};
            },
            [&](const caf::error& err) { BOOST_FAIL(test::error_message_of(err)); });
    return out;
  };
  auto join = [&](const peer_actor& peer, const std::string& name, const std::string& proof) {
    bool admitted = true;
    self->request(peer, 5s, join_atom_v, name, std::string{"node"}, proof)
        .receive([&](bool answer) { admitted = answer; },
                 [&](const caf::error& err) { BOOST_FAIL(test::error_message_of(err)); });
    return admitted;
  };
  BOOST_CHECK(!join(to_b, "a", std::string(64, '0')));
  hello(to_b, new_nonce());
  BOOST_CHECK(!join(to_b, "a", std::string(64, '0')));
  auto challenge = hello(to_b, new_nonce());
  auto reflected = hello(to_a, challenge[1]);
  BOOST_REQUIRE_EQUAL(reflected[0], "a");
  BOOST_CHECK_MESSAGE(!join(to_b, "a", reflected[2]),
                      "b admitted a caller that reflected a's answer to b's challenge");
  auto executor = caller.sys->spawn([] { return caf::behavior{[](int32_t) {}}; });
  pb::ExecutorRegistration offer;
  offer.add_types("REMOTE");
  offer.set_capacity(1);
  std::string refusal;
  self->request(to_b, 5s, register_atom_v, executor, offer)
      .receive([&](int32_t) { refusal = "taken"; },
               [&](const caf::error& err) { refusal = test::error_message_of(err); });
  BOOST_CHECK_MESSAGE(refusal.find("cluster.secret") != std::string::npos, refusal);
  self->send_exit(executor, caf::exit_reason::user_shutdown);
  BOOST_CHECK_EQUAL(link_of(b, "a"), "up");
  BOOST_CHECK_EQUAL(executors_linked(b), 0);
  // The two wrong proofs after a hello are counted, and logged once.
  auto metrics = http_fetch("GET", b.api + "/metrics");
  BOOST_REQUIRE(metrics && metrics->status == 200);
  BOOST_CHECK_MESSAGE(
      metrics->body.find("taskmill_cluster_refused_total{reason=\"bad_proof\"} 2") !=
          std::string::npos,
      metrics->body);
  BOOST_CHECK(test::eventually(
      [&] {
        std::ifstream in{b.process->log_file()};
        std::string log{std::istreambuf_iterator<char>{in}, {}};
        auto first = log.find("refused a caller from 127.0.0.1: wrong proof of cluster.secret");
        return first != std::string::npos &&
               log.find("refused a caller from", first + 1) == std::string::npos;
      },
      5s));
}

namespace {

/// (state, since) of the link `peers` shows to `name`; empty if none.
std::pair<std::string, int64_t> link_seen(caf::actor_system& sys, const peers_actor& peers,
                                          const std::string& name) {
  caf::scoped_actor self{sys};
  std::pair<std::string, int64_t> out;
  self->request(peers, 5s, peers_atom_v)
      .receive(
          [&](const pb::PeerLinks& links) {
            for (const auto& l : links.links())
              if (l.name() == name) out = {l.state(), to_micros(l.since())};
          },
          [](const caf::error&) {});
  return out;
}

/// Kills, in `sys` alone, its proxy of `remote`, as CAF does when it takes
/// the route to a node for lost: the connection stays up, the other side
/// is not told.
void drop_proxy(caf::actor_system& sys, const caf::actor_addr& remote) {
  auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  caf::anon_send(basp, caf::delete_atom_v, remote.node(), remote.id(),
                 caf::make_error(caf::exit_reason::remote_link_unreachable));
}

}  // namespace

// Node a runs in this process's actor system; node b and a remote executor
// in another one, linked to a over TCP as other processes would be. a drops
// its side of each link alone (its proxies die, the connections stay): the
// executor and b find out at their next check, within CAF's link bound,
// and link again.
BOOST_AUTO_TEST_CASE(a_link_dropped_on_one_side_alone_is_found_and_made_again) {
  test::nodes_fixture here{"clusteroneside"};
  auto a_cfg = test::test_node_config("a");
  task_type_config remote;
  remote.name = "REMOTE";
  remote.executor = executor_kind::caf;
  a_cfg.types["REMOTE"] = remote;
  // a looks for unlinked peers only every 5 s: b must relink by itself.
  a_cfg.heartbeat.interval = 5s;
  auto& a = here.start(a_cfg);
  test::actor_system_fixture elsewhere;
  auto b = start_node(*elsewhere.sys, std::make_shared<const config>(test::test_node_config("b")),
                      here.db.conninfo(), test::patience(30s));
  BOOST_REQUIRE_MESSAGE(b, test::describe(b));
  BOOST_REQUIRE(test::eventually(
      [&] {
        return link_seen(*here.sys, a.peers, "b").first == "up" &&
               link_seen(*elsewhere.sys, b->peers, "a").first == "up";
      },
      30s));

  remote_executor_options o;
  o.node = "127.0.0.1:" + std::to_string(a.cluster_port);
  o.name = "e1";
  o.types = {"REMOTE"};
  o.capacity = 2;
  std::atomic<int> ran{0};
  auto handler = [&](const pb::Task& task, const remote_execution&) {
    ++ran;
    return outcome_of(task, pb::OUTCOME_SUCCEEDED);
  };
  auto runner = start_remote_executor(*elsewhere.sys, o, handler);
  BOOST_REQUIRE_MESSAGE(runner, test::describe(runner));
  BOOST_REQUIRE(test::eventually(
      [&] { return link_seen(*here.sys, a.peers, "executor e1").first == "up"; }, 10s));

  caf::scoped_actor watcher{*elsewhere.sys};
  watcher->monitor(*runner);
  auto dropped_at = std::chrono::steady_clock::now();
  drop_proxy(*here.sys, runner->address());
  bool down = false;
  watcher->receive([&](caf::down_msg&) { down = true; }, caf::after(link_silence_bound) >> [] {});
  BOOST_REQUIRE_MESSAGE(down, "the executor still believes in a link a dropped");
  auto noticed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - dropped_at);
  BOOST_TEST_MESSAGE("the executor found its link dropped after " << noticed.count() << " ms");
  BOOST_CHECK(link_seen(*here.sys, a.peers, "executor e1").first != "up");
  // What the example executor does next: link again, and run tasks.
  runner = start_remote_executor(*elsewhere.sys, o, handler);
  BOOST_REQUIRE_MESSAGE(runner, test::describe(runner));
  here.db.call("submit('REMOTE', 'after')");
  BOOST_CHECK(test::eventually(
      [&] {
        return here.db.scalar("SELECT status::text FROM taskmill.tasks WHERE key = 'after'") ==
               "succeeded";
      },
      10s));
  BOOST_CHECK_EQUAL(ran.load(), 1);

  auto before = wall_clock_micros();
  drop_proxy(*here.sys, caf::actor_cast<caf::actor_addr>(b->peers));
  BOOST_CHECK(
      test::eventually([&] { return link_seen(*elsewhere.sys, b->peers, "a").second > before; },
                       link_silence_bound));
  BOOST_CHECK(test::eventually(
      [&] {
        return link_seen(*here.sys, a.peers, "b").first == "up" &&
               link_seen(*elsewhere.sys, b->peers, "a").first == "up";
      },
      link_silence_bound));
  caf::anon_send_exit(*runner, caf::exit_reason::user_shutdown);
  here.stop_nodes();
  stop_node(*elsewhere.sys, *b);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(wakeups)

// Neither node LISTENs and both poll only every 30 s: a task submitted on a
// for a type only b runs starts on b within milliseconds, because a tells b
// over CAF.
BOOST_AUTO_TEST_CASE(a_task_submitted_on_one_node_starts_on_another_at_once) {
  test::task_database db{"clusterwake"};
  std::vector<std::string> quiet{"database.listen=false", "scheduling.poll_interval=30s"};
  auto a = start_node(db, "a", "s", quiet);
  auto b_options = quiet;
  b_options.push_back("types.FAN.executor=noop");
  // Nothing listens on port 1: every attempt fails and is retried.
  b_options.push_back("types.FLAKY.executor=http");
  b_options.push_back("types.FLAKY.url=http://127.0.0.1:1/");
  auto b = start_node(db, "b", "s", b_options);
  BOOST_REQUIRE(
      test::eventually([&] { return link_of(a, "b") == "up" && link_of(b, "a") == "up"; }, 30s));
  // Let both pushers settle into their 30 s sleep.
  std::this_thread::sleep_for(1s);
  constexpr int tasks = 200;
  for (int i = 0; i < tasks; ++i) {
    auto res = http_fetch("POST", a.api + "/v1/tasks",
                          R"({"type": "FAN", "key": "k)" + std::to_string(i) + R"("})");
    BOOST_REQUIRE(res && res->status == 200);
    std::this_thread::sleep_for(5ms);
  }
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'succeeded'") ==
               std::to_string(tasks);
      },
      20s));
  auto latency = [&](const char* pct) {
    return std::stod(db.scalar(std::string{"SELECT percentile_cont("} + pct +
                               ") WITHIN GROUP (ORDER BY extract(epoch FROM started_at - "
                               "created_at) * 1000) FROM taskmill.tasks"));
  };
  auto p50 = latency("0.5"), p99 = latency("0.99"), max = latency("1.0");
  BOOST_TEST_MESSAGE("submit on a -> start on b: p50 " << p50 << " ms, p99 " << p99 << " ms, max "
                                                       << max << " ms");
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(DISTINCT picked_by) FROM taskmill.tasks"), "1");
  // Bounds loose enough for a noisy box, far below the 30 s poll.
  BOOST_CHECK_LT(p50, 50);
  BOOST_CHECK_LT(p99, 500);
  BOOST_CHECK_LT(max, 3000);

  // Retries come due after their backoff, not at the next poll: three
  // attempts 200 ms apart end well within the 30 s poll.
  auto res = http_fetch("POST", a.api + "/v1/tasks",
                        R"({"type": "FLAKY", "key": "f", "max_retries": 2,
                            "backoff": {"kind": "fixed", "base_ms": 200, "jitter": 0}})");
  BOOST_REQUIRE_MESSAGE(res && res->status == 200, (res ? res->body : std::string{}));
  BOOST_CHECK(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT status::text || ' ' || attempt FROM taskmill.tasks WHERE key = "
                   "'f'") == "dead 3";
      },
      5s));
}

// The node that failed an attempt stores its retry and tells its peers, so
// the retry comes due on another node although that node neither LISTENs nor
// polls more than every 30 s: here the failing node dies right after the
// failure, and the other starts the retry when its backoff ends.
BOOST_AUTO_TEST_CASE(a_retry_failed_on_one_node_comes_due_on_another) {
  test::task_database db{"clusterretry"};
  test::scripted_executor executor;
  // A lease far longer than the test: no takeover sweep claims on the
  // survivor's behalf.
  std::vector<std::string> options{"database.listen=false", "scheduling.poll_interval=30s",
                                   "heartbeat.missed=150", "types.RETRY.executor=http",
                                   "types.RETRY.url=" + executor.url()};
  std::map<std::string, node_handle> nodes;
  nodes.emplace("a", start_node(db, "a", "s", options));
  nodes.emplace("b", start_node(db, "b", "s", options));
  BOOST_REQUIRE(test::eventually(
      [&] { return link_of(nodes["a"], "b") == "up" && link_of(nodes["b"], "a") == "up"; }, 30s));
  std::this_thread::sleep_for(1s);
  auto res = http_fetch("POST", nodes["a"].api + "/v1/tasks",
                        R"({"type": "RETRY", "key": "r", "payload": {"fail_first": 1},
                            "backoff": {"kind": "fixed", "base_ms": 3000, "jitter": 0}})");
  BOOST_REQUIRE_MESSAGE(res && res->status == 200, (res ? res->body : std::string{}));
  std::string failed_on;
  BOOST_REQUIRE(test::eventually(
      [&] {
        failed_on = db.scalar(
            "SELECT coalesce(max(node), '') FROM taskmill.attempts WHERE attempt = 1 AND outcome "
            "= 'retry'");
        return !failed_on.empty();
      },
      20s));
  auto other = failed_on == "a" ? "b" : "a";
  // Time for the wake-up to leave, far less than the backoff.
  std::this_thread::sleep_for(300ms);
  nodes[failed_on].process->kill_hard();
  BOOST_REQUIRE_MESSAGE(
      test::eventually(
          [&] {
            return db.scalar("SELECT status::text FROM taskmill.tasks WHERE key = 'r'") ==
                   "succeeded";
          },
          20s),
      test::later{[&](std::ostream& out) {
        out << "the retry did not run on " << other << ": " << nodes[other].process->log_tail();
      }});
  BOOST_CHECK_EQUAL(db.scalar("SELECT picked_by || ' ' || attempt FROM taskmill.tasks"),
                    std::string{other} + " 2");
  auto late = std::stod(
      db.scalar("SELECT extract(epoch FROM started_at - execute_at) * 1000 FROM taskmill.tasks"));
  BOOST_TEST_MESSAGE("retry failed on " << failed_on << ", started on " << other << " " << late
                                        << " ms after it came due");
  // Loose for a noisy box, far below the 30 s poll.
  BOOST_CHECK_LT(late, 2000);
}

// Under a global limit of one running task, node b waits for the permit
// node a holds; when a's task ends, a tells b, which starts at once rather
// than at its next poll.
BOOST_AUTO_TEST_CASE(a_permit_freed_on_one_node_wakes_another) {
  test::task_database db{"clusterpermit"};
  std::vector<std::string> quiet{"database.listen=false", "scheduling.poll_interval=30s",
                                 "scheduling.global_limit=1"};
  auto a_options = quiet;
  a_options.push_back("types.HOLD.executor=sleep");
  auto a = start_node(db, "a", "s", a_options);
  auto b_options = quiet;
  b_options.push_back("types.NEXT.executor=noop");
  auto b = start_node(db, "b", "s", b_options);
  BOOST_REQUIRE(
      test::eventually([&] { return link_of(a, "b") == "up" && link_of(b, "a") == "up"; }, 30s));
  // Submitted through a's API, so that a starts it now, not at its next poll.
  auto hold = http_fetch("POST", a.api + "/v1/tasks",
                         R"({"type": "HOLD", "key": "h", "payload": {"ms": 1500}})");
  BOOST_REQUIRE(hold && hold->status == 200);
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar("SELECT status::text FROM taskmill.tasks WHERE key = 'h'") == "running";
      },
      30s));
  db.call("submit('NEXT', 'n')");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'succeeded'") == "2";
      },
      20s));
  auto gap =
      std::stod(db.scalar("SELECT extract(epoch FROM n.started_at - h.updated_at) * 1000 FROM "
                          "taskmill.tasks n, taskmill.tasks h WHERE n.key = 'n' AND h.key = 'h'"));
  BOOST_TEST_MESSAGE("permit freed on a -> start on b: " << gap << " ms");
  BOOST_CHECK_LT(gap, 2000);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(remote_executors)

BOOST_AUTO_TEST_CASE(executors_share_a_type_by_capacity_and_a_killed_ones_tasks_run_elsewhere) {
  test::task_database db{"clusterexec"};
  auto node = start_node(db, "n", "s", {"types.REMOTE.executor=caf"});
  auto e1 = std::make_unique<executor_process>("e1", node.cluster, "s", "REMOTE", 2);
  auto e2 = std::make_unique<executor_process>("e2", node.cluster, "s", "REMOTE", 2);
  auto executors_up = [&](int n) { return executors_linked(node) == n; };
  BOOST_REQUIRE_MESSAGE(
      test::eventually([&] { return executors_up(2); }, 30s),
      test::later{[&](std::ostream& out) { out << e1->log() << node.process->log_tail(); }});
  // A wrong secret is refused.
  executor_process intruder{"intruder", node.cluster, "guess", "REMOTE", 8};
  // Four tasks, two at a time on each.
  for (int i = 0; i < 4; ++i)
    db.call("submit('REMOTE', 'share" + std::to_string(i) + "', payload => '{\"sleep_ms\": 500}')");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM taskmill.tasks WHERE key LIKE 'share%' AND "
                   "status = 'succeeded'") == "4";
      },
      30s));
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(h || ':' || n, ',' ORDER BY h) FROM (SELECT "
                              "result->>'handled_by' AS h, count(*) AS n FROM taskmill.tasks "
                              "WHERE key LIKE 'share%' GROUP BY 1) x"),
                    "e1:2,e2:2");
  BOOST_CHECK_MESSAGE(intruder.log().find("does not know cluster.secret") != std::string::npos,
                      intruder.log());
  BOOST_CHECK(!executors_up(3));

  // Only e1 is left; it takes two long tasks. A new executor comes, and e1
  // is killed: its tasks are failed attempts at once, far within their
  // timeout, and run again on the new one.
  e2.reset();
  BOOST_REQUIRE(test::eventually([&] { return executors_up(1); }, 10s));
  for (int i = 0; i < 2; ++i)
    db.call("submit('REMOTE', 'long" + std::to_string(i) +
            "', payload => '{\"sleep_ms\": 3000}', timeout_ms => 60000, "
            "backoff_kind => 'fixed', backoff_base_ms => 10)");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM taskmill.tasks WHERE key LIKE 'long%' AND "
                   "status = 'running'") == "2";
      },
      30s));
  auto e3 = std::make_unique<executor_process>("e3", node.cluster, "s", "REMOTE", 2);
  BOOST_REQUIRE(test::eventually([&] { return executors_up(2); }, 30s));
  auto killed_at = db.scalar("SELECT clock_timestamp()::text");
  e1->stop(SIGKILL);
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM taskmill.tasks WHERE key LIKE 'long%' AND "
                   "status = 'succeeded'") == "2";
      },
      30s));
  // Attempt 1 of each ended as the executor went away, within seconds of the
  // kill; attempt 2 ran on e3. No attempt ran twice.
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.attempts a JOIN taskmill.tasks t ON t.id = "
                "a.task_id WHERE t.key LIKE 'long%' AND a.attempt = 1 AND a.error = 'the "
                "executor went away' AND a.finished_at < $1::timestamptz + interval '2 seconds'",
                {killed_at}),
      "2");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(attempt || ':' || (result->>'handled_by'), ',') "
                              "FROM taskmill.tasks WHERE key LIKE 'long%'"),
                    "2:e3,2:e3");
  auto log = e3->log();
  for (int i = 0; i < 2; ++i)
    BOOST_CHECK_MESSAGE(
        log.find("REMOTE/long" + std::to_string(i) + " attempt 2: done") != std::string::npos, log);
}

// The node running an attempt freezes, the task is cancelled, the node is
// killed before it could tell anyone: the HTTP executor still gets the
// cancel, from the node left, once the dead one's lease ran out.
BOOST_AUTO_TEST_CASE(a_cancel_reaches_an_http_executor_whose_node_was_killed) {
  test::task_database db{"clustercancel"};
  test::scripted_executor executor;
  std::vector<std::string> web{"types.WEB.executor=http", "types.WEB.url=" + executor.url(),
                               "types.WEB.timeout=60s", "reconciler.interval=500ms"};
  auto a = start_node(db, "a", "s", web);
  db.exec(R"(SELECT taskmill.submit('WEB', 'long', payload => '{"delay_ms": 8000}'))");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT status::text || picked_by FROM taskmill.tasks WHERE key = "
                   "'long'") == "runninga";
      },
      30s));
  kill(a.process->pid(), SIGSTOP);
  BOOST_CHECK_EQUAL(db.call("cancel('WEB', 'long')").outcome, "cancelled");
  a.process->kill_hard();
  BOOST_CHECK(executor.cancels_for("long").empty());
  auto b = start_node(db, "b", "s", web);
  BOOST_CHECK_MESSAGE(test::eventually([&] { return !executor.cancels_for("long").empty(); }, 30s),
                      test::later{[&](std::ostream& out) { out << b.process->log_tail(); }});
  if (!executor.cancels_for("long").empty())
    BOOST_CHECK_EQUAL(executor.cancels_for("long").front().body["attempt"], 1);
  // The request is done once the node has recorded the executor's answer,
  // which comes after the executor has seen it.
  BOOST_CHECK(test::eventually(
      [&] { return db.scalar("SELECT count(*) FROM taskmill.cancel_requests") == "0"; }, 10s));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(partitions)

// Two nodes reach each other only through proxies (each advertises its
// proxy). Tasks are submitted on b for a type only a runs, neither LISTENs
// and a polls every 2 s: linked, a starts them at once; while the partition
// lasts, a's poll finds them all. Nothing is lost, nothing runs twice.
BOOST_AUTO_TEST_CASE(a_partition_between_nodes_loses_no_work_and_runs_none_twice) {
  test::task_database db{"clustercut"};
  test::scripted_executor executor;
  auto a_port = "127.0.0.1:" + std::to_string(free_loopback_port());
  auto b_port = "127.0.0.1:" + std::to_string(free_loopback_port());
  tcp_proxy to_a{a_port}, to_b{b_port};
  std::vector<std::string> quiet{"database.listen=false", "scheduling.poll_interval=2s"};
  auto a_options = quiet;
  for (const std::string& o :
       {std::string{"types.CUT.executor=http"}, std::string{"types.CUT.max_retries=0"},
        "cluster.advertise=" + to_a.address(), "types.CUT.url=" + executor.url()})
    a_options.push_back(o);
  auto b_options = quiet;
  b_options.push_back("cluster.advertise=" + to_b.address());
  auto a = start_node(db, "a", "s", a_options, a_port);
  auto b = start_node(db, "b", "s", b_options, b_port);
  auto linked = [&] { return link_of(a, "b") == "up" && link_of(b, "a") == "up"; };
  BOOST_REQUIRE_MESSAGE(test::eventually(linked, 30s), test::later{[&](std::ostream& out) {
                          out << links_report(db, {&a, &b});
                        }});
  BOOST_REQUIRE_GT(to_a.forwarded() + to_b.forwarded(), 0);
  std::this_thread::sleep_for(2500ms);

  // Three phases of 60 tasks, 25 ms apart: linked, cut, linked again.
  auto submit_phase = [&](const std::string& phase) {
    for (int i = 0; i < 60; ++i) {
      auto res = http_fetch("POST", b.api + "/v1/tasks",
                            R"({"type": "CUT", "key": ")" + phase + std::to_string(i) + R"("})");
      BOOST_REQUIRE(res && res->status == 200);
      std::this_thread::sleep_for(25ms);
    }
  };
  submit_phase("before-");
  to_a.cut();
  to_b.cut();
  BOOST_REQUIRE(test::eventually(
      [&] { return link_of(a, "b") == "down" && link_of(b, "a") == "down"; }, 10s));
  submit_phase("during-");
  // Polling alone gets all of it done while the partition lasts.
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM taskmill.tasks WHERE key LIKE 'during-%' AND "
                   "status = 'succeeded'") == "60";
      },
      10s));
  BOOST_REQUIRE_EQUAL(link_of(a, "b"), "down");
  to_a.restore();
  to_b.restore();
  BOOST_REQUIRE_MESSAGE(test::eventually(linked, 30s), test::later{[&](std::ostream& out) {
                          out << links_report(db, {&a, &b});
                        }});
  std::this_thread::sleep_for(2500ms);
  submit_phase("after-");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'succeeded'") == "180";
      },
      30s));

  // Every task ran once, under attempt 1: no (task, attempt) twice.
  std::set<std::pair<int64_t, int>> runs;
  for (const auto& r : executor.all_requests())
    BOOST_CHECK(runs.emplace(r.body["id"].get<int64_t>(), r.body["attempt"].get<int>()).second);
  BOOST_CHECK_EQUAL(runs.size(), 180u);
  BOOST_CHECK_EQUAL(db.scalar("SELECT max(attempt) FROM taskmill.tasks"), "1");
  auto p50 = [&](const std::string& phase) {
    return std::stod(db.scalar(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - "
        "created_at) * 1000) FROM taskmill.tasks WHERE key LIKE $1",
        {phase + "%"}));
  };
  auto before = p50("before-"), during = p50("during-"), after = p50("after-");
  BOOST_TEST_MESSAGE("submit on b -> start on a, p50: linked " << before << " ms, cut " << during
                                                               << " ms, relinked " << after
                                                               << " ms (poll every 2 s)");
  // Linked, a wake-up starts the task; cut, only the 2 s poll does.
  BOOST_CHECK_LT(before, 300);
  BOOST_CHECK_LT(after, 300);
  BOOST_CHECK_GT(during, 300);
}

// e1 reaches the node through a proxy, e2 directly. e1 holds two long
// tasks when the proxy cuts it off: it finishes them, or stops them once it
// finds its link dropped, but the node has already failed those attempts
// (fenced by attempt) and e2 runs them again.
// When the proxy is back, e1 links again and takes work.
BOOST_AUTO_TEST_CASE(a_cut_off_executors_tasks_fail_at_once_and_run_again_elsewhere) {
  test::task_database db{"clusterexeccut"};
  auto node = start_node(db, "n", "s", {"types.REMOTE.executor=caf"});
  tcp_proxy proxy{node.cluster};
  auto executors_up = [&](int n) { return executors_linked(node) == n; };
  executor_process e1{"e1", proxy.address(), "s", "REMOTE", 2};
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return executors_up(1); }, 30s),
                        test::later{[&](std::ostream& out) { out << e1.log(); }});
  for (int i = 0; i < 2; ++i)
    db.call("submit('REMOTE', 'long" + std::to_string(i) +
            "', payload => '{\"sleep_ms\": 2000}', timeout_ms => 60000, "
            "backoff_kind => 'fixed', backoff_base_ms => 10)");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'running'") == "2";
      },
      30s));
  executor_process e2{"e2", node.cluster, "s", "REMOTE", 2};
  BOOST_REQUIRE(test::eventually([&] { return executors_up(2); }, 30s));
  auto cut_at = db.scalar("SELECT clock_timestamp()::text");
  proxy.cut();
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'succeeded'") == "2";
      },
      30s));
  BOOST_CHECK_EQUAL(
      db.scalar("SELECT count(*) FROM taskmill.attempts WHERE attempt = 1 AND error = 'the "
                "executor went away' AND finished_at < $1::timestamptz + interval '2 seconds'",
                {cut_at}),
      "2");
  BOOST_CHECK_EQUAL(db.scalar("SELECT string_agg(attempt || ':' || (result->>'handled_by'), ',') "
                              "FROM taskmill.tasks"),
                    "2:e2,2:e2");
  // e1 ended its attempts 1 after all (done, or stopped once it found its
  // link dropped), too late: they stay failed.
  BOOST_REQUIRE_MESSAGE(test::eventually(
                            [&] {
                              auto log = e1.log();
                              auto ended = [&](const std::string& task) {
                                return log.find(task + " attempt 1: done") != std::string::npos ||
                                       log.find(task + " attempt 1: cancelled") !=
                                           std::string::npos;
                              };
                              return ended("long0") && ended("long1");
                            },
                            10s),
                        test::later{[&](std::ostream& out) { out << e1.log(); }});
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(*) FROM taskmill.attempts WHERE attempt = 1 AND "
                              "outcome = 'succeeded'"),
                    "0");

  proxy.restore();
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return executors_up(2); }, 30s),
                        test::later{[&](std::ostream& out) { out << e1.log(); }});
  for (int i = 0; i < 8; ++i)
    db.call("submit('REMOTE', 'again" + std::to_string(i) + "', payload => '{\"sleep_ms\": 300}')");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar("SELECT count(*) FROM taskmill.tasks WHERE status = 'succeeded'") == "10";
      },
      30s));
  BOOST_CHECK_EQUAL(db.scalar("SELECT count(DISTINCT result->>'handled_by') FROM taskmill.tasks "
                              "WHERE key LIKE 'again%'"),
                    "2");
  // No (task, attempt) ran twice across both executors.
  std::regex done{R"(REMOTE/(\S+) attempt (\d+): (done|cancelled))"};
  std::set<std::string> runs;
  for (const auto& log : {e1.log(), e2.log()})
    for (auto it = std::sregex_iterator(log.begin(), log.end(), done); it != std::sregex_iterator();
         ++it)
      BOOST_CHECK_MESSAGE(runs.insert((*it)[1].str() + "/" + (*it)[2].str()).second,
                          "ran twice: " << (*it)[0]);
  BOOST_CHECK_EQUAL(runs.size(), 12u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tls)

BOOST_AUTO_TEST_CASE(links_verify_certificates_and_refuse_a_foreign_one) {
  test::task_database db{"clustertls"};
  auto ours = make_certificates("ours");
  auto foreign = make_certificates("foreign");
  auto a = start_node(db, "a", "s", tls_options(ours));
  auto b_options = tls_options(ours);
  b_options.push_back("types.REMOTE.executor=caf");
  auto b = start_node(db, "b", "s", b_options);
  auto c = start_node(db, "c", "s", tls_options(foreign));
  BOOST_REQUIRE_MESSAGE(test::eventually([&] { return link_of(a, "b") == "up"; }, 30s),
                        test::later{[&](std::ostream& out) {
                          out << links_report(db, {&a, &b});
                        }});
  BOOST_REQUIRE(test::eventually([&] { return link_of(b, "a") == "up"; }, 30s));
  // c knows the secret, but its certificate is not signed by our CA.
  BOOST_REQUIRE(test::eventually(
      [&] { return last_error_of(a, "c").find("handshake") != std::string::npos; }, 30s));
  BOOST_CHECK_NE(link_of(a, "c"), "up");
  BOOST_CHECK_NE(link_of(c, "a"), "up");
  // A remote executor with our certificate links over TLS and runs a task.
  executor_process e{
      "tls-exec", b.cluster, "s",
      "REMOTE",   1,         {"--tls-cert", ours.cert, "--tls-key", ours.key, "--tls-ca", ours.ca}};
  db.call("submit('REMOTE', 'over-tls', payload => '{\"sleep_ms\": 400, \"progress\": true}')");
  BOOST_CHECK_MESSAGE(test::eventually(
                          [&] {
                            return db.scalar(
                                       "SELECT status::text FROM taskmill.tasks WHERE key = "
                                       "'over-tls'") == "succeeded";
                          },
                          30s),
                      test::later{[&](std::ostream& out) { out << e.log(); }});
  // It reported how far it got over the link too.
  BOOST_CHECK_EQUAL(db.scalar("SELECT coalesce(max(p.processed || ' ' || p.message), 'none') FROM "
                              "taskmill.task_progress p JOIN taskmill.tasks t ON t.id = p.task_id "
                              "WHERE t.key = 'over-tls'"),
                    "5 half way");
  // And what it logged.
  BOOST_CHECK(test::eventually([&] {
    return db.scalar(
               "SELECT coalesce(string_agg(l.line, '|'), 'none') FROM "
               "taskmill.attempt_logs l JOIN taskmill.tasks t ON t.id = l.task_id "
               "WHERE t.key = 'over-tls'") == "started REMOTE/over-tls attempt 1 on tls-exec";
  }));
  // Cancelled while it runs there, the task's execution is told over TLS.
  db.call("submit('REMOTE', 'long-over-tls', payload => '{\"sleep_ms\": 30000}')");
  BOOST_REQUIRE(test::eventually(
      [&] {
        return db.scalar("SELECT status::text FROM taskmill.tasks WHERE key = 'long-over-tls'") ==
               "running";
      },
      30s));
  db.call("cancel('REMOTE', 'long-over-tls')");
  BOOST_CHECK_MESSAGE(test::eventually(
                          [&] {
                            return e.log().find("REMOTE/long-over-tls attempt 1: cancelled") !=
                                   std::string::npos;
                          },
                          10s),
                      test::later{[&](std::ostream& out) { out << e.log(); }});
  std::filesystem::remove_all(ours.dir);
  std::filesystem::remove_all(foreign.dir);
}

// A TLS node and a plain one, each with a good executor holding two long
// tasks, are hammered on their cluster ports for 22 s: TLS with another
// CA's certificate, plain TCP where TLS is expected and TLS where it is
// not, a wrong secret, random bytes, 100 idle connections, a slow-loris,
// half-closed and reset connections and a flood of connects. No good link
// drops, every long task runs on under attempt 1, and wake-ups between two
// good nodes still take milliseconds.
BOOST_AUTO_TEST_CASE(hostile_callers_disturb_no_other_link) {
  test::task_database db{"clusterhostile"};
  test::task_database plain_db{"clusterhostileplain"};
  auto ours = make_certificates("ours");
  auto foreign = make_certificates("foreign");
  // Leases longer than the test: the flood may starve a node of the
  // processor for a second, and a lease of one would take its long attempts
  // back (the lease's job, not what is tested here).
  const char* long_lease = "heartbeat.missed=150";
  auto a_options = tls_options(ours);
  for (const char* o : {"types.REMOTE.executor=caf", "types.WAKE.executor=noop",
                        "database.listen=false", "scheduling.poll_interval=5s", long_lease})
    a_options.push_back(o);
  auto b_options = tls_options(ours);
  b_options.push_back("database.listen=false");
  b_options.push_back(long_lease);
  auto a = start_node(db, "a", "s", a_options);
  auto b = start_node(db, "b", "s", b_options);
  auto c = start_node(plain_db, "c", "s", {"types.REMOTE.executor=caf", long_lease});
  std::vector<std::string> our_tls{"--tls-cert", ours.cert,  "--tls-key",
                                   ours.key,     "--tls-ca", ours.ca};
  executor_process good_tls{"good-tls", a.cluster, "s", "REMOTE", 4, our_tls};
  executor_process good_plain{"good-plain", c.cluster, "s", "REMOTE", 4};
  BOOST_REQUIRE_MESSAGE(test::eventually(
                            [&] {
                              return link_of(a, "b") == "up" && link_of(b, "a") == "up" &&
                                     executors_linked(a) == 1 && executors_linked(c) == 1;
                            },
                            30s),
                        test::later{[&](std::ostream& out) {
                          out << links_report(db, {&a, &b}) << good_tls.log() << good_plain.log();
                        }});
  for (auto* d : {&db, &plain_db})
    for (int i = 0; i < 2; ++i)
      d->call("submit('REMOTE', 'long" + std::to_string(i) +
              "', payload => '{\"sleep_ms\": 30000}', timeout_ms => 120000)");
  auto long_ones_running = [](test::task_database& d) {
    return d.scalar(
        "SELECT count(*) FROM taskmill.tasks WHERE key LIKE 'long%' AND status = "
        "'running' AND attempt = 1");
  };
  BOOST_REQUIRE(test::eventually(
      [&] { return long_ones_running(db) == "2" && long_ones_running(plain_db) == "2"; }, 30s));

  test::hostile_peers at_tls{a.cluster}, at_plain{c.cluster};
  // A handshake every 50 ms: twice the 100 counted below in the 22 s, with
  // room for a loaded machine's slower handshakes.
  at_tls.tls_handshakes({foreign.cert, foreign.key, foreign.ca}, 50);
  at_plain.tls_handshakes({ours.cert, ours.key, ours.ca}, 50);
  for (auto* h : {&at_tls, &at_plain}) {
    h->random_bytes(64, 50);
    h->oversized_frames(0xf0000000u, 100);
    h->idle(200);
    h->slow_loris(10, 300);
    h->half_open(100);
    h->flood(1000);
  }
  std::vector<std::string> their_tls{"--tls-cert", foreign.cert, "--tls-key",
                                     foreign.key,  "--tls-ca",   foreign.ca};
  executor_process wrong_ca{"wrong-ca", a.cluster, "s", "REMOTE", 8, their_tls};
  executor_process no_tls{"no-tls", a.cluster, "s", "REMOTE", 8};
  executor_process wrong_secret{"wrong-secret", a.cluster, "guess", "REMOTE", 8, our_tls};
  executor_process tls_at_plain{"tls-at-plain", c.cluster, "s", "REMOTE", 8, our_tls};
  executor_process wrong_secret_plain{"wrong-secret-plain", c.cluster, "guess", "REMOTE", 8};

  // Wake-ups from b to a while it lasts: a polls every 5 s and does not
  // LISTEN, so only b's wake-up over the link starts a WAKE task at once.
  int samples = 0, bad_samples = 0;
  std::string first_bad;
  auto until = std::chrono::steady_clock::now() + 22s;
  for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
    auto res = http_fetch("POST", b.api + "/v1/tasks",
                          R"({"type": "WAKE", "key": "wake)" + std::to_string(i) + R"("})");
    BOOST_REQUIRE(res && res->status == 200);
    if (i % 2 == 0) {
      ++samples;
      auto seen = "tls executors " + std::to_string(executors_linked(a)) + ", plain executors " +
                  std::to_string(executors_linked(c)) + ", a->b " + link_of(a, "b") + ", b->a " +
                  link_of(b, "a");
      if (seen != "tls executors 1, plain executors 1, a->b up, b->a up") {
        ++bad_samples;
        if (first_bad.empty()) first_bad = seen;
      }
    }
    std::this_thread::sleep_for(250ms);
  }
  at_tls.stop();
  at_plain.stop();
  BOOST_TEST_MESSAGE("hostile connections: " << at_tls.connections() << " at the TLS node, "
                                             << at_plain.connections() << " at the plain one");
  BOOST_CHECK_GT(at_tls.connections(), 1000);
  BOOST_CHECK_GT(at_plain.connections(), 1000);
  BOOST_CHECK_GT(at_tls.handshakes(), 100);
  BOOST_CHECK_EQUAL(at_tls.handshakes_completed(), 0);

  BOOST_CHECK_MESSAGE(
      bad_samples == 0,
      bad_samples << " of " << samples << " samples saw a good link down, first: " << first_bad);
  BOOST_CHECK_EQUAL(long_ones_running(db), "2");
  BOOST_CHECK_EQUAL(long_ones_running(plain_db), "2");
  for (auto* d : {&db, &plain_db})
    BOOST_CHECK_EQUAL(d->scalar("SELECT count(*) FROM taskmill.attempts a JOIN taskmill.tasks t "
                                "ON t.id = a.task_id WHERE t.type = 'REMOTE'"),
                      "0");
  // Refused callers are counted by reason and logged once a minute for each
  // address and reason, not once per attempt.
  auto metrics_of = [](const node_handle& n) {
    auto metrics = http_fetch("GET", n.api + "/metrics");
    BOOST_REQUIRE(metrics && metrics->status == 200);
    return metrics->body;
  };
  auto counted = [](const std::string& metrics, const std::string& reason) {
    std::smatch m;
    std::regex counter{"taskmill_cluster_refused_total\\{reason=\"" + reason + "\"\\} ([0-9.e+]+)"};
    return std::regex_search(metrics, m, counter) ? std::stod(m[1]) : 0.0;
  };
  auto a_metrics = metrics_of(a), c_metrics = metrics_of(c);
  auto refused = [&](const std::string& reason) { return counted(a_metrics, reason); };
  double total = 0;
  for (const auto* reason : {"wrong_ca", "not_tls", "bad_proof", "tls_mismatch",
                             "closed_in_handshake", "no_certificate", "tls_error"}) {
    BOOST_TEST_MESSAGE("refused at a, " << reason << ": " << refused(reason));
    total += refused(reason);
  }
  BOOST_CHECK_GT(refused("wrong_ca"), 100);
  BOOST_CHECK_GT(refused("not_tls"), 100);
  // The plain node closed each caller whose frame header announced more
  // than it takes, or no operation of BASP, before CAF read it.
  auto oversized = counted(c_metrics, "oversized_frame"), bad = counted(c_metrics, "bad_frame");
  BOOST_TEST_MESSAGE("refused at c, oversized_frame: " << oversized << ", bad_frame: " << bad);
  BOOST_CHECK_GT(oversized, 100);
  BOOST_CHECK_GT(bad, 100);
  {
    std::ifstream in{a.process->log_file()};
    int lines = 0;
    for (std::string line; std::getline(in, line);)
      if (line.find("refused a caller from") != std::string::npos) {
        BOOST_TEST_MESSAGE(line);
        ++lines;
      }
    BOOST_CHECK_GT(lines, 0);
    BOOST_CHECK_LE(lines, 7);
    BOOST_CHECK_GT(total, 20 * lines);
  }
  for (const auto* n : {&a, &b, &c}) {
    std::ifstream in{n->process->log_file()};
    std::string log{std::istreambuf_iterator<char>{in}, {}};
    BOOST_CHECK_MESSAGE(log.find("lost its link") == std::string::npos,
                        n->process->name() << ": " << n->process->log_tail());
  }
  for (const auto* e : {&good_tls, &good_plain})
    BOOST_CHECK_MESSAGE(e->log().find("dropped") == std::string::npos, e->log());
  auto wake_p50 = std::stod(db.scalar(
      "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - "
      "created_at) * 1000) FROM taskmill.tasks WHERE type = 'WAKE'"));
  BOOST_TEST_MESSAGE("wake-up b -> a under attack, p50 " << wake_p50 << " ms");
  BOOST_CHECK_LT(wake_p50, 300);
  std::filesystem::remove_all(ours.dir);
  std::filesystem::remove_all(foreign.dir);
}

BOOST_AUTO_TEST_SUITE_END()
