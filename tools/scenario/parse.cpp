#include "config/config.hpp"
#include "messages/errors.hpp"
#include "tools/scenario/scenario.hpp"

#include <toml++/toml.h>

#include <fstream>
#include <set>
#include <sstream>

namespace taskmill::scenario {

namespace {

/// The first problem found, with the line it is on.
struct problem {
  std::string text;
};

std::string at(const std::string& file, const toml::node& n) {
  return file + ":" + std::to_string(n.source().begin.line);
}

/// Reads the keys of one table, refusing the keys it does not know.
class table_reader {
 public:
  table_reader(const std::string& file, const toml::table& t, std::string what)
      : file_(file), table_(t), what_(std::move(what)) {}

  std::string where(const toml::node& n) const { return at(file_, n) + ": " + what_; }

  const toml::node* get(const std::string& key) {
    known_.insert(key);
    return table_.get(key);
  }

  void fail(const toml::node& n, const std::string& key, const std::string& why) {
    if (error_.empty()) error_ = where(n) + ": " + key + " " + why;
  }

  std::optional<std::string> text(const std::string& key) {
    auto n = get(key);
    if (!n) return std::nullopt;
    if (auto v = n->value<std::string>()) return *v;
    fail(*n, key, "must be a string");
    return std::nullopt;
  }

  std::optional<int64_t> integer(const std::string& key, int64_t least, int64_t most) {
    auto n = get(key);
    if (!n) return std::nullopt;
    auto v = n->value<int64_t>();
    if (!n->is_integer() || !v) {
      fail(*n, key, "must be an integer");
      return std::nullopt;
    }
    if (*v < least || *v > most) {
      fail(*n, key, "must be between " + std::to_string(least) + " and " + std::to_string(most));
      return std::nullopt;
    }
    return v;
  }

  std::optional<double> number(const std::string& key, double least, double most) {
    auto n = get(key);
    if (!n) return std::nullopt;
    auto v = n->value<double>();
    if (!v || !(n->is_floating_point() || n->is_integer())) {
      fail(*n, key, "must be a number");
      return std::nullopt;
    }
    if (*v < least || *v > most) {
      fail(*n, key, "must be between " + std::to_string(least) + " and " + std::to_string(most));
      return std::nullopt;
    }
    return v;
  }

  std::optional<bool> boolean(const std::string& key) {
    auto n = get(key);
    if (!n) return std::nullopt;
    if (auto v = n->value<bool>(); v && n->is_boolean()) return *v;
    fail(*n, key, "must be true or false");
    return std::nullopt;
  }

  std::optional<milliseconds> duration(const std::string& key) {
    auto n = get(key);
    if (!n) return std::nullopt;
    auto v = n->value<std::string>();
    if (!v) {
      fail(*n, key, "must be a duration such as \"500ms\" or \"2s\"");
      return std::nullopt;
    }
    auto d = parse_duration(*v);
    if (!d) {
      fail(*n, key, "must be a duration such as \"500ms\" or \"2s\": " + error_message(d.error()));
      return std::nullopt;
    }
    return *d;
  }

  std::optional<std::vector<std::string>> texts(const std::string& key) {
    auto n = get(key);
    if (!n) return std::nullopt;
    std::vector<std::string> out;
    auto arr = n->as_array();
    if (!arr) {
      fail(*n, key, "must be a list of strings");
      return std::nullopt;
    }
    for (const auto& e : *arr) {
      auto v = e.value<std::string>();
      if (!v) {
        fail(e, key, "must be a list of strings");
        return std::nullopt;
      }
      out.push_back(*v);
    }
    return out;
  }

  std::optional<std::vector<int>> integers(const std::string& key, int least, int most) {
    auto n = get(key);
    if (!n) return std::nullopt;
    std::vector<int> out;
    auto arr = n->as_array();
    if (!arr) {
      fail(*n, key, "must be a list of integers");
      return std::nullopt;
    }
    for (const auto& e : *arr) {
      auto v = e.value<int64_t>();
      if (!v || !e.is_integer() || *v < least || *v > most) {
        fail(e, key,
             "must be a list of integers between " + std::to_string(least) + " and " +
                 std::to_string(most));
        return std::nullopt;
      }
      out.push_back(static_cast<int>(*v));
    }
    return out;
  }

  const toml::table* table(const std::string& key) {
    auto n = get(key);
    if (!n) return nullptr;
    if (auto t = n->as_table()) return t;
    fail(*n, key, "must be a table");
    return nullptr;
  }

  /// Call last: unknown keys are errors.
  std::string finish() {
    for (const auto& [key, value] : table_)
      if (!known_.count(std::string{key.str()}) && error_.empty())
        error_ = where(value) + ": unknown key '" + std::string{key.str()} + "'";
    return error_;
  }

  void absorb(const std::string& error) {
    if (error_.empty()) error_ = error;
  }

  const std::string& file() const { return file_; }

 private:
  const std::string& file_;
  const toml::table& table_;
  std::string what_;
  std::set<std::string> known_;
  std::string error_;
};

std::string read_executor(table_reader& r, executor_behaviour& e) {
  if (auto v = r.text("name")) e.name = *v;
  if (auto spread = r.get("latency_ms"); spread && spread->is_table()) {
    table_reader lr{r.file(), *spread->as_table(), "latency_ms"};
    auto p50 = lr.number("p50", 0.001, 3'600'000);
    auto p99 = lr.number("p99", 0.001, 3'600'000);
    auto unknown = lr.finish();
    r.absorb(unknown);
    if (unknown.empty() && (!p50 || !p99 || *p99 < *p50))
      r.fail(*spread, "latency_ms", "must be {p50 = ms, p99 = ms} with p50 <= p99");
    e.latency_p50_ms = p50.value_or(0);
    e.latency_p99_ms = p99.value_or(0);
  } else if (auto range = r.integers("latency_ms", 0, 3'600'000)) {
    if (range->size() != 2 || (*range)[0] > (*range)[1])
      r.fail(*r.get("latency_ms"), "latency_ms",
             "must be [min, max] with min <= max, or {p50 = ms, p99 = ms}");
    else
      e.latency_min_ms = (*range)[0], e.latency_max_ms = (*range)[1];
  }
  if (auto v = r.number("failure_rate", 0, 1)) e.failure_rate = *v;
  if (auto v = r.integers("answers", 100, 599)) e.answers = *v;
  if (auto v = r.boolean("async")) e.async = *v;
  if (auto v = r.number("hang_rate", 0, 1)) e.hang_rate = *v;
  if (auto v = r.number("late_rate", 0, 1)) e.late_rate = *v;
  if (auto v = r.integer("late_ms", 0, 3'600'000)) e.late_ms = static_cast<int>(*v);
  if (auto v = r.text("work_sql")) e.work_sql = *v;
  return r.finish();
}

void read_task(table_reader& outer, const toml::table& t, task_template& task) {
  table_reader r{outer.file(), t, "task"};
  if (auto v = r.text("type")) task.type = *v;
  if (auto v = r.text("key")) task.key = *v;
  if (auto v = r.text("payload")) task.payload = *v;
  if (auto v = r.text("execute_at")) task.execute_at = *v;
  for (const char* key : {"priority", "max_retries", "timeout_ms", "version"})
    if (auto v = r.integer(key, -1'000'000'000, 1'000'000'000))
      task.json_fields[key] = std::to_string(*v);
  for (const char* key : {"batch", "shard", "replace"})
    if (auto n = r.get(key)) {
      std::ostringstream out;
      out << toml::json_formatter{*n};
      task.json_fields[key] = out.str();
    }
  outer.absorb(r.finish());
}

void read_count(table_reader& outer, const toml::table& t, count_check& c) {
  table_reader r{outer.file(), t, "tasks"};
  c.status = r.text("status");
  c.type = r.text("type");
  c.equals = r.integer("equals", 0, INT64_MAX);
  c.at_least = r.integer("at_least", 0, INT64_MAX);
  c.at_most = r.integer("at_most", 0, INT64_MAX);
  if (!c.equals && !c.at_least && !c.at_most)
    r.fail(t, "tasks", "needs equals, at_least or at_most");
  outer.absorb(r.finish());
}

/// The keys each kind of step takes besides `do`.
const std::map<std::string, std::set<std::string>>& step_keys() {
  static const std::map<std::string, std::set<std::string>> keys{
      {"start", {"node", "nodes", "set"}},
      {"stop", {"node", "nodes"}},
      {"kill", {"node", "nodes"}},
      {"cut", {"node", "nodes", "from"}},
      {"heal", {"node", "nodes"}},
      {"freeze", {"node", "nodes"}},
      {"thaw", {"node", "nodes"}},
      {"restart", {"node", "nodes", "set", "hard"}},
      {"postgres", {"action"}},
      {"sql", {"sql", "repeat"}},
      {"submit", {"node", "count", "batch", "task"}},
      {"reschedule", {"node", "count", "task"}},
      {"cancel", {"node", "count", "task"}},
      {"api", {"node", "method", "path", "body", "status"}},
      {"sleep", {"for"}},
      {"chaos", {"nodes", "for", "every", "down_for"}},
      {"wait", {"timeout", "tasks", "sql", "equals", "at_least", "at_most", "deliveries"}},
      {"assert",
       {"tasks", "sql", "equals", "at_least", "at_most", "no_duplicate_deliveries",
        "every_task_ran", "latency", "alerts", "recovered_within"}},
  };
  return keys;
}

/// Steps whose node or nodes are the ones they act on (not whose API).
bool acts_on_nodes(const std::string& kind) {
  static const std::set<std::string> kinds{"start", "stop", "kill",   "restart",
                                           "cut",   "heal", "freeze", "thaw"};
  return kinds.count(kind) > 0;
}

/// "a 'submit' step", "an 'assert' step".
std::string a_step(const std::string& kind) {
  bool vowel = !kind.empty() && std::string{"aeiou"}.find(kind[0]) != std::string::npos;
  return std::string{vowel ? "an '" : "a '"} + kind + "' step";
}

std::string read_step(table_reader& r, const toml::table& t, step& s) {
  auto kind = r.text("do");
  if (!kind) {
    r.fail(t, "do",
           "is required: one of start, stop, kill, restart, cut, heal, freeze, thaw, postgres, "
           "sql, submit, reschedule, cancel, api, sleep, chaos, wait, assert");
    return r.finish();
  }
  auto keys = step_keys().find(*kind);
  if (keys == step_keys().end()) {
    r.fail(*r.get("do"), "do", "'" + *kind + "' is not a step");
    return r.finish();
  }
  s.kind = *kind;
  for (const auto& [key, value] : t)
    if (key.str() != "do" && !keys->second.count(std::string{key.str()})) {
      r.fail(value, std::string{key.str()}, "is not a key of " + a_step(*kind));
      return r.finish();
    }
  if (auto v = r.text("node")) s.node = *v;
  if (auto v = r.texts("nodes")) s.nodes = *v;
  if (!s.node.empty() && acts_on_nodes(s.kind)) s.nodes.push_back(s.node);
  if (auto v = r.texts("set")) s.set = *v;
  if (auto v = r.boolean("hard")) s.hard = *v;
  if (auto from = r.texts("from")) {
    s.cut_postgres = std::count(from->begin(), from->end(), "postgres") > 0;
    s.cut_peers = std::count(from->begin(), from->end(), "peers") > 0;
    auto known = static_cast<size_t>(std::count(from->begin(), from->end(), "postgres") +
                                     std::count(from->begin(), from->end(), "peers"));
    if (from->empty() || known != from->size())
      r.fail(*r.get("from"), "from", "must list \"postgres\", \"peers\" or both");
  }
  if (auto v = r.text("action")) {
    s.action = *v;
    if (s.action != "stop" && s.action != "crash" && s.action != "start" && s.action != "restart")
      r.fail(*r.get("action"), "action", "must be stop, crash, start or restart");
  }
  if (auto v = r.text("sql")) s.sql = *v;
  if (auto v = r.text("equals")) s.equals = *v;
  s.at_least = r.number("at_least", -1e18, 1e18);
  s.at_most = r.number("at_most", -1e18, 1e18);
  if ((s.at_least || s.at_most) && t.contains("equals"))
    r.fail(*r.get("equals"), "equals", "goes with neither at_least nor at_most");
  if (auto v = r.integer("repeat", 1, 10'000'000)) s.repeat = *v;
  if (auto v = r.integer("count", 1, 10'000'000)) s.count = *v;
  if (auto v = r.integer("batch", 1, 10'000)) s.batch = *v;
  if (auto task = r.table("task")) read_task(r, *task, s.task);
  if (auto v = r.text("method")) s.method = *v;
  if (auto v = r.text("path")) s.path = *v;
  if (auto v = r.text("body")) s.body = *v;
  if (auto v = r.integer("status", 100, 599)) s.expect_status = static_cast<int>(*v);
  if (auto v = r.duration("for")) s.duration = *v;
  if (auto v = r.duration("every")) s.every = *v;
  if (auto v = r.duration("down_for")) s.down_for = *v;
  if (auto v = r.duration("timeout")) s.timeout = *v;
  if (auto tasks = r.table("tasks")) {
    s.tasks.emplace();
    read_count(r, *tasks, *s.tasks);
  }
  s.deliveries = r.integer("deliveries", 0, INT64_MAX);
  if (auto l = r.table("latency")) {
    table_reader lr{r.file(), *l, "latency"};
    latency_check c;
    if (auto v = lr.text("executor")) c.executor = *v;
    if (auto v = lr.number("percentile", 1, 100)) c.percentile = *v;
    if (auto v = lr.number("at_most_ms", 0, 1e9)) c.at_most_ms = *v;
    if (c.executor.empty()) lr.fail(*l, "executor", "is required");
    r.absorb(lr.finish());
    s.latency = c;
  }
  if (auto a = r.table("alerts")) {
    table_reader ar{r.file(), *a, "alerts"};
    std::pair<std::string, int64_t> c{"", 1};
    if (auto v = ar.text("kind")) c.first = *v;
    if (auto v = ar.integer("at_least", 0, INT64_MAX)) c.second = *v;
    r.absorb(ar.finish());
    s.alerts = c;
  }
  if (auto v = r.boolean("no_duplicate_deliveries")) s.no_duplicate_deliveries = *v;
  if (auto n = r.get("every_task_ran")) {
    if (n->is_boolean()) {
      s.every_task_ran = n->value<bool>().value_or(false);
    } else if (auto type = n->value<std::string>()) {
      s.every_task_ran = true;
      s.every_task_ran_type = *type;
    } else {
      r.fail(*n, "every_task_ran", "must be true or a task type");
    }
  }
  s.recovered_within = r.duration("recovered_within");
  auto error = r.finish();
  if (!error.empty()) return error;
  auto needs = [&](bool ok, const std::string& what) {
    if (!ok && error.empty()) error = r.where(t) + ": " + a_step(s.kind) + " needs " + what;
  };
  if (acts_on_nodes(s.kind) && s.kind != "heal" && s.kind != "thaw")
    needs(!s.nodes.empty(), "node or nodes");
  for (const auto& name : s.nodes)
    if (name == leader_node && s.kind != "cut" && s.kind != "freeze" && error.empty())
      error = r.where(t) + ": " + a_step(s.kind) + " takes " + leader_node +
              " only to cut or freeze (heal and thaw without nodes: every one cut or frozen)";
  if (s.kind == "postgres") needs(!s.action.empty(), "action");
  if (s.kind == "sql") needs(!s.sql.empty(), "sql");
  if (s.kind == "submit" || s.kind == "reschedule" || s.kind == "cancel")
    needs(!s.task.type.empty() && !s.task.key.empty(), "task with type and key");
  if (s.kind == "reschedule") needs(s.task.execute_at.has_value(), "task.execute_at");
  if (s.kind == "api") needs(!s.method.empty() && !s.path.empty(), "method and path");
  if (s.kind == "sleep") needs(s.duration.count() > 0, "for");
  if (s.kind == "chaos")
    needs(!s.nodes.empty() && s.duration.count() > 0 && s.every.count() > 0,
          "nodes, for and every");
  if (s.kind == "wait")
    needs(s.tasks || !s.sql.empty() || s.deliveries, "tasks, sql or deliveries");
  if (s.kind == "assert")
    needs(s.tasks || !s.sql.empty() || s.no_duplicate_deliveries || s.every_task_ran || s.latency ||
              s.alerts || s.recovered_within,
          "something to check");
  return error;
}

}  // namespace

caf::expected<scenario> parse_scenario(const std::string& text, const std::string& file) {
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << file << ":" << e.source().begin.line << ": " << e.description();
    return make_error(errc::invalid_argument, msg.str());
  }
  scenario sc;
  sc.file = file;
  table_reader top{file, root, "scenario"};
  auto bad = [](const std::string& e) { return make_error(errc::invalid_argument, e); };
  if (auto v = top.text("name")) sc.name = *v;
  if (auto v = top.text("description")) sc.description = *v;
  std::set<std::string> executor_names, node_names;
  auto each_table = [&](const char* key, auto&& read) -> std::string {
    auto n = top.get(key);
    if (!n) return {};
    auto arr = n->as_array();
    if (!arr) return at(file, *n) + ": " + key + " must be written [[" + key + "]]";
    for (const auto& e : *arr) {
      auto t = e.as_table();
      if (!t) return at(file, e) + ": " + key + " must be written [[" + key + "]]";
      if (auto err = read(*t); !err.empty()) return err;
    }
    return {};
  };
  auto err = each_table("executor", [&](const toml::table& t) {
    table_reader r{file, t, "executor"};
    executor_behaviour e;
    auto error = read_executor(r, e);
    if (error.empty() && e.name.empty()) error = at(file, t) + ": executor: name is required";
    if (error.empty() && !executor_names.insert(e.name).second)
      error = at(file, t) + ": executor: name '" + e.name + "' is taken";
    sc.executors.push_back(std::move(e));
    return error;
  });
  if (err.empty())
    err = each_table("node", [&](const toml::table& t) {
      table_reader r{file, t, "node"};
      node_spec n;
      if (auto v = r.text("name")) n.name = *v;
      if (auto v = r.texts("set")) n.set = *v;
      auto error = r.finish();
      if (error.empty() && n.name.empty()) error = at(file, t) + ": node: name is required";
      if (error.empty() && !node_names.insert(n.name).second)
        error = at(file, t) + ": node: name '" + n.name + "' is taken";
      sc.nodes.push_back(std::move(n));
      return error;
    });
  if (err.empty())
    err = each_table("step", [&](const toml::table& t) {
      step s;
      s.line = static_cast<int>(t.source().begin.line);
      table_reader r{file, t, "step"};
      auto error = read_step(r, t, s);
      for (const auto& name : s.nodes)
        if (error.empty() && !node_names.count(name) && name != leader_node)
          error = at(file, t) + ": step: node '" + name + "' is not a [[node]] of this scenario";
      if (error.empty() && !s.node.empty() && !node_names.count(s.node) && !acts_on_nodes(s.kind))
        error = at(file, t) + ": step: node '" + s.node + "' is not a [[node]] of this scenario";
      if (error.empty() && s.latency && !executor_names.count(s.latency->executor))
        error =
            at(file, t) + ": step: executor '" + s.latency->executor + "' is not an [[executor]]";
      sc.steps.push_back(std::move(s));
      return error;
    });
  if (!err.empty()) return bad(err);
  if (auto e = top.finish(); !e.empty()) return bad(e);
  if (sc.name.empty()) return bad(file + ": name is required");
  if (sc.steps.empty()) return bad(file + ": a scenario needs at least one [[step]]");
  return sc;
}

caf::expected<scenario> parse_scenario_file(const std::string& path) {
  std::ifstream in{path};
  if (!in) return make_error(errc::invalid_argument, "cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_scenario(text.str(), path);
}

}  // namespace taskmill::scenario
