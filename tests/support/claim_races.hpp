#pragma once

// Claimers racing on connections of their own (the claims' and keys' race
// tests): what they claimed, and the checks every race ends with.

#include "tests/support/task_sql.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace taskmill::test::races {

/// What racing claimers saw: how many times each (id, attempt) was claimed,
/// and how many statements failed.
struct race_record {
  std::mutex mtx;
  std::map<std::pair<int64_t, int>, int> runs;
  std::atomic<int> errors{0};

  int claimed_twice() const {
    int twice = 0;
    for (const auto& [run, times] : runs) twice += times > 1;
    return twice;
  }
};

/// What a claimer does with a batch it claimed, on its connection.
using race_finish =
    std::function<void(db::connection& conn, std::mt19937& rng, const std::vector<int64_t>& ids,
                       const std::vector<int64_t>& attempts)>;

/// `workers` claimers, each on a connection of its own, claim with the SQL
/// `claim_of` gives them (rows: the id first, the attempt in column
/// `attempt_column`) until fifty claims in a row find nothing (or fail), and hand each
/// batch to `finish`, which reports its outcomes on the same connection.
void race_claimers(const task_database& db, int workers, int attempt_column, race_record& record,
                   const std::function<std::string(int worker, std::mt19937& rng)>& claim_of,
                   const race_finish& finish);

/// A claim by worker `worker` of random turns over the five levels, for up
/// to `beyond` more tasks than the turns (room filled in claim order over all
/// levels), under the limits `limits` (claim_by_turns' arguments from
/// p_capped_types to p_global_limit, as SQL).
std::string claim_by_random_turns(int worker, std::mt19937& rng, int beyond,
                                  const std::string& limits);

/// A PostgreSQL array literal of integers.
std::string integers(const std::vector<int64_t>& values);

/// Outcomes for a race's claimers: a third of the executions fail and are
/// retried; outcomes that do not apply are counted in `stale`.
race_finish finish_a_third_retried(race_record& record, std::atomic<int>& stale);

/// After a race of claimers that retried a third: nothing failed or was
/// stale, no task ran twice under one attempt, every task finished, and each
/// ran exactly as many times as its attempt counter says, retries included.
void check_every_task_ran_once_an_attempt(const task_database& db, race_record& record,
                                          const std::atomic<int>& stale, int tasks);

/// From now on, every commit that starts a keyed task counts that task's
/// key's running tasks against its limit, in the test database, and notes
/// each time one passes it (key_limits_passed).
void check_key_limits_at_commit(const task_database& db);
int64_t key_limits_passed(const task_database& db);

}  // namespace taskmill::test::races
