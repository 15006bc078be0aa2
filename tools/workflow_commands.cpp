// `taskmill workflow submit|show|list|cancel|retry` (SPEC §10): calls to the
// workflow endpoints of a node's API.

#include "tools/client_commands.hpp"

#include "tools/client_support.hpp"

#include <fstream>
#include <memory>
#include <sstream>

namespace taskmill {

namespace {

using namespace client;

struct workflow_options {
  common_options common;
  std::string file;
  int64_t id = 0;
  std::optional<int64_t> limit;
};

/// A step's tasks in one cell: the task id, or the ids of its shards.
std::string task_ids(const json& step) {
  std::string out;
  for (const auto& t : array_field(step, "tasks"))
    out += (out.empty() ? "" : ",") + shown(field(t, "id"));
  return out;
}

/// The names of a step's parents, from the workflow's edges.
std::string parents_of(const json& workflow, const json& step) {
  std::string out;
  for (const auto& e : array_field(workflow, "edges"))
    if (field(e, "child") == field(step, "name")) {
      out += (out.empty() ? "" : ",") + shown(field(e, "parent"));
      if (field(e, "on_failure") != "fail") out += "(" + shown(field(e, "on_failure")) + ")";
    }
  return out.empty() ? "-" : out;
}

void print_workflow(const json& wf) {
  if (auto outcome = field(wf, "outcome"); outcome.is_string()) std::cout << shown(outcome) << "\n";
  table listing;
  for (const char* name :
       {"id", "name", "key", "status", "created_at", "started_at", "finished_at", "cancelled_at"})
    listing.add({std::string{name} + ":", shown(field(wf, name))});
  listing.print(std::cout);
  std::cout << "\n";
  table steps{{"STEP", "STATUS", "AFTER", "TASKS", "ATTEMPT", "ERROR"}};
  for (const auto& step : array_field(wf, "steps")) {
    const auto& tasks = array_field(step, "tasks");
    std::string attempt = tasks.size() == 1 ? shown(field(tasks[0], "attempt")) : "-";
    std::string error = tasks.size() == 1 ? shown(field(tasks[0], "error")) : "-";
    steps.add({shown(field(step, "name")), shown(field(step, "status")), parents_of(wf, step),
               shorten(task_ids(step), cell_chars), attempt, shorten(error, cell_chars)});
  }
  steps.print(std::cout);
}

void print_workflows(const json& doc) {
  table rows{{"ID", "NAME", "STATUS", "CREATED_AT", "FINISHED_AT"}};
  for (const auto& wf : array_field(doc, "workflows"))
    rows.add({shown(field(wf, "id")), shorten(shown(field(wf, "name")), cell_chars),
              shown(field(wf, "status")), shown(field(wf, "created_at")),
              shown(field(wf, "finished_at"))});
  rows.print(std::cout);
}

void print_cancelled(const json& doc) {
  std::cout << "cancelled " << shown(field(doc, "cancelled")) << " tasks\n";
}

void print_retried(const json& doc) {
  std::cout << "retried " << shown(field(doc, "retried")) << " tasks\n";
}

std::string workflow_path(int64_t id) {
  return "/v1/workflows/" + std::to_string(id);
}

/// The file's JSON, sent as it is: the node says what is wrong with it.
int submit_file(const workflow_options& o) {
  std::ifstream in{o.file};
  if (!in) {
    std::cerr << "error: cannot read " << o.file << "\n";
    return EXIT_FAILURE;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto body = json::parse(text.str(), nullptr, false);
  if (body.is_discarded()) {
    std::cerr << "error: " << o.file << " is not JSON\n";
    return EXIT_FAILURE;
  }
  return answer_of(o.common, api_client{o.common.server}.post("/v1/workflows", body),
                   print_workflow);
}

void add_id_command(CLI::App& workflow, client_command& chosen, const char* name,
                    const char* description,
                    std::optional<answer> (*call)(const api_client&, int64_t),
                    void (*print)(const json&)) {
  auto o = std::make_shared<workflow_options>();
  auto sub = workflow.add_subcommand(name, description);
  add_common_options(*sub, o->common);
  sub->add_option("ID", o->id, "Workflow id")->required()->check(CLI::PositiveNumber);
  on_parsed(sub, chosen, [o, call, print] {
    return answer_of(o->common, call(api_client{o->common.server}, o->id), print);
  });
}

}  // namespace

void add_workflow_commands(CLI::App& app, client_command& chosen) {
  auto workflow = app.add_subcommand(
      "workflow", "Workflows: submit a file of steps, show, list, cancel, retry");
  workflow->require_subcommand(1);

  auto submit = workflow->add_subcommand("submit", "Submit a workflow from a JSON file");
  auto submit_options = std::make_shared<workflow_options>();
  add_common_options(*submit, submit_options->common);
  submit->add_option("FILE", submit_options->file, "JSON: {\"name\", \"key\", \"steps\": [...]}")
      ->required();
  on_parsed(submit, chosen, [submit_options] { return submit_file(*submit_options); });

  add_id_command(
      *workflow, chosen, "show", "Show a workflow's steps and edges",
      [](const api_client& api, int64_t id) { return api.get(workflow_path(id)); }, print_workflow);
  add_id_command(
      *workflow, chosen, "cancel", "Cancel every unfinished step, running ones too",
      [](const api_client& api, int64_t id) { return api.post(workflow_path(id) + "/cancel"); },
      print_cancelled);
  add_id_command(
      *workflow, chosen, "retry", "Run the dead, cancelled and skipped steps again",
      [](const api_client& api, int64_t id) { return api.post(workflow_path(id) + "/retry"); },
      print_retried);

  auto list = workflow->add_subcommand("list", "List workflows, newest first");
  auto list_options = std::make_shared<workflow_options>();
  add_common_options(*list, list_options->common);
  list->add_option("--limit", list_options->limit, "At most this many (1 to 500; default 50)");
  on_parsed(list, chosen, [list_options] {
    std::string path = "/v1/workflows";
    if (list_options->limit) path += "?limit=" + std::to_string(*list_options->limit);
    return answer_of(list_options->common, api_client{list_options->common.server}.get(path),
                     print_workflows);
  });
}

}  // namespace taskmill
