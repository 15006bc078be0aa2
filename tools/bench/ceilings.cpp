#include "tools/bench/ceilings.hpp"

#include <atomic>
#include <vector>

namespace taskmill::bench {
namespace {

std::vector<db::connection> connect_all(const std::string& conninfo, int n) {
  std::vector<db::connection> conns;
  for (int i = 0; i < n; ++i) conns.push_back(connect(conninfo));
  return conns;
}

/// Claims a batch of raw jobs for `worker` and completes them; answers
/// whether there were any.
bool raw_claim_and_complete(db::connection& conn, const std::string& worker, int batch) {
  auto claimed = run(conn, sql::raw_claim, {worker, std::to_string(batch)});
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

double raw_sql_rate(const std::string& conninfo, int tasks, sql_shape shape) {
  {
    auto conn = connect(conninfo);
    run(conn, sql::raw_reset);
  }
  auto conns = connect_all(conninfo, shape.workers);
  // Whole batches: a worker's share rounded up.
  int rounds = (tasks / shape.workers + shape.batch - 1) / shape.batch;
  auto start = steady::now();
  in_parallel(shape.workers, [&](int w) {
    auto& conn = conns[w];
    auto name = "raw-" + std::to_string(w);
    for (int round = 0; round < rounds && !interrupted; ++round) {
      run(conn, sql::raw_insert, {std::to_string(shape.batch)});
      raw_claim_and_complete(conn, name, shape.batch);
    }
    // Claims that skipped the other workers' locked rows leave some behind.
    while (!interrupted && raw_claim_and_complete(conn, name, shape.batch)) {
    }
  });
  auto elapsed = seconds_since(start);
  check_interrupted();
  check_raw_finished(conns[0], "raw SQL");
  return static_cast<double>(rounds) * shape.batch * shape.workers / elapsed;
}

double raw_drain_rate(const std::string& conninfo, int tasks, sql_shape shape) {
  {
    auto conn = connect(conninfo);
    run(conn, sql::raw_reset);
    run(conn, sql::raw_insert, {std::to_string(tasks)});
    run(conn, sql::vacuum_raw);
  }
  auto conns = connect_all(conninfo, shape.workers);
  auto start = steady::now();
  in_parallel(shape.workers, [&](int w) {
    auto name = "raw-" + std::to_string(w);
    while (!interrupted && raw_claim_and_complete(conns[w], name, shape.batch)) {
    }
  });
  auto elapsed = seconds_since(start);
  check_interrupted();
  check_raw_finished(conns[0], "raw drain");
  return tasks / elapsed;
}

ceiling best_ceiling(const std::function<double(sql_shape)>& rate) {
  ceiling best;
  for (int batch : {100, 1000, 5000})
    for (int workers : {1, 2, 4}) {
      sql_shape shape{batch, workers};
      if (auto r = rate(shape); r > best.rate) best = {r, shape};
    }
  return best;
}

std::string describe(const sql_shape& shape) {
  return "batch " + std::to_string(shape.batch) + ", " + std::to_string(shape.workers) +
         (shape.workers == 1 ? " connection" : " connections");
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
