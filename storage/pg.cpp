#include "storage/pg.hpp"

#include "messages/errors.hpp"
#include "messages/time.hpp"

#include <libpq-fe.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstdlib>
#include <random>

namespace taskmill::db {

namespace {

errc classify(std::string_view sqlstate) {
  // 53200: out of shared memory, mostly the lock table full of other
  // transactions' locks, free again once they end.
  if (sqlstate == "40P01" || sqlstate == "40001" || sqlstate == "55P03" || sqlstate == "53200")
    return errc::retryable;
  if (sqlstate == "P0002") return errc::not_found;
  if (sqlstate == "23505" || sqlstate == "55006") return errc::conflict;
  if (sqlstate.substr(0, 2) == "22" || sqlstate == "23514" || sqlstate == "23502")
    return errc::invalid_argument;
  if (sqlstate.substr(0, 2) == "08" || sqlstate == "57P01" || sqlstate == "57P02" ||
      sqlstate == "57P03")
    return errc::storage_unavailable;
  return errc::storage_error;
}

caf::error error_of(const PGresult* res) {
  auto field = [&](int code) -> std::string {
    auto v = PQresultErrorField(res, code);
    return v ? v : "";
  };
  auto sqlstate = field(PG_DIAG_SQLSTATE);
  auto message = field(PG_DIAG_MESSAGE_PRIMARY);
  if (message.empty()) message = PQresultErrorMessage(res);
  auto code = classify(sqlstate);
  if (code == errc::invalid_argument || code == errc::not_found || sqlstate == "55006")
    return make_error(code, message);
  return make_error(code, "PostgreSQL: " + message + " (SQLSTATE " + sqlstate + ")");
}

// Behind PgBouncer before 1.21, a client that leaves (a node killed, a
// connection dropped on a timeout) while its pipelined statements still run
// has its server connection handed to the next client, which then reads the
// leaver's results as its own. The pooler links a client to a server
// connection anew at each Sync, so behind a pooler every statement up to a
// Sync is preceded by this one, carrying a value of the connection's own:
// an answer other than that value is another session's, and the connection
// is dropped before anything is misread.
constexpr const char* marker_sql = "SELECT $1::text";

std::string trimmed(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

// -- result -------------------------------------------------------------------

void result::deleter::operator()(pg_result* res) const {
  PQclear(res);
}

result::result(pg_result* res) : res_(res) {}

int result::rows() const {
  return PQntuples(res_.get());
}

int result::column(const char* name) const {
  return PQfnumber(res_.get(), name);
}

bool result::is_null(int row, int col) const {
  return col < 0 || PQgetisnull(res_.get(), row, col);
}

std::string_view result::text(int row, int col) const {
  if (is_null(row, col)) return {};
  return {PQgetvalue(res_.get(), row, col), static_cast<size_t>(PQgetlength(res_.get(), row, col))};
}

int64_t result::int64(int row, int col) const {
  auto s = text(row, col);
  int64_t value = 0;
  std::from_chars(s.data(), s.data() + s.size(), value);
  return value;
}

double result::float64(int row, int col) const {
  auto s = string(row, col);
  return s.empty() ? 0.0 : std::strtod(s.c_str(), nullptr);
}

bool result::boolean(int row, int col) const {
  auto s = text(row, col);
  return !s.empty() && s[0] == 't';
}

int64_t result::micros(int row, int col) const {
  auto parsed = parse_rfc3339(text(row, col));
  return parsed ? *parsed : 0;
}

// -- connection ---------------------------------------------------------------

void connection::deleter::operator()(pg_conn* conn) const {
  PQfinish(conn);
}

connection::connection(pg_conn* conn, std::chrono::milliseconds io_timeout, bool pooled)
    : conn_(conn), io_timeout_(io_timeout), pooled_(pooled) {
  if (pooled_) {
    static thread_local std::mt19937_64 rng = [] {
      std::random_device device;
      std::seed_seq seed{device(), device(), device(), device()};
      return std::mt19937_64{seed};
    }();
    marker_prefix_ = "taskmill-" + std::to_string(rng()) + "-";
  }
}

connection::connection(connection&&) noexcept = default;
connection& connection::operator=(connection&&) noexcept = default;
connection::~connection() = default;

caf::expected<connection> connection::open(const std::string& conninfo,
                                           std::chrono::milliseconds statement_timeout,
                                           std::chrono::milliseconds lock_timeout, bool pooled) {
  // Later keywords override what the connection string says: every connection
  // gets a bounded connect and keepalives so a vanished server is noticed.
  const char* keys[] = {
      "dbname",          "fallback_application_name", "connect_timeout",  "keepalives",
      "keepalives_idle", "keepalives_interval",       "keepalives_count", nullptr};
  const char* values[] = {conninfo.c_str(), "taskmill", "5", "1", "10", "5", "3", nullptr};
  PGconn* raw = PQconnectdbParams(keys, values, 1);
  // Server notices (e.g. why a connection was terminated) go to the log, not
  // to stderr.
  if (raw)
    PQsetNoticeProcessor(
        raw, [](void*, const char* message) { spdlog::debug("PostgreSQL: {}", trimmed(message)); },
        nullptr);
  // The socket is silent for at most the statement timeout, plus slack.
  connection conn{raw, statement_timeout + std::chrono::seconds{10}, pooled};
  if (!raw || PQstatus(raw) != CONNECTION_OK)
    return make_error(
        errc::storage_unavailable,
        "cannot connect to PostgreSQL: " + trimmed(raw ? PQerrorMessage(raw) : "out of memory"));
  // No JIT: the plans kept for a session cannot know a claim's LIMIT, so at
  // a million tasks their estimates passed jit_above_cost and every claim
  // spent 5 ms compiling expressions for a few hundred rows.
  auto setup =
      "SET TimeZone = 'UTC'; SET statement_timeout = " + std::to_string(statement_timeout.count()) +
      "; SET lock_timeout = " + std::to_string(lock_timeout.count()) +
      "; SET idle_in_transaction_session_timeout = 60000"
      "; SET client_min_messages = warning; SET jit = off"
      // The server's side of the keepalives: the backend of a node gone
      // silent (its host or network, not its process) ends within about
      // 25 s, and its connection slot and session state with it, where the
      // kernel's defaults took two hours.
      "; SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5"
      "; SET tcp_keepalives_count = 3; SET tcp_user_timeout = 25000";
  // One round trip: the settings (none behind a transaction pooler, where
  // the session is whoever's next), then what the server says of itself.
  auto state =
      conn.exec((pooled ? std::string{} : setup + "; ") +
                "SELECT current_setting('transaction_read_only'), current_setting('TimeZone')");
  if (!state) return state.error();
  // A standby (or a primary a failover demoted) answers, but takes no
  // writes: a node must not start on one.
  if (state->string(0, 0) == "on")
    return make_error(errc::storage_unavailable,
                      "cannot work on PostgreSQL at " + trimmed(PQhost(raw)) + ":" +
                          trimmed(PQport(raw)) +
                          ": it takes no writes (a standby?); with several hosts, add "
                          "target_session_attrs=read-write to the connection string");
  // Times are read as UTC text; a pooled session cannot be told so.
  auto zone = state->string(0, 1);
  if (zone != "UTC" && zone != "Etc/UTC")
    return make_error(errc::storage_error,
                      "behind a transaction pooler (database.pooler) the node cannot set its "
                      "sessions' TimeZone, which is " +
                          zone +
                          ": make it UTC for the node's role (ALTER ROLE ... SET TimeZone = "
                          "'UTC') or database");
  return conn;
}

caf::expected<result> connection::exec(const std::string& sql) {
  return exec(sql, {});
}

caf::expected<result> connection::exec(const std::string& sql, const std::vector<param>& params) {
  if (broken_) return make_error(errc::storage_unavailable, "not connected to PostgreSQL");
  if (PQpipelineStatus(conn_.get()) != PQ_PIPELINE_OFF)
    return make_error(errc::storage_error, "exec on a connection in pipeline mode");
  // Inside a transaction the pooler keeps this session's server connection,
  // which the transaction's first statement found clean.
  if (pooled_ && PQtransactionStatus(conn_.get()) == PQTRANS_IDLE) return exec_pooled(sql, params);
  std::vector<const char*> values;
  for (auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  PGresult* raw = params.empty()
                      ? PQexec(conn_.get(), sql.c_str())
                      : PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()),
                                     nullptr, values.data(), nullptr, nullptr, 0);
  if (!raw || PQstatus(conn_.get()) == CONNECTION_BAD) {
    PQclear(raw);
    return lost("query failed");
  }
  auto status = PQresultStatus(raw);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result{raw};
  auto err = error_of(raw);
  PQclear(raw);
  return err;
}

caf::expected<result> connection::exec_pooled(const std::string& sql,
                                              const std::vector<param>& params) {
  auto marker = next_marker();
  if (params.empty()) {
    // The simple protocol keeps exec's several statements in one text, which
    // the pooler sends to one server connection; the marker goes first in
    // it, set and shown, as neither takes a snapshot that a BEGIN ISOLATION
    // LEVEL after them would refuse.
    auto text = "SET LOCAL taskmill.marker = '" + marker + "'; SHOW taskmill.marker; " + sql;
    if (!PQsendQuery(conn_.get(), text.c_str())) return lost("cannot send");
    caf::error err;
    auto set = next_result(err);
    if (err) return err;
    if (!set || PQresultStatus(set) != PGRES_COMMAND_OK) {
      auto stray = check_marker(set, marker);
      return stray ? stray : lost("pipeline out of step");
    }
    PQclear(set);
    auto shown = next_result(err);
    if (err) return err;
    if (auto stray = check_marker(shown, marker)) return stray;
    return read_one_statement();
  }
  std::vector<const char*> values;
  for (auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  if (PQenterPipelineMode(conn_.get()) != 1 || !send_marker(marker) ||
      !PQsendQueryParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                         values.data(), nullptr, nullptr, 0) ||
      !PQpipelineSync(conn_.get()))
    return lost("cannot send");
  if (auto err = flush_all()) return err;
  if (auto err = read_marker(marker)) return err;
  auto res = read_one_statement();
  if (broken_) return res;
  auto committed = read_sync();
  if (broken_) return committed;
  if (PQexitPipelineMode(conn_.get()) != 1) return lost("cannot leave pipeline mode");
  if (committed) return committed;
  return res;
}

std::string connection::next_marker() {
  return marker_prefix_ + std::to_string(++markers_sent_);
}

bool connection::send_marker(const std::string& marker) {
  const char* value = marker.c_str();
  return PQsendQueryParams(conn_.get(), marker_sql, 1, nullptr, &value, nullptr, nullptr, 0);
}

caf::error connection::read_marker(const std::string& marker) {
  caf::error err;
  auto first = next_result(err);
  if (err) return err;
  if (auto stray = check_marker(first, marker)) return stray;
  if (auto after = next_result(err); after || err) {
    PQclear(after);
    return err ? err : lost("pipeline out of step");
  }
  return caf::none;
}

caf::error connection::check_marker(pg_result* first, const std::string& marker) {
  auto status = first ? PQresultStatus(first) : PGRES_EMPTY_QUERY;
  bool ours = status == PGRES_TUPLES_OK && PQntuples(first) == 1 && PQnfields(first) == 1 &&
              marker == PQgetvalue(first, 0, 0);
  // An error before the marker may be the pooler's own, the server's (shut
  // down, a text that does not parse), or another session's: which, the
  // connection cannot tell, so it is dropped, saying what came.
  auto error = status == PGRES_FATAL_ERROR ? error_message(error_of(first)) : std::string{};
  PQclear(first);
  if (ours) return caf::none;
  if (!error.empty()) return lost("an error came before this session's statements: " + error);
  spdlog::warn(
      "the pooler answered this connection with another session's results (PgBouncer before "
      "1.21 does so when a client leaves with statements running); connecting again");
  return lost("the pooler answered with another session's results");
}

pg_result* connection::next_result(caf::error& err) {
  while (PQisBusy(conn_.get())) {
    if ((err = wait_for(false))) return nullptr;
  }
  return PQgetResult(conn_.get());
}

caf::error connection::prepare_and_enter_pipeline(const std::vector<const statement*>& statements) {
  // Behind a transaction pooler a named statement would stay on a server
  // connection others get next: each is parsed where it runs instead. A
  // parse is still made, and a wrong statement found, once at connect.
  for (auto stmt : statements) {
    if (pooled_) {
      PGresult* described = PQprepare(conn_.get(), "", stmt->sql, 0, nullptr);
      if (!described) return lost("prepare failed");
      auto ok = PQresultStatus(described) == PGRES_COMMAND_OK;
      auto err = ok ? caf::error{} : error_of(described);
      PQclear(described);
      if (!ok)
        return make_error(errc::storage_error, std::string{"cannot prepare statement "} +
                                                   stmt->name + ": " + error_message(err));
      continue;
    }
    PGresult* raw = PQprepare(conn_.get(), stmt->name, stmt->sql, 0, nullptr);
    if (!raw) return lost("prepare failed");
    if (PQresultStatus(raw) != PGRES_COMMAND_OK) {
      auto err = error_of(raw);
      PQclear(raw);
      return make_error(errc::storage_error, std::string{"cannot prepare statement "} + stmt->name +
                                                 ": " + error_message(err));
    }
    PQclear(raw);
  }
  if (PQenterPipelineMode(conn_.get()) != 1 || PQsetnonblocking(conn_.get(), 1) != 0)
    return lost("cannot enter pipeline mode");
  return caf::none;
}

void connection::run(const std::vector<call>& calls,
                     const std::function<void(caf::expected<result>&&)>& each) {
  size_t handed = 0;
  auto fail_rest = [&](const caf::error& err) {
    for (; handed < calls.size(); ++handed) each(caf::expected<result>{err});
  };
  if (broken_)
    return fail_rest(make_error(errc::storage_unavailable, "not connected to PostgreSQL"));
  std::vector<std::string> markers;
  std::vector<const char*> values;
  for (const auto& c : calls) {
    if (pooled_) {
      markers.push_back(next_marker());
      if (!send_marker(markers.back())) return fail_rest(lost("cannot send"));
    }
    values.clear();
    for (const auto& p : c.params) values.push_back(p ? p->c_str() : nullptr);
    auto sent =
        pooled_ ? PQsendQueryParams(conn_.get(), c.stmt->sql, static_cast<int>(values.size()),
                                    nullptr, values.data(), nullptr, nullptr, 0)
                : PQsendQueryPrepared(conn_.get(), c.stmt->name, static_cast<int>(values.size()),
                                      values.data(), nullptr, nullptr, 0);
    if (!sent || !PQpipelineSync(conn_.get())) return fail_rest(lost("cannot send"));
  }
  if (auto err = flush_all()) return fail_rest(err);
  // Each statement runs in a transaction of its own that commits at its
  // Sync: its rows arrive before that, so a statement counts only once its
  // Sync came back. Lost in between, the commit is in doubt, and the caller
  // hears an error (a claim it never hears of is recovered by its timeout).
  while (handed < calls.size()) {
    if (pooled_)
      if (auto err = read_marker(markers[handed])) return fail_rest(err);
    auto res = read_one_statement();
    if (broken_) return fail_rest(res ? lost("connection lost") : res.error());
    auto committed = read_sync();
    if (broken_) return fail_rest(committed);
    ++handed;
    each(committed ? caf::expected<result>{committed} : std::move(res));
  }
}

bool connection::broken() const {
  return broken_ || PQstatus(conn_.get()) == CONNECTION_BAD;
}

int connection::socket() const {
  return PQsocket(conn_.get());
}

caf::error connection::consume_input() {
  if (!PQconsumeInput(conn_.get())) return lost("connection lost");
  return caf::none;
}

std::vector<notification> connection::take_notifications() {
  std::vector<notification> got;
  while (PGnotify* n = PQnotifies(conn_.get())) {
    got.push_back({n->relname, n->extra});
    PQfreemem(n);
  }
  return got;
}

caf::error connection::wait_for(bool write) {
  pollfd pfd{PQsocket(conn_.get()), static_cast<short>(POLLIN | (write ? POLLOUT : 0)), 0};
  int rc = 0;
  do {
    rc = ::poll(&pfd, 1, static_cast<int>(io_timeout_.count()));
  } while (rc < 0 && errno == EINTR);
  if (rc == 0)
    return lost("no answer from PostgreSQL within " + std::to_string(io_timeout_.count()) + " ms");
  if (rc < 0) return lost("poll failed");
  if ((pfd.revents & POLLIN) || (pfd.revents & (POLLERR | POLLHUP))) {
    if (!PQconsumeInput(conn_.get())) return lost("connection lost");
  }
  return caf::none;
}

caf::error connection::flush_all() {
  for (;;) {
    int rc = PQflush(conn_.get());
    if (rc == 0) return caf::none;
    if (rc < 0) return lost("cannot send");
    // Reading while waiting to write keeps a long pipeline from deadlocking
    // against a server that is blocked on sending us results.
    if (auto err = wait_for(true)) return err;
  }
}

caf::expected<result> connection::read_one_statement() {
  std::optional<result> res;
  caf::error err;
  for (;;) {
    caf::error lost_while_waiting;
    PGresult* raw = next_result(lost_while_waiting);
    if (lost_while_waiting) return lost_while_waiting;
    if (!raw) break;
    switch (PQresultStatus(raw)) {
      case PGRES_TUPLES_OK:
      case PGRES_COMMAND_OK:
        res.emplace(raw);
        break;
      case PGRES_FATAL_ERROR: {
        // A write refused as read-only: this server is a standby now (a
        // primary demoted by a failover). Connecting again finds the
        // primary (target_session_attrs=read-write) or waits for one.
        auto sqlstate = PQresultErrorField(raw, PG_DIAG_SQLSTATE);
        bool read_only = sqlstate && std::string_view{sqlstate} == "25006";
        err = error_of(raw);
        PQclear(raw);
        if (read_only)
          return lost("the server takes no writes (a standby, or a primary a failover demoted)");
        if (PQstatus(conn_.get()) == CONNECTION_BAD) return lost(error_message(err));
        break;
      }
      default:
        err = make_error(errc::storage_error,
                         std::string{"unexpected result "} + PQresStatus(PQresultStatus(raw)));
        PQclear(raw);
        break;
    }
  }
  if (err) return err;
  if (!res) return make_error(errc::storage_error, "statement returned no result");
  return std::move(*res);
}

caf::error connection::read_sync() {
  // A commit can fail (a deferred constraint): its error comes before the
  // Sync's result.
  caf::error commit_error;
  for (;;) {
    while (PQisBusy(conn_.get())) {
      if (auto e = wait_for(false)) return e;
    }
    PGresult* raw = PQgetResult(conn_.get());
    if (!raw) {
      // The end of the failed commit's results.
      if (commit_error) continue;
      return lost("pipeline out of step");
    }
    auto status = PQresultStatus(raw);
    if (status == PGRES_PIPELINE_SYNC) {
      PQclear(raw);
      return commit_error;
    }
    if (status != PGRES_FATAL_ERROR) {
      PQclear(raw);
      return lost("pipeline out of step");
    }
    commit_error = error_of(raw);
    PQclear(raw);
    if (PQstatus(conn_.get()) == CONNECTION_BAD) return lost(error_message(commit_error));
  }
}

caf::error connection::lost(const std::string& what) {
  broken_ = true;
  auto detail = trimmed(PQerrorMessage(conn_.get()));
  return make_error(errc::storage_unavailable,
                    "lost the connection to PostgreSQL: " + what +
                        (detail.empty() || detail == what ? "" : " (" + detail + ")"));
}

// -- helpers ------------------------------------------------------------------

std::string array_literal(const std::vector<param>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    if (!values[i]) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (char c : *values[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace taskmill::db
