#define BOOST_TEST_MODULE config
#include <boost/test/unit_test.hpp>

#include "config/config.hpp"
#include "messages/errors.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace taskmill;
using namespace std::chrono_literals;

namespace {

struct temp_file {
  explicit temp_file(const std::string& content)
      : path(std::filesystem::temp_directory_path() /
             ("taskmill-config-" + std::to_string(getpid()) + "-" + std::to_string(counter++) +
              ".toml")) {
    std::ofstream{path} << content;
  }
  ~temp_file() { std::filesystem::remove(path); }
  std::filesystem::path path;
  static inline int counter = 0;
};

std::string error_of(const std::string& content, const std::vector<std::string>& overrides = {}) {
  temp_file file{content};
  auto cfg = load_config(file.path.string(), overrides);
  BOOST_REQUIRE_MESSAGE(!cfg, "expected an error for:\n" << content);
  BOOST_CHECK(is(cfg.error(), errc::invalid_argument));
  return error_message(cfg.error());
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_example_file_documents_the_defaults) {
  auto example = load_config(TASKMILL_SOURCE_DIR "/config/taskmill.example.toml", {});
  BOOST_REQUIRE_MESSAGE(example, error_message(example ? caf::error{} : example.error()));
  config defaults;
  BOOST_CHECK_EQUAL(example->node.data_dir, defaults.node.data_dir);
  BOOST_CHECK(example->node.shutdown_grace == defaults.node.shutdown_grace);
  BOOST_CHECK_EQUAL(example->database.url, defaults.database.url);
  BOOST_CHECK_EQUAL(example->database.pooler, defaults.database.pooler);
  BOOST_CHECK(example->database.lock_timeout == defaults.database.lock_timeout);
  BOOST_CHECK_EQUAL(example->api.listen, defaults.api.listen);
  BOOST_CHECK_EQUAL(example->api.max_payload_bytes, defaults.api.max_payload_bytes);
  BOOST_CHECK(example->api.allowed_hosts == defaults.api.allowed_hosts);
  BOOST_CHECK(example->api.allowed_origins == defaults.api.allowed_origins);
  BOOST_CHECK_EQUAL(example->scheduling.batch_size, defaults.scheduling.batch_size);
  BOOST_CHECK_EQUAL(example->scheduling.node_limit, defaults.scheduling.node_limit);
  BOOST_CHECK(example->scheduling.poll_interval == defaults.scheduling.poll_interval);
  BOOST_CHECK(example->scheduling.weights == defaults.scheduling.weights);
  BOOST_CHECK(example->heartbeat.interval == defaults.heartbeat.interval);
  BOOST_CHECK_EQUAL(example->heartbeat.missed, defaults.heartbeat.missed);
  BOOST_CHECK(example->watcher.success_retention == defaults.watcher.success_retention);
  BOOST_CHECK(example->watcher.purge_retention == defaults.watcher.purge_retention);
  BOOST_CHECK(example->reconciler.interval == defaults.reconciler.interval);
  BOOST_CHECK(example->cron.misfire_after == defaults.cron.misfire_after);
  BOOST_CHECK_EQUAL(alert_rules_json(example->alerts), alert_rules_json(defaults.alerts));
  BOOST_CHECK(example->alerts.interval == defaults.alerts.interval);
  BOOST_CHECK(example->alerts.overdue_check_interval == defaults.alerts.overdue_check_interval);
  BOOST_CHECK(example->alerts.delivery_timeout == defaults.alerts.delivery_timeout);
  BOOST_CHECK_EQUAL(example->alerts.delivery_attempts, defaults.alerts.delivery_attempts);
  BOOST_CHECK(example->alerts.delivery_backoff == defaults.alerts.delivery_backoff);
  BOOST_CHECK(example->alerts.delivery_backoff_cap == defaults.alerts.delivery_backoff_cap);
  BOOST_CHECK(example->alerts.webhooks.empty());
  BOOST_CHECK(example->default_type.executor == defaults.default_type.executor);
  BOOST_CHECK(example->default_type.timeout == defaults.default_type.timeout);
  BOOST_CHECK(example->default_type.backoff.cap == defaults.default_type.backoff.cap);
  BOOST_CHECK(!example->node.name.empty());
}

BOOST_AUTO_TEST_CASE(types_inherit_defaults_and_override_them) {
  temp_file file{R"(
[defaults]
timeout = "7s"
max_retries = 5

[types.AUDIT]
executor = "http"
url = "http://127.0.0.1:9000/audit"
max_retries = 1
running_limit = 20
backoff = "fixed"
backoff_base = "250ms"
heartbeat_timeout = "30s"
max_timeout = "1h"
)"};
  auto cfg = load_config(file.path.string(), {});
  BOOST_REQUIRE(cfg);
  const auto& audit = cfg->type_config("AUDIT");
  BOOST_CHECK(audit.executor == executor_kind::http);
  BOOST_CHECK(audit.timeout == 7s);
  BOOST_CHECK_EQUAL(audit.max_retries, 1);
  BOOST_CHECK_EQUAL(audit.running_limit, 20);
  BOOST_CHECK(audit.heartbeat_timeout == 30s);
  BOOST_CHECK(audit.max_timeout == 1h);
  BOOST_CHECK(cfg->type_config("OTHER").heartbeat_timeout == 0ms);
  BOOST_CHECK(!audit.backoff.exponential);
  BOOST_CHECK(audit.backoff.base == 250ms);
  const auto& other = cfg->type_config("OTHER");
  BOOST_CHECK_EQUAL(other.max_retries, 5);
  BOOST_CHECK(other.executor == executor_kind::none);
}

BOOST_AUTO_TEST_CASE(key_spaces_are_read_with_their_keys_and_classes) {
  temp_file file{R"(
[key_spaces.tenants]
limit = 5
keys = { acme = 50 }
class_path = "$.tier"
classes = { free = 2, pro = 20 }
rate = 100
period = "1m"

[types.REPORT]
key_space = "tenants"
key_path = "$.tenant"
rate_units = 5
)"};
  auto cfg = load_config(file.path.string(), {});
  BOOST_REQUIRE(cfg);
  const auto& tenants = cfg->key_spaces.at("tenants");
  BOOST_CHECK_EQUAL(tenants.limit, 5);
  BOOST_CHECK_EQUAL(tenants.keys.at("acme"), 50);
  BOOST_CHECK_EQUAL(tenants.class_path, "$.tier");
  BOOST_CHECK_EQUAL(tenants.classes.at("pro"), 20);
  BOOST_CHECK_EQUAL(cfg->type_config("REPORT").key_space, "tenants");
  BOOST_CHECK_EQUAL(cfg->type_config("REPORT").key_path, "$.tenant");
  BOOST_CHECK(tenants.rate == 100);
  BOOST_CHECK(tenants.period == 60s);
  BOOST_CHECK(cfg->type_config("REPORT").rate_units == 5);
  BOOST_CHECK(!cfg->type_config("OTHER").rate_units);
  BOOST_CHECK(contains(error_of("[key_spaces.t]\nlimit = 1\nrate = 5\nperiod = \"soon\"\n"),
                       "'key_spaces.t.period' must be a duration"));
  BOOST_CHECK(contains(error_of("[key_spaces.t]\nlimit = 1\nrate = \"many\"\n"),
                       "'key_spaces.t.rate' must be an integer"));
  BOOST_CHECK(
      contains(error_of("[key_spaces.t]\nkeys = { a = 1 }\n"), "'key_spaces.t.limit' is required"));
  BOOST_CHECK(contains(error_of("[key_spaces.t]\nlimit = 1\nkeys = { a = \"x\" }\n"),
                       "'key_spaces.t.keys.a' must be an integer"));
  BOOST_CHECK(contains(error_of("[key_spaces.t]\nlimit = 1\nclass = \"$.x\"\n"),
                       "unknown option 'key_spaces.t.class'"));
}

BOOST_AUTO_TEST_CASE(jobs_are_read_with_their_payload_and_checked) {
  temp_file file{R"(
[[jobs]]
name = "sync-search"
schedule = "0 */5 * * * *"
time_zone = "Europe/Berlin"
type = "SYNC"
payload = { index = "articles", full = false }
misfire = "catch_up"
catch_up_limit = 3
timeout = "2m"

[[jobs]]
name = "nightly"
schedule = "0 0 9 ? * 6#3"
dialect = "quartz"
type = "COUNT"
enabled = false
)"};
  auto cfg = load_config(file.path.string(), {});
  BOOST_REQUIRE_MESSAGE(cfg, (cfg ? "" : error_message(cfg.error())));
  BOOST_REQUIRE_EQUAL(cfg->jobs.size(), 2u);
  const auto& sync = cfg->jobs[0];
  BOOST_CHECK_EQUAL(sync.name, "sync-search");
  BOOST_CHECK_EQUAL(sync.time_zone, "Europe/Berlin");
  BOOST_CHECK_EQUAL(sync.payload, R"({"full":false,"index":"articles"})");
  BOOST_CHECK_EQUAL(sync.misfire, "catch_up");
  BOOST_CHECK_EQUAL(*sync.catch_up_limit, 3);
  BOOST_CHECK(*sync.timeout == 2min);
  BOOST_CHECK(!sync.priority);
  BOOST_CHECK(!cfg->jobs[1].enabled);
  BOOST_CHECK_EQUAL(cfg->jobs[1].dialect, "quartz");
  BOOST_CHECK(
      contains(error_of("[[jobs]]\nname = \"x\"\ntype = \"T\"\nschedule = \"0 0 * * 0\"\n"
                        "dialect = \"quartz\"\n"),
               "'jobs[0]' schedule: \"0\" in the day-of-week field is not between 1 and 7"));
  BOOST_CHECK(contains(error_of("[[jobs]]\nname = \"x\"\ntype = \"T\"\nschedule = \"@daily\"\n"
                                "dialect = \"cron\"\n"),
                       "'jobs[0]' dialect must be one of unix, quartz (got \"cron\")"));
  BOOST_CHECK(
      contains(error_of("[[jobs]]\nname = \"x\"\ntype = \"T\"\nschedule = \"61 * * * *\"\n"),
               "'jobs[0]' schedule: \"61\" in the minute field"));
  BOOST_CHECK(contains(error_of("[[jobs]]\nname = \"x\"\ntype = \"T\"\nschedule = \"@daily\"\n"
                                "time_zone = \"Nowhere/Land\"\n"),
                       "time_zone: \"Nowhere/Land\""));
  BOOST_CHECK(contains(error_of("[[jobs]]\nname = \"x\"\nschedule = \"@daily\"\n"),
                       "'jobs[0].type' is required"));
  BOOST_CHECK(contains(error_of("[[jobs]]\nname = \"x\"\ntype = \"T\"\nschedule = \"@daily\"\n"
                                "colour = 1\n"),
                       "unknown option 'jobs[0].colour'"));
}

BOOST_AUTO_TEST_CASE(jobs_name_their_child_jobs_and_callbacks_without_a_cycle) {
  temp_file file{R"(
[[jobs]]
name = "extract"
schedule = "@daily"
type = "EXTRACT"
child_jobs = ["load"]
child_jobs_on_failure = ["page-ops"]
on_finish = { type = "REPORT", payload = { to = "ops" } }

[[jobs]]
name = "load"
schedule = "@daily"
type = "LOAD"
)"};
  auto cfg = load_config(file.path.string(), {});
  BOOST_REQUIRE_MESSAGE(cfg, (cfg ? "" : error_message(cfg.error())));
  const auto& extract = cfg->jobs[0];
  BOOST_CHECK(extract.child_jobs == std::vector<std::string>{"load"});
  BOOST_CHECK(extract.child_jobs_on_failure == std::vector<std::string>{"page-ops"});
  BOOST_CHECK_EQUAL(extract.on_finish, R"({"payload":{"to":"ops"},"type":"REPORT"})");
  BOOST_CHECK(extract.on_success.empty());
  auto job = [](const std::string& name, const std::string& children) {
    return "[[jobs]]\nname = \"" + name + "\"\ntype = \"T\"\nschedule = \"@daily\"\n" + children +
           "\n";
  };
  BOOST_CHECK(contains(
      error_of(job("a", "child_jobs = [\"b\"]") + job("b", "child_jobs_on_failure = [\"c\"]") +
               job("c", "child_jobs = [\"a\"]")),
      "'jobs[0]' child_jobs: a cycle: a -> b -> c -> a"));
  BOOST_CHECK(contains(error_of(job("a", "child_jobs = [\"a\"]")),
                       "'jobs[0]' child_jobs: a cycle: a -> a"));
  BOOST_CHECK(contains(error_of(job("a", "child_jobs = \"b\"")), "'jobs[0].child_jobs' must be"));
  BOOST_CHECK(contains(error_of(job("a", "child_jobs = [1]")),
                       "'jobs[0].child_jobs' must be a list of job names"));
  BOOST_CHECK(contains(error_of(job("a", "on_finish = \"REPORT\"")),
                       "'jobs[0].on_finish' must be a table or an array"));
  // Chains without a cycle, a diamond among them, are fine.
  temp_file diamond{job("a", "child_jobs = [\"b\", \"c\"]") + job("b", "child_jobs = [\"d\"]") +
                    job("c", "child_jobs = [\"d\"]") + job("d", "")};
  BOOST_CHECK(load_config(diamond.path.string(), {}));
}

BOOST_AUTO_TEST_CASE(alert_rules_have_defaults_and_per_type_and_job_settings) {
  temp_file file{R"(
[alerts]
webhooks = ["http://127.0.0.1:9000/alerts"]
failure_rate = 0.1
record_failure_rate = 0.02
pending_after = "10m"
[alerts.types.AUDIT]
dead_task = false
pending_after = "0"
[alerts.jobs.nightly]
missed_firings = false
)"};
  auto cfg = load_config(file.path.string(), {});
  BOOST_REQUIRE_MESSAGE(cfg, (cfg ? "" : error_message(cfg.error())));
  BOOST_CHECK_EQUAL(cfg->alerts.webhooks.size(), 1u);
  BOOST_CHECK_EQUAL(alert_rules_json(cfg->alerts),
                    R"({"default":{"dead_task":true,"failure_rate":0.1,"missed_firings":true,)"
                    R"("pending_after_ms":600000,"record_failure_rate":0.02},)"
                    R"("jobs":{"nightly":{"missed_firings":false}},)"
                    R"("types":{"AUDIT":{"dead_task":false,"pending_after_ms":0}}})");
  BOOST_CHECK(contains(error_of("[alerts]\nwebhooks = [\"ftp://x\"]\n"),
                       "'alerts.webhooks' must be a list of http:// URLs"));
  BOOST_CHECK(contains(error_of("[alerts]\nfailure_rate = 2\n"), "'alerts.failure_rate'"));
  BOOST_CHECK(
      contains(error_of("[alerts]\nrecord_failure_rate = -1\n"), "'alerts.record_failure_rate'"));
  BOOST_CHECK(contains(error_of("[alerts.types.T]\nmissed_firings = true\n"),
                       "unknown option 'alerts.types.T.missed_firings'"));
  BOOST_CHECK(contains(error_of("[alerts.jobs.J]\npending_after = \"1m\"\n"),
                       "unknown option 'alerts.jobs.J.pending_after'"));
  BOOST_CHECK(contains(error_of("[cron]\nmisfire_after = \"soon\"\n"), "'cron.misfire_after'"));
}

BOOST_AUTO_TEST_CASE(cluster_options_need_a_secret_off_loopback) {
  temp_file file{R"(
[cluster]
listen = "0.0.0.0:8481"
advertise = "10.0.0.1:8481"
seeds = ["10.0.0.2:8481", "10.0.0.3:8481"]
secret = "s"
)"};
  auto cfg = load_config(file.path.string(), {});
  BOOST_REQUIRE_MESSAGE(cfg, (cfg ? "" : error_message(cfg.error())));
  BOOST_CHECK_EQUAL(cfg->cluster.seeds.size(), 2u);
  BOOST_CHECK_EQUAL(cfg->cluster.advertise, "10.0.0.1:8481");
  BOOST_CHECK(contains(error_of("[cluster]\nlisten = \"10.0.0.1:8481\"\n"),
                       "'cluster.secret' is required when cluster.listen is not a loopback"));
  BOOST_CHECK(contains(error_of("[cluster]\nlisten = \"0.0.0.0:8481\"\nsecret = \"s\"\n"),
                       "'cluster.advertise' is required"));
  BOOST_CHECK(contains(error_of("[cluster]\nseeds = [\"nohost\"]\n"), "'cluster.seeds'"));
  BOOST_CHECK(contains(error_of("[cluster]\ntls_cert = \"/etc/hostname\"\n"),
                       "tls_key and tls_ca go together"));
  BOOST_CHECK(contains(error_of("[cluster]\ntls_cert = \"/nonexistent.pem\"\n"
                                "tls_key = \"/etc/hostname\"\ntls_ca = \"/etc/hostname\"\n"),
                       "'cluster.tls_cert' names a file that cannot be read: /nonexistent.pem"));
  auto loopback =
      load_config(file.path.string(), {"cluster.listen=127.0.0.1:9000", "cluster.secret="});
  BOOST_CHECK_MESSAGE(loopback, (loopback ? "" : error_message(loopback.error())));
}

BOOST_AUTO_TEST_CASE(errors_name_the_option) {
  BOOST_CHECK(
      contains(error_of("[scheduling]\nbatchsize = 3\n"), "unknown option 'scheduling.batchsize'"));
  BOOST_CHECK(contains(error_of("[scheduling]\nbatch_size = \"x\"\n"),
                       "'scheduling.batch_size' must be an integer"));
  BOOST_CHECK(contains(error_of("[scheduling]\nbatch_size = 0\n"), "'scheduling.batch_size'"));
  BOOST_CHECK(contains(error_of("[heartbeat]\ninterval = \"5 parsecs\"\n"),
                       "'heartbeat.interval' must be a duration"));
  BOOST_CHECK(contains(error_of("[types.X]\nexecutor = \"smtp\"\n"), "'types.X.executor'"));
  BOOST_CHECK(contains(error_of("[types.X]\nexecutor = \"http\"\n"), "'types.X.url'"));
  BOOST_CHECK(contains(error_of("[api]\nlisten = \"nohost\"\n"), "'api.listen'"));
  BOOST_CHECK(contains(error_of("[database]\npooler = \"statement\"\n"),
                       "'database.pooler' must be none, session or transaction"));
  BOOST_CHECK(contains(error_of("[api]\nallowed_hosts = [\"https://tasks.example.com\"]\n"),
                       "'api.allowed_hosts' must be a list of host names alone"));
  BOOST_CHECK(
      contains(error_of("[api]\nallowed_hosts = \"tasks.example.com\"\n"), "'api.allowed_hosts'"));
  for (const char* origin : {"ops.example.com", "https://ops.example.com/", "ftp://ops.example.com",
                             "https://ops.example.com:port"})
    BOOST_CHECK_MESSAGE(
        contains(error_of(std::string{"[api]\nallowed_origins = [\""} + origin + "\"]\n"),
                 "'api.allowed_origins' must be a list of origins"),
        origin);
  BOOST_CHECK(contains(error_of("[scheduling]\nweights = [1, 2]\n"), "'scheduling.weights'"));
  BOOST_CHECK(contains(error_of("[[reconciler.rules]]\ntype = \"A\"\n"),
                       "'reconciler.rules[0].query' is required"));
  BOOST_CHECK(contains(error_of("speling = 1\n"), "unknown option 'speling'"));
  BOOST_CHECK(contains(error_of("[node]\nname = \"a\\nb\"\n"),
                       "'node.name' must not contain control characters"));
  auto syntax = error_of("[node\nname = 1\n");
  BOOST_CHECK_MESSAGE(contains(syntax, "line 1"), syntax);
}

BOOST_AUTO_TEST_CASE(the_api_takes_the_hosts_and_origins_it_is_told) {
  temp_file file{
      "[api]\nallowed_hosts = [\"tasks.example.com\", \"tasks\"]\n"
      "allowed_origins = [\"https://ops.example.com\", \"http://127.0.0.1:3000\"]\n"};
  auto cfg = load_config(file.path.string(), {});
  BOOST_REQUIRE_MESSAGE(cfg, error_message(cfg ? caf::error{} : cfg.error()));
  BOOST_CHECK((cfg->api.allowed_hosts == std::vector<std::string>{"tasks.example.com", "tasks"}));
  BOOST_CHECK((cfg->api.allowed_origins ==
               std::vector<std::string>{"https://ops.example.com", "http://127.0.0.1:3000"}));
}

BOOST_AUTO_TEST_CASE(command_line_overrides_beat_the_environment_which_beats_the_file) {
  temp_file file{"[database]\nurl = \"host=file\"\n[scheduling]\nbatch_size = 100\n"};
  setenv("TASKMILL_DATABASE_URL", "host=env", 1);
  auto from_env = load_config(file.path.string(), {"scheduling.batch_size=64"});
  BOOST_REQUIRE(from_env);
  BOOST_CHECK_EQUAL(from_env->database.url, "host=env");
  BOOST_CHECK_EQUAL(from_env->scheduling.batch_size, 64);
  auto from_cli = load_config(file.path.string(), {"database.url=postgresql://cli/db"});
  BOOST_REQUIRE(from_cli);
  BOOST_CHECK_EQUAL(from_cli->database.url, "postgresql://cli/db");
  unsetenv("TASKMILL_DATABASE_URL");
  auto bad = load_config(file.path.string(), {"scheduling.batchsize=3"});
  BOOST_REQUIRE(!bad);
  BOOST_CHECK(contains(error_message(bad.error()), "scheduling.batchsize"));
  auto malformed = load_config(file.path.string(), {"no-equals-sign"});
  BOOST_REQUIRE(!malformed);
  BOOST_CHECK(contains(error_message(malformed.error()), "section.key=value"));
}

BOOST_AUTO_TEST_CASE(durations) {
  BOOST_CHECK(*parse_duration("250ms") == 250ms);
  BOOST_CHECK(*parse_duration("5s") == 5s);
  BOOST_CHECK(*parse_duration("2m") == 2min);
  BOOST_CHECK(*parse_duration("24h") == 24h);
  BOOST_CHECK(*parse_duration("7d") == 168h);
  BOOST_CHECK(*parse_duration("1500") == 1500ms);
  BOOST_CHECK(!parse_duration("5 s"));
  BOOST_CHECK(!parse_duration("-1s"));
  BOOST_CHECK(!parse_duration("s"));
}
