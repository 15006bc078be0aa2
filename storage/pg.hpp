#pragma once

// A thin layer over libpq: owned results, a connection that runs a list of
// named statements in one round trip (pipeline mode, one sync per statement so
// each runs in its own implicit transaction and a failure stays its own), and
// PostgreSQL array literals for set-based statements.

#include <caf/expected.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct pg_conn;
struct pg_result;

namespace taskmill::db {

/// A statement prepared on every connection under its name.
struct statement {
  const char* name;
  const char* sql;
};

using param = std::optional<std::string>;

/// One execution of a prepared statement.
struct call {
  const statement* stmt;
  std::vector<param> params;
};

class result {
 public:
  explicit result(pg_result* res);

  int rows() const;
  /// The index of column `name`; -1 if the result has none.
  int column(const char* name) const;
  bool is_null(int row, int col) const;
  std::string_view text(int row, int col) const;
  std::string string(int row, int col) const { return std::string{text(row, col)}; }
  int64_t int64(int row, int col) const;
  int32_t int32(int row, int col) const { return static_cast<int32_t>(int64(row, col)); }
  double float64(int row, int col) const;
  bool boolean(int row, int col) const;
  /// A timestamptz printed in UTC, as microseconds since the epoch.
  int64_t micros(int row, int col) const;

 private:
  struct deleter {
    void operator()(pg_result* res) const;
  };
  std::unique_ptr<pg_result, deleter> res_;
};

/// A NOTIFY that arrived: its channel and payload.
struct notification {
  std::string channel;
  std::string payload;
};

class connection {
 public:
  /// Connects, sets the session up (UTC, timeouts) and leaves the connection in
  /// ordinary (non-pipeline) mode. Behind a transaction pooler (`pooled`)
  /// the session is whoever's the pooler hands it to next: nothing is set
  /// in it, statements go unnamed, and the settings the node needs must be
  /// the role's (TimeZone UTC is checked).
  static caf::expected<connection> open(const std::string& conninfo,
                                        std::chrono::milliseconds statement_timeout,
                                        std::chrono::milliseconds lock_timeout,
                                        bool pooled = false);

  connection(connection&&) noexcept;
  connection& operator=(connection&&) noexcept;
  ~connection();

  /// Runs SQL text (possibly several statements) outside pipeline mode.
  caf::expected<result> exec(const std::string& sql);
  caf::expected<result> exec(const std::string& sql, const std::vector<param>& params);

  /// Prepares `statements`, then switches to pipeline mode for good.
  caf::error prepare_and_enter_pipeline(const std::vector<const statement*>& statements);

  /// Runs `calls` in one round trip, handing each call's entry to `each` in
  /// order as soon as it is known, so that callers are answered before the
  /// statements after theirs ran. After a lost connection every remaining
  /// entry is `storage_unavailable`.
  void run(const std::vector<call>& calls,
           const std::function<void(caf::expected<result>&&)>& each);

  /// True once the connection is unusable; open a new one.
  bool broken() const;

  /// For LISTEN: the socket, reading what arrived, and the notifications.
  int socket() const;
  caf::error consume_input();
  std::vector<notification> take_notifications();

 private:
  connection(pg_conn* conn, std::chrono::milliseconds io_timeout, bool pooled);
  caf::expected<result> exec_pooled(const std::string& sql, const std::vector<param>& params);
  std::string next_marker();
  bool send_marker(const std::string& marker);
  caf::error read_marker(const std::string& marker);
  caf::error check_marker(pg_result* first, const std::string& marker);
  pg_result* next_result(caf::error& err);
  caf::error wait_for(bool write);
  caf::error flush_all();
  caf::expected<result> read_one_statement();
  caf::error read_sync();
  caf::error lost(const std::string& what);

  struct deleter {
    void operator()(pg_conn* conn) const;
  };
  std::unique_ptr<pg_conn, deleter> conn_;
  std::chrono::milliseconds io_timeout_;
  /// Behind a transaction pooler: statements are sent unnamed, and each
  /// round begins with a marker that must come back first.
  bool pooled_ = false;
  std::string marker_prefix_;
  uint64_t markers_sent_ = 0;
  bool broken_ = false;
};

/// Renders values as a PostgreSQL array literal: {"a","b\"c",NULL}.
std::string array_literal(const std::vector<param>& values);

/// Renders integers as a PostgreSQL array literal without quotes: {1,-2,3}.
/// The claim sends hundreds of them at each round (its turns), the outcomes
/// theirs ids and attempts.
template <class Range, class Fn>
std::string number_array_literal(const Range& range, Fn&& to_number) {
  std::string out = "{";
  out.reserve(2 + 8 * std::size(range));
  char digits[24];
  for (const auto& x : range) {
    if (out.size() > 1) out += ',';
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, to_number(x));
    out.append(digits, end);
  }
  out += '}';
  return out;
}

template <class Range, class Fn>
std::vector<param> params_of(const Range& range, Fn&& to_param) {
  std::vector<param> values;
  values.reserve(std::size(range));
  for (const auto& x : range) values.push_back(to_param(x));
  return values;
}

template <class Range, class Fn>
std::string array_literal_of(const Range& range, Fn&& to_param) {
  return array_literal(params_of(range, to_param));
}

/// As array_literal_of, but NULL when no value is set: for a field that a
/// batch may leave unset throughout, which a statement reads only through a
/// multi-argument unnest (that pads a NULL array with NULLs, as it reads an
/// array of NULLs) or by subscript. PostgreSQL then neither parses nor
/// unnests a thousand NULLs.
template <class Range, class Fn>
param optional_array_of(const Range& range, Fn&& to_param) {
  auto values = params_of(range, to_param);
  for (const auto& value : values)
    if (value) return array_literal(values);
  return {};
}

}  // namespace taskmill::db
