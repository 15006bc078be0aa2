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
#include "tools/scenario/scenario.hpp"
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

namespace {

namespace fs = std::filesystem;
namespace sql = db::scenario_sql;
using nlohmann::json;
using steady = std::chrono::steady_clock;

std::atomic<bool> interrupted{false};

extern "C" void on_scenario_interrupt(int) {
  interrupted = true;
}

/// A step that could not be done; ends the scenario.
struct step_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

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

struct assertion {
  int line = 0;
  std::string what;
  std::string expected;
  std::string found;
  bool held = false;
};

struct step_report {
  int index = 0;
  int line = 0;
  std::string kind;
  std::string what;
  double started_s = 0;
  double took_s = 0;
  bool ok = true;
  std::string message;
};

/// One node of the scenario: its ports stay the same across restarts.
struct node_run {
  node_spec spec;
  uint16_t api_port = 0;
  uint16_t cluster_port = 0;
  std::vector<std::string> extra;
  std::unique_ptr<node_process> process;
  /// Where its connections to PostgreSQL pass, and where the other nodes
  /// reach it (its advertised cluster address), in a scenario that cuts
  /// nodes off: a cut makes them silent, across restarts, until healed.
  std::unique_ptr<tcp_proxy> database_link;
  std::unique_ptr<tcp_proxy> cluster_link;
  /// Cut from PostgreSQL; cut from the other nodes.
  bool cut = false;
  bool cut_off_peers = false;
  /// Its processes whose links to the other nodes' ports are silenced.
  std::vector<pid_t> silenced;
  bool frozen = false;
  std::string api() const { return "http://127.0.0.1:" + std::to_string(api_port); }
};

struct kill_record {
  std::string node;
  std::string at;  // RFC 3339
};

class runner {
 public:
  runner(const scenario& sc, const run_options& options) : sc_(sc), options_(options) {}

  ~runner() { tear_down(); }

  /// Answers whether every assertion held.
  bool run();
  json report_json() const;

 private:
  void say(const std::string& line) const {
    auto& out = options_.json ? std::cerr : std::cout;
    out << line << std::endl;
  }
  double elapsed() const { return std::chrono::duration<double>(steady::now() - started_).count(); }

  void set_up();
  void tear_down();
  void start_database();
  db::connection& conn();
  db::result query(const char* statement, const std::vector<db::param>& params = {});
  std::string scalar(const std::string& statement);

  std::string expand(const std::string& text, int64_t i) const;
  std::string api_of(const std::string& node) const;
  void retire(node_run& n);
  void start_node(node_run& n, const std::vector<std::string>& set);
  void kill_node(node_run& n);
  void thaw_node(node_run& n);
  void cut_node(node_run& n, bool from_postgres, bool from_peers);
  void heal_node(node_run& n);
  /// Silences the links n's process dials to the other nodes.
  void silence_dialled_links(node_run& n);
  std::vector<node_run*> targets(const step& s);
  /// cut, heal, freeze or thaw.
  void set_apart(const step& s, step_report& r);
  void point_executors_at_a_node();

  void run_step(const step& s, step_report& r);
  void submit(const step& s, step_report& r);
  void change(const step& s, step_report& r, const char* path);
  void call_api(const step& s, step_report& r);
  void run_sql(const step& s, step_report& r);
  void postgres(const step& s, step_report& r);
  void chaos(const step& s, step_report& r);
  void wait(const step& s, step_report& r);
  void check(const step& s, step_report& r);

  /// Whether a wait condition holds now, and what was found.
  std::pair<bool, std::string> condition(const step& s);
  std::pair<bool, std::string> count_condition(const count_check& c);
  void add(const step& s, std::string what, std::string expected, std::string found, bool held);
  std::vector<delivery> all_deliveries() const;
  std::string task_json(const task_template& t, int64_t i) const;

  const scenario& sc_;
  const run_options& options_;
  steady::time_point started_ = steady::now();
  std::string logs_;
  std::optional<db::embedded_postgres> pg_;
  std::string conninfo_;
  std::optional<db::connection> conn_;
  std::map<std::string, std::unique_ptr<recording_executor>> executors_;
  std::map<std::string, node_run> nodes_;
  std::vector<kill_record> kills_;
  std::vector<step_report> steps_;
  std::vector<assertion> assertions_;
  std::string failure_;
  std::mt19937_64 random_{20261123};
};

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

std::pair<bool, std::string> runner::count_condition(const count_check& c) {
  auto res = query(sql::count_tasks, {c.status, c.type});
  auto n = res.int64(0, 0);
  bool held = (!c.equals || n == *c.equals) && (!c.at_least || n >= *c.at_least) &&
              (!c.at_most || n <= *c.at_most);
  return {held, std::to_string(n)};
}

std::vector<delivery> runner::all_deliveries() const {
  std::vector<delivery> out;
  for (const auto& [name, e] : executors_) {
    auto d = e->deliveries();
    out.insert(out.end(), d.begin(), d.end());
  }
  return out;
}

/// "= 5, >= 1, <= 9": whichever of the three are set.
std::string bounds_text(std::optional<double> equals, std::optional<double> least,
                        std::optional<double> most) {
  std::string out;
  auto add = [&](const char* op, std::optional<double> v) {
    if (!v) return;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s %.15g", out.empty() ? "" : ", ", op, *v);
    out += buf;
  };
  add("=", equals);
  add(">=", least);
  add("<=", most);
  return out;
}

/// What a sql check expects: equals, or numeric bounds.
std::string sql_expectation(const step& s) {
  if (!s.at_least && !s.at_most) return s.equals;
  return bounds_text(std::nullopt, s.at_least, s.at_most);
}

bool sql_holds(const step& s, const std::string& found) {
  if (!s.at_least && !s.at_most) return found == s.equals;
  char* end = nullptr;
  double v = std::strtod(found.c_str(), &end);
  if (found.empty() || *end != '\0') return false;
  return (!s.at_least || v >= *s.at_least) && (!s.at_most || v <= *s.at_most);
}

/// A statement as one short line, for the report.
std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\t') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  return out.size() > 120 ? out.substr(0, 117) + "..." : out;
}

std::pair<bool, std::string> runner::condition(const step& s) {
  if (s.tasks) return count_condition(*s.tasks);
  if (!s.sql.empty()) {
    auto found = scalar(expand(s.sql, 0));
    return {sql_holds(s, found), found};
  }
  auto n = static_cast<int64_t>(all_deliveries().size());
  return {n >= *s.deliveries, std::to_string(n)};
}

std::string count_expectation(const count_check& c) {
  auto number = [](std::optional<int64_t> v) {
    return v ? std::optional<double>{static_cast<double>(*v)} : std::nullopt;
  };
  return bounds_text(number(c.equals), number(c.at_least), number(c.at_most));
}

std::string count_subject(const count_check& c) {
  return "tasks" + (c.type ? " of " + *c.type : std::string{}) +
         (c.status ? " " + *c.status : std::string{});
}

void runner::wait(const step& s, step_report& r) {
  auto what = s.tasks          ? count_subject(*s.tasks) + " " + count_expectation(*s.tasks)
              : !s.sql.empty() ? "sql " + sql_expectation(s)
                               : "deliveries >= " + std::to_string(*s.deliveries);
  auto deadline = steady::now() + s.timeout;
  auto next_progress = steady::now() + std::chrono::seconds{2};
  while (true) {
    check_interrupted();
    std::pair<bool, std::string> now{false, "(no answer)"};
    try {
      now = condition(s);
    } catch (const step_failure& e) {
      now.second = e.what();  // PostgreSQL may be down for a while
    }
    if (now.first) {
      r.message = what + ": " + now.second;
      return;
    }
    if (steady::now() > deadline)
      throw step_failure{"waited " +
                         seconds_text(std::chrono::duration<double>(s.timeout).count()) + " for " +
                         what + "; found " + now.second};
    if (steady::now() > next_progress) {
      say("    waiting for " + what + ": " + now.second + " at " + seconds_text(elapsed()));
      next_progress = steady::now() + std::chrono::seconds{2};
    }
    sleep_checked(milliseconds{100});
  }
}

void runner::add(const step& s, std::string what, std::string expected, std::string found,
                 bool held) {
  say(std::string{"    "} + (held ? "held: " : "FAILED: ") + what + ": expected " + expected +
      ", found " + found);
  assertions_.push_back({s.line, std::move(what), std::move(expected), std::move(found), held});
}

void runner::check(const step& s, step_report& r) {
  if (s.tasks) {
    auto [held, found] = count_condition(*s.tasks);
    add(s, count_subject(*s.tasks), count_expectation(*s.tasks), found, held);
  }
  if (!s.sql.empty()) {
    auto found = scalar(expand(s.sql, 0));
    add(s, "sql: " + one_line(s.sql), sql_expectation(s), found, sql_holds(s, found));
  }
  if (s.no_duplicate_deliveries) {
    std::map<std::pair<int64_t, int>, int64_t> first_seen;
    std::string examples;
    int twice = 0;
    for (const auto& d : all_deliveries()) {
      auto [at, fresh] = first_seen.emplace(std::pair{d.task_id, d.attempt}, d.arrived_us);
      if (fresh) continue;
      if (++twice <= 3)
        examples += " " + d.type + "/" + d.key + "#" + std::to_string(d.attempt) + " at " +
                    format_rfc3339(at->second) + " and " + format_rfc3339(d.arrived_us);
    }
    add(s, "no (task, attempt) delivered twice", "0",
        std::to_string(twice) + (examples.empty() ? "" : " (" + examples + " )"), twice == 0);
  }
  if (s.every_task_ran) {
    std::set<int64_t> delivered;
    for (const auto& d : all_deliveries()) delivered.insert(d.task_id);
    auto tasks = query(sql::list_tasks, {s.every_task_ran_type});
    int missing = 0;
    std::string examples;
    for (int i = 0; i < tasks.rows(); ++i)
      if (tasks.string(i, 2) != "cancelled" && !delivered.count(tasks.int64(i, 0))) {
        if (++missing <= 3) examples += " " + tasks.string(i, 1);
      }
    add(s,
        "every task" + (s.every_task_ran_type ? " of " + *s.every_task_ran_type : "") +
            " ran at least once",
        "0 never delivered",
        std::to_string(missing) + " never delivered" +
            (examples.empty() ? "" : " (" + examples + " )"),
        missing == 0);
  }
  if (s.latency) {
    // Each task's latest attempt was due at its execute_at.
    std::map<std::pair<int64_t, int>, int64_t> due;
    auto res = query(sql::due_times);
    for (int i = 0; i < res.rows(); ++i) due[{res.int64(i, 0), res.int32(i, 1)}] = res.int64(i, 2);
    std::vector<double> ms;
    for (const auto& d : executors_.at(s.latency->executor)->deliveries())
      if (auto at = due.find({d.task_id, d.attempt}); at != due.end())
        ms.push_back(std::max<double>(0, static_cast<double>(d.arrived_us - at->second) / 1000.0));
    std::sort(ms.begin(), ms.end());
    auto p = percentile(ms, s.latency->percentile / 100);
    char found[64], expected[64];
    std::snprintf(found, sizeof found, "%.1f ms over %zu deliveries", p, ms.size());
    std::snprintf(expected, sizeof expected, "<= %.1f ms", s.latency->at_most_ms);
    add(s,
        "latency p" + std::to_string(static_cast<int>(s.latency->percentile)) + " due -> " +
            s.latency->executor,
        expected, found, !ms.empty() && p <= s.latency->at_most_ms);
  }
  if (s.alerts) {
    auto kind = s.alerts->first.empty() ? db::param{} : db::param{s.alerts->first};
    auto n = query(sql::count_alerts, {kind}).int64(0, 0);
    add(s, "alerts" + (s.alerts->first.empty() ? "" : " of kind " + s.alerts->first),
        ">= " + std::to_string(s.alerts->second), std::to_string(n), n >= s.alerts->second);
  }
  if (s.recovered_within) {
    double worst = 0;
    int64_t lost = 0;
    for (const auto& k : kills_) {
      auto res = query(sql::recovery_after_kill, {k.node, k.at});
      lost += res.int64(0, 0);
      worst = std::max(worst, std::stod(res.string(0, 1)));
    }
    auto bound = std::chrono::duration<double>(*s.recovered_within).count();
    add(s,
        "each killed node's tasks taken back (" + std::to_string(kills_.size()) + " kills, " +
            std::to_string(lost) + " lost attempts, due again after their backoff)",
        "<= " + seconds_text(bound), seconds_text(worst), worst <= bound);
  }
  r.message = "checked";
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

}  // namespace

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
