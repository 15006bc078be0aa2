#include "tools/scenario/runner.hpp"
#include "config/config.hpp"
#include "messages/errors.hpp"
#include "messages/time.hpp"
#include "storage/migrations.hpp"
#include "storage/pg.hpp"
#include "storage/scenario/scenario_sql.hpp"
#include "tools/http_fetch.hpp"
#include "tools/node_process.hpp"
#include "tools/percentile.hpp"
#include "tools/postgres/embedded_postgres.hpp"
#include "tools/tcp_proxy.hpp"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <set>
#include <stdexcept>
#include <thread>

namespace taskmill::scenario {

namespace detail {

std::atomic<bool> interrupted{false};

extern "C" void on_scenario_interrupt(int) {
  interrupted = true;
}

void check_interrupted() {
  if (interrupted) throw step_failure{"interrupted"};
}

void sleep_checked(milliseconds d) {
  auto until = steady::now() + d;
  while (steady::now() < until) {
    check_interrupted();
    std::this_thread::sleep_for(
        std::min<steady::duration>(until - steady::now(), milliseconds{50}));
  }
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

void runner::start_database() {
  if (!options_.database.empty()) {
    conninfo_ = options_.database;
    return;
  }
  // Durable settings (fsync, synchronous commit): a crash step must lose
  // only what PostgreSQL never acknowledged, as in production.
  db::embedded_postgres_options o;
  o.dir = logs_ + "/postgres";
  auto started = db::embedded_postgres::start(o);
  if (!started) throw step_failure{"cannot start PostgreSQL: " + error_message(started.error())};
  pg_.emplace(std::move(*started));
  conninfo_ = pg_->conninfo();
  say("  its own PostgreSQL: port " + std::to_string(pg_->port()) + ", cluster in " + pg_->dir());
}

void runner::set_up() {
  logs_ = (fs::temp_directory_path() / "taskmill-scenario-XXXXXX").string();
  if (!mkdtemp(logs_.data())) throw step_failure{"cannot create a directory for the logs"};
  say("scenario " + sc_.name + " (" + sc_.file + "), logs in " + logs_);
  start_database();
  auto applied = db::apply_migrations(conn(), db::all_migrations());
  if (!applied) throw step_failure{"cannot set the schema up: " + error_message(applied.error())};
  for (const auto& e : sc_.executors) {
    std::string error;
    auto started = recording_executor::start(e, conninfo_, error);
    if (!started) throw step_failure{error};
    executors_.emplace(e.name, std::move(started));
  }
  bool cuts = std::any_of(sc_.steps.begin(), sc_.steps.end(),
                          [](const step& s) { return s.kind == "cut"; });
  std::smatch port;
  if (cuts && !std::regex_search(conninfo_, port, std::regex{"port=(\\d+)"}))
    throw step_failure{"a cut step needs PostgreSQL on a TCP port of this host"};
  for (const auto& spec : sc_.nodes) {
    node_run n;
    n.spec = spec;
    n.api_port = free_loopback_port();
    n.cluster_port = free_loopback_port();
    if (cuts) {
      n.database_link = std::make_unique<tcp_proxy>("127.0.0.1:" + port[1].str());
      n.cluster_link = std::make_unique<tcp_proxy>("127.0.0.1:" + std::to_string(n.cluster_port));
    }
    nodes_.emplace(spec.name, std::move(n));
  }
}

void runner::tear_down() {
  for (auto& [name, n] : nodes_)
    if (n.process) {
      thaw_node(n);
      n.process->stop(SIGTERM, std::chrono::seconds{20});
      retire(n);
    }
  // What each executor was sent, next to the nodes' logs.
  for (const auto& [name, e] : executors_) {
    std::ofstream out{logs_ + "/" + name + ".deliveries.csv"};
    out << "arrived,task_id,type,key,attempt,behaviour\n";
    for (const auto& d : e->deliveries())
      out << format_rfc3339(d.arrived_us) << ',' << d.task_id << ',' << d.type << ',' << d.key
          << ',' << d.attempt << ',' << d.behaviour << '\n';
  }
  executors_.clear();
  conn_.reset();
  if (pg_) {
    pg_->stop();
    // The server may live elsewhere (a directory its user can reach).
    // Its log stays with the others; its data goes.
    std::error_code ignored;
    fs::copy_file(fs::path{pg_->dir()} / "postgres.log", fs::path{logs_} / "postgres.log",
                  fs::copy_options::overwrite_existing, ignored);
    fs::remove_all(pg_->dir(), ignored);
    pg_.reset();
  }
}

db::connection& runner::conn() {
  if (!conn_) {
    auto c = db::connection::open(conninfo_, std::chrono::seconds{60}, std::chrono::seconds{10});
    if (!c) throw step_failure{"cannot connect to PostgreSQL: " + error_message(c.error())};
    conn_.emplace(std::move(*c));
  }
  return *conn_;
}

db::result runner::query(const char* statement, const std::vector<db::param>& params) {
  // One retry on a fresh connection: PostgreSQL may have been restarted.
  for (int tries = 0;; ++tries) {
    auto res = conn().exec(statement, params);
    if (res) return std::move(*res);
    conn_.reset();
    if (tries == 1) throw step_failure{"SQL failed: " + error_message(res.error())};
  }
}

std::string runner::scalar(const std::string& statement) {
  auto res = query(statement.c_str());
  if (res.rows() == 0 || res.is_null(0, 0)) return "NULL";
  return res.string(0, 0);
}

std::string runner::expand(const std::string& text, int64_t i) const {
  auto out = replace_all(text, "{i}", std::to_string(i));
  for (const auto& [name, e] : executors_)
    out = replace_all(out, "{executor." + name + "}", e->url());
  for (const auto& [name, n] : nodes_) out = replace_all(out, "{node." + name + "}", n.api());
  return out;
}

std::string runner::api_of(const std::string& node) const {
  if (!node.empty()) return nodes_.at(node).api();
  for (const auto& [name, n] : nodes_)
    if (n.process) return n.api();
  throw step_failure{"no node is running to take the request"};
}

void runner::retire(node_run& n) {
  if (!n.process) return;
  std::ifstream in{n.process->log_file()};
  std::ofstream out{logs_ + "/" + n.spec.name + ".log", std::ios::app};
  out << in.rdbuf() << "---- pid " << n.process->pid() << " ended\n";
  n.process.reset();
}

void runner::point_executors_at_a_node() {
  for (const auto& [name, n] : nodes_)
    if (n.process) {
      for (auto& [_, e] : executors_) e->set_result_api(n.api());
      return;
    }
}

void runner::start_node(node_run& n, const std::vector<std::string>& set) {
  retire(n);
  if (!set.empty()) n.extra = set;
  std::vector<std::string> options{"api.listen=127.0.0.1:" + std::to_string(n.api_port),
                                   "cluster.listen=127.0.0.1:" + std::to_string(n.cluster_port),
                                   "node.log_level=info"};
  if (n.cluster_link) options.push_back("cluster.advertise=" + n.cluster_link->address());
  for (const auto& o : n.spec.set) options.push_back(expand(o, 0));
  for (const auto& o : n.extra) options.push_back(expand(o, 0));
  auto conninfo = conninfo_;
  if (n.database_link) {
    const auto& link = n.database_link->address();
    conninfo = std::regex_replace(conninfo, std::regex{"port=\\d+"},
                                  "port=" + link.substr(link.rfind(':') + 1));
  }
  n.process = std::make_unique<node_process>(options_.binary, n.spec.name, conninfo, options);
  if (n.cut_off_peers) silence_dialled_links(n);
  auto deadline = steady::now() + std::chrono::seconds{60};
  // Cut off, it cannot be ready before it is healed.
  while (!n.cut) {
    check_interrupted();
    auto ready = http_fetch("GET", n.api() + "/readyz", {}, {}, std::chrono::seconds{2});
    if (ready && ready->status == 200) break;
    if (steady::now() > deadline)
      throw step_failure{"node " + n.spec.name + " was not ready within 60 s:\n" +
                         n.process->log_tail()};
    sleep_checked(milliseconds{50});
  }
  point_executors_at_a_node();
}

void runner::kill_node(node_run& n) {
  if (!n.process) throw step_failure{"node " + n.spec.name + " is not running"};
  n.process->kill_hard();
  n.frozen = false;
  kills_.push_back({n.spec.name, format_rfc3339(wall_clock_micros())});
  retire(n);
  point_executors_at_a_node();
}

void runner::thaw_node(node_run& n) {
  if (!n.frozen) return;
  if (n.process) kill(n.process->pid(), SIGCONT);
  n.frozen = false;
}

void runner::cut_node(node_run& n, bool from_postgres, bool from_peers) {
  if (from_postgres) {
    n.cut = true;
    n.database_link->go_silent();
  }
  if (from_peers) {
    n.cut_off_peers = true;
    n.cluster_link->go_silent();
    silence_dialled_links(n);
  }
}

void runner::silence_dialled_links(node_run& n) {
  if (!n.process) return;
  n.silenced.push_back(n.process->pid());
  for (auto& [name, other] : nodes_)
    if (&other != &n) other.cluster_link->go_silent_for(n.process->pid());
}

void runner::heal_node(node_run& n) {
  n.cut = n.cut_off_peers = false;
  n.database_link->restore();
  n.cluster_link->restore();
  for (auto pid : n.silenced)
    for (auto& [name, other] : nodes_)
      if (&other != &n) other.cluster_link->restore_for(pid);
  n.silenced.clear();
}

/// The nodes a cut, heal, freeze or thaw acts on: those named ({leader}:
/// the one that leads now), or for heal and thaw without any, every node
/// cut or frozen.
std::vector<node_run*> runner::targets(const step& s) {
  std::vector<node_run*> out;
  for (const auto& name : s.nodes) {
    if (name != leader_node) {
      out.push_back(&nodes_.at(name));
      continue;
    }
    auto leader =
        scalar("SELECT CASE WHEN expires_at > now() THEN node END FROM taskmill.leadership");
    if (!nodes_.count(leader)) throw step_failure{"no node of this scenario leads now"};
    out.push_back(&nodes_.at(leader));
  }
  if (s.nodes.empty())
    for (auto& [name, n] : nodes_)
      if (s.kind == "heal" ? n.cut || n.cut_off_peers : n.frozen) out.push_back(&n);
  return out;
}

void runner::set_apart(const step& s, step_report& r) {
  std::string names;
  for (auto* n : targets(s)) {
    if (s.kind == "cut") {
      cut_node(*n, s.cut_postgres, s.cut_peers);
    } else if (s.kind == "heal") {
      heal_node(*n);
    } else if (s.kind == "thaw") {
      thaw_node(*n);
    } else {
      if (!n->process) throw step_failure{"node " + n->spec.name + " is not running"};
      if (kill(n->process->pid(), SIGSTOP) != 0)
        throw step_failure{"cannot stop node " + n->spec.name + ": " + std::strerror(errno)};
      n->frozen = true;
    }
    names += (names.empty() ? "" : ", ") + n->spec.name;
  }
  auto cut_from = std::string{s.cut_postgres ? "PostgreSQL" : ""} +
                  (s.cut_postgres && s.cut_peers ? " and " : "") +
                  (s.cut_peers ? "the other nodes" : "");
  const std::map<std::string, std::string> done{
      {"cut", "connections to " + cut_from + " pass nothing and stay open"},
      {"heal", "connected again"},
      {"freeze", "SIGSTOP"},
      {"thaw", "SIGCONT"}};
  r.message = names.empty() ? "none was " + std::string{s.kind == "heal" ? "cut" : "frozen"}
                            : names + ": " + done.at(s.kind);
}

std::string runner::task_json(const task_template& t, int64_t i) const {
  json task{{"type", expand(t.type, i)}, {"key", expand(t.key, i)}};
  if (t.payload) {
    auto payload = json::parse(expand(*t.payload, i), nullptr, false);
    if (payload.is_discarded()) throw step_failure{"task.payload is not JSON: " + *t.payload};
    task["payload"] = payload;
  }
  if (t.execute_at) {
    auto at = expand(*t.execute_at, i);
    if (!at.empty() && at[0] == '+') {
      auto d = parse_duration(at.substr(1));
      if (!d) throw step_failure{"task.execute_at: bad duration '" + at + "'"};
      at = format_rfc3339(wall_clock_micros() + d->count() * 1000);
    }
    task["execute_at"] = at;
  }
  for (const auto& [key, value] : t.json_fields) task[key] = json::parse(value);
  return task.dump();
}

/// A call as a business service makes it: a 503 (PostgreSQL unreachable,
/// nothing stored) is sent again with backoff for up to 20 s; `resent`
/// counts those.
caf::expected<fetched> call_until_stored(http_session& session, const std::string& method,
                                         const std::string& path, const std::string& body,
                                         int& resent) {
  auto deadline = steady::now() + std::chrono::seconds{20};
  auto pause = std::chrono::milliseconds{100};
  while (true) {
    auto res = session.call(method, path, body);
    if (!res || res->status != 503 || steady::now() + pause > deadline) return res;
    ++resent;
    check_interrupted();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds{1000});
  }
}

/// ", N answered 503 and were sent again", when any were.
std::string resent_note(int resent) {
  return resent == 0 ? "" : ", " + std::to_string(resent) + " answered 503 and were sent again";
}

void runner::submit(const step& s, step_report& r) {
  auto api = api_of(s.node);
  http_session session{api};
  int64_t created = 0;
  int resent = 0;
  for (int64_t first = 0; first < s.count; first += s.batch) {
    check_interrupted();
    auto last = std::min(s.count, first + s.batch);
    std::string body;
    if (s.batch == 1) {
      body = task_json(s.task, first);
    } else {
      body = R"({"tasks":[)";
      for (auto i = first; i < last; ++i) body += (i > first ? "," : "") + task_json(s.task, i);
      body += "]}";
    }
    auto res = call_until_stored(session, "POST", "/v1/tasks", body, resent);
    if (!res) throw step_failure{"submit: " + error_message(res.error())};
    if (res->status != 200)
      throw step_failure{"submit answered " + std::to_string(res->status) + ": " +
                         res->body.substr(0, 300)};
    created += last - first;
  }
  r.message = std::to_string(created) + " submitted" + resent_note(resent);
}

void runner::change(const step& s, step_report& r, const char* path) {
  auto api = api_of(s.node);
  http_session session{api};
  std::map<std::string, int> outcomes;
  int resent = 0;
  for (int64_t i = 0; i < s.count; ++i) {
    check_interrupted();
    auto body = json::parse(task_json(s.task, i));
    body.erase("payload");
    auto res = call_until_stored(session, "POST", path, body.dump(), resent);
    if (!res) throw step_failure{std::string{path} + ": " + error_message(res.error())};
    if (res->status != 200)
      throw step_failure{std::string{path} + " answered " + std::to_string(res->status) + ": " +
                         res->body.substr(0, 300)};
    auto answer = json::parse(res->body, nullptr, false);
    ++outcomes[answer.is_object() ? answer.value("outcome", std::string{"?"}) : "?"];
  }
  for (const auto& [outcome, n] : outcomes)
    r.message += (r.message.empty() ? "" : ", ") + std::to_string(n) + " " + outcome;
  r.message += resent_note(resent);
}

void runner::call_api(const step& s, step_report& r) {
  auto res = http_fetch(s.method, api_of(s.node) + expand(s.path, 0), expand(s.body, 0));
  if (!res) throw step_failure{"api: " + error_message(res.error())};
  r.message = "answered " + std::to_string(res->status);
  bool expected =
      s.expect_status ? res->status == *s.expect_status : res->status >= 200 && res->status < 300;
  if (!expected)
    throw step_failure{s.method + " " + s.path + " answered " + std::to_string(res->status) +
                       ", expected " +
                       (s.expect_status ? std::to_string(*s.expect_status) : "2xx") + ": " +
                       res->body.substr(0, 300)};
}

void runner::run_sql(const step& s, step_report& r) {
  for (int64_t i = 0; i < s.repeat; ++i) {
    check_interrupted();
    auto text = expand(s.sql, i);
    // As a business service runs it: one transaction per repetition.
    auto& c = conn();
    auto done = c.exec("BEGIN");
    if (done) done = c.exec(text);
    if (done) done = c.exec("COMMIT");
    if (!done) {
      c.exec("ROLLBACK");
      throw step_failure{"sql (repetition " + std::to_string(i) +
                         "): " + error_message(done.error())};
    }
  }
  r.message = std::to_string(s.repeat) + " transaction" + (s.repeat > 1 ? "s" : "");
}

void runner::postgres(const step& s, step_report& r) {
  if (!pg_)
    throw step_failure{"a postgres step needs the scenario's own PostgreSQL (no --database)"};
  conn_.reset();
  caf::error err;
  if (s.action == "stop") err = pg_->stop();
  if (s.action == "crash") err = pg_->crash();
  if (s.action == "start") err = pg_->restart();
  if (s.action == "restart") {
    err = pg_->crash();
    if (!err) err = pg_->restart();
  }
  if (err) throw step_failure{"postgres " + s.action + ": " + error_message(err)};
  r.message = "done";
}

void runner::chaos(const step& s, step_report& r) {
  auto until = steady::now() + s.duration;
  int killed = 0;
  while (steady::now() + s.every < until) {
    sleep_checked(s.every);
    std::vector<node_run*> running;
    for (const auto& name : s.nodes)
      if (nodes_.at(name).process) running.push_back(&nodes_.at(name));
    if (running.empty()) continue;
    auto& victim = *running[std::uniform_int_distribution<size_t>{0, running.size() - 1}(random_)];
    kill_node(victim);
    ++killed;
    say("    killed " + victim.spec.name + " (kill -9) at " + seconds_text(elapsed()));
    sleep_checked(s.down_for);
    start_node(victim, {});
  }
  r.message = std::to_string(killed) + (killed == 1 ? " node" : " nodes") + " killed and restarted";
}

void runner::run_step(const step& s, step_report& r) {
  const auto& k = s.kind;
  if (k == "start" || k == "restart") {
    for (const auto& name : s.nodes) {
      auto& n = nodes_.at(name);
      if (k == "restart" && n.process) {
        thaw_node(n);
        if (s.hard)
          kill_node(n);
        else
          n.process->stop(SIGTERM, std::chrono::seconds{30});
      }
      start_node(n, s.set);
    }
    r.message = "running";
  } else if (k == "stop") {
    for (const auto& name : s.nodes) {
      auto& n = nodes_.at(name);
      if (!n.process) throw step_failure{"node " + name + " is not running"};
      thaw_node(n);
      auto code = n.process->stop(SIGTERM, std::chrono::seconds{30});
      retire(n);
      if (code != 0) throw step_failure{"node " + name + " exited with " + std::to_string(code)};
    }
    point_executors_at_a_node();
    r.message = "stopped";
  } else if (k == "kill") {
    for (const auto& name : s.nodes) kill_node(nodes_.at(name));
    r.message = "killed";
  } else if (k == "cut" || k == "heal" || k == "freeze" || k == "thaw") {
    set_apart(s, r);
  } else if (k == "postgres") {
    postgres(s, r);
  } else if (k == "sql") {
    run_sql(s, r);
  } else if (k == "submit") {
    submit(s, r);
  } else if (k == "reschedule") {
    change(s, r, "/v1/tasks/reschedule");
  } else if (k == "cancel") {
    change(s, r, "/v1/tasks/cancel");
  } else if (k == "api") {
    call_api(s, r);
  } else if (k == "sleep") {
    sleep_checked(s.duration);
  } else if (k == "chaos") {
    chaos(s, r);
  } else if (k == "wait") {
    wait(s, r);
  } else if (k == "assert") {
    check(s, r);
  }
}

std::string describe(const step& s) {
  auto nodes = [&] {
    std::string out;
    for (const auto& n : s.nodes) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  const auto& k = s.kind;
  if (k == "start" || k == "stop" || k == "kill" || k == "cut" || k == "freeze")
    return k + " " + nodes();
  if (k == "heal" || k == "thaw")
    return k + " " +
           (s.nodes.empty() ? std::string{k == "heal" ? "every node cut" : "every node frozen"}
                            : nodes());
  if (k == "restart") return std::string{s.hard ? "kill -9 and restart " : "restart "} + nodes();
  if (k == "postgres") return "postgres " + s.action;
  if (k == "sql") return "sql" + (s.repeat > 1 ? " x" + std::to_string(s.repeat) : "");
  if (k == "submit" || k == "reschedule" || k == "cancel")
    return k + " " + std::to_string(s.count) + " " + s.task.type + " " + s.task.key +
           (s.kind == "submit" && s.batch > 1 ? " in batches of " + std::to_string(s.batch) : "");
  if (k == "api") return s.method + " " + s.path;
  if (k == "sleep")
    return "sleep " + seconds_text(std::chrono::duration<double>(s.duration).count());
  if (k == "chaos")
    return "chaos on " + nodes() + " for " +
           seconds_text(std::chrono::duration<double>(s.duration).count());
  return k;
}

bool runner::run() {
  try {
    set_up();
  } catch (const std::exception& e) {
    failure_ = e.what();
    say("  setup FAILED: " + failure_);
    // What set-up started before it failed is stopped, and its logs kept.
    tear_down();
    say("  logs of every process: " + logs_);
    return false;
  }
  int index = 0;
  for (const auto& s : sc_.steps) {
    step_report r;
    r.index = ++index;
    r.line = s.line;
    r.kind = s.kind;
    r.what = describe(s);
    r.started_s = elapsed();
    say("[" + seconds_text(r.started_s) + "] step " + std::to_string(r.index) + " (line " +
        std::to_string(s.line) + "): " + r.what);
    try {
      run_step(s, r);
    } catch (const step_failure& e) {
      r.ok = false;
      r.message = e.what();
    } catch (const std::exception& e) {
      r.ok = false;
      r.message = std::string{"unexpected: "} + e.what();
    }
    r.took_s = elapsed() - r.started_s;
    if (s.kind != "assert")
      say(std::string{"    "} + (r.ok ? "ok" : "FAILED") +
          (r.message.empty() ? "" : ": " + r.message) + " (" + seconds_text(r.took_s) + ")");
    steps_.push_back(r);
    if (!r.ok) {
      failure_ = "step " + std::to_string(r.index) + " (line " + std::to_string(s.line) + ", " +
                 r.what + "): " + r.message;
      break;
    }
  }
  for (const auto& [name, e] : executors_) {
    if (auto cancels = e->cancels(); cancels > 0)
      say("    note: executor " + name + " was told of " + std::to_string(cancels) +
          " cancels of running attempts");
    auto errors = e->work_errors();
    if (errors.empty()) continue;
    say("    note: executor " + name + ": work_sql failed " + std::to_string(errors.size()) +
        " times (answered 503), first: " + errors.front());
  }
  bool passed = failure_.empty() && std::all_of(assertions_.begin(), assertions_.end(),
                                                [](const assertion& a) { return a.held; });
  tear_down();
  say("");
  say("scenario " + sc_.name + ": " + (passed ? "PASSED" : "FAILED") + " in " +
      seconds_text(elapsed()) + ", " + std::to_string(assertions_.size()) + " assertions, " +
      std::to_string(std::count_if(assertions_.begin(), assertions_.end(),
                                   [](const assertion& a) { return !a.held; })) +
      " failed");
  if (!failure_.empty()) say("  " + failure_);
  for (const auto& a : assertions_)
    if (!a.held)
      say("  line " + std::to_string(a.line) + ": " + a.what + ": expected " + a.expected +
          ", found " + a.found);
  if (passed && !options_.keep_logs) {
    std::error_code ignored;
    fs::remove_all(logs_, ignored);
  } else {
    say("  logs of every process: " + logs_);
  }
  return passed;
}

json runner::report_json() const {
  json steps = json::array(), assertions = json::array();
  for (const auto& s : steps_)
    steps.push_back({{"step", s.index},
                     {"line", s.line},
                     {"kind", s.kind},
                     {"what", s.what},
                     {"started_s", s.started_s},
                     {"took_s", s.took_s},
                     {"ok", s.ok},
                     {"message", s.message}});
  for (const auto& a : assertions_)
    assertions.push_back({{"line", a.line},
                          {"what", a.what},
                          {"expected", a.expected},
                          {"found", a.found},
                          {"held", a.held}});
  bool passed = failure_.empty() && std::all_of(assertions_.begin(), assertions_.end(),
                                                [](const assertion& a) { return a.held; });
  return {{"scenario", sc_.name},
          {"file", sc_.file},
          {"passed", passed},
          {"failure", failure_.empty() ? json() : json(failure_)},
          {"steps", steps},
          {"assertions", assertions},
          {"logs", passed && !options_.keep_logs ? json() : json(logs_)}};
}

}  // namespace detail

using namespace detail;

int run_scenarios(const run_options& options) {
  std::vector<scenario> scenarios;
  for (const auto& file : options.files) {
    auto sc = parse_scenario_file(file);
    if (!sc) {
      std::cerr << "taskmill scenario: " << error_message(sc.error()) << "\n";
      return 2;
    }
    scenarios.push_back(std::move(*sc));
  }
  std::signal(SIGINT, on_scenario_interrupt);
  std::signal(SIGTERM, on_scenario_interrupt);
  bool all_passed = true;
  json reports = json::array();
  for (const auto& sc : scenarios) {
    runner r{sc, options};
    all_passed = r.run() && all_passed;
    reports.push_back(r.report_json());
    if (interrupted) break;
  }
  if (options.json) std::cout << reports.dump(2) << std::endl;
  if (interrupted) return 130;
  return all_passed ? 0 : 1;
}

}  // namespace taskmill::scenario
