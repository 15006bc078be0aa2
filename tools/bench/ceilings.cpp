#include "tools/bench/ceilings.hpp"

#include <atomic>
#include <vector>

namespace taskmill::bench {
namespace {

constexpr int raw_batch = 100;

std::vector<db::connection> connect_all(const std::string& conninfo, int n) {
  std::vector<db::connection> conns;
  for (int i = 0; i < n; ++i) conns.push_back(connect(conninfo));
  return conns;
}

/// Claims a batch of raw jobs for `worker` and completes them; answers
/// whether there were any.
bool raw_claim_and_complete(db::connection& conn, const std::string& worker) {
  auto claimed = run(conn, sql::raw_claim, {worker, std::to_string(raw_batch)});
  if (claimed.rows() == 0) return false;
  std::vector<db::param> ids;
  for (int r = 0; r < claimed.rows(); ++r) ids.push_back(claimed.string(r, 0));
  run(conn, sql::raw_complete, {db::array_literal(ids)});
  return true;
}

/// Fails when raw jobs were left unfinished.
void check_raw_finished(db::connection& conn, const char* what) {
  auto unfinished = run(conn, sql::raw_unfinished).int64(0, 0);
  if (unfinished != 0)
    throw bench_failure{std::string{what} + ": " + std::to_string(unfinished) +
                        " jobs left unfinished"};
}

}  // namespace

double raw_sql_rate(const std::string& conninfo, int tasks, int workers) {
  {
    auto conn = connect(conninfo);
    run(conn, sql::raw_reset);
  }
  auto conns = connect_all(conninfo, workers);
  auto start = steady::now();
  in_parallel(workers, [&](int w) {
    auto& conn = conns[w];
    auto name = "raw-" + std::to_string(w);
    for (int done = 0; done < tasks / workers && !interrupted; done += raw_batch) {
      run(conn, sql::raw_insert, {std::to_string(raw_batch)});
      raw_claim_and_complete(conn, name);
    }
    // Claims that skipped the other worker's locked rows leave some behind.
    while (!interrupted && raw_claim_and_complete(conn, name)) {
    }
  });
  auto elapsed = seconds_since(start);
  check_interrupted();
  check_raw_finished(conns[0], "raw SQL");
  return (tasks / workers) * workers / elapsed;
}

double raw_drain_rate(const std::string& conninfo, int tasks, int workers) {
  {
    auto conn = connect(conninfo);
    run(conn, sql::raw_reset);
    run(conn, sql::raw_insert, {std::to_string(tasks)});
    run(conn, sql::vacuum_raw);
  }
  auto conns = connect_all(conninfo, workers);
  auto start = steady::now();
  in_parallel(workers, [&](int w) {
    auto name = "raw-" + std::to_string(w);
    while (!interrupted && raw_claim_and_complete(conns[w], name)) {
    }
  });
  auto elapsed = seconds_since(start);
  check_interrupted();
  check_raw_finished(conns[0], "raw drain");
  return tasks / elapsed;
}

double raw_insert_rate(const std::string& conninfo, int clients, double seconds) {
  {
    auto conn = connect(conninfo);
    run(conn, sql::raw_reset);
  }
  auto conns = connect_all(conninfo, clients);
  std::atomic<int64_t> inserted{0};
  auto start = steady::now();
  auto deadline =
      start + std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>{seconds});
  in_parallel(clients, [&](int c) {
    while (steady::now() < deadline && !interrupted) {
      run(conns[c], sql::raw_insert_one, {std::string{R"({"n": 1})"}});
      ++inserted;
    }
  });
  auto elapsed = seconds_since(start);
  check_interrupted();
  return static_cast<double>(inserted) / elapsed;
}

}  // namespace taskmill::bench
