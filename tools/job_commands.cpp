// `taskmill jobs ...` and `taskmill alerts` (SPEC §6): calls to the
// recurring jobs' and the alerts' endpoints of a node's API.

#include "tools/client_commands.hpp"

#include "tools/client_support.hpp"

#include <memory>

namespace taskmill {

namespace {

using namespace client;

// -- recurring jobs (SPEC §6) ---------------------------------------------------------

constexpr const char* job_fields[] = {"name",
                                      "schedule",
                                      "dialect",
                                      "time_zone",
                                      "type",
                                      "payload",
                                      "priority",
                                      "max_retries",
                                      "timeout_ms",
                                      "backoff",
                                      "enabled",
                                      "routing",
                                      "shards",
                                      "overlap",
                                      "misfire",
                                      "catch_up_limit",
                                      "description",
                                      "child_jobs",
                                      "child_jobs_on_failure",
                                      "on_finish",
                                      "on_success",
                                      "source",
                                      "next_fire_at",
                                      "created_at",
                                      "updated_at"};

void print_job(const json& job) {
  table listing;
  for (const char* name : job_fields)
    listing.add({std::string{name} + ":", shorten(shown(field(job, name)), value_chars)});
  listing.print(std::cout);
}

void print_put_job(const json& doc) {
  std::cout << (field(doc, "created").get<bool>() ? "created" : "replaced") << "\n";
  print_job(field(doc, "job"));
}

void print_jobs(const json& doc) {
  table rows{{"NAME", "SCHEDULE", "TIME_ZONE", "TYPE", "ENABLED", "NEXT_FIRE_AT"}};
  for (const auto& j : array_field(doc, "jobs"))
    rows.add({shown(field(j, "name")), shorten(shown(field(j, "schedule")), cell_chars),
              shown(field(j, "time_zone")), shorten(shown(field(j, "type")), cell_chars),
              shown(field(j, "enabled")), shown(field(j, "next_fire_at"))});
  rows.print(std::cout);
}

std::string counts_text(const json& counts) {
  std::string out;
  for (const char* status : task_statuses)
    if (counts.contains(status))
      out += (out.empty() ? "" : " ") + std::string{status} + "=" + shown(counts[status]);
  return out.empty() ? "-" : out;
}

/// A firing's kind, and for a child firing the job whose firing fired it.
std::string kind_text(const json& f) {
  auto parent = f.find("parent");
  if (parent == f.end() || !parent->is_object()) return shown(field(f, "kind"));
  return "child of " + shown(field(*parent, "job"));
}

void print_firing(const json& f) {
  table listing;
  for (const char* name : {"job", "fire_at", "kind", "outcome", "batch"})
    listing.add({std::string{name} + ":", shown(field(f, name))});
  listing.print(std::cout);
}

void print_firings(const json& doc) {
  table rows{{"FIRE_AT", "KIND", "OUTCOME", "BATCH", "TASKS"}};
  for (const auto& f : array_field(doc, "firings"))
    rows.add({shown(field(f, "fire_at")), kind_text(f), shown(field(f, "outcome")),
              shown(field(f, "batch")), counts_text(field(f, "counts"))});
  rows.print(std::cout);
}

void print_times(const json& doc) {
  if (doc.value("paused", false)) std::cout << "paused; were it resumed now:\n";
  for (const auto& t : array_field(doc, "times")) std::cout << shown(t) << "\n";
}

struct job_options {
  common_options common;
  std::string name;
  std::string schedule;
  std::string time_zone;
  std::string type;
  std::string payload;
  std::optional<int64_t> priority;
  std::optional<int64_t> max_retries;
  std::optional<int64_t> timeout_ms;
  std::string routing;
  std::optional<int64_t> shards;
  std::string overlap;
  std::string misfire;
  std::optional<int64_t> catch_up_limit;
  std::string description;
  std::string dialect;
  std::vector<std::string> child_jobs;
  std::vector<std::string> child_jobs_on_failure;
  std::string on_finish;
  std::string on_success;
  bool disabled = false;
  std::optional<int64_t> count;
};

json job_body(const job_options& o) {
  json body{{"schedule", o.schedule}, {"type", o.type}};
  if (!o.dialect.empty()) body["dialect"] = o.dialect;
  if (!o.time_zone.empty()) body["time_zone"] = o.time_zone;
  if (!o.payload.empty()) body["payload"] = json::parse(o.payload);
  if (o.priority) body["priority"] = *o.priority;
  if (o.max_retries) body["max_retries"] = *o.max_retries;
  if (o.timeout_ms) body["timeout_ms"] = *o.timeout_ms;
  if (!o.routing.empty()) body["routing"] = o.routing;
  if (o.shards) body["shards"] = *o.shards;
  if (!o.overlap.empty()) body["overlap"] = o.overlap;
  if (!o.misfire.empty()) body["misfire"] = o.misfire;
  if (o.catch_up_limit) body["catch_up_limit"] = *o.catch_up_limit;
  if (!o.description.empty()) body["description"] = o.description;
  if (!o.child_jobs.empty()) body["child_jobs"] = o.child_jobs;
  if (!o.child_jobs_on_failure.empty()) body["child_jobs_on_failure"] = o.child_jobs_on_failure;
  if (!o.on_finish.empty()) body["on_finish"] = json::parse(o.on_finish);
  if (!o.on_success.empty()) body["on_success"] = json::parse(o.on_success);
  if (o.disabled) body["enabled"] = false;
  return body;
}

std::string job_path(const job_options& o) {
  return "/v1/jobs/" + percent_encode(o.name);
}

/// `taskmill jobs ACTION NAME`: one call and its printer.
void add_job_action(CLI::App& jobs, client_command& chosen, const char* action,
                    const char* description,
                    std::optional<answer> (*call)(const api_client&, const job_options&),
                    void (*print)(const json&)) {
  auto o = std::make_shared<job_options>();
  auto sub = jobs.add_subcommand(action, description);
  add_common_options(*sub, o->common);
  sub->add_option("NAME", o->name, "Job name")->required();
  if (std::string{action} == "trigger")
    sub->add_option("--payload", o->payload, "Payload for this firing, JSON")
        ->check(CLI::Validator{json_text, "JSON"});
  if (std::string{action} == "firings")
    sub->add_option("--limit", o->count, "At most this many, newest first (1 to 1000)");
  if (std::string{action} == "next")
    sub->add_option("--count", o->count, "How many fire times (1 to 100)");
  on_parsed(sub, chosen, [o, call, print] {
    return answer_of(o->common, call(api_client{o->common.server}, *o), print);
  });
}

void add_job_put(CLI::App& jobs, client_command& chosen) {
  auto o = std::make_shared<job_options>();
  auto sub = jobs.add_subcommand("put", "Create or replace a recurring job");
  add_common_options(*sub, o->common);
  sub->add_option("NAME", o->name, "Job name")->required();
  sub->add_option("--schedule", o->schedule,
                  "Cron (5 or 6 fields), @daily and the like, or @every 90s")
      ->required();
  sub->add_option("--dialect", o->dialect,
                  "unix (default: 0 and 7 are Sunday) or quartz (1 is Sunday, as Quartz and "
                  "XXL-JOB count)");
  sub->add_option("--type", o->type, "Type of the tasks it fires")->required();
  sub->add_option("--time-zone", o->time_zone, "IANA time zone (default UTC)");
  sub->add_option("--payload", o->payload, "Payload of its tasks, JSON")
      ->check(CLI::Validator{json_text, "JSON"});
  sub->add_option("--priority", o->priority, "Priority of its tasks, 1 to 5");
  sub->add_option("--max-retries", o->max_retries, "Retries of its tasks");
  sub->add_option("--timeout-ms", o->timeout_ms, "Timeout of its tasks");
  sub->add_option("--routing", o->routing, "any (default) or broadcast");
  sub->add_option("--shards", o->shards, "broadcast: a fixed number of shards");
  sub->add_option("--overlap", o->overlap, "allow (default), skip or replace");
  sub->add_option("--misfire", o->misfire, "fire_once (default), skip or catch_up");
  sub->add_option("--catch-up-limit", o->catch_up_limit, "catch_up: at most this many (10)");
  sub->add_option("--description", o->description, "What it is for");
  sub->add_option("--child-job", o->child_jobs,
                  "A job to fire once a firing's tasks all succeeded (repeatable)");
  sub->add_option("--child-job-on-failure", o->child_jobs_on_failure,
                  "A job to fire once a firing's tasks finished and one did not (repeatable)");
  sub->add_option("--on-finish", o->on_finish,
                  "A task to submit once each firing's tasks finished, JSON {type, payload, ...}")
      ->check(CLI::Validator{json_text, "JSON"});
  sub->add_option("--on-success", o->on_success,
                  "A task to submit once each firing's tasks all succeeded, JSON")
      ->check(CLI::Validator{json_text, "JSON"});
  sub->add_flag("--disabled", o->disabled, "Create it paused");
  on_parsed(sub, chosen, [o] {
    return answer_of(o->common, api_client{o->common.server}.put(job_path(*o), job_body(*o)),
                     print_put_job);
  });
}

void add_jobs(CLI::App& app, client_command& chosen) {
  auto jobs = app.add_subcommand("jobs", "Recurring jobs: list, show, put, delete, trigger, ...");
  jobs->require_subcommand(1);
  auto list = jobs->add_subcommand("list", "List the jobs");
  auto list_options = std::make_shared<common_options>();
  add_common_options(*list, *list_options);
  on_parsed(list, chosen, [list_options] {
    return answer_of(*list_options, api_client{list_options->server}.get("/v1/jobs"), print_jobs);
  });
  add_job_put(*jobs, chosen);
  add_job_action(
      *jobs, chosen, "show", "Show one job",
      [](const api_client& api, const job_options& o) { return api.get(job_path(o)); }, print_job);
  add_job_action(
      *jobs, chosen, "delete", "Delete a job and its firings (its tasks stay)",
      [](const api_client& api, const job_options& o) { return api.del(job_path(o)); },
      print_deleted);
  add_job_action(
      *jobs, chosen, "trigger", "Fire a job now",
      [](const api_client& api, const job_options& o) {
        json body = json::object();
        if (!o.payload.empty()) body["payload"] = json::parse(o.payload);
        return api.post(job_path(o) + "/trigger", body);
      },
      print_firing);
  add_job_action(
      *jobs, chosen, "pause", "Stop a job from firing",
      [](const api_client& api, const job_options& o) { return api.post(job_path(o) + "/pause"); },
      print_job);
  add_job_action(
      *jobs, chosen, "resume", "Let a paused job fire again, from now on",
      [](const api_client& api, const job_options& o) { return api.post(job_path(o) + "/resume"); },
      print_job);
  add_job_action(
      *jobs, chosen, "firings", "A job's latest firings and their tasks per status",
      [](const api_client& api, const job_options& o) {
        auto query = o.count ? "?limit=" + std::to_string(*o.count) : std::string{};
        return api.get(job_path(o) + "/firings" + query);
      },
      print_firings);
  add_job_action(
      *jobs, chosen, "next", "A job's next fire times",
      [](const api_client& api, const job_options& o) {
        auto query = o.count ? "?count=" + std::to_string(*o.count) : std::string{};
        return api.get(job_path(o) + "/next" + query);
      },
      print_times);
}

// -- alerts (SPEC §6) -------------------------------------------------------------------

struct alerts_options {
  common_options common;
  std::string since;
  std::optional<int> limit;
};

/// How an alert's deliveries went, in a few words.
std::string delivery_text(const json& alert) {
  const auto& deliveries = array_field(alert, "deliveries");
  if (deliveries.empty()) return "-";
  int delivered = 0, failed = 0;
  for (const auto& d : deliveries) {
    if (!field(d, "delivered_at").is_null())
      ++delivered;
    else if (field(d, "next_at").is_null())
      ++failed;
  }
  auto pending = static_cast<int>(deliveries.size()) - delivered - failed;
  std::string out =
      std::to_string(delivered) + "/" + std::to_string(deliveries.size()) + " delivered";
  if (failed > 0) out += ", " + std::to_string(failed) + " given up";
  if (pending > 0) out += ", " + std::to_string(pending) + " retrying";
  return out;
}

void print_alerts(const json& doc) {
  table rows{{"ID", "RAISED_AT", "KIND", "MESSAGE", "DELIVERY"}};
  for (const auto& a : array_field(doc, "alerts"))
    rows.add({shown(field(a, "id")), shown(field(a, "raised_at")), shown(field(a, "kind")),
              shorten(shown(field(a, "message")), value_chars), delivery_text(a)});
  rows.print(std::cout);
}

void add_alerts(CLI::App& app, client_command& chosen) {
  auto o = std::make_shared<alerts_options>();
  auto sub = app.add_subcommand("alerts",
                                "Alerts raised: dead tasks, failure rates, missed "
                                "firings, overdue types");
  add_common_options(*sub, o->common);
  sub->add_option("--since", o->since, "Only alerts after this alert id or RFC 3339 time");
  sub->add_option("--limit", o->limit, "At most this many, 1 to 1000 (default 100)");
  on_parsed(sub, chosen, [o] {
    std::string query;
    if (!o->since.empty()) query += "since=" + percent_encode(o->since);
    if (o->limit)
      query += (query.empty() ? "" : "&") + std::string{"limit="} + std::to_string(*o->limit);
    return answer_of(
        o->common,
        api_client{o->common.server}.get("/v1/alerts" + (query.empty() ? "" : "?" + query)),
        print_alerts);
  });
}

}  // namespace

void add_job_commands(CLI::App& app, client_command& chosen) {
  add_jobs(app, chosen);
  add_alerts(app, chosen);
}

}  // namespace taskmill
