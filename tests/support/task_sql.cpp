#include "tests/support/task_sql.hpp"

#include "messages/errors.hpp"
#include "storage/rows.hpp"
#include "storage/statements.hpp"
#include "tools/node/node.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace taskmill::test {

namespace {

constexpr const char* task_columns =
    "id, type, key, version, status, priority, payload::text, coalesce(error, ''), attempt, "
    "retry_count, max_retries, timeout_ms, coalesce(picked_by, ''), coalesce(batch, ''), trace_id, "
    "CASE WHEN execute_at = 'infinity' THEN 'Infinity'::float8 "
    "ELSE extract(epoch from execute_at - now())::float8 END";

std::string text_or_empty(const db::result& res, int row, const char* name) {
  auto col = res.column(name);
  return col < 0 ? std::string{} : res.string(row, col);
}

}  // namespace

int64_t buffers_of(db::connection& conn, const std::string& sql) {
  auto res = conn.exec("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql);
  BOOST_REQUIRE_MESSAGE(res, describe(res));
  auto plan = nlohmann::json::parse(res->string(0, 0))[0]["Plan"];
  return plan.value("Shared Hit Blocks", int64_t{0}) + plan.value("Shared Read Blocks", int64_t{0});
}

task_row read_task_row(const db::result& res, int row) {
  task_row t;
  t.outcome = text_or_empty(res, row, "outcome");
  int base = res.column("id");
  t.id = res.int64(row, base);
  t.type = res.string(row, base + 1);
  t.key = res.string(row, base + 2);
  t.version = res.int64(row, base + 3);
  t.status = res.string(row, base + 4);
  t.priority = res.int32(row, base + 5);
  t.payload = res.string(row, base + 6);
  t.error = res.string(row, base + 7);
  t.attempt = res.int32(row, base + 8);
  t.retry_count = res.int32(row, base + 9);
  t.max_retries = res.int32(row, base + 10);
  t.timeout_ms = res.int32(row, base + 11);
  t.picked_by = res.string(row, base + 12);
  t.batch = res.string(row, base + 13);
  t.trace_id = res.string(row, base + 14);
  t.execute_in_s = res.float64(row, base + 15);
  return t;
}

std::vector<std::tuple<int, std::string, std::string>> pre_baseline_migrations() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator{
           std::filesystem::path{TASKMILL_SOURCE_DIR} / "tests/upgrade/legacy_v8"})
    files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::vector<std::tuple<int, std::string, std::string>> out;
  for (const auto& file : files) {
    auto base = file.stem().string();
    std::ifstream in{file};
    std::string sql{std::istreambuf_iterator<char>{in}, {}};
    out.emplace_back(std::stoi(base.substr(0, 3)), base.substr(4), std::move(sql));
  }
  return out;
}

void apply_pre_baseline_migrations(db::connection& conn) {
  // As those releases did: no definitions, only the migrations and their
  // records.
  auto exec = [&](const std::string& sql, const std::vector<db::param>& params = {}) {
    auto r = params.empty() ? conn.exec(sql) : conn.exec(sql, params);
    BOOST_REQUIRE_MESSAGE(r, describe(r));
  };
  exec(
      "CREATE SCHEMA taskmill; CREATE TABLE taskmill.schema_migrations ("
      "  version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
      "  applied_at timestamptz NOT NULL DEFAULT now())");
  for (const auto& [version, name, sql] : pre_baseline_migrations()) {
    exec(sql);
    exec("INSERT INTO taskmill.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
         {std::to_string(version), name, db::migration_checksum(sql.c_str())});
  }
}

task_database::task_database(const std::string& label) : scratch_database(label) {
  auto conn = connect();
  if (std::getenv("TASKMILL_TEST_UPGRADED_SCHEMA")) apply_pre_baseline_migrations(conn);
  auto applied = db::apply_migrations(conn, db::all_migrations());
  BOOST_REQUIRE_MESSAGE(applied, describe(applied));
  write_default_type_settings(conn);
}

void write_default_type_settings(db::connection& conn) {
  auto defaults =
      conn.exec(db::sql::put_type_settings.sql, db::type_settings_params(type_settings(config{})));
  BOOST_REQUIRE_MESSAGE(defaults, describe(defaults));
}

namespace {

std::string call_sql(const std::string& call) {
  return std::string{"SELECT f.outcome, "} + task_columns + " FROM taskmill." + call +
         " f, LATERAL (SELECT (f.task).*) t";
}

}  // namespace

task_row task_database::call(const std::string& call) const {
  auto res = exec(call_sql(call));
  BOOST_REQUIRE_EQUAL(res.rows(), 1);
  return read_task_row(res, 0);
}

task_row task_database::call_on(db::connection& conn, const std::string& call) {
  auto res = conn.exec(call_sql(call));
  BOOST_REQUIRE_MESSAGE(res, describe(res));
  BOOST_REQUIRE_EQUAL(res->rows(), 1);
  return read_task_row(*res, 0);
}

std::vector<task_row> task_database::unit(const std::string& type, const std::string& key) const {
  auto res = exec(std::string{"SELECT '' AS outcome, "} + task_columns +
                      " FROM taskmill.tasks WHERE type = $1 AND key = $2 ORDER BY id",
                  {type, key});
  std::vector<task_row> out;
  for (int i = 0; i < res.rows(); ++i) out.push_back(read_task_row(res, i));
  return out;
}

void task_database::insert_tasks(int n, const std::string& type, const std::string& execute_at,
                                 const std::string& priority) const {
  exec(
      "INSERT INTO taskmill.tasks (type, key, execute_at, trace_id, priority, max_retries, "
      "timeout_ms, backoff_kind, backoff_base_ms, backoff_cap_ms, backoff_jitter) SELECT " +
      type + ", 'k-' || g, " + execute_at + ", md5(g::text), " + priority +
      ", 2, 5000, 'fixed', 1, 1000, 0 FROM generate_series(1, " + std::to_string(n) + ") g");
}

task_row task_database::by_id(int64_t id) const {
  auto res = exec(
      std::string{"SELECT '' AS outcome, "} + task_columns + " FROM taskmill.tasks WHERE id = $1",
      {std::to_string(id)});
  BOOST_REQUIRE_EQUAL(res.rows(), 1);
  return read_task_row(res, 0);
}

std::vector<task_row> task_database::claim(int n, const std::string& node) const {
  auto res = exec(
      std::string{"SELECT '' AS outcome, "} + task_columns +
          " FROM taskmill.claim($1, $2, '{}', '{}', '{}', 0, NULL, NULL, NULL) ORDER BY priority, "
          "execute_at, id",
      {node, std::to_string(n)});
  std::vector<task_row> out;
  for (int i = 0; i < res.rows(); ++i) out.push_back(read_task_row(res, i));
  return out;
}

bool task_database::complete(int64_t id, int attempt, const std::string& outcome,
                             const std::string& error) const {
  auto res = exec(
      "SELECT applied FROM taskmill.complete_many(ARRAY[$1::bigint], ARRAY[$2::int], ARRAY[$3], "
      "ARRAY[NULL::jsonb], ARRAY[$4], 'n1')",
      {std::to_string(id), std::to_string(attempt), outcome,
       error.empty() ? db::param{} : db::param{error}});
  return res.boolean(0, 0);
}

std::string task_database::error_of(const std::string& sql) const {
  auto conn = connect();
  auto res = conn.exec(sql);
  BOOST_REQUIRE_MESSAGE(!res, "expected an error from: " << sql);
  return error_message(res.error());
}

std::string task_database::seize_lead() const {
  return scalar(
      "UPDATE taskmill.leadership SET node = 'test', incarnation = 'test', term = term + 1, "
      "expires_at = now() + interval '1 day' RETURNING term");
}

}  // namespace taskmill::test
