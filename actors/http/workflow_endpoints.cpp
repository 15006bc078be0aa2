#include "actors/http/workflow_endpoints.hpp"

#include "messages/validate.hpp"

#include <charconv>
#include <optional>

namespace taskmill::api_call {

namespace {

/// The most workflows one page of the list holds.
constexpr int max_workflow_page = 500;

std::optional<int64_t> positive(const std::string& text, int64_t max) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 1 || value > max)
    return std::nullopt;
  return value;
}

template <class F>
void with_workflow_id(self_ptr self, call_ptr c, F&& f) {
  auto id = positive(c->path[2], INT64_MAX);
  if (!id)
    return fail(self, *c,
                make_error(errc::invalid_argument,
                           "the workflow id in the path must be a positive integer, got " +
                               quote_input(c->path[2])));
  f(*id);
}

void answer_workflow(self_ptr self, call_ptr c, int64_t id, std::string outcome, int status) {
  ask<pb::Workflow>(
      self, c, self->state.options.workflows,
      [self, outcome = std::move(outcome), status](const call& c, pb::Workflow& wf) {
        wf.set_outcome(outcome);
        answer(
            self, c, wf, [](const pb::Workflow& m) { return json::encode(m); }, status);
      },
      workflow_atom_v, id);
}

/// `{"<name>": n}`
void answer_count(self_ptr self, const call& c, int32_t n, const char* name) {
  pb::Count count;
  count.set_count(n);
  answer(self, c, count, [name](const pb::Count& m) {
    return std::string{"{\""} + name + "\":" + std::to_string(m.count()) + "}";
  });
}

}  // namespace

void submit_workflow(self_ptr self, call_ptr c) {
  auto wf =
      c->protobuf_in ? decode_protobuf<pb::SubmitWorkflow>(*c) : json::decode_workflow(c->req.body);
  if (!wf) return fail(self, *c, wf.error());
  const auto& o = self->state.options;
  if (auto err = validate(*wf, input_limits{o.cfg->api.max_payload_bytes}))
    return fail(self, *c, err);
  ask<pb::WorkflowSubmitted>(
      self, c, o.workflows,
      [self, c](const call&, const pb::WorkflowSubmitted& s) {
        bool created = s.outcome() == "created";
        if (created) self->send(self->state.options.pusher, wake_atom_v);
        answer_workflow(self, c, s.id(), s.outcome(), created ? 201 : 200);
      },
      submit_workflow_atom_v, std::move(*wf), static_cast<int64_t>(o.lease.count()));
}

void list_workflows(self_ptr self, call_ptr c) {
  int32_t limit = 50;
  int64_t before = 0;
  for (const auto& [name, value] : c->query) {
    if (name == "limit") {
      auto n = positive(value, max_workflow_page);
      if (!n)
        return fail(self, *c,
                    make_error(errc::invalid_argument, "limit must be an integer from 1 to " +
                                                           std::to_string(max_workflow_page)));
      limit = static_cast<int32_t>(*n);
    } else if (name == "before") {
      auto n = positive(value, INT64_MAX);
      if (!n)
        return fail(self, *c, make_error(errc::invalid_argument, "before must be a workflow id"));
      before = *n;
    } else {
      return fail(
          self, *c,
          make_error(errc::invalid_argument,
                     "unknown query parameter " + quote_input(name) + " (known: limit, before)"));
    }
  }
  ask<pb::WorkflowList>(
      self, c, self->state.options.workflows,
      [self](const call& c, const pb::WorkflowList& l) { answer(self, c, l); }, workflows_atom_v,
      limit, before);
}

void get_workflow(self_ptr self, call_ptr c) {
  with_workflow_id(self, c, [&](int64_t id) { answer_workflow(self, c, id, "", 200); });
}

void cancel_workflow(self_ptr self, call_ptr c) {
  with_workflow_id(self, c, [&](int64_t id) {
    ask<int32_t>(
        self, c, self->state.options.workflows,
        [self](const call& c, int32_t n) { answer_count(self, c, n, "cancelled"); },
        cancel_workflow_atom_v, id);
  });
}

void retry_workflow(self_ptr self, call_ptr c) {
  with_workflow_id(self, c, [&](int64_t id) {
    ask<int32_t>(
        self, c, self->state.options.workflows,
        [self](const call& c, int32_t n) {
          if (n > 0) self->send(self->state.options.pusher, wake_atom_v);
          answer_count(self, c, n, "retried");
        },
        retry_workflow_atom_v, id);
  });
}

}  // namespace taskmill::api_call
