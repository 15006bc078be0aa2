#include "tools/node/config_check.hpp"

#include "messages/errors.hpp"
#include "messages/text.hpp"
#include "storage/job_rows.hpp"
#include "storage/lock_table.hpp"
#include "storage/migrations.hpp"
#include "storage/pg.hpp"
#include "storage/rows.hpp"
#include "storage/statements.hpp"
#include "tools/node/node.hpp"
#include "tools/postgres/embedded_postgres.hpp"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

namespace taskmill {

namespace {

namespace fs = std::filesystem;

template <class T, void (*Free)(T*)>
using owned = std::unique_ptr<T, decltype([](T* p) { Free(p); })>;

using x509_ptr = owned<X509, X509_free>;
using key_ptr = owned<EVP_PKEY, EVP_PKEY_free>;

x509_ptr read_certificate(const std::string& path) {
  owned<BIO, BIO_free_all> bio{BIO_new_file(path.c_str(), "r")};
  if (!bio) return nullptr;
  return x509_ptr{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)};
}

key_ptr read_key(const std::string& path) {
  owned<BIO, BIO_free_all> bio{BIO_new_file(path.c_str(), "r")};
  if (!bio) return nullptr;
  return key_ptr{PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)};
}

void check_certificates(const config::cluster_section& c, config_check& out) {
  if (!c.tls()) return;
  auto cert = read_certificate(c.tls_cert);
  if (!cert)
    out.problems.push_back("cluster.tls_cert: " + c.tls_cert + " holds no PEM certificate");
  else if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) < 0)
    out.problems.push_back("cluster.tls_cert: " + c.tls_cert + " has expired");
  auto key = read_key(c.tls_key);
  if (!key)
    out.problems.push_back("cluster.tls_key: " + c.tls_key + " holds no PEM private key");
  else if (cert && X509_check_private_key(cert.get(), key.get()) != 1)
    out.problems.push_back("cluster.tls_key: " + c.tls_key + " is not the key of " + c.tls_cert);
  if (!read_certificate(c.tls_ca))
    out.problems.push_back("cluster.tls_ca: " + c.tls_ca + " holds no PEM certificate");
}

void check_embedded(const config& cfg, config_check& out) {
  if (auto bin = db::find_bin_dir(cfg.embedded.bin_dir); !bin)
    out.problems.push_back(error_message(bin.error()));
  std::error_code ec;
  fs::path dir = cfg.node.data_dir;
  auto existing = fs::exists(dir, ec) ? dir : fs::absolute(dir, ec).parent_path();
  while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
  if (access(existing.c_str(), W_OK) != 0)
    out.problems.push_back("node.data_dir: " + existing.string() +
                           " cannot be written to (the embedded PostgreSQL's data goes there)");
}

/// Runs one check in the open transaction; a refusal is rolled back to
/// before it, so that the next check runs. Answers whether it passed.
bool check_in_database(db::connection& conn, const std::string& what, const std::string& sql,
                       const std::vector<db::param>& params, config_check& out,
                       bool answers_problem = false) {
  conn.exec("SAVEPOINT taskmill_check");
  auto res = conn.exec(sql, params);
  if (!res) {
    out.problems.push_back(what + ": " + error_message(res.error()));
    conn.exec("ROLLBACK TO SAVEPOINT taskmill_check");
    return false;
  }
  if (answers_problem && res->rows() > 0 && !res->is_null(0, 0) && !res->text(0, 0).empty()) {
    out.problems.push_back(what + ": " + res->string(0, 0));
    return false;
  }
  return true;
}

/// Opens the transaction the checks run in. A database without taskmill's
/// schema gets this build's, to be rolled back with the rest; one behind
/// this build's is checked as it is: migrating it would lock what running
/// nodes use until the check ends.
bool prepare_schema(db::connection& conn, config_check& out) {
  auto state = conn.exec(
      "SELECT to_regclass('taskmill.schema_migrations') IS NULL, "
      "(SELECT max(version) FROM taskmill.schema_migrations), "
      "(SELECT max(generation) FROM taskmill.schema_definitions)");
  if (!state) {
    // Without the tables the query cannot be planned: a fresh database.
    state = conn.exec("SELECT true, 0, 0");
  }
  if (!state) {
    out.problems.push_back("database: " + error_message(state.error()));
    return false;
  }
  if (state->string(0, 0) == "t") {
    auto version = db::apply_migrations(conn, db::all_migrations(), db::all_definitions(),
                                        db::current_generation.number, true);
    if (!version) out.problems.push_back("database: " + error_message(version.error()));
    return static_cast<bool>(version);
  }
  auto migration = std::stoi(state->string(0, 1));
  auto generation = state->is_null(0, 2) ? 0 : std::stoi(state->string(0, 2));
  auto latest = db::all_migrations().back().version;
  if (migration < latest || generation < db::current_generation.number)
    out.notes.push_back("database: its schema is behind this build's (migration " +
                        std::to_string(migration) + " of " + std::to_string(latest) +
                        ", definitions generation " + std::to_string(generation) + " of " +
                        std::to_string(db::current_generation.number) +
                        "): a start migrates it; checked as it is, whose rules may refuse what "
                        "this build's take");
  auto begun = conn.exec("BEGIN");
  if (!begun) out.problems.push_back("database: " + error_message(begun.error()));
  return static_cast<bool>(begun);
}

void check_database(const config& cfg, config_check& out) {
  // A check should not wait long on a server that is not there.
  setenv("PGCONNECT_TIMEOUT", "5", 0);
  auto conn = db::connection::open(cfg.database.url, cfg.database.statement_timeout,
                                   cfg.database.lock_timeout, cfg.database.transaction_pooler());
  if (!conn) {
    out.notes.push_back("database: not reachable (" + error_message(conn.error()) +
                        "): types, key spaces, jobs and reconciler rules were not checked "
                        "against it");
    return;
  }
  if (auto shortfall = db::lock_table_shortfall(*conn); shortfall && *shortfall)
    out.notes.push_back("database: " + **shortfall);
  if (!prepare_schema(*conn, out)) return;
  // As a start goes: the jobs checked, the types written, the jobs written.
  auto jobs = config_jobs(cfg);
  if (!jobs) out.problems.push_back(error_message(jobs.error()));
  std::vector<const pb::Job*> sound;
  if (jobs)
    for (const auto& job : *jobs)
      if (check_in_database(*conn, "jobs: " + job.name(), db::sql::put_job_problem.sql,
                            db::job_params(job), out, true))
        sound.push_back(&job);
  check_in_database(*conn, "[defaults] or [types.*]", db::sql::put_type_settings.sql,
                    db::type_settings_params(type_settings(cfg)), out);
  for (const auto* job : sound)
    check_in_database(*conn, "jobs: " + job->name(), db::sql::put_job.sql, db::job_params(*job),
                      out);
  for (size_t i = 0; i < cfg.reconciler.rules.size(); ++i) {
    const auto& rule = cfg.reconciler.rules[i];
    check_in_database(*conn, "reconciler.rules[" + std::to_string(i) + "] (" + rule.name + ")",
                      "PREPARE taskmill_check_rule AS " + db::sql::compensation_sql(rule.query), {},
                      out);
    conn->exec("DEALLOCATE ALL");
  }
  conn->exec("ROLLBACK");
  out.notes.push_back("database: types, key spaces, jobs and reconciler rules checked against " +
                      redact_conninfo(cfg.database.url) + " in a transaction rolled back");
}

}  // namespace

config_check check_config(const config& cfg) {
  config_check out;
  check_certificates(cfg.cluster, out);
  if (cfg.database.url.empty()) {
    check_embedded(cfg, out);
    out.notes.push_back(
        "database: the embedded PostgreSQL (no database.url): types, key spaces, jobs and "
        "reconciler rules are checked against it as the node starts");
  } else {
    check_database(cfg, out);
  }
  return out;
}

}  // namespace taskmill
