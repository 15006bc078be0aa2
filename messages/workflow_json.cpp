// Workflows as JSON (SPEC §10): the request that submits one, and a
// workflow with its steps and edges.

#include "messages/json_codec.hpp"
#include "messages/json_objects.hpp"
#include "messages/names.hpp"
#include "messages/text.hpp"
#include "messages/validate.hpp"

namespace taskmill::json {

namespace {

caf::error read_step(const json& value, const std::string& where, pb::WorkflowStep& out) {
  object_reader r{value, where};
  if (auto v = r.text("name")) out.set_name(*v);
  if (auto v = r.text("routing")) {
    if (*v == "broadcast")
      out.set_broadcast(true);
    else if (*v != "any")
      r.fail(r.path("routing") + " must be one of any, broadcast (got " + quote_input(*v) + ")");
  }
  if (auto v = r.integer("shards", INT32_MIN, INT32_MAX)) out.set_shards(static_cast<int32_t>(*v));
  if (auto err = read_submit_fields(r, *out.mutable_task())) return err;
  if (auto err = r.finish()) return err;
  if (out.has_shards() && !out.broadcast())
    return bad(r.path("shards") + " goes with routing broadcast");
  return caf::none;
}

void write_workflow(std::string& out, const pb::Workflow& wf) {
  object_writer w{out};
  w.number("id", wf.id());
  if (!wf.outcome().empty()) w.text("outcome", wf.outcome());
  w.text("name", wf.name());
  w.text_or_null("key", wf.key());
  w.text("status", wf.status());
  w.time_or_null("created_at", wf.created_at(), wf.has_created_at());
  w.time_or_null("started_at", wf.started_at(), wf.has_started_at());
  w.time_or_null("finished_at", wf.finished_at(), wf.has_finished_at());
  w.time_or_null("cancelled_at", wf.cancelled_at(), wf.has_cancelled_at());
  if (wf.steps_size() == 0 && wf.edges_size() == 0) return;
  auto& steps = w.field("steps");
  steps += '[';
  for (int i = 0; i < wf.steps_size(); ++i) {
    if (i > 0) steps += ',';
    const auto& step = wf.steps(i);
    object_writer s{steps};
    s.text("name", step.name());
    s.text("status", step.status());
    auto& tasks = s.field("tasks");
    tasks += '[';
    for (int j = 0; j < step.tasks_size(); ++j) {
      if (j > 0) tasks += ',';
      write_task(tasks, step.tasks(j));
    }
    tasks += ']';
  }
  steps += ']';
  auto& edges = w.field("edges");
  edges += '[';
  for (int i = 0; i < wf.edges_size(); ++i) {
    if (i > 0) edges += ',';
    object_writer e{edges};
    e.text("parent", wf.edges(i).parent());
    e.text("child", wf.edges(i).child());
    e.text("on_failure", wf.edges(i).on_failure());
  }
  edges += ']';
}

}  // namespace

caf::expected<pb::SubmitWorkflow> decode_workflow(std::string_view body) {
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  object_reader r{*doc, ""};
  pb::SubmitWorkflow out;
  if (auto v = r.text("name")) out.set_name(*v);
  if (auto v = r.text("key")) out.set_key(*v);
  auto steps = r.find("steps");
  if (auto err = r.finish()) return err;
  if (!steps || !steps->is_array() || steps->empty())
    return bad("steps must be an array of 1 to " + std::to_string(max_workflow_steps) + " steps");
  if (steps->size() > static_cast<size_t>(max_workflow_steps))
    return bad("steps must hold at most " + std::to_string(max_workflow_steps) + " steps");
  for (size_t i = 0; i < steps->size(); ++i)
    if (auto err = read_step((*steps)[i], "steps[" + std::to_string(i) + "]", *out.add_steps()))
      return err;
  return out;
}

std::string encode(const pb::Workflow& workflow) {
  std::string out;
  write_workflow(out, workflow);
  return out;
}

std::string encode(const pb::WorkflowList& list) {
  std::string out = "{\"workflows\":[";
  for (int i = 0; i < list.workflows_size(); ++i) {
    if (i > 0) out += ',';
    write_workflow(out, list.workflows(i));
  }
  return out + "]}";
}

}  // namespace taskmill::json
