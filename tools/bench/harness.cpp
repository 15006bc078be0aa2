#include "tools/bench/harness.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

namespace taskmill::bench {

std::atomic<bool> interrupted{false};

extern "C" void on_interrupt(int) {
  interrupted = true;
}

void check_interrupted() {
  if (interrupted) throw bench_failure{"interrupted"};
}

void progress(const std::string& line) {
  std::cerr << "bench: " << line << std::endl;
}

double seconds_since(steady::time_point start) {
  return std::chrono::duration<double>(steady::now() - start).count();
}

void sleep_checked(milliseconds d) {
  check_interrupted();
  std::this_thread::sleep_for(d);
}

std::string with_dbname(const std::string& conninfo, const std::string& dbname) {
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &err);
  if (!options) {
    std::string message = err ? err : "cannot parse the connection string";
    PQfreemem(err);
    throw bench_failure{"--database: " + message};
  }
  auto quote = [](const std::string& v) {
    std::string out = "'";
    for (char c : v) {
      if (c == '\'' || c == '\\') out += '\\';
      out += c;
    }
    return out + "'";
  };
  std::string out;
  for (auto* o = options; o->keyword; ++o) {
    std::string keyword = o->keyword;
    if (keyword == "dbname" || !o->val) continue;
    out += keyword + "=" + quote(o->val) + " ";
  }
  PQconninfoFree(options);
  return out + "dbname=" + quote(dbname);
}

db::connection connect(const std::string& conninfo) {
  auto conn = db::connection::open(conninfo, std::chrono::minutes{10}, std::chrono::minutes{1});
  if (!conn) throw bench_failure{"cannot connect: " + error_message(conn.error())};
  return std::move(*conn);
}

namespace {

// The bench's own statements race the nodes it runs (a reset's TRUNCATE
// against a leader's first sweeps); a deadlock rolls a statement back whole,
// so it runs again.
// Inside a transaction the deadlock aborted it, so a second try fails at
// once; the first failure is the one reported.
template <class Exec>
db::result run_until_not_deadlocked(const Exec& exec) {
  constexpr int tries = 5;
  caf::error first;
  for (int tried = 1;; ++tried) {
    auto res = exec();
    if (res) return std::move(*res);
    if (!first) first = res.error();
    if (!is(res.error(), errc::retryable) || tried == tries)
      throw bench_failure{error_message(first)};
    std::this_thread::sleep_for(std::chrono::milliseconds{100 * tried});
  }
}

}  // namespace

db::result run(db::connection& conn, const char* statement, const std::vector<db::param>& params) {
  return run_until_not_deadlocked([&] { return conn.exec(statement, params); });
}

db::result run(db::connection& conn, const char* statement) {
  return run_until_not_deadlocked([&] { return conn.exec(statement); });
}

void in_parallel(int n, const std::function<void(int)>& work) {
  std::mutex guard;
  std::string failure;
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        work(i);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock{guard};
        if (failure.empty()) failure = e.what();
      }
    });
  for (auto& t : threads) t.join();
  if (!failure.empty()) throw bench_failure{failure};
}

std::string types_param(const type_list& types) {
  return db::array_literal_of(types, [](const std::string& t) { return db::param{t}; });
}

task_counts count_tasks(db::connection& conn, const type_list& types) {
  auto res = run(conn, sql::succeeded_count, {types_param(types)});
  return {res.int64(0, 0), res.int64(0, 1), res.int64(0, 2)};
}

void await_succeeded(db::connection& conn, const type_list& types, int64_t expected,
                     const std::string& finished_since) {
  constexpr auto least = milliseconds{50};
  constexpr auto most = milliseconds{1000};
  int64_t last = -1;
  auto last_change = steady::now();
  std::optional<std::pair<steady::time_point, int64_t>> first_seen;
  while (true) {
    auto succeeded =
        run(conn, sql::finished_count, {types_param(types), finished_since}).int64(0, 0);
    if (succeeded >= expected) return;
    auto now = steady::now();
    if (succeeded != last) {
      last = succeeded;
      last_change = now;
    } else if (seconds_since(last_change) > 30) {
      throw bench_failure{"no " + types.front() + " task finished for 30 s; " +
                          std::to_string(succeeded) + " of " + std::to_string(expected) +
                          " succeeded"};
    }
    auto pause = least;
    if (!first_seen) {
      first_seen.emplace(now, succeeded);
    } else if (succeeded > first_seen->second) {
      double per_second = static_cast<double>(succeeded - first_seen->second) /
                          std::chrono::duration<double>(now - first_seen->first).count();
      auto left = milliseconds{
          static_cast<int64_t>(500.0 * static_cast<double>(expected - succeeded) / per_second)};
      pause = std::clamp(left, least, most);
    }
    sleep_checked(pause);
  }
}

std::string short_count(int n) {
  if (n >= 1'000'000) return std::to_string(n / 1'000'000) + "M";
  return n >= 1000 ? std::to_string(n / 1000) + "k" : std::to_string(n);
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

double drain_rate(bench_node& node, db::connection& conn, const type_list& types, int window,
                  const std::function<void()>& load) {
  node.stop();
  auto loaded = steady::now();
  load();
  run(conn, sql::vacuum_tasks);
  // Every drain starts from a checkpoint: otherwise the one that loading a
  // million rows set off lands in the measured window.
  if (auto done = conn.exec(sql::checkpoint); !done)
    progress("  no CHECKPOINT (" + error_message(done.error()) + ")");
  progress("  loaded in " + fixed(seconds_since(loaded), 2) + " s");
  auto started = run(conn, sql::now).string(0, 0);
  node.start();
  await_succeeded(conn, types, window, started);
  node.stop();
  auto res = run(conn, sql::claim_window, {types_param(types)});
  auto counts = count_tasks(conn, types);
  if (counts.claimed_again != 0)
    throw bench_failure{"drain: " + std::to_string(counts.claimed_again) +
                        " tasks claimed more than once"};
  return static_cast<double>(res.int64(0, 1)) / res.float64(0, 0);
}

namespace {

struct function_time {
  int64_t calls = 0;
  double total_ms = 0;
  double self_ms = 0;
};

std::map<std::string, function_time> function_times(db::connection& conn) {
  std::map<std::string, function_time> out;
  auto res = run(conn, sql::claim_function_times);
  for (int i = 0; i < res.rows(); ++i)
    out[res.string(i, 0)] = {res.int64(i, 1), res.float64(i, 2), res.float64(i, 3)};
  return out;
}

}  // namespace

void time_function_calls(db::connection& conn, bool on) {
  run(conn, on ? sql::track_function_calls : sql::untrack_function_calls);
  run(conn, sql::reload_configuration);
}

drain_run profiled_drain(bench_node& node, db::connection& conn, const type_list& types, int tasks,
                         const std::function<void()>& load) {
  std::map<std::string, function_time> before;
  drain_run out{};
  out.rate = drain_rate(node, conn, types, tasks, [&] {
    load();
    // The load's own counts (the submits' functions) are not the drain's:
    // flushed at once, and read before it.
    run(conn, sql::flush_statistics);
    before = function_times(conn);
  });
  // A stopped node's sessions report their counts as they exit, a moment
  // after the node: read earlier, a drain's counts went to the next one's.
  sleep_checked(milliseconds{300});
  auto after = function_times(conn);
  auto delta = [&](const std::string& name) {
    auto a = after[name];
    auto b = before[name];
    return function_time{a.calls - b.calls, a.total_ms - b.total_ms, a.self_ms - b.self_ms};
  };
  auto claims = delta("claim_by_turns");
  // A task is held from its claim's start (started_at) past its outcome's
  // start (updated_at) until that outcome commits: the mean outcome call.
  auto outcomes = delta("complete_many");
  auto outcome_s = outcomes.calls > 0 ? outcomes.total_ms / 1000.0 / outcomes.calls : 0;
  auto claim_to_outcome_s = run(conn, sql::claim_to_outcome, {types_param(types)}).float64(0, 0);
  out.tasks_held = out.rate * (claim_to_outcome_s + outcome_s);
  out.claim_us_per_task = claims.total_ms * 1000.0 / tasks;
  out.tasks_per_claim = claims.calls > 0 ? static_cast<double>(tasks) / claims.calls : 0;
  out.node_us_per_task = node.last_cpu_seconds() * 1e6 / tasks;
  std::vector<std::pair<double, std::string>> heaviest;
  for (const auto& [name, t] : after)
    if (auto d = delta(name); d.self_ms > 0) heaviest.emplace_back(d.self_ms, name);
  std::sort(heaviest.rbegin(), heaviest.rend());
  std::string line = "  claims: " + fixed(out.claim_us_per_task, 1) + " us a task, " +
                     fixed(out.tasks_per_claim, 1) + " tasks a claim, " + fixed(out.tasks_held, 0) +
                     " held; node " + fixed(out.node_us_per_task, 1) +
                     " us a task; most time in itself:";
  for (size_t i = 0; i < std::min<size_t>(heaviest.size(), 8); ++i)
    line += " " + heaviest[i].second + " " + fixed(heaviest[i].first * 1000.0 / tasks, 1);
  progress(line);
  return out;
}

std::string task_json(const char* type, const std::string& key, const char* execute_at,
                      const char* payload) {
  std::string out = std::string{R"({"type":")"} + type + R"(","key":")" + key + '"';
  if (execute_at) out += std::string{R"(,"execute_at":")"} + execute_at + '"';
  if (payload) out += std::string{R"(,"payload":)"} + payload;
  return out + "}";
}

void post_tasks(http_session& session, const std::string& body) {
  auto res = session.call("POST", "/v1/tasks", body);
  if (!res) throw bench_failure{"submit: " + error_message(res.error())};
  if (res->status < 200 || res->status > 299)
    throw bench_failure{"submit answered " + std::to_string(res->status) + ": " +
                        res->body.substr(0, 300)};
}

}  // namespace taskmill::bench
