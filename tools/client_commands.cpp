#include "tools/client_commands.hpp"

#include "tools/client_support.hpp"

#include "config/config.hpp"
#include "messages/errors.hpp"
#include "messages/time.hpp"
#include "tools/http_fetch.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace taskmill {

namespace {

using namespace client;
using namespace std::chrono_literals;

// -- printing answers ----------------------------------------------------------------

constexpr const char* task_fields[] = {
    "id",          "type",       "key",       "version",         "status",    "priority",
    "execute_at",  "payload",    "result",    "error",           "attempt",   "retry_count",
    "max_retries", "timeout_ms", "backoff",   "picked_by",       "batch",     "shard_index",
    "shard_total", "trace_id",   "key_space", "concurrency_key", "key_class", "heartbeat_at",
    "started_at",  "created_at", "updated_at"};

void add_task_fields(table& listing, const json& task) {
  for (const char* name : task_fields)
    listing.add({std::string{name} + ":", shorten(shown(field(task, name)), value_chars)});
  if (task.contains("waiting")) {
    const auto& waiting = task["waiting"];
    listing.add({"waiting:", shown(field(waiting, "reason"))});
    listing.add({"why:", shown(field(waiting, "message"))});
  }
}

void print_task(const json& task) {
  table listing;
  add_task_fields(listing, task);
  listing.print(std::cout);
}

/// `{outcome, task}`, as submit, reschedule and cancel answer.
void print_outcome(const json& doc) {
  table listing;
  listing.add({"outcome:", shown(field(doc, "outcome"))});
  add_task_fields(listing, field(doc, "task"));
  listing.print(std::cout);
}

void print_attempts(const json& doc) {
  table rows{{"ATTEMPT", "NODE", "STARTED_AT", "FINISHED_AT", "DURATION_MS", "OUTCOME", "ERROR"}};
  for (const auto& a : array_field(doc, "attempts"))
    rows.add({shown(field(a, "attempt")), shown(field(a, "node")), shown(field(a, "started_at")),
              shown(field(a, "finished_at")), shown(field(a, "duration_ms")),
              shown(field(a, "outcome")), shorten(shown(field(a, "error")), value_chars)});
  rows.print(std::cout);
}

void print_batch(const json& doc) {
  table listing;
  listing.add({"batch:", shown(field(doc, "batch"))});
  const auto& counts = field(doc, "counts");
  for (const char* status : task_statuses)
    if (counts.contains(status)) listing.add({std::string{status} + ":", shown(counts[status])});
  listing.add({"total:", shown(field(doc, "total"))});
  listing.print(std::cout);
}

void print_retried(const json& doc) {
  std::cout << "retried: " << shown(field(doc, "retried")) << "\n";
}

void print_stats(const json& doc) {
  std::vector<std::string> header{"TYPE"};
  for (const char* status : task_statuses) header.push_back(upper(status));
  table counts{header};
  for (const auto& [type, by_status] : field(doc, "counts").items()) {
    std::vector<std::string> row{one_line(type)};
    for (const char* status : task_statuses)
      row.push_back(by_status.contains(status) ? shown(by_status[status]) : "0");
    counts.add(std::move(row));
  }
  counts.print(std::cout);
  std::cout << "\n";
  table nodes{{"NODE", "RUNNING"}};
  for (const auto& n : array_field(doc, "running_by_node"))
    nodes.add({shown(field(n, "node")), shown(field(n, "running"))});
  nodes.print(std::cout);
  std::cout << "\n";
  table limiter{{"SCOPE", "USED", "LIMIT"}};
  for (const auto& l : array_field(doc, "limiter"))
    limiter.add({shown(field(l, "scope")), shown(field(l, "used")), shown(field(l, "limit"))});
  limiter.print(std::cout);
}

void print_nodes(const json& doc) {
  table rows{{"NAME", "ADDRESS", "ROLE", "STARTED_AT", "HEARTBEAT_AT", "RUNNING", "LINK"}};
  for (const auto& n : array_field(doc, "nodes"))
    rows.add({shown(field(n, "name")), shown(field(n, "address")), shown(field(n, "role")),
              shown(field(n, "started_at")), shown(field(n, "heartbeat_at")),
              shown(field(n, "running")), shown(field(n, "link"))});
  rows.print(std::cout);
  std::vector<json> executors;
  for (const auto& l : array_field(doc, "links"))
    if (field(l, "kind") == "executor") executors.push_back(l);
  if (executors.empty()) return;
  std::cout << "\n";
  table links{{"REMOTE EXECUTOR", "STATE", "SINCE"}};
  for (const auto& l : executors)
    links.add({shown(field(l, "name")), shown(field(l, "state")), shown(field(l, "since"))});
  links.print(std::cout);
}

std::string task_path(int64_t id) {
  return "/v1/tasks/" + std::to_string(id);
}

/// When a task should run: an RFC 3339 time or a delay from now.
struct when_options {
  std::string execute_at;
  std::string in;

  /// The time asked for as RFC 3339; empty when neither option was given.
  std::string time() const {
    if (!in.empty())
      return format_rfc3339(wall_clock_micros() + parse_duration(in)->count() * 1000);
    return execute_at;
  }
};

/// Adds --execute-at and --in, of which at most one may be given (exactly one
/// when `required`).
void add_when_options(CLI::App& sub, when_options& w, bool required) {
  auto group = sub.add_option_group("time", "When the task runs");
  auto at = group->add_option("--execute-at", w.execute_at,
                              "When to run, RFC 3339 (e.g. 2026-11-21T22:52:00Z)");
  auto in = group->add_option("--in", w.in, "Run after this delay from now (e.g. 5s, 2m)")
                ->check(CLI::Validator{duration, "DURATION"});
  at->excludes(in);
  if (required) group->require_option(1);
}

// -- submit --------------------------------------------------------------------------

struct submit_options {
  common_options common;
  std::string type;
  std::string key;
  std::optional<int64_t> version;
  std::string payload;
  when_options when;
  std::optional<int64_t> priority;
  std::optional<int64_t> max_retries;
  std::optional<int64_t> timeout_ms;
  std::string batch;
  std::vector<std::string> after;
  std::string on_parent_failure;
  std::string concurrency_key;
  bool wait = false;
};

/// A parent of --after: a task id, or TYPE:KEY (the unit's current task).
json parent_ref(const std::string& ref) {
  if (!ref.empty() && ref.find_first_not_of("0123456789") == std::string::npos)
    return std::stoll(ref);
  auto colon = ref.find(':');
  if (colon == std::string::npos) return ref;  // refused by the node, naming it
  return json{{"type", ref.substr(0, colon)}, {"key", ref.substr(colon + 1)}};
}

json submit_body(const submit_options& o) {
  json body{{"type", o.type}, {"key", o.key}};
  if (o.version) body["version"] = *o.version;
  if (!o.payload.empty()) body["payload"] = json::parse(o.payload);
  if (auto at = o.when.time(); !at.empty()) body["execute_at"] = at;
  if (o.priority) body["priority"] = *o.priority;
  if (o.max_retries) body["max_retries"] = *o.max_retries;
  if (o.timeout_ms) body["timeout_ms"] = *o.timeout_ms;
  if (!o.batch.empty()) body["batch"] = o.batch;
  if (!o.after.empty()) {
    auto& after = body["after"] = json::array();
    for (const auto& ref : o.after) after.push_back(parent_ref(ref));
  }
  if (!o.on_parent_failure.empty()) body["on_parent_failure"] = o.on_parent_failure;
  if (!o.concurrency_key.empty()) body["concurrency_key"] = o.concurrency_key;
  return body;
}

/// One line of --wait progress: status, attempt, and why the last one failed.
std::string progress_line(const json& task) {
  auto status = shown(field(task, "status"));
  auto line = "task " + shown(field(task, "id")) + ": " + status;
  if (auto attempt = integer(field(task, "attempt")); attempt > 0)
    line += ", attempt " + std::to_string(attempt);
  if (status == "failed" || status == "dead")
    line += ": " + shorten(shown(field(task, "error")), value_chars);
  if (status == "failed") line += "; next attempt at " + shown(field(task, "execute_at"));
  return line;
}

/// Polls the task until it is finished, printing each change to stderr.
int wait_until_finished(const api_client& api, const common_options& o, int64_t id) {
  std::string last_line;
  auto pause = 100ms;
  for (;;) {
    auto a = api.get(task_path(id));
    if (!a) return EXIT_FAILURE;
    auto line = progress_line(a->doc);
    if (line != last_line) std::cerr << line << std::endl;
    last_line = line;
    auto status = shown(field(a->doc, "status"));
    if (finished(status)) {
      print_answer(o, *a, print_task);
      // Stopped: it succeeded, and its success retention has passed since.
      return status == "succeeded" || status == "stopped" ? EXIT_SUCCESS : EXIT_FAILURE;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, 1s);
  }
}

int submit(const submit_options& o) {
  api_client api{o.common.server};
  auto a = api.post("/v1/tasks", submit_body(o));
  if (!a || !o.wait) return answer_of(o.common, a, print_outcome);
  const auto& task = field(a->doc, "task");
  std::cerr << "task " << shown(field(task, "id")) << " (" << shown(field(task, "type")) << " "
            << shown(field(task, "key")) << "): " << shown(field(a->doc, "outcome")) << std::endl;
  return wait_until_finished(api, o.common, integer(field(task, "id")));
}

void add_submit(CLI::App& app, client_command& chosen) {
  auto o = std::make_shared<submit_options>();
  auto sub = app.add_subcommand("submit", "Submit a task");
  add_common_options(*sub, o->common);
  sub->add_option("TYPE", o->type, "Task type")->required();
  sub->add_option("KEY", o->key, "Task key, unique per type among live tasks")->required();
  sub->add_option("--version", o->version, "Version; a lower one than stored is stale");
  sub->add_option("--payload", o->payload, "Payload, JSON")
      ->check(CLI::Validator{json_text, "JSON"});
  add_when_options(*sub, o->when, false);
  sub->add_option("--priority", o->priority, "Priority, 1 (first) to 5");
  sub->add_option("--max-retries", o->max_retries, "Retries after a failed attempt");
  sub->add_option("--timeout-ms", o->timeout_ms, "Execution timeout in milliseconds");
  sub->add_option("--batch", o->batch, "Batch the task belongs to");
  sub->add_option("--after", o->after,
                  "A task that must finish first: its id, or TYPE:KEY (repeatable)");
  sub->add_option("--on-parent-failure", o->on_parent_failure,
                  "With --after, when a parent ends dead or cancelled: fail (default), run, skip");
  sub->add_option("--concurrency-key", o->concurrency_key,
                  "Its concurrency key, for a type keyed without a key_path or key_separator");
  sub->add_flag("--wait", o->wait, "Wait until the task is finished; exit 0 only if it succeeded");
  on_parsed(sub, chosen, [o] { return submit(*o); });
}

// -- reschedule and cancel -----------------------------------------------------------

struct reschedule_options {
  common_options common;
  std::string type;
  std::string key;
  when_options when;
  std::string payload;
};

int reschedule(const reschedule_options& o) {
  json body{{"type", o.type}, {"key", o.key}, {"execute_at", o.when.time()}};
  if (!o.payload.empty()) body["payload"] = json::parse(o.payload);
  return answer_of(o.common, api_client{o.common.server}.post("/v1/tasks/reschedule", body),
                   print_outcome);
}

void add_reschedule(CLI::App& app, client_command& chosen) {
  auto o = std::make_shared<reschedule_options>();
  auto sub = app.add_subcommand("reschedule", "Move a task to another time");
  add_common_options(*sub, o->common);
  sub->add_option("TYPE", o->type, "Task type")->required();
  sub->add_option("KEY", o->key, "Task key")->required();
  add_when_options(*sub, o->when, true);
  sub->add_option("--payload", o->payload, "New payload, JSON")
      ->check(CLI::Validator{json_text, "JSON"});
  on_parsed(sub, chosen, [o] { return reschedule(*o); });
}

struct cancel_options {
  common_options common;
  std::vector<std::string> task;
};

/// {"id"} for one argument, {"type", "key"} for two.
std::optional<json> cancel_body(const std::vector<std::string>& task) {
  if (task.size() == 2) return json{{"type", task[0]}, {"key", task[1]}};
  const auto& text = task.front();
  int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return json{{"id", id}};
}

void add_cancel(CLI::App& app, client_command& chosen) {
  auto o = std::make_shared<cancel_options>();
  auto sub = app.add_subcommand("cancel", "Cancel a task by id, or by type and key");
  add_common_options(*sub, o->common);
  sub->add_option("TASK", o->task, "ID, or TYPE KEY")->required()->expected(1, 2);
  sub->callback([o, &chosen] {
    auto body = cancel_body(o->task);
    if (!body)
      throw CLI::ValidationError(
          "TASK", "'" + o->task.front() + "' is not a task id; give an integer id, or TYPE KEY");
    chosen = [o, body = *body] {
      return answer_of(o->common, api_client{o->common.server}.post("/v1/tasks/cancel", body),
                       print_outcome);
    };
  });
}

// -- queries and repairs of one task -------------------------------------------------

struct task_id_options {
  common_options common;
  int64_t id = 0;
};

/// A command that takes one task id and makes one call about it.
void add_task_command(CLI::App& app, client_command& chosen, const char* name,
                      const char* description,
                      std::optional<answer> (*call)(const api_client&, int64_t),
                      void (*print)(const json&)) {
  auto o = std::make_shared<task_id_options>();
  auto sub = app.add_subcommand(name, description);
  add_common_options(*sub, o->common);
  sub->add_option("ID", o->id, "Task id")->required();
  on_parsed(sub, chosen, [o, call, print] {
    return answer_of(o->common, call(api_client{o->common.server}, o->id), print);
  });
}

std::optional<answer> get_task(const api_client& api, int64_t id) {
  return api.get(task_path(id));
}

std::optional<answer> get_attempts(const api_client& api, int64_t id) {
  return api.get(task_path(id) + "/attempts");
}

std::optional<answer> retry_task(const api_client& api, int64_t id) {
  return api.post(task_path(id) + "/retry");
}

// -- list ----------------------------------------------------------------------------

struct list_options {
  common_options common;
  std::string type;
  std::string key;
  std::string status;
  std::string batch;
  std::optional<int64_t> limit;
  bool all = false;
};

std::string list_target(const list_options& o, const std::string& page_token) {
  std::string query;
  auto add = [&](const char* name, const std::string& value) {
    if (value.empty()) return;
    query += (query.empty() ? "?" : "&") + std::string{name} + "=" + percent_encode(value);
  };
  add("type", o.type);
  add("key", o.key);
  add("status", o.status);
  add("batch", o.batch);
  add("limit", o.limit ? std::to_string(*o.limit) : std::string{});
  add("page_token", page_token);
  return "/v1/tasks" + query;
}

std::string next_page_token(const json& page) {
  const auto& token = field(page, "next_page_token");
  return token.is_string() ? token.get<std::string>() : std::string{};
}

/// Pages merged into one answer of the same shape, until it holds `wanted`
/// tasks or no page is left. The API reads a bounded part of the table per
/// page, so a page of a selective filter may come short with more to follow.
std::optional<answer> merged_pages(const api_client& api, const list_options& o, size_t wanted) {
  auto page = api.get(list_target(o, {}));
  if (!page) return std::nullopt;
  auto merged = page->doc;
  for (auto token = next_page_token(page->doc);
       !token.empty() && array_field(merged, "tasks").size() < wanted;
       token = next_page_token(page->doc)) {
    page = api.get(list_target(o, token));
    if (!page) return std::nullopt;
    for (const auto& task : array_field(page->doc, "tasks")) merged["tasks"].push_back(task);
    merged["next_page_token"] = page->doc["next_page_token"];
  }
  auto& tasks = merged["tasks"];
  if (tasks.is_array() && tasks.size() > wanted) {
    tasks.erase(tasks.begin() + static_cast<std::ptrdiff_t>(wanted), tasks.end());
    merged["next_page_token"] = std::to_string(tasks.back()["id"].get<int64_t>());
  }
  return answer{merged.dump(), merged};
}

int list(const list_options& o) {
  api_client api{o.common.server};
  if (o.all) return answer_of(o.common, merged_pages(api, o, SIZE_MAX), print_tasks);
  auto page = merged_pages(api, o, static_cast<size_t>(o.limit.value_or(100)));
  if (page && !o.common.json_output && !next_page_token(page->doc).empty())
    std::cerr << "more tasks may match; --all lists them all\n";
  return answer_of(o.common, page, print_tasks);
}

void add_list(CLI::App& app, client_command& chosen) {
  auto o = std::make_shared<list_options>();
  auto sub = app.add_subcommand("list", "List tasks, newest first");
  add_common_options(*sub, o->common);
  sub->add_option("--type", o->type, "Only this type");
  sub->add_option("--key", o->key, "Only this key");
  sub->add_option("--status", o->status, "Only this status (pending, running, succeeded, ...)");
  sub->add_option("--batch", o->batch, "Only this batch");
  sub->add_option("--limit", o->limit, "Tasks per page, 1 to 1000");
  sub->add_flag("--all", o->all, "Follow the pages to the last one");
  on_parsed(sub, chosen, [o] { return list(*o); });
}

// -- batches, stats, nodes -----------------------------------------------------------

struct batch_options {
  common_options common;
  std::string batch;
  bool retry_failed = false;
};

int batch(const batch_options& o) {
  api_client api{o.common.server};
  auto path = "/v1/batches/" + percent_encode(o.batch);
  if (o.retry_failed) return answer_of(o.common, api.post(path + "/retry-failed"), print_retried);
  return answer_of(o.common, api.get(path), print_batch);
}

void add_batch(CLI::App& app, client_command& chosen) {
  auto o = std::make_shared<batch_options>();
  auto sub = app.add_subcommand("batch", "Count a batch's tasks per status, or rerun its failed");
  add_common_options(*sub, o->common);
  sub->add_option("ID", o->batch, "Batch")->required();
  sub->add_flag("--retry-failed", o->retry_failed, "Re-arm the batch's failed and dead tasks");
  on_parsed(sub, chosen, [o] { return batch(*o); });
}

/// A command without arguments that makes one GET.
void add_get_command(CLI::App& app, client_command& chosen, const char* name,
                     const char* description, std::string path, void (*print)(const json&)) {
  auto o = std::make_shared<common_options>();
  auto sub = app.add_subcommand(name, description);
  add_common_options(*sub, *o);
  on_parsed(sub, chosen, [o, path = std::move(path), print] {
    return answer_of(*o, api_client{o->server}.get(path), print);
  });
}

}  // namespace

void add_client_commands(CLI::App& app, client_command& chosen) {
  add_submit(app, chosen);
  add_reschedule(app, chosen);
  add_cancel(app, chosen);
  add_task_command(app, chosen, "show", "Show one task", get_task, print_task);
  add_list(app, chosen);
  add_task_command(app, chosen, "attempts", "List a task's attempts", get_attempts, print_attempts);
  add_task_command(app, chosen, "retry", "Run a task again now, from a fresh retry count",
                   retry_task, print_task);
  add_batch(app, chosen);
  add_get_command(app, chosen, "stats", "Counts per type and status, running per node, limits",
                  "/v1/stats", print_stats);
  add_get_command(app, chosen, "nodes", "The nodes of the cluster", "/v1/nodes", print_nodes);
  add_job_commands(app, chosen);
  add_key_commands(app, chosen);
  add_workflow_commands(app, chosen);
  add_log_command(app, chosen);
}

}  // namespace taskmill
