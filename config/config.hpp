#pragma once

// The node's configuration: one TOML file (see config/taskmill.example.toml),
// every option with a default, `key=value` overrides from the command line,
// TASKMILL_DATABASE_URL and TASKMILL_API_TOKEN from the environment.

#include <caf/expected.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace taskmill {

using std::chrono::milliseconds;

struct backoff_config {
  bool exponential = true;
  milliseconds base{1000};
  milliseconds cap{std::chrono::hours{1}};
  double jitter = 0.1;
};

/// Who runs a type's tasks on this node (SPEC §4). `none`: not this node,
/// unless a CAF executor registers for the type.
enum class executor_kind { none, noop, sleep, fail, http, caf };

/// The kind's name in the config ("" for none).
const char* executor_name(executor_kind kind);

/// How tasks of one type are run.
struct task_type_config {
  std::string name;
  executor_kind executor = executor_kind::none;
  std::string url;  // http executor only
  // Where a cancel of a running attempt goes (a DELETE); empty: url.
  std::string cancel_url;
  milliseconds timeout{5000};
  int max_retries = 3;
  backoff_config backoff;
  int running_limit = 0;             // cluster-wide; 0 means none
  milliseconds pending_deadline{0};  // 0 means none
  // An attempt silent (no progress, no heartbeat) this long is taken back;
  // 0 means never.
  milliseconds heartbeat_timeout{0};
  // How late after its start an attempt may move its own deadline; 0: the
  // timeout (it cannot).
  milliseconds max_timeout{0};
  // The key space its tasks are keyed in (empty: none), and where a task's
  // key comes from: a payload path, or its key up to a separator.
  std::string key_space;
  std::string key_path;
  std::string key_separator;
  // What a start of one of its tasks costs its key's rate (none: 1).
  std::optional<int> rate_units;
  /// The longest an attempt of this type may run: its timeout, or its max
  /// timeout if it may move its deadline.
  milliseconds longest_attempt(milliseconds task_timeout) const {
    return std::max(task_timeout, max_timeout);
  }
};

/// A key space of [key_spaces.NAME] (SPEC §4 Keyed limits): a running limit
/// per key of the types that name it, with limits of their own for named keys
/// and for classes (the value at class_path in a task's payload), and a rate
/// per key. The database checks the ranges, naming the field.
struct key_space_config {
  std::string name;
  int64_t limit = 0;
  std::map<std::string, int64_t> keys;
  std::string class_path;
  std::map<std::string, int64_t> classes;
  /// Units each key may start in any window of `period` (none: no rate).
  std::optional<int> rate;
  std::optional<milliseconds> period;
};

/// A reconciler rule: rows of `query` (key, execute_at, payload) that must
/// each have a live task of `type`.
struct compensation_rule {
  std::string name;
  std::string type;
  std::string query;
};

/// A recurring job of the config's [[jobs]] (SPEC §6), written as the node
/// starts: the config wins for the jobs it names. Unset fields take the
/// job's defaults (storage/job_rows.cpp) or the type's settings.
struct job_config {
  std::string name;
  std::string schedule;
  std::string dialect;
  std::string time_zone;
  std::string type;
  std::string payload;  // JSON text; empty: none
  std::optional<int> priority;
  std::optional<int> max_retries;
  std::optional<milliseconds> timeout;
  bool enabled = true;
  std::string routing;
  std::optional<int> shards;
  std::string overlap;
  std::string misfire;
  std::optional<int> catch_up_limit;
  std::string description;
  std::vector<std::string> child_jobs;
  std::vector<std::string> child_jobs_on_failure;
  std::string on_finish;   // JSON text of the task object; empty: none
  std::string on_success;  // as on_finish
};

/// When to raise alerts (SPEC §6) for one type or job; unset settings take
/// the defaults of [alerts].
struct alert_rule {
  std::optional<bool> dead_task;
  std::optional<double> failure_rate;  // of a finished batch or firing
  // Of the records a finished batch or firing's tasks reported, the share
  // failed.
  std::optional<double> record_failure_rate;
  std::optional<bool> missed_firings;         // missed or skipped (jobs)
  std::optional<milliseconds> pending_after;  // a due task waits longer; 0: never (types)
};

struct config {
  struct node_section {
    std::string name;  // default: <hostname>-<api port>
    std::string data_dir = "taskmill-data";
    milliseconds shutdown_grace{5000};
    std::string log_level = "info";
    /// "text" or "json" (actors/logging/log_format.hpp).
    std::string log_format = "text";
  } node;

  struct database_section {
    std::string url;     // empty: run the embedded PostgreSQL
    bool listen = true;  // false: poll only (for poolers that break LISTEN)
    /// "none" or "session": the node's sessions are its own. "transaction"
    /// (PgBouncer's pool_mode, RDS Proxy, pgcat): a session lasts one
    /// transaction, so the node keeps nothing in it (no named prepared
    /// statements, no session settings, no LISTEN: listen is off).
    std::string pooler = "none";
    bool transaction_pooler() const { return pooler == "transaction"; }
    milliseconds statement_timeout{30000};
    milliseconds lock_timeout{2000};
    milliseconds reconnect_min{100};
    milliseconds reconnect_max{5000};
  } database;

  struct embedded_section {
    std::string bin_dir;            // default: the newest /usr/lib/postgresql/*/bin
    std::string user = "postgres";  // runs the server when taskmill runs as root
  } embedded;

  struct api_section {
    std::string listen = "127.0.0.1:8480";
    std::string token;
    int64_t max_payload_bytes = 1 << 20;
    int64_t max_body_bytes = 64 << 20;
    /// Host names the node is reached by besides IP addresses and localhost
    /// (a reverse proxy's, say): any other Host header is refused.
    std::vector<std::string> allowed_hosts;
    /// Origins (scheme://host[:port]) whose pages may call the API besides
    /// the node's own console.
    std::vector<std::string> allowed_origins;
  } api;

  struct cluster_section {
    std::string listen = "127.0.0.1:8481";
    /// host:port at which the other nodes reach this one; default: listen.
    std::string advertise;
    /// host:port of nodes to link to at start, besides those in taskmill.nodes.
    std::vector<std::string> seeds;
    /// Shared by every node and remote executor; without one only loopback
    /// peers are possible (listen must be a loopback address).
    std::string secret;
    /// PEM files: with all three set, links use TLS and both sides verify
    /// the other's certificate against tls_ca.
    std::string tls_cert;
    std::string tls_key;
    std::string tls_ca;
    bool tls() const { return !tls_cert.empty(); }
  } cluster;

  struct scheduling_section {
    int batch_size = 512;   // most tasks claimed in one round trip
    int node_limit = 2048;  // tasks in flight on this node
    int global_limit = 0;   // running tasks in the cluster; 0 means none
    // Permits an idle node offers to submits of tasks due at once (hand-offs,
    // storage/sql/offers.sql); 0: none.
    int hand_off_permits = 64;
    milliseconds poll_interval{1000};
    std::array<int, 5> weights{16, 8, 4, 2, 1};  // priorities 1..5
  } scheduling;

  struct heartbeat_section {
    milliseconds interval{1000};
    int missed = 5;
  } heartbeat;

  /// A node silent this long is dead, and a leader that cannot renew the
  /// lead loses it: heartbeat.interval x heartbeat.missed.
  milliseconds lease() const { return heartbeat.interval * heartbeat.missed; }

  struct watcher_section {
    milliseconds interval{1000};
    milliseconds success_retention{std::chrono::hours{24}};
    milliseconds purge_retention{std::chrono::hours{24 * 7}};
    int batch_size = 1000;
  } watcher;

  struct reconciler_section {
    milliseconds interval{30000};
    std::vector<compensation_rule> rules;
  } reconciler;

  struct cron_section {
    /// A fire time later than this by now was missed (no leader ran), and
    /// its job's misfire policy decides; a later one fires as it is.
    milliseconds misfire_after{60000};
  } cron;

  std::vector<job_config> jobs;

  struct alerts_section {
    std::vector<std::string> webhooks;  // http:// URLs that get each alert as a JSON POST
    milliseconds interval{1000};
    milliseconds overdue_check_interval{10000};
    milliseconds delivery_timeout{5000};
    int delivery_attempts = 12;
    milliseconds delivery_backoff{1000};  // doubles after each failed try
    milliseconds delivery_backoff_cap{std::chrono::minutes{5}};
    alert_rule defaults{true, 0.05, 0.05, true, std::chrono::hours{1}};
    std::map<std::string, alert_rule> types;
    std::map<std::string, alert_rule> jobs;
  } alerts;

  /// Settings for types without a section of their own.
  task_type_config default_type;
  std::map<std::string, task_type_config> types;
  std::map<std::string, key_space_config> key_spaces;

  /// The settings that apply to `type`.
  const task_type_config& type_config(const std::string& type) const;
};

/// Whether load_config's `effective` text shows the secrets.
enum class secrets { masked, shown };

/// Reads `path` (none: defaults only), applies `overrides` ("section.key=value",
/// the value in TOML syntax or a bare string), then the environment. The
/// error lists every problem, one a line, each naming the file, the key and
/// what is wrong. Given `effective`, writes there the configuration as the
/// node uses it, as TOML: every option, read or defaulted; `masked`, without
/// its secrets (api.token, cluster.secret, passwords in database.url and the
/// types' URLs, the webhooks' paths), for people to read.
caf::expected<config> load_config(const std::string& path,
                                  const std::vector<std::string>& overrides,
                                  std::string* effective = nullptr,
                                  secrets shown = secrets::masked);

/// The alert rules as storage/sql/alerts.sql reads them (JSON).
std::string alert_rules_json(const config::alerts_section& alerts);

/// The task types a node runs by its configuration. Types run by CAF
/// executors become claimable once one registers.
struct types_run {
  bool any = false;
  std::vector<std::string> types;
};
types_run types_run_here(const config& cfg);

/// The longest duration any option takes.
inline constexpr milliseconds max_duration{100LL * 365 * 24 * 3600 * 1000};
/// Timeouts and backoff times travel and are stored as 32-bit milliseconds;
/// what a task may hold within that is the database's rule
/// (taskmill.task_problem), which a node's type settings are held to as it
/// starts.
inline constexpr milliseconds max_int32_ms{INT32_MAX};

/// Parses "250ms", "5s", "2m", "24h", "7d" or a number of milliseconds.
caf::expected<milliseconds> parse_duration(const std::string& text);

/// Splits "host:port"; errors name `field`.
caf::expected<std::pair<std::string, uint16_t>> parse_listen_address(const std::string& text,
                                                                     const std::string& field);

}  // namespace taskmill
