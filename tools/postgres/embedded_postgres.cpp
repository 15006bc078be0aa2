#include "tools/postgres/embedded_postgres.hpp"

#include "messages/errors.hpp"
#include "storage/pg.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

namespace fs = std::filesystem;

namespace taskmill::db {

namespace {

struct server_user {
  uid_t uid;
  gid_t gid;
};

caf::error fail(const std::string& what) {
  return make_error(errc::storage_unavailable, "embedded PostgreSQL: " + what);
}

/// The user that runs the server: nobody to switch to unless we are root.
caf::expected<std::optional<server_user>> resolve_user(const std::string& name) {
  if (geteuid() != 0) return std::optional<server_user>{};
  auto pw = getpwnam(name.c_str());
  if (!pw)
    return fail("PostgreSQL refuses to run as root and there is no user '" + name +
                "' to run it (embedded.user)");
  return std::optional<server_user>{server_user{pw->pw_uid, pw->pw_gid}};
}

bool may_traverse(const fs::path& dir, const server_user& user) {
  for (fs::path p = dir; !p.empty(); p = p.parent_path()) {
    struct stat st {};
    if (stat(p.c_str(), &st) == 0) {
      bool ok = (st.st_uid == user.uid && (st.st_mode & S_IXUSR)) ||
                (st.st_gid == user.gid && (st.st_mode & S_IXGRP)) || (st.st_mode & S_IXOTH);
      if (!ok) return false;
    }
    if (p == p.parent_path()) break;
  }
  return true;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/// Where the cluster lives: the configured directory, unless the server user
/// cannot reach it (a checkout under /root, say); then a directory of its own.
fs::path cluster_dir(const std::string& configured, const std::optional<server_user>& user) {
  auto dir = fs::absolute(configured).lexically_normal();
  if (!user || may_traverse(dir.parent_path(), *user)) return dir;
  char name[64];
  std::snprintf(name, sizeof(name), "embedded-%016llx",
                static_cast<unsigned long long>(fnv1a(dir.string())));
  return fs::path{"/var/lib/taskmill"} / name;
}

/// Runs `argv`, as `user` if given, with output appended to `log`; returns the
/// exit code. Everything the child needs is prepared before fork.
int run(const std::vector<std::string>& argv, const std::optional<server_user>& user,
        const fs::path& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto log_path = log.string();
  // The node's service manager listens for the node alone: a server that
  // speaks its protocol too would be refused, noisily.
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) {
    std::string_view var{*e};
    if (!var.starts_with("NOTIFY_SOCKET=") && !var.starts_with("WATCHDOG_")) env.push_back(*e);
  }
  env.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    for (int fd = 3; fd < 1024; ++fd) close(fd);
    // The node blocks SIGINT and SIGTERM to wait for them; the server must not.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Switch user first: the server appends to the same log as that user.
    if (user && (setgroups(1, &user->gid) != 0 || setgid(user->gid) != 0 || setuid(user->uid) != 0))
      _exit(126);
    int in = open("/dev/null", O_RDONLY);
    int out = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (in >= 0) dup2(in, 0);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    execve(args[0], args.data(), env.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string tail_of(const fs::path& file) {
  std::ifstream in{file};
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > 8 ? lines.size() - 8 : 0; i < lines.size(); ++i)
    out += "\n  " + lines[i];
  return out;
}

caf::expected<std::string> random_password() {
  std::ifstream in{"/dev/urandom", std::ios::binary};
  unsigned char bytes[16];
  if (!in.read(reinterpret_cast<char*>(bytes), sizeof(bytes)))
    return fail("cannot read /dev/urandom");
  std::string out;
  char buf[3];
  for (auto b : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    out += buf;
  }
  return out;
}

caf::error write_private_file(const fs::path& path, const std::string& content,
                              const std::optional<server_user>& owner) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return fail("cannot write " + path.string());
  bool ok = write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  if (owner && fchown(fd, owner->uid, owner->gid) != 0) ok = false;
  close(fd);
  if (!ok) return fail("cannot write " + path.string());
  return caf::none;
}

caf::expected<uint16_t> free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return fail("cannot open a socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(fd);
  if (!ok) return fail("cannot find a free port");
  return ntohs(addr.sin_port);
}

/// The port of a server already running from `pgdata`, if any.
std::optional<uint16_t> running_port(const std::string& bin, const fs::path& pgdata,
                                     const std::optional<server_user>& user, const fs::path& log) {
  if (!fs::exists(pgdata / "postmaster.pid")) return std::nullopt;
  if (run({bin + "/pg_ctl", "-D", pgdata.string(), "status"}, user, log) != 0) return std::nullopt;
  std::ifstream in{pgdata / "postmaster.pid"};
  std::string line;
  for (int i = 0; i < 4 && std::getline(in, line); ++i) {
  }
  int port = std::atoi(line.c_str());
  if (port <= 0 || port > 65535) return std::nullopt;
  return static_cast<uint16_t>(port);
}

caf::error init_cluster(const std::string& bin, const fs::path& dir,
                        const std::optional<server_user>& user, const std::string& password) {
  auto pwfile = dir / "initdb.pw";
  if (auto err = write_private_file(pwfile, password + "\n", user)) return err;
  auto log = dir / "initdb.log";
  int rc = run({bin + "/initdb", "-D", (dir / "pgdata").string(), "-U", "taskmill",
                "--pwfile=" + pwfile.string(), "--auth=scram-sha-256", "-E", "UTF8", "--no-locale"},
               user, log);
  fs::remove(pwfile);
  if (rc != 0) return fail("initdb failed (exit " + std::to_string(rc) + "):" + tail_of(log));
  return caf::none;
}

/// pg_ctl start on `port` with each of `settings` (name=value); answers
/// pg_ctl's exit code.
int start_server(const std::string& bin, const fs::path& dir,
                 const std::optional<server_user>& user, uint16_t port, bool throwaway,
                 const std::vector<std::string>& settings = {}) {
  auto log = dir / "postgres.log";
  std::string server_options = "-p " + std::to_string(port) +
                               " -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
                               " -c max_connections=200 -c max_locks_per_transaction=256";
  if (throwaway)
    server_options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off";
  for (const auto& s : settings) server_options += " -c " + s;
  return run({bin + "/pg_ctl", "-D", (dir / "pgdata").string(), "-l", log.string(), "-w", "-t",
              "60", "-o", server_options, "start"},
             user, log);
}

/// pg_ctl stop in `mode` (fast, or immediate as in a crash).
caf::error stop_server(const embedded_postgres_options& options, const char* mode) {
  auto bin = find_bin_dir(options.bin_dir);
  if (!bin) return bin.error();
  auto user = resolve_user(options.user);
  if (!user) return user.error();
  auto dir = fs::path{options.dir};
  if (!fs::exists(dir / "pgdata" / "postmaster.pid")) {
    dir = cluster_dir(options.dir, *user);
    if (!fs::exists(dir / "pgdata" / "postmaster.pid")) return caf::none;
  }
  auto log = dir / "postgres.log";
  int rc =
      run({*bin + "/pg_ctl", "-D", (dir / "pgdata").string(), "-m", mode, "-w", "-t", "60", "stop"},
          *user, log);
  if (rc != 0) return fail("pg_ctl stop failed (exit " + std::to_string(rc) + "):" + tail_of(log));
  return caf::none;
}

/// Starts the server of `dir` on the configured port, or on a free one
/// (three tries: another process may take a port found free).
caf::expected<uint16_t> start_on_a_port(const std::string& bin, const fs::path& dir,
                                        const std::optional<server_user>& user,
                                        const embedded_postgres_options& options) {
  for (int attempt = 0;; ++attempt) {
    auto candidate = options.port != 0 ? caf::expected<uint16_t>{options.port} : free_port();
    if (!candidate) return candidate.error();
    int rc = start_server(bin, dir, user, *candidate, options.throwaway);
    if (rc == 0) return *candidate;
    if (options.port != 0 || attempt == 2)
      return fail("the server did not start (exit " + std::to_string(rc) +
                  "):" + tail_of(dir / "postgres.log"));
  }
}

/// Makes `dir` for the server user, private to it.
caf::error prepare_dir(const fs::path& dir, const std::optional<server_user>& user) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create " + dir.string() + ": " + ec.message());
  fs::permissions(dir, fs::perms::owner_all, ec);
  if (user && chown(dir.c_str(), user->uid, user->gid) != 0)
    return fail("cannot hand " + dir.string() + " to the server user");
  return caf::none;
}

caf::error ensure_database(const std::string& server_conninfo) {
  auto conn = connection::open(server_conninfo, std::chrono::seconds{30}, std::chrono::seconds{5});
  if (!conn) return conn.error();
  auto exists = conn->exec("SELECT 1 FROM pg_database WHERE datname = 'taskmill'");
  if (!exists) return exists.error();
  if (exists->rows() > 0) return caf::none;
  if (auto created = conn->exec("CREATE DATABASE taskmill"); !created) return created.error();
  return caf::none;
}

}  // namespace

caf::expected<std::string> find_bin_dir(const std::string& configured) {
  if (!configured.empty()) {
    if (fs::exists(fs::path{configured} / "pg_ctl")) return configured;
    return fail("no pg_ctl in " + configured + " (embedded.bin_dir)");
  }
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator{"/usr/lib/postgresql", ec}) {
    auto bin = entry.path() / "bin";
    if (!fs::exists(bin / "initdb") || !fs::exists(bin / "pg_ctl")) continue;
    found.emplace_back(std::atoi(entry.path().filename().c_str()), bin.string());
  }
  if (found.empty())
    return fail(
        "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql), "
        "or set embedded.bin_dir or database.url");
  return std::max_element(found.begin(), found.end())->second;
}

embedded_postgres::embedded_postgres(embedded_postgres&& other) noexcept
    : options_(std::move(other.options_)),
      dir_(std::move(other.dir_)),
      conninfo_(std::move(other.conninfo_)),
      server_conninfo_(std::move(other.server_conninfo_)),
      port_(other.port_),
      running_(other.running_) {
  other.running_ = false;
}

embedded_postgres::~embedded_postgres() {
  if (running_) stop();
}

caf::expected<embedded_postgres> embedded_postgres::start(embedded_postgres_options options) {
  auto bin = find_bin_dir(options.bin_dir);
  if (!bin) return bin.error();
  auto user = resolve_user(options.user);
  if (!user) return user.error();
  auto dir = cluster_dir(options.dir, *user);
  if (auto err = prepare_dir(dir, *user)) return err;

  auto password_file = dir / "password";
  std::string password;
  if (!fs::exists(dir / "pgdata" / "PG_VERSION")) {
    auto generated = random_password();
    if (!generated) return generated.error();
    password = *generated;
    if (auto err = write_private_file(password_file, password, std::nullopt)) return err;
    if (auto err = init_cluster(*bin, dir, *user, password)) return err;
  } else {
    std::ifstream in{password_file};
    if (!std::getline(in, password) || password.empty())
      return fail("the cluster in " + dir.string() +
                  " has no password file; remove the directory to start afresh");
  }

  auto port = running_port(*bin, dir / "pgdata", *user, dir / "postgres.log");
  if (!port) {
    auto started = start_on_a_port(*bin, dir, *user, options);
    if (!started) return started.error();
    port = *started;
  }
  auto pg = running(std::move(options), dir.string(), *port, password);
  if (auto err = ensure_database(pg.server_conninfo_)) return err;
  return pg;
}

embedded_postgres embedded_postgres::running(embedded_postgres_options options, std::string dir,
                                             uint16_t port, const std::string& password) {
  embedded_postgres pg;
  pg.options_ = std::move(options);
  pg.dir_ = std::move(dir);
  pg.port_ = port;
  pg.running_ = true;
  auto base = "host=127.0.0.1 port=" + std::to_string(port) + " user=taskmill password=" + password;
  pg.server_conninfo_ = base + " dbname=postgres";
  pg.conninfo_ = base + " dbname=taskmill";
  return pg;
}

caf::expected<embedded_postgres> embedded_postgres::start_standby(embedded_postgres_options options,
                                                                  const std::string& name) const {
  auto bin = find_bin_dir(options.bin_dir);
  if (!bin) return bin.error();
  auto user = resolve_user(options.user);
  if (!user) return user.error();
  auto dir = cluster_dir(options.dir, *user);
  if (fs::exists(dir / "pgdata")) return fail(dir.string() + " holds a cluster already");
  if (auto err = prepare_dir(dir, *user)) return err;
  std::string password;
  std::ifstream{fs::path{dir_} / "password"} >> password;
  if (auto err = write_private_file(dir / "password", password, std::nullopt)) return err;
  // -R writes the primary's connection string, name included, for the
  // standby to stream from; the copy brings the superuser's password along.
  auto log = dir / "basebackup.log";
  int rc = run({*bin + "/pg_basebackup", "-D", (dir / "pgdata").string(), "-R", "-X", "stream",
                "-c", "fast", "-d",
                "host=127.0.0.1 port=" + std::to_string(port_) +
                    " user=taskmill password=" + password + " application_name=" + name},
               *user, log);
  if (rc != 0)
    return fail("pg_basebackup failed (exit " + std::to_string(rc) + "):" + tail_of(log));
  auto port = start_on_a_port(*bin, dir, *user, options);
  if (!port) return port.error();
  return running(std::move(options), dir.string(), *port, password);
}

caf::error embedded_postgres::promote() {
  auto bin = find_bin_dir(options_.bin_dir);
  if (!bin) return bin.error();
  auto user = resolve_user(options_.user);
  if (!user) return user.error();
  auto log = fs::path{dir_} / "postgres.log";
  int rc = run(
      {*bin + "/pg_ctl", "-D", (fs::path{dir_} / "pgdata").string(), "-w", "-t", "60", "promote"},
      *user, log);
  if (rc != 0)
    return fail("pg_ctl promote failed (exit " + std::to_string(rc) + "):" + tail_of(log));
  auto conn = connection::open(server_conninfo_, std::chrono::seconds{30}, std::chrono::seconds{5});
  if (!conn) return conn.error();
  for (const char* sql :
       {"ALTER SYSTEM RESET synchronous_standby_names", "SELECT pg_reload_conf()"})
    if (auto res = conn->exec(sql); !res) return res.error();
  return caf::none;
}

caf::error embedded_postgres::stop() {
  if (!running_) return caf::none;
  running_ = false;
  auto opts = options_;
  opts.dir = dir_;
  return stop_embedded_postgres(opts);
}

caf::error embedded_postgres::crash() {
  if (!running_) return caf::none;
  running_ = false;
  auto opts = options_;
  opts.dir = dir_;
  return stop_server(opts, "immediate");
}

caf::error embedded_postgres::restart(const std::vector<std::string>& settings) {
  if (running_) return caf::none;
  auto bin = find_bin_dir(options_.bin_dir);
  if (!bin) return bin.error();
  auto user = resolve_user(options_.user);
  if (!user) return user.error();
  int rc = start_server(*bin, dir_, *user, port_, options_.throwaway, settings);
  if (rc != 0)
    return fail("the server did not start again (exit " + std::to_string(rc) +
                "):" + tail_of(fs::path{dir_} / "postgres.log"));
  running_ = true;
  return caf::none;
}

caf::error stop_embedded_postgres(const embedded_postgres_options& options) {
  return stop_server(options, "fast");
}

}  // namespace taskmill::db
