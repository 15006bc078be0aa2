#include "tools/bench/harness.hpp"

#include <libpq-fe.h>

#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

namespace taskmill::bench {

std::atomic<bool> interrupted{false};

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

db::result run(db::connection& conn, const char* statement, const std::vector<db::param>& params) {
  auto res = conn.exec(statement, params);
  if (!res) throw bench_failure{error_message(res.error())};
  return std::move(*res);
}

db::result run(db::connection& conn, const char* statement) {
  auto res = conn.exec(statement);
  if (!res) throw bench_failure{error_message(res.error())};
  return std::move(*res);
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

void await_succeeded(db::connection& conn, const type_list& types, int64_t expected) {
  constexpr auto least = milliseconds{50};
  constexpr auto most = milliseconds{1000};
  int64_t last = -1;
  auto last_change = steady::now();
  std::optional<std::pair<steady::time_point, int64_t>> first_seen;
  while (true) {
    auto succeeded = run(conn, sql::finished_count, {types_param(types)}).int64(0, 0);
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
  node.start();
  await_succeeded(conn, types, window);
  node.stop();
  auto res = run(conn, sql::claim_window, {types_param(types)});
  auto counts = count_tasks(conn, types);
  if (counts.claimed_again != 0)
    throw bench_failure{"drain: " + std::to_string(counts.claimed_again) +
                        " tasks claimed more than once"};
  return static_cast<double>(res.int64(0, 1)) / res.float64(0, 0);
}

}  // namespace taskmill::bench
