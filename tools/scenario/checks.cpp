// What a scenario waits for and checks: counts, SQL, and the invariants of
// its executors' deliveries and the nodes' history (SPEC §9).

#include "messages/time.hpp"
#include "tools/percentile.hpp"
#include "tools/scenario/runner.hpp"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

namespace taskmill::scenario::detail {

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

}  // namespace taskmill::scenario::detail
