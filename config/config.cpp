#include "config/config.hpp"

#include "config/effective_toml.hpp"
#include "config/table_reader.hpp"

#include "messages/errors.hpp"
#include "messages/json_parse.hpp"
#include "messages/schedule.hpp"
#include "messages/text.hpp"
#include "messages/url.hpp"
#include "messages/validate.hpp"

#include <toml++/toml.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace taskmill {

namespace {

caf::error config_error(const std::string& where, const std::string& what) {
  return make_error(errc::invalid_argument, "config: " + where + ": " + what);
}

bool is_host_name(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

/// scheme://host[:port], as a browser's Origin header has it.
bool is_origin(const std::string& text) {
  for (std::string_view scheme : {"http://", "https://"})
    if (text.starts_with(scheme)) {
      auto authority = std::string_view{text}.substr(scheme.size());
      auto host = authority.substr(0, authority.rfind(':'));
      auto port = authority.substr(host.size());
      return is_host_name(std::string{host}) &&
             (port.empty() ||
              (port.size() > 1 && std::all_of(port.begin() + 1, port.end(), [](char c) {
                 return std::isdigit(static_cast<unsigned char>(c));
               })));
    }
  return false;
}

constexpr std::array executor_kinds{executor_kind::none, executor_kind::noop, executor_kind::sleep,
                                    executor_kind::fail, executor_kind::http, executor_kind::caf};

void read_executor(table_reader& r, executor_kind& kind) {
  std::string name = executor_name(kind);
  r.read("executor", name);
  for (auto k : executor_kinds)
    if (name == executor_name(k)) {
      kind = k;
      return;
    }
  r.fail("executor", "must be one of noop, sleep, fail, http, caf or empty (got \"" + name + "\")");
}

/// One task type's settings. Their ranges are the database's
/// (taskmill.task_problem), which refuses them at start naming the type and
/// the field; here only that each is of its kind and fits what carries it.
void read_type(table_reader& r, task_type_config& t) {
  read_executor(r, t.executor);
  r.read("url", t.url);
  r.read("cancel_url", t.cancel_url);
  r.read("timeout", t.timeout, milliseconds{0}, max_int32_ms);
  r.read("max_retries", t.max_retries, std::numeric_limits<int>::min(),
         std::numeric_limits<int>::max());
  r.read("running_limit", t.running_limit, 0, 1'000'000);
  r.read("pending_deadline", t.pending_deadline);
  r.read("heartbeat_timeout", t.heartbeat_timeout);
  r.read("max_timeout", t.max_timeout, milliseconds{0}, max_int32_ms);
  r.read("key_space", t.key_space);
  r.read("key_path", t.key_path);
  r.read("key_separator", t.key_separator);
  r.read("rate_units", t.rate_units);
  std::string kind = t.backoff.exponential ? "exponential" : "fixed";
  r.read("backoff", kind);
  r.read("backoff_base", t.backoff.base, milliseconds{0}, max_int32_ms);
  r.read("backoff_cap", t.backoff.cap, milliseconds{0}, max_int32_ms);
  r.read("backoff_jitter", t.backoff.jitter, std::numeric_limits<double>::lowest(),
         std::numeric_limits<double>::max());
  if (kind != "exponential" && kind != "fixed")
    r.fail("backoff", "must be \"fixed\" or \"exponential\"");
  t.backoff.exponential = kind == "exponential";
  if (t.executor == executor_kind::http && !parse_http_url(t.url))
    r.fail("url", "must be an http:// URL when executor = \"http\"");
  if (!t.cancel_url.empty() && (t.executor != executor_kind::http || !parse_http_url(t.cancel_url)))
    r.fail("cancel_url", "must be an http:// URL, for executor = \"http\"");
}

/// A TOML table or array as JSON text, or the problem with it.
std::string json_of(const toml::node& node, const std::string& path, std::string& out) {
  std::ostringstream text;
  if (auto table = node.as_table())
    text << toml::json_formatter{*table};
  else if (auto array = node.as_array())
    text << toml::json_formatter{*array};
  else
    return "'" + path + "' must be a table or an array";
  auto parsed = json::parse_bounded(text.str(), path, max_json_depth);
  if (!parsed) return error_message(parsed.error());
  out = json::dump(*parsed);
  return {};
}

void read_names(table_reader& r, const char* key, std::vector<std::string>& out) {
  if (auto list = r.array(key))
    for (const auto& item : *list) {
      auto name = item.value<std::string>();
      if (!name) return r.fail(key, "must be a list of job names");
      out.push_back(*name);
    }
  r.echo_list(key, out);
}

/// The first cycle the config's jobs close through their children, as
/// "jobs[i]: child_jobs: a cycle: a -> b -> a", or empty. (The database
/// refuses one through jobs stored before as the jobs are written.) A depth-
/// first walk that visits each job once.
std::string child_jobs_cycle(const std::vector<job_config>& jobs) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < jobs.size(); ++i) index.emplace(jobs[i].name, i);
  enum class mark { unseen, on_path, done };
  std::vector<mark> marks(jobs.size(), mark::unseen);
  std::vector<size_t> path;
  std::string found;
  std::function<bool(size_t)> visit = [&](size_t i) {
    marks[i] = mark::on_path;
    path.push_back(i);
    for (const auto* list : {&jobs[i].child_jobs, &jobs[i].child_jobs_on_failure})
      for (const auto& child : *list) {
        auto it = index.find(child);
        if (it == index.end() || marks[it->second] == mark::done) continue;
        if (marks[it->second] == mark::on_path) {
          auto from = std::find(path.begin(), path.end(), it->second);
          std::string text;
          for (auto p = from; p != path.end(); ++p) text += jobs[*p].name + " -> ";
          found = "'jobs[" + std::to_string(*from) + "]' child_jobs: a cycle: " + text + child;
          return true;
        }
        if (visit(it->second)) return true;
      }
    path.pop_back();
    marks[i] = mark::done;
    return false;
  };
  for (size_t i = 0; i < jobs.size(); ++i)
    if (marks[i] == mark::unseen && visit(i)) return found;
  return {};
}

/// One [[jobs]] entry; the schedule and zone are checked here, so that a bad
/// one stops the node before it starts.
void read_job(table_reader& r, job_config& job) {
  r.read("name", job.name);
  r.read("schedule", job.schedule);
  r.read("dialect", job.dialect);
  r.read("time_zone", job.time_zone);
  r.read("type", job.type);
  for (auto [key, out] :
       {std::pair{"payload", &job.payload}, std::pair{"on_finish", &job.on_finish},
        std::pair{"on_success", &job.on_success}})
    if (auto node = r.node(key)) {
      if (auto problem = json_of(*node, r.path(key), *out); !problem.empty())
        r.add_problem(problem);
      else if (auto table = node->as_table())
        r.echo(key, *table);
      else if (auto array = node->as_array())
        r.echo(key, *array);
    }
  // Their ranges are the database's (taskmill.job_problem), which refuses
  // the job at start naming the field.
  r.read("priority", job.priority);
  r.read("max_retries", job.max_retries);
  r.read("timeout", job.timeout);
  r.read("enabled", job.enabled);
  r.read("routing", job.routing);
  r.read("shards", job.shards);
  r.read("overlap", job.overlap);
  r.read("misfire", job.misfire);
  r.read("catch_up_limit", job.catch_up_limit);
  r.read("description", job.description);
  read_names(r, "child_jobs", job.child_jobs);
  read_names(r, "child_jobs_on_failure", job.child_jobs_on_failure);
  if (job.name.empty()) r.fail("name", "is required");
  if (job.type.empty()) r.fail("type", "is required");
  if (job.schedule.empty()) r.fail("schedule", "is required");
  r.reject_unknown_keys();
  if (!r.problems().empty()) return;
  if (auto schedule = cron::parse(job.schedule, job.dialect); !schedule)
    r.add_problem("'" + r.prefix() + "' " + error_message(schedule.error()));
  else if (auto zone = cron::find_zone(job.time_zone); !zone)
    r.add_problem("'" + r.prefix() + "' " + error_message(zone.error()));
}

/// One alert rule: the defaults of [alerts], or [alerts.types.X] or
/// [alerts.jobs.X] (`scope`), which take only the settings that apply.
enum class rule_scope { defaults, type, job };

void read_alert_rule(table_reader& r, alert_rule& rule, rule_scope scope) {
  auto optional_bool = [&](const char* key, std::optional<bool>& out) {
    if (!r.node(key)) return;
    bool value = false;
    r.read(key, value);
    out = value;
  };
  optional_bool("dead_task", rule.dead_task);
  if (r.node("failure_rate")) {
    double rate = 0;
    r.read("failure_rate", rate, 0.0, 1.0);
    rule.failure_rate = rate;
  }
  if (r.node("record_failure_rate")) {
    double rate = 0;
    r.read("record_failure_rate", rate, 0.0, 1.0);
    rule.record_failure_rate = rate;
  }
  if (scope != rule_scope::type) optional_bool("missed_firings", rule.missed_firings);
  if (scope != rule_scope::job && r.node("pending_after")) {
    milliseconds after{0};
    r.read("pending_after", after);
    rule.pending_after = after;
  }
}

void read_alerts(table_reader& top, config::alerts_section& alerts) {
  auto r = top.child("alerts");
  if (auto hooks = r.array("webhooks")) {
    for (const auto& hook : *hooks) {
      auto url = hook.value<std::string>();
      if (!url || !parse_http_url(*url)) {
        r.fail("webhooks", "must be a list of http:// URLs");
        break;
      }
      alerts.webhooks.push_back(*url);
    }
  }
  r.echo_list("webhooks", alerts.webhooks);
  r.read("interval", alerts.interval, milliseconds{10});
  r.read("overdue_check_interval", alerts.overdue_check_interval, milliseconds{10});
  r.read("delivery_timeout", alerts.delivery_timeout, milliseconds{1}, max_int32_ms);
  r.read("delivery_attempts", alerts.delivery_attempts, 1, 1000);
  r.read("delivery_backoff", alerts.delivery_backoff, milliseconds{1}, max_int32_ms);
  r.read("delivery_backoff_cap", alerts.delivery_backoff_cap, milliseconds{1}, max_int32_ms);
  read_alert_rule(r, alerts.defaults, rule_scope::defaults);
  auto read_rules = [&](const char* key, rule_scope scope, std::map<std::string, alert_rule>& out) {
    auto table = r.table(key);
    if (!table) return;
    for (auto&& [name, node] : *table) {
      auto rr = r.entry(key, node, std::string{name.str()});
      alert_rule rule;
      read_alert_rule(rr, rule, scope);
      rr.reject_unknown_keys();
      r.add_problems(rr.problems());
      out.emplace(std::string{name.str()}, rule);
    }
  };
  read_rules("types", rule_scope::type, alerts.types);
  read_rules("jobs", rule_scope::job, alerts.jobs);
  r.reject_unknown_keys();
  top.add_problems(r.problems());
}

std::vector<std::string> read_sections(const toml::table& root, config& cfg, toml::table* echo) {
  table_reader top{&root, "", echo};
  {
    auto r = top.child("node");
    r.read("name", cfg.node.name);
    // Hand-off notifications end their first line with the node's name.
    if (std::any_of(cfg.node.name.begin(), cfg.node.name.end(),
                    [](unsigned char c) { return c < 0x20 || c == 0x7f; }))
      r.fail("name", "must not contain control characters");
    r.read("data_dir", cfg.node.data_dir);
    r.read("shutdown_grace", cfg.node.shutdown_grace);
    r.read("log_level", cfg.node.log_level);
    static const std::set<std::string> levels{"trace", "debug", "info", "warn", "error", "off"};
    if (!levels.count(cfg.node.log_level))
      r.fail("log_level", "must be one of trace, debug, info, warn, error, off");
    r.read("log_format", cfg.node.log_format);
    if (cfg.node.log_format != "text" && cfg.node.log_format != "json")
      r.fail("log_format", "must be text or json");
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  {
    auto r = top.child("database");
    r.read("url", cfg.database.url);
    r.read("listen", cfg.database.listen);
    r.read("pooler", cfg.database.pooler);
    if (cfg.database.pooler != "none" && cfg.database.pooler != "session" &&
        cfg.database.pooler != "transaction")
      r.fail("pooler", "must be none, session or transaction");
    if (cfg.database.transaction_pooler()) cfg.database.listen = false;
    r.read("statement_timeout", cfg.database.statement_timeout, milliseconds{1});
    r.read("lock_timeout", cfg.database.lock_timeout, milliseconds{1});
    r.read("reconnect_min", cfg.database.reconnect_min, milliseconds{1});
    r.read("reconnect_max", cfg.database.reconnect_max, milliseconds{1});
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  {
    auto r = top.child("embedded");
    r.read("bin_dir", cfg.embedded.bin_dir);
    r.read("user", cfg.embedded.user);
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  {
    auto r = top.child("api");
    r.read("listen", cfg.api.listen);
    r.read("token", cfg.api.token);
    r.read("max_payload_bytes", cfg.api.max_payload_bytes, 2, int64_t{1} << 30);
    r.read("max_body_bytes", cfg.api.max_body_bytes, 1024, int64_t{1} << 31);
    if (auto addr = parse_listen_address(cfg.api.listen, "api.listen"); !addr)
      r.fail("listen", "must be host:port");
    if (auto hosts = r.array("allowed_hosts"))
      for (const auto& entry : *hosts) {
        auto host = entry.value<std::string>();
        if (!host || !is_host_name(*host)) {
          r.fail("allowed_hosts", "must be a list of host names alone (no scheme, port or path)");
          break;
        }
        cfg.api.allowed_hosts.push_back(*host);
      }
    if (auto origins = r.array("allowed_origins"))
      for (const auto& entry : *origins) {
        auto origin = entry.value<std::string>();
        if (!origin || !is_origin(*origin)) {
          r.fail("allowed_origins",
                 "must be a list of origins, scheme://host[:port] (http or https, no path), as "
                 "a browser sends them");
          break;
        }
        cfg.api.allowed_origins.push_back(*origin);
      }
    r.echo_list("allowed_hosts", cfg.api.allowed_hosts);
    r.echo_list("allowed_origins", cfg.api.allowed_origins);
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  {
    auto r = top.child("cluster");
    auto& c = cfg.cluster;
    r.read("listen", c.listen);
    r.read("advertise", c.advertise);
    r.read("secret", c.secret);
    r.read("tls_cert", c.tls_cert);
    r.read("tls_key", c.tls_key);
    r.read("tls_ca", c.tls_ca);
    int tls_set = !c.tls_cert.empty() + !c.tls_key.empty() + !c.tls_ca.empty();
    if (tls_set != 0 && tls_set != 3)
      r.fail("tls_cert", "tls_key and tls_ca go together: set all three or none");
    for (auto [key, path] :
         {std::pair{"tls_cert", &c.tls_cert}, {"tls_key", &c.tls_key}, {"tls_ca", &c.tls_ca}})
      if (!path->empty() && access(path->c_str(), R_OK) != 0)
        r.fail(key, "names a file that cannot be read: " + *path);
    if (auto seeds = r.array("seeds"))
      for (const auto& seed : *seeds) {
        auto text = seed.value<std::string>();
        if (!text || !parse_listen_address(*text, "cluster.seeds")) {
          r.fail("seeds", "must be a list of host:port");
          break;
        }
        c.seeds.push_back(*text);
      }
    r.echo_list("seeds", c.seeds);
    auto addr = parse_listen_address(c.listen, "cluster.listen");
    if (!addr) r.fail("listen", "must be host:port");
    if (!c.advertise.empty() && !parse_listen_address(c.advertise, "cluster.advertise"))
      r.fail("advertise", "must be host:port");
    auto loopback = [](const std::string& host) {
      return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
    };
    if (addr && c.secret.empty() && !loopback(addr->first))
      r.fail("secret", "is required when cluster.listen is not a loopback address");
    if (addr && c.advertise.empty() && (addr->first == "0.0.0.0" || addr->first == "::"))
      r.fail("advertise", "is required when cluster.listen is a wildcard address");
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  {
    auto r = top.child("scheduling");
    auto& s = cfg.scheduling;
    r.read("batch_size", s.batch_size, 1, 10'000);
    r.read("node_limit", s.node_limit, 1, 1'000'000);
    r.read("global_limit", s.global_limit, 0, 10'000'000);
    r.read("hand_off_permits", s.hand_off_permits, 0, 10'000);
    r.read("poll_interval", s.poll_interval, milliseconds{10});
    if (auto weights = r.array("weights")) {
      if (weights->size() != 5) r.fail("weights", "must list 5 weights, for priorities 1 to 5");
      for (size_t i = 0; i < weights->size() && i < 5; ++i) {
        auto w = (*weights)[i].value<int64_t>();
        if (!w || *w < 1 || *w > 1000) {
          r.fail("weights", "must be integers from 1 to 1000");
          break;
        }
        s.weights[i] = static_cast<int>(*w);
      }
    }
    r.echo_list("weights", std::vector<int64_t>(s.weights.begin(), s.weights.end()));
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  {
    auto r = top.child("heartbeat");
    r.read("interval", cfg.heartbeat.interval, milliseconds{10});
    r.read("missed", cfg.heartbeat.missed, 2, 1000);
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  {
    auto r = top.child("watcher");
    r.read("interval", cfg.watcher.interval, milliseconds{10});
    r.read("success_retention", cfg.watcher.success_retention);
    r.read("purge_retention", cfg.watcher.purge_retention);
    r.read("batch_size", cfg.watcher.batch_size, 1, 100'000);
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  {
    auto r = top.child("reconciler");
    r.read("interval", cfg.reconciler.interval, milliseconds{10});
    if (auto rules = r.array("rules")) {
      for (size_t i = 0; i < rules->size(); ++i) {
        auto rr = r.element("rules", (*rules)[i], i);
        compensation_rule rule;
        rr.read("name", rule.name);
        rr.read("type", rule.type);
        rr.read("query", rule.query);
        if (rule.type.empty()) rr.fail("type", "is required");
        if (rule.query.empty()) rr.fail("query", "is required");
        if (rule.name.empty()) rule.name = rule.type;
        rr.reject_unknown_keys();
        r.add_problems(rr.problems());
        cfg.reconciler.rules.push_back(std::move(rule));
      }
    }
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  {
    auto r = top.child("cron");
    r.read("misfire_after", cfg.cron.misfire_after, milliseconds{1});
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  read_alerts(top, cfg.alerts);
  if (auto jobs = top.array("jobs")) {
    for (size_t i = 0; i < jobs->size(); ++i) {
      job_config job;
      auto r = top.element("jobs", (*jobs)[i], i);
      read_job(r, job);
      top.add_problems(r.problems());
      cfg.jobs.push_back(std::move(job));
    }
    if (auto cycle = child_jobs_cycle(cfg.jobs); !cycle.empty()) top.add_problem(cycle);
  }
  {
    auto r = top.child("defaults");
    read_type(r, cfg.default_type);
    r.reject_unknown_keys();
    top.add_problems(r.problems());
  }
  if (auto types = top.table("types")) {
    for (auto&& [key, node] : *types) {
      std::string name{key.str()};
      auto r = top.entry("types", node, name);
      task_type_config t = cfg.default_type;
      t.name = name;
      read_type(r, t);
      r.reject_unknown_keys();
      top.add_problems(r.problems());
      cfg.types.emplace(name, std::move(t));
    }
  }
  if (auto spaces = top.table("key_spaces")) {
    for (auto&& [key, node] : *spaces) {
      std::string name{key.str()};
      auto r = top.entry("key_spaces", node, name);
      key_space_config space;
      space.name = name;
      r.read("limit", space.limit, std::numeric_limits<int64_t>::min(),
             std::numeric_limits<int64_t>::max());
      if (!r.has("limit")) r.fail("limit", "is required: the running tasks allowed per key");
      r.read_limits("keys", space.keys);
      r.read("class_path", space.class_path);
      r.read_limits("classes", space.classes);
      r.read("rate", space.rate);
      r.read("period", space.period);
      r.reject_unknown_keys();
      top.add_problems(r.problems());
      cfg.key_spaces.emplace(name, std::move(space));
    }
  }
  top.reject_unknown_keys();
  return top.problems();
}

/// Parses the value of an override as TOML; a bare word is taken as a string.
toml::table parse_override_value(const std::string& value) {
  try {
    return toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    toml::table t;
    t.insert_or_assign("v", value);
    return t;
  }
}

caf::error apply_override(toml::table& root, const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    return config_error("override '" + assignment + "'", "must have the form section.key=value");
  auto path = assignment.substr(0, eq);
  auto value = parse_override_value(assignment.substr(eq + 1));
  toml::table* table = &root;
  std::string::size_type start = 0;
  for (auto dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    auto part = path.substr(start, dot - start);
    auto [it, inserted] = table->emplace(part, toml::table{});
    if (!it->second.is_table())
      return config_error("override '" + assignment + "'", "'" + part + "' is not a section");
    table = it->second.as_table();
    start = dot + 1;
  }
  table->insert_or_assign(path.substr(start), *value.get("v"));
  return caf::none;
}

void set_from_environment(toml::table& root, const char* section, const char* key,
                          const char* variable) {
  auto value = std::getenv(variable);
  if (!value || !*value) return;
  auto [it, inserted] = root.emplace(section, toml::table{});
  if (auto table = it->second.as_table()) table->insert_or_assign(key, std::string{value});
}

std::string default_node_name(const config& cfg) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "node");
  auto addr = parse_listen_address(cfg.api.listen, "api.listen");
  return std::string{host} + "-" + (addr ? std::to_string(addr->second) : "0");
}

}  // namespace

const char* executor_name(executor_kind kind) {
  switch (kind) {
    case executor_kind::noop:
      return "noop";
    case executor_kind::sleep:
      return "sleep";
    case executor_kind::fail:
      return "fail";
    case executor_kind::http:
      return "http";
    case executor_kind::caf:
      return "caf";
    case executor_kind::none:
      break;
  }
  return "";
}

types_run types_run_here(const config& cfg) {
  auto runs_here = [](executor_kind executor) {
    return executor != executor_kind::none && executor != executor_kind::caf;
  };
  types_run out;
  out.any = runs_here(cfg.default_type.executor);
  for (const auto& [name, t] : cfg.types)
    if (runs_here(t.executor)) out.types.push_back(name);
  return out;
}

std::string alert_rules_json(const config::alerts_section& alerts) {
  auto rule_json = [](const alert_rule& rule) {
    nlohmann::json out = nlohmann::json::object();
    if (rule.dead_task) out["dead_task"] = *rule.dead_task;
    if (rule.failure_rate) out["failure_rate"] = *rule.failure_rate;
    if (rule.record_failure_rate) out["record_failure_rate"] = *rule.record_failure_rate;
    if (rule.missed_firings) out["missed_firings"] = *rule.missed_firings;
    if (rule.pending_after) out["pending_after_ms"] = rule.pending_after->count();
    return out;
  };
  nlohmann::json types = nlohmann::json::object();
  for (const auto& [name, rule] : alerts.types) types[name] = rule_json(rule);
  nlohmann::json jobs = nlohmann::json::object();
  for (const auto& [name, rule] : alerts.jobs) jobs[name] = rule_json(rule);
  return json::dump(
      nlohmann::json{{"default", rule_json(alerts.defaults)}, {"types", types}, {"jobs", jobs}});
}

const task_type_config& config::type_config(const std::string& type) const {
  auto it = types.find(type);
  return it != types.end() ? it->second : default_type;
}

caf::expected<milliseconds> parse_duration(const std::string& text) {
  int64_t number = 0;
  auto begin = text.data();
  auto end = text.data() + text.size();
  auto [rest, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc{} || number < 0)
    return make_error(errc::invalid_argument, "bad duration " + quote_input(text));
  std::string unit{rest, end};
  static const std::map<std::string, int64_t> factors{
      {"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
  auto factor = factors.find(unit);
  if (factor == factors.end())
    return make_error(errc::invalid_argument, "bad duration unit in " + quote_input(text));
  if (number > max_duration.count() / factor->second)
    return make_error(errc::invalid_argument,
                      "duration " + quote_input(text) + " is longer than 100 years");
  return milliseconds{number * factor->second};
}

caf::expected<std::pair<std::string, uint16_t>> parse_listen_address(const std::string& text,
                                                                     const std::string& field) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return make_error(errc::invalid_argument,
                      field + " must be host:port, got " + quote_input(text));
  int port = -1;
  auto ptr = text.data() + colon + 1;
  auto end = text.data() + text.size();
  auto [rest, ec] = std::from_chars(ptr, end, port);
  if (ec != std::errc{} || rest != end || port < 0 || port > 65535)
    return make_error(errc::invalid_argument, field + " has a bad port in '" + text + "'");
  return std::pair{text.substr(0, colon), static_cast<uint16_t>(port)};
}

caf::expected<config> load_config(const std::string& path,
                                  const std::vector<std::string>& overrides, std::string* effective,
                                  secrets shown_secrets) {
  toml::table root;
  std::string where = path.empty() ? "defaults" : path;
  if (!path.empty()) {
    try {
      root = toml::parse_file(path);
    } catch (const toml::parse_error& e) {
      std::ostringstream msg;
      msg << e.description() << " (line " << e.source().begin.line << ", column "
          << e.source().begin.column << ")";
      return config_error(path, msg.str());
    }
  }
  // The environment overrides the file; the command line overrides both.
  set_from_environment(root, "database", "url", "TASKMILL_DATABASE_URL");
  set_from_environment(root, "database", "pooler", "TASKMILL_DATABASE_POOLER");
  set_from_environment(root, "api", "token", "TASKMILL_API_TOKEN");
  set_from_environment(root, "cluster", "secret", "TASKMILL_CLUSTER_SECRET");
  for (const auto& o : overrides)
    if (auto err = apply_override(root, o)) return err;
  config cfg;
  toml::table shown;
  if (auto problems = read_sections(root, cfg, effective ? &shown : nullptr); !problems.empty()) {
    std::string all;
    for (const auto& problem : problems)
      all += (all.empty() ? "" : "\nconfig: " + where + ": ") + problem;
    return config_error(where, all);
  }
  if (cfg.node.name.empty()) cfg.node.name = default_node_name(cfg);
  if (effective) *effective = effective_toml(shown, cfg, shown_secrets == secrets::masked);
  return cfg;
}

}  // namespace taskmill
