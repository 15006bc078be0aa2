// The requests of workflows (SPEC §10).

#include "storage/storage_internal.hpp"

#include "messages/errors.hpp"
#include "messages/time.hpp"
#include "storage/rows.hpp"

namespace taskmill::storage_internal {

namespace {

std::vector<db::param> workflow_params(const pb::SubmitWorkflow& wf, int64_t lease_ms) {
  std::vector<const pb::SubmitTask*> tasks;
  for (const auto& step : wf.steps()) tasks.push_back(&step.task());
  std::vector<db::param> params{
      wf.name(),
      wf.has_key() ? db::param{wf.key()} : db::param{},
      db::array_literal_of(wf.steps(),
                           [](const pb::WorkflowStep& s) { return db::param{s.name()}; }),
      db::optional_array_of(wf.steps(),
                            [](const pb::WorkflowStep& s) {
                              return s.broadcast() ? db::param{std::to_string(s.shards())}
                                                   : db::param{};
                            }),
      std::to_string(lease_ms),
  };
  auto task_params = db::submit_params(tasks);
  // A step without a key is named by the workflow.
  task_params[1] = db::optional_array_of(tasks, [](const pb::SubmitTask* t) {
    return t->key().empty() ? db::param{} : db::param{t->key()};
  });
  params.insert(params.end(), task_params.begin(), task_params.end());
  return params;
}

void read_summary(const db::result& res, int row, pb::Workflow* out) {
  auto time = [&](const char* name, google::protobuf::Timestamp* (pb::Workflow::*field)()) {
    int col = res.column(name);
    if (!res.is_null(row, col)) set_micros((out->*field)(), res.micros(row, col));
  };
  out->set_id(res.int64(row, res.column("id")));
  out->set_name(res.string(row, res.column("name")));
  out->set_key(res.string(row, res.column("key")));
  out->set_status(res.string(row, res.column("status")));
  time("created_at", &pb::Workflow::mutable_created_at);
  time("started_at", &pb::Workflow::mutable_started_at);
  time("finished_at", &pb::Workflow::mutable_finished_at);
  time("cancelled_at", &pb::Workflow::mutable_cancelled_at);
}

caf::expected<pb::Workflow> read_workflow(results& rs, int64_t id) {
  const auto& summary = *rs[0];
  if (summary.rows() == 0) return make_error(errc::not_found, "no workflow " + std::to_string(id));
  pb::Workflow out;
  read_summary(summary, 0, &out);
  const auto& tasks = *rs[1];
  db::task_columns cols{tasks};
  int step_col = tasks.column("step");
  int status_col = tasks.column("step_status");
  for (int row = 0; row < tasks.rows(); ++row) {
    auto name = tasks.text(row, step_col);
    if (out.steps_size() == 0 || out.steps(out.steps_size() - 1).name() != name) {
      auto step = out.add_steps();
      step->set_name(std::string{name});
      step->set_status(tasks.string(row, status_col));
    }
    db::read_task(tasks, row, cols, out.mutable_steps(out.steps_size() - 1)->add_tasks());
  }
  const auto& edges = *rs[2];
  for (int row = 0; row < edges.rows(); ++row) {
    auto edge = out.add_edges();
    edge->set_parent(edges.string(row, 0));
    edge->set_child(edges.string(row, 1));
    edge->set_on_failure(edges.string(row, 2));
  }
  return out;
}

}  // namespace

caf::result<pb::WorkflowSubmitted> submit_workflow(self_ptr self, const pb::SubmitWorkflow& wf,
                                                   int64_t lease_ms) {
  return ask_db<pb::WorkflowSubmitted>(
      self, {db::call{&db::sql::submit_workflow, workflow_params(wf, lease_ms)}},
      [](results& rs) -> caf::expected<pb::WorkflowSubmitted> {
        pb::WorkflowSubmitted out;
        out.set_outcome(rs[0]->string(0, 0));
        out.set_id(rs[0]->int64(0, 1));
        return out;
      });
}

caf::result<pb::Workflow> get_workflow(self_ptr self, int64_t id) {
  auto arg = std::to_string(id);
  return ask_db<pb::Workflow>(
      self,
      {db::call{&db::sql::workflow_summary, {arg}}, db::call{&db::sql::workflow_tasks, {arg}},
       db::call{&db::sql::workflow_edges, {arg}}},
      [id](results& rs) { return read_workflow(rs, id); });
}

caf::result<pb::WorkflowList> list_workflows(self_ptr self, int32_t limit, int64_t before) {
  db::call c{&db::sql::list_workflows,
             {std::to_string(limit), before > 0 ? db::param{std::to_string(before)} : db::param{}}};
  return ask_db<pb::WorkflowList>(self, {std::move(c)},
                                  [](results& rs) -> caf::expected<pb::WorkflowList> {
                                    pb::WorkflowList out;
                                    for (int row = 0; row < rs[0]->rows(); ++row)
                                      read_summary(*rs[0], row, out.add_workflows());
                                    return out;
                                  });
}

}  // namespace taskmill::storage_internal
