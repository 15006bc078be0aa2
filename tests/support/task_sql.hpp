#pragma once

// SQL-level helpers for tests of the task rules: a migrated scratch database
// and rows of the SQL functions read into plain structs.

#include "storage/migrations.hpp"
#include "tests/support/test_database.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <tuple>
#include <vector>

namespace taskmill::test {

/// One task as a row of taskmill.tasks, with the outcome a function gave.
struct task_row {
  std::string outcome;
  int64_t id = 0;
  std::string type, key;
  int64_t version = 0;
  std::string status;
  int priority = 0;
  std::string payload;
  std::string error;
  int attempt = 0;
  int retry_count = 0;
  int max_retries = 0;
  int timeout_ms = 0;
  std::string picked_by;
  std::string batch;
  std::string trace_id;
  double execute_in_s = 0;  // execute_at - now(), in seconds; infinite while waiting for parents
};

task_row read_task_row(const db::result& res, int row);

/// Shared buffers `sql` touched, its nested statements included.
int64_t buffers_of(db::connection& conn, const std::string& sql);

/// The migrations of the releases before the baseline, as they shipped
/// (tests/upgrade/legacy_v8/): version, name, SQL.
std::vector<std::tuple<int, std::string, std::string>> pre_baseline_migrations();

/// Makes `conn`'s database as those releases did (migrations 1 to 8).
void apply_pre_baseline_migrations(db::connection& conn);

/// Writes the default type settings of an unconfigured node, as a node
/// writes its configuration's as it starts.
void write_default_type_settings(db::connection& conn);

/// A scratch database with the schema applied and the default type settings. With
/// TASKMILL_TEST_UPGRADED_SCHEMA set it is first made as the releases before
/// the baseline made it, then upgraded, so that the rule tests also run on an
/// upgraded schema.
struct task_database : scratch_database {
  explicit task_database(const std::string& label);

  /// `SELECT outcome, task FROM taskmill.<call>`; e.g. call("submit('T', 'k')").
  task_row call(const std::string& call) const;
  /// The same on a connection of the caller's (e.g. in another thread).
  static task_row call_on(db::connection& conn, const std::string& call);
  /// Every task of (type, key), oldest first.
  std::vector<task_row> unit(const std::string& type, const std::string& key) const;
  task_row by_id(int64_t id) const;
  /// Claims up to `n` due tasks for `node` with no quotas or limits.
  std::vector<task_row> claim(int n, const std::string& node = "n1") const;
  /// Reports one outcome; true if it applied.
  bool complete(int64_t id, int attempt, const std::string& outcome,
                const std::string& error = "") const;
  /// `n` tasks (g = 1..n) written straight into the table, not submitted: the
  /// type, execute_at and priority of each are SQL expressions over g. Two
  /// retries each, due again 1 ms after a failure.
  void insert_tasks(int n, const std::string& type, const std::string& execute_at,
                    const std::string& priority = "3") const;
  /// The error a statement fails with (fails the test if it succeeds).
  std::string error_of(const std::string& sql) const;
  /// Takes the lead for the test, for a day, from whoever holds it; answers
  /// the term the leader's functions (sweeps, firings, alerts) take.
  std::string seize_lead() const;
};

}  // namespace taskmill::test
