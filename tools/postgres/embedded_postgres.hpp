#pragma once

// A private PostgreSQL server run from the system's binaries: initdb on first
// use, pg_ctl to start and stop it, listening on a loopback port with a
// generated password. PostgreSQL refuses to run as root, so when taskmill runs
// as root the server runs as an unprivileged user.

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace taskmill::db {

struct embedded_postgres_options {
  /// Holds the cluster (pgdata/), its password and its log.
  std::string dir;
  /// Where initdb and pg_ctl are; empty: the newest /usr/lib/postgresql/*/bin.
  std::string bin_dir;
  /// Runs the server when taskmill runs as root.
  std::string user = "postgres";
  /// 0: pick a free loopback port.
  uint16_t port = 0;
  /// Trade durability for speed (fsync off): for throwaway test servers.
  bool throwaway = false;
};

class embedded_postgres {
 public:
  /// Creates the cluster if needed, starts it (or adopts one already running
  /// from the same directory) and makes sure database `taskmill` exists.
  static caf::expected<embedded_postgres> start(embedded_postgres_options options);

  embedded_postgres(embedded_postgres&& other) noexcept;
  embedded_postgres& operator=(embedded_postgres&&) = delete;
  /// Stops the server unless released.
  ~embedded_postgres();

  /// Connection string for database `taskmill`.
  const std::string& conninfo() const { return conninfo_; }
  /// Connection string for the maintenance database `postgres`.
  const std::string& server_conninfo() const { return server_conninfo_; }
  uint16_t port() const { return port_; }
  /// Where the cluster actually lives (differs from options.dir when the
  /// server user could not reach that directory).
  const std::string& dir() const { return dir_; }

  caf::error stop();
  /// Stops the server at once, as a crash would (pg_ctl stop -m immediate);
  /// the next start recovers from the write-ahead log.
  caf::error crash();
  /// Starts the server again, on the same port, after stop() or crash(),
  /// with each of `settings` (name=value) besides its own.
  caf::error restart(const std::vector<std::string>& settings = {});

  /// Copies this running server into a streaming standby in `options.dir`
  /// (pg_basebackup -R) that replicates under the name `name` (the one
  /// synchronous_standby_names lists), and starts it.
  caf::expected<embedded_postgres> start_standby(embedded_postgres_options options,
                                                 const std::string& name) const;
  /// Makes a standby the primary (pg_ctl promote) and clears the
  /// synchronous standbys it may have inherited, as failover managers do:
  /// with none left to confirm them, its commits would wait forever.
  caf::error promote();
  /// Leaves the server running when this object goes away.
  void release() { running_ = false; }

 private:
  embedded_postgres() = default;
  /// A started server in `dir` on `port`, reached with `password`.
  static embedded_postgres running(embedded_postgres_options options, std::string dir,
                                   uint16_t port, const std::string& password);

  embedded_postgres_options options_;
  std::string dir_;
  std::string conninfo_;
  std::string server_conninfo_;
  uint16_t port_ = 0;
  bool running_ = false;
};

/// Where the server's programs are: `configured` (embedded.bin_dir), or the
/// newest /usr/lib/postgresql/*/bin.
caf::expected<std::string> find_bin_dir(const std::string& configured);

/// Stops the server of a cluster directory made by `embedded_postgres`.
caf::error stop_embedded_postgres(const embedded_postgres_options& options);

}  // namespace taskmill::db
