#pragma once

// The bench's raw-SQL throughput ceilings: the same work as the node's, done
// by plain SQL on a table of its own (insert, claim with SKIP LOCKED,
// complete), the bounds the node's rates are measured against. The pickup's
// floor as plain SQL stays with the latency measurements (bench.cpp).

#include "tools/bench/harness.hpp"

#include <functional>
#include <string>

namespace taskmill::bench {

/// How plain SQL did the work: `batch` rows a statement from `workers`
/// connections.
struct sql_shape {
  int batch;
  int workers;
};

/// The best rate plain SQL reached and how.
struct ceiling {
  double rate = 0;
  sql_shape shape{};
};

/// Tasks per second of the same work as plain SQL: each connection inserting,
/// claiming (SKIP LOCKED) and completing a batch at a time, `tasks` at least.
double raw_sql_rate(const std::string& conninfo, int tasks, sql_shape shape);

/// Tasks per second of the drain as plain SQL: `tasks` due jobs loaded
/// first, then claimed and completed a batch at a time until none is left.
double raw_drain_rate(const std::string& conninfo, int tasks, sql_shape shape);

/// The best of `rate` over batches of 100, 1,000 and 5,000 from 1, 2 and 4
/// connections: what plain SQL achieves on this server, not one way of it.
ceiling best_ceiling(const std::function<double(sql_shape)>& rate);

/// "batch 1000, 4 connections".
std::string describe(const sql_shape& shape);

/// Rows per second inserted one per autocommit statement from `clients`
/// connections: the ceiling of one-task submits at that concurrency.
double raw_insert_rate(const std::string& conninfo, int clients, double seconds);

}  // namespace taskmill::bench
