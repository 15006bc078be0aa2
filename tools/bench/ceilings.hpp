#pragma once

// The bench's raw-SQL throughput ceilings: the same work as the node's, done
// by plain SQL on a table of its own (insert, claim with SKIP LOCKED,
// complete), the bounds the node's rates are measured against. The pickup's
// floor as plain SQL stays with the latency measurements (bench.cpp).

#include "tools/bench/harness.hpp"

#include <string>

namespace taskmill::bench {

/// Tasks per second of the same work as plain SQL: `workers` connections,
/// each inserting, claiming (SKIP LOCKED) and completing batches of 100.
double raw_sql_rate(const std::string& conninfo, int tasks, int workers);

/// Tasks per second of the drain as plain SQL: `tasks` due jobs loaded
/// first, then claimed and completed in batches of 100 from `workers`
/// connections until none is left.
double raw_drain_rate(const std::string& conninfo, int tasks, int workers);

/// Rows per second inserted one per autocommit statement from `clients`
/// connections: the ceiling of one-task submits at that concurrency.
double raw_insert_rate(const std::string& conninfo, int clients, double seconds);

}  // namespace taskmill::bench
