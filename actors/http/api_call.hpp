#pragma once

// A request of the API on its way to an answer, and how the API's handlers
// answer it: in JSON or protobuf as the caller asked, errors as HTTP
// statuses, answers of other actors awaited without blocking.

#include "actors/api.hpp"
#include "actors/http/browser_guard.hpp"
#include "actors/http/http_server.hpp"
#include "messages/errors.hpp"
#include "messages/json_codec.hpp"
#include "messages/protobuf_codec.hpp"
#include "messages/text.hpp"

#include <caf/typed_event_based_actor.hpp>

#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace taskmill {

struct api_state {
  static inline const char* name = "api";
  api_options options;
  browser_policy browsers;
};

namespace api_call {

using self_ptr = api_actor::stateful_pointer<api_state>;

/// One request on its way to an answer.
struct call {
  http_request req;
  http_reply reply;
  bool protobuf_in = false;
  bool protobuf_out = false;
  std::vector<std::string> path;
  std::map<std::string, std::string> query;
};

using call_ptr = std::shared_ptr<call>;

/// Query parameter `name`, the only one the call may have, as an integer
/// from 1 to `max`, or `fallback` when absent.
caf::expected<int32_t> count_parameter(const call& c, const char* name, int32_t fallback,
                                       int32_t max);

/// An error naming the call's first query parameter, if it has any.
caf::error no_query_parameters(const call& c);

/// The HTTP status of an error.
int status_of(const caf::error& err);

void send(self_ptr self, const call& c, http_response res);

/// Answers the call with `err`, as JSON or protobuf.
void fail(self_ptr self, const call& c, const caf::error& err,
          std::vector<std::pair<std::string, std::string>> headers = {},
          const pb::Waiting* waiting = nullptr);

/// A task's read that storage could not answer. While PostgreSQL is away no
/// node claims or finishes anything, so that is also why the task is not
/// running (SPEC §8), the one waiting reason the database cannot give.
void fail_task_read(self_ptr self, const call& c, const caf::error& err);

template <class Message, class ToJson>
void answer(self_ptr self, const call& c, const Message& msg, ToJson&& to_json, int status = 200) {
  http_response res;
  res.status = status;
  if (c.protobuf_out) {
    res.content_type = "application/x-protobuf";
    res.body = msg.SerializeAsString();
  } else {
    res.body = to_json(msg);
  }
  send(self, c, std::move(res));
}

template <class Message>
void answer(self_ptr self, const call& c, const Message& msg) {
  answer(self, c, msg, [](const Message& m) { return json::encode(m); });
}

/// Runs `f`; should it throw anyway, the call is answered 500 and the actor
/// lives on: one request must never take the API down.
template <class F>
void guarded(self_ptr self, const call& c, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    spdlog::error("api: {} {}: unexpected exception: {}", c.req.method, quote_input(c.req.target),
                  quote_input(e.what(), 400));
    fail(self, c, make_error(errc::internal, "internal error"));
  }
}

/// Asks `handle` and answers the call with the result, or the error through
/// `failed`.
template <class Result, class Handle, class Done, class Failed, class... Ts>
void ask_or(self_ptr self, call_ptr c, const Handle& handle, Done&& done, Failed&& failed,
            Ts&&... xs) {
  self->request(handle, local_request_timeout, std::forward<Ts>(xs)...)
      .then([self, c, done = std::forward<Done>(done)](
                Result& result) mutable { guarded(self, *c, [&] { done(*c, result); }); },
            [self, c, failed = std::forward<Failed>(failed)](const caf::error& err) mutable {
              failed(self, *c, err);
            });
}

/// Asks `handle` and answers the call with the result or the error.
template <class Result, class Handle, class Done, class... Ts>
void ask(self_ptr self, call_ptr c, const Handle& handle, Done&& done, Ts&&... xs) {
  ask_or<Result>(
      self, std::move(c), handle, std::forward<Done>(done),
      [](self_ptr self, const call& c, const caf::error& err) { fail(self, c, err); },
      std::forward<Ts>(xs)...);
}

template <class Message>
caf::expected<Message> decode_protobuf(const call& c) {
  return protobuf::decode<Message>(c.req.body);
}

}  // namespace api_call

}  // namespace taskmill
