#include "tools/bench/flows.hpp"

#include <thread>

namespace taskmill::bench {

double chain_step_ms(bench_node& node, db::connection& conn, const char* type, int steps) {
  node.stop();
  run(conn, sql::reset_tasks);
  run(conn, sql::submit_chain, {std::string{type}, std::to_string(steps)});
  node.start();
  await_succeeded(conn, {type}, steps);
  node.stop();
  return 1000 * run(conn, sql::chain_seconds, {std::string{type}}).float64(0, 0) / steps;
}

progress_run progress_reports(bench_node& node, db::connection& conn, const std::string& conninfo,
                              int tasks, double seconds) {
  constexpr auto every = milliseconds{100};
  run(conn, sql::reset_tasks);
  run(conn, sql::track_function_calls);
  run(conn, sql::reload_configuration);
  node.start();
  auto run_ms = static_cast<int>(seconds * 1000) + 30'000;
  run(conn, sql::submit_talking,
      {std::string{talking_type}, std::to_string(tasks), std::to_string(run_ms)});
  std::vector<std::string> ids;
  auto deadline = steady::now() + std::chrono::seconds{30};
  while (static_cast<int>(ids.size()) < tasks) {
    if (steady::now() > deadline) throw bench_failure{"progress: the tasks did not all start"};
    sleep_checked(milliseconds{50});
    auto res = run(conn, sql::running_ids, {std::string{talking_type}});
    ids.clear();
    for (int i = 0; i < res.rows(); ++i) ids.push_back(res.string(i, 0));
  }
  std::atomic<int64_t> answered{0};
  auto start = steady::now();
  auto stop =
      start + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>{seconds});
  struct sample {
    steady::time_point at;
    int64_t answered = 0;
    int64_t statements = 0;
  } first, last;
  std::string sampler_failure;
  std::thread sampler{[&] {
    try {
      auto sample_conn = connect(conninfo);
      auto take = [&](sample& s, steady::time_point when) {
        std::this_thread::sleep_until(when);
        s.at = steady::now();
        s.answered = answered.load();
        s.statements = run(sample_conn, sql::progress_statements).int64(0, 0);
      };
      take(first, start + milliseconds{1500});
      take(last, stop - milliseconds{500});
    } catch (const std::exception& e) {
      sampler_failure = e.what();
    }
  }};
  auto report_every_round = [&](int task) {
    http_session session{node.api()};
    auto body = std::string{R"({"attempt": 1, "processed": )"};
    for (auto next = start; next < stop && !interrupted; next += every) {
      auto res = session.call("POST", "/v1/tasks/" + ids[task] + "/progress",
                              body + std::to_string(answered.load()) + "}");
      if (!res || res->status != 200)
        throw bench_failure{"progress: a report failed: " +
                            (res ? res->body : error_message(res.error()))};
      ++answered;
      std::this_thread::sleep_until(next + every);
    }
  };
  try {
    in_parallel(tasks, report_every_round);
  } catch (...) {
    sampler.join();
    throw;
  }
  sampler.join();
  check_interrupted();
  if (!sampler_failure.empty()) throw bench_failure{"progress: " + sampler_failure};
  run(conn, sql::cancel_type, {std::string{talking_type}});
  node.stop();
  run(conn, sql::untrack_function_calls);
  run(conn, sql::reload_configuration);
  auto window = std::chrono::duration<double>(last.at - first.at).count();
  return {static_cast<double>(last.answered - first.answered) / window,
          static_cast<double>(last.statements - first.statements) / window};
}

fan_run fan_out_and_in(bench_node& node, db::connection& conn, const char* type, int children) {
  node.stop();
  run(conn, sql::reset_tasks);
  auto submitted = steady::now();
  run(conn, "BEGIN");
  run(conn, sql::submit_fan_out, {std::string{type}, std::to_string(children)});
  run(conn, sql::submit_fan_in, {std::string{type}, std::to_string(children)});
  run(conn, "COMMIT");
  auto submit_s = seconds_since(submitted);
  run(conn, sql::vacuum_tasks);
  node.start();
  await_succeeded(conn, {type}, children + 2);
  node.stop();
  auto res = run(conn, sql::fan_seconds, {std::string{type}});
  return {submit_s, res.float64(0, 0), 1000 * res.float64(0, 1)};
}

}  // namespace taskmill::bench
