#include "actors/http/task_endpoints.hpp"

#include "messages/names.hpp"
#include "messages/validate.hpp"

#include <charconv>

namespace taskmill::api_call {

namespace {

caf::expected<int64_t> task_id(const std::string& text) {
  int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc{} || end != text.data() + text.size() || id < 1)
    return make_error(
        errc::invalid_argument,
        "the task id in the path must be a positive integer, got " + quote_input(text));
  return id;
}

void wake_pusher(self_ptr self) {
  self->send(self->state.options.pusher, wake_atom_v);
}

/// Calls `f` with the task id of the path, or fails the call.
template <class F>
void with_task_id(self_ptr self, call_ptr c, F&& f) {
  auto id = task_id(c->path[2]);
  if (!id) return fail(self, *c, id.error());
  f(*id);
}

}  // namespace

void submit(self_ptr self, call_ptr c) {
  bool batch = true;
  auto tasks = c->protobuf_in ? decode_protobuf<pb::SubmitTasks>(*c)
                              : json::decode_submit(c->req.body, batch);
  if (!tasks) return fail(self, *c, tasks.error());
  ask<pb::SubmitResults>(
      self, c, self->state.options.inserter,
      [self, batch](const call& c, const pb::SubmitResults& results) {
        answer(self, c, results,
               [batch](const pb::SubmitResults& r) { return json::encode(r, batch); });
      },
      submit_atom_v, std::move(*tasks));
}

void reschedule(self_ptr self, call_ptr c) {
  auto req = c->protobuf_in ? decode_protobuf<pb::RescheduleRequest>(*c)
                            : json::decode_reschedule(c->req.body);
  if (!req) return fail(self, *c, req.error());
  ask<pb::RescheduleResult>(
      self, c, self->state.options.inserter,
      [self](const call& c, const pb::RescheduleResult& r) { answer(self, c, r); },
      reschedule_atom_v, std::move(*req));
}

void cancel(self_ptr self, call_ptr c) {
  auto req =
      c->protobuf_in ? decode_protobuf<pb::CancelRequest>(*c) : json::decode_cancel(c->req.body);
  if (!req) return fail(self, *c, req.error());
  ask<pb::CancelResult>(
      self, c, self->state.options.inserter,
      [self](const call& c, const pb::CancelResult& r) { answer(self, c, r); }, cancel_atom_v,
      std::move(*req));
}

void list(self_ptr self, call_ptr c) {
  pb::ListTasksRequest req;
  for (const auto& [name, value] : c->query) {
    if (name == "type") {
      req.set_type(value);
    } else if (name == "key") {
      req.set_key(value);
    } else if (name == "batch") {
      req.set_batch(value);
    } else if (name == "status") {
      auto status = parse_status(value);
      if (!status)
        return fail(self, *c,
                    make_error(errc::invalid_argument,
                               "status must be one of pending, running, succeeded, failed, dead, "
                               "cancelled, stopped (got " +
                                   quote_input(value) + ")"));
      req.set_status(*status);
    } else if (name == "limit") {
      int limit = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), limit);
      if (ec != std::errc{} || end != value.data() + value.size() || limit < 1 || limit > 1000)
        return fail(self, *c,
                    make_error(errc::invalid_argument, "limit must be an integer from 1 to 1000"));
      req.set_limit(limit);
    } else if (name == "page_token") {
      auto id = task_id(value);
      if (!id)
        return fail(self, *c,
                    make_error(errc::invalid_argument, "page_token is not one this API gave"));
      req.set_page_token(value);
    } else {
      return fail(
          self, *c,
          make_error(errc::invalid_argument, "unknown query parameter " + quote_input(name)));
    }
  }
  ask<pb::TaskList>(
      self, c, self->state.options.storage,
      [self](const call& c, const pb::TaskList& l) { answer(self, c, l); }, list_atom_v,
      std::move(req));
}

void get_task(self_ptr self, call_ptr c) {
  with_task_id(self, c, [&](int64_t id) {
    ask_or<pb::Task>(
        self, c, self->state.options.storage,
        [self](const call& c, const pb::Task& t) { answer(self, c, t); }, fail_task_read,
        caf::get_atom_v, id);
  });
}

void task_attempts(self_ptr self, call_ptr c) {
  with_task_id(self, c, [&](int64_t id) {
    ask<pb::AttemptList>(
        self, c, self->state.options.storage,
        [self](const call& c, const pb::AttemptList& a) { answer(self, c, a); }, attempts_atom_v,
        id);
  });
}

void task_result(self_ptr self, call_ptr c) {
  with_task_id(self, c, [&](int64_t id) {
    const auto& o = self->state.options;
    auto report = c->protobuf_in ? decode_protobuf<pb::ResultReport>(*c)
                                 : json::decode_result_report(c->req.body);
    if (!report) return fail(self, *c, report.error());
    if (auto err = validate(*report, input_limits{o.cfg->api.max_payload_bytes}))
      return fail(self, *c, err);
    ask<pb::ResultAck>(
        self, c, o.dispatcher,
        [self](const call& c, const pb::ResultAck& a) { answer(self, c, a); }, result_atom_v, id,
        std::move(*report));
  });
}

void task_progress(self_ptr self, call_ptr c) {
  with_task_id(self, c, [&](int64_t id) {
    auto report =
        c->protobuf_in ? decode_protobuf<pb::Progress>(*c) : json::decode_progress(c->req.body);
    if (!report) return fail(self, *c, report.error());
    if (auto err = validate(*report)) return fail(self, *c, err);
    ask<pb::ResultAck>(
        self, c, self->state.options.progress,
        [self](const call& c, const pb::ResultAck& a) { answer(self, c, a); }, progress_atom_v, id,
        std::move(*report));
  });
}

void task_log(self_ptr self, call_ptr c) {
  with_task_id(self, c, [&](int64_t id) {
    auto log = c->protobuf_in ? decode_protobuf<pb::AttemptLog>(*c)
                              : json::decode_attempt_log(c->req.body);
    if (!log) return fail(self, *c, log.error());
    if (auto err = validate(*log)) return fail(self, *c, err);
    ask<pb::ResultAck>(
        self, c, self->state.options.progress,
        [self](const call& c, const pb::ResultAck& a) { answer(self, c, a); }, log_atom_v, id,
        std::move(*log));
  });
}

void read_task_log(self_ptr self, call_ptr c) {
  with_task_id(self, c, [&](int64_t id) {
    pb::TaskLogRequest req;
    req.set_task_id(id);
    req.set_limit(max_log_lines_per_call);
    for (const auto& [name, value] : c->query) {
      int64_t number = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
      bool integer = ec == std::errc{} && end == value.data() + value.size();
      if (name == "after" && integer && number >= 0) {
        req.set_after(number);
      } else if (name == "limit" && integer && number >= 1 && number <= max_log_lines_per_call) {
        req.set_limit(static_cast<int32_t>(number));
      } else if (name == "after") {
        return fail(self, *c,
                    make_error(errc::invalid_argument, "after must be a line id (0 or more)"));
      } else if (name == "limit") {
        return fail(self, *c,
                    make_error(errc::invalid_argument, "limit must be an integer from 1 to " +
                                                           std::to_string(max_log_lines_per_call)));
      } else {
        return fail(
            self, *c,
            make_error(errc::invalid_argument, "unknown query parameter " + quote_input(name)));
      }
    }
    ask<pb::TaskLog>(
        self, c, self->state.options.storage,
        [self](const call& c, const pb::TaskLog& l) { answer(self, c, l); }, read_log_atom_v,
        std::move(req));
  });
}

void retry_task(self_ptr self, call_ptr c) {
  with_task_id(self, c, [&](int64_t id) {
    ask<pb::Task>(
        self, c, self->state.options.storage,
        [self](const call& c, const pb::Task& t) {
          wake_pusher(self);
          answer(self, c, t);
        },
        retry_atom_v, id);
  });
}

void get_batch(self_ptr self, call_ptr c) {
  ask<pb::BatchCounts>(
      self, c, self->state.options.storage,
      [self](const call& c, const pb::BatchCounts& b) { answer(self, c, b); }, batch_atom_v,
      c->path[2]);
}

void retry_batch(self_ptr self, call_ptr c) {
  ask<int32_t>(
      self, c, self->state.options.storage,
      [self](const call& c, int32_t n) {
        if (n > 0) wake_pusher(self);
        pb::Count count;
        count.set_count(n);
        answer(self, c, count, [](const pb::Count& m) {
          return "{\"retried\":" + std::to_string(m.count()) + "}";
        });
      },
      retry_atom_v, c->path[2]);
}

}  // namespace taskmill::api_call
