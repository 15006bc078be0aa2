#include "actors/api.hpp"

#include "actors/metrics.hpp"
#include "messages/errors.hpp"
#include "messages/json_codec.hpp"
#include "messages/names.hpp"
#include "messages/validate.hpp"
#include "storage/migrations.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <charconv>
#include <map>

namespace taskmill {

struct api_state {
  static inline const char* name = "api";
  api_options options;
};

namespace {

using self_ptr = api_actor::stateful_pointer<api_state>;

constexpr auto ask_timeout = std::chrono::seconds{60};

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

int status_of(const caf::error& err) {
  if (err.category() != error_category) return 503;  // e.g. a request timeout
  switch (static_cast<errc>(err.code())) {
    case errc::invalid_argument:
      return 400;
    case errc::unauthorized:
      return 401;
    case errc::not_found:
      return 404;
    case errc::conflict:
      return 409;
    case errc::payload_too_large:
      return 413;
    case errc::storage_unavailable:
    case errc::retryable:
    case errc::unavailable:
      return 503;
    default:
      return 500;
  }
}

const char* code_of(const caf::error& err) {
  if (err.category() != error_category) return "unavailable";
  return to_string(static_cast<errc>(err.code()));
}

void send(self_ptr self, const call& c, http_response res) {
  self->state.options.metrics->http_requests.Increment();
  if (res.status >= 400) self->state.options.metrics->http_errors.Increment();
  c.reply(std::move(res));
}

void fail(self_ptr self, const call& c, const caf::error& err) {
  http_response res;
  res.status = status_of(err);
  if (c.protobuf_out) {
    pb::Error e;
    e.set_code(code_of(err));
    e.set_message(error_message(err));
    res.content_type = "application/x-protobuf";
    res.body = e.SerializeAsString();
  } else {
    res.body = json::encode_error(code_of(err), error_message(err));
  }
  send(self, c, std::move(res));
}

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

/// Asks `handle` and answers the call with the result or the error.
template <class Result, class Handle, class Done, class... Ts>
void ask(self_ptr self, call_ptr c, const Handle& handle, Done&& done, Ts&&... xs) {
  self->request(handle, ask_timeout, std::forward<Ts>(xs)...)
      .then(
          [self, c, done = std::forward<Done>(done)](Result& result) mutable { done(*c, result); },
          [self, c](const caf::error& err) { fail(self, *c, err); });
}

std::string percent_decode(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      int value = 0;
      auto [end, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, value, 16);
      if (ec == std::errc{} && end == in.data() + i + 3) {
        out += static_cast<char>(value);
        i += 2;
        continue;
      }
    }
    out += in[i] == '+' ? ' ' : in[i];
  }
  return out;
}

void split_target(call& c) {
  std::string_view target = c.req.target;
  auto q = target.find('?');
  auto path = target.substr(0, q);
  size_t start = 1;
  while (start <= path.size()) {
    auto slash = path.find('/', start);
    auto end = slash == std::string_view::npos ? path.size() : slash;
    if (end > start) c.path.push_back(percent_decode(path.substr(start, end - start)));
    start = end + 1;
  }
  if (q == std::string_view::npos) return;
  auto query = target.substr(q + 1);
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (!pair.empty())
      c.query[percent_decode(pair.substr(0, eq))] =
          eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
}

/// Compares in time independent of where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

caf::expected<int64_t> task_id(const std::string& text) {
  int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc{} || end != text.data() + text.size() || id < 1)
    return make_error(errc::invalid_argument,
                      "the task id in the path must be a positive integer, got '" + text + "'");
  return id;
}

template <class Message>
caf::expected<Message> decode_protobuf(const call& c) {
  Message msg;
  if (!msg.ParseFromString(c.req.body))
    return make_error(errc::invalid_argument,
                      "the body is not a valid protobuf " + Message::descriptor()->full_name());
  return msg;
}

void wake_pusher(self_ptr self) {
  self->send(self->state.options.pusher, wake_atom_v);
}

// -- the endpoints ------------------------------------------------------------------

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
                               "cancelled, stopped (got '" +
                                   value + "')"));
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
      return fail(self, *c,
                  make_error(errc::invalid_argument, "unknown query parameter '" + name + "'"));
    }
  }
  ask<pb::TaskList>(
      self, c, self->state.options.storage,
      [self](const call& c, const pb::TaskList& l) { answer(self, c, l); }, list_atom_v,
      std::move(req));
}

void task_endpoint(self_ptr self, call_ptr c, int64_t id) {
  const auto& method = c->req.method;
  const auto& o = self->state.options;
  auto sub = c->path.size() == 4 ? c->path[3] : std::string{};
  if (c->path.size() == 3 && method == "GET") {
    ask<pb::Task>(
        self, c, o.storage, [self](const call& c, const pb::Task& t) { answer(self, c, t); },
        caf::get_atom_v, id);
  } else if (sub == "attempts" && method == "GET") {
    ask<pb::AttemptList>(
        self, c, o.storage, [self](const call& c, const pb::AttemptList& a) { answer(self, c, a); },
        attempts_atom_v, id);
  } else if (sub == "result" && method == "POST") {
    auto report = c->protobuf_in ? decode_protobuf<pb::ResultReport>(*c)
                                 : json::decode_result_report(c->req.body);
    if (!report) return fail(self, *c, report.error());
    if (auto err = validate(*report, input_limits{o.cfg->api.max_payload_bytes}))
      return fail(self, *c, err);
    ask<pb::ResultAck>(
        self, c, o.dispatcher,
        [self](const call& c, const pb::ResultAck& a) { answer(self, c, a); }, result_atom_v, id,
        std::move(*report));
  } else if (sub == "retry" && method == "POST") {
    ask<pb::Task>(
        self, c, o.storage,
        [self](const call& c, const pb::Task& t) {
          wake_pusher(self);
          answer(self, c, t);
        },
        retry_atom_v, id);
  } else if (c->path.size() <= 4 &&
             (sub.empty() || sub == "attempts" || sub == "result" || sub == "retry")) {
    fail(self, *c, make_error(errc::invalid_argument, "method " + method + " is not allowed here"));
  } else {
    fail(self, *c,
         make_error(errc::not_found, "no such endpoint: " + method + " " + c->req.target));
  }
}

void batch_endpoint(self_ptr self, call_ptr c) {
  const auto& batch = c->path[2];
  const auto& o = self->state.options;
  if (c->path.size() == 3 && c->req.method == "GET") {
    ask<pb::BatchCounts>(
        self, c, o.storage, [self](const call& c, const pb::BatchCounts& b) { answer(self, c, b); },
        batch_atom_v, batch);
  } else if (c->path.size() == 4 && c->path[3] == "retry-failed" && c->req.method == "POST") {
    ask<int32_t>(
        self, c, o.storage,
        [self](const call& c, int32_t n) {
          if (n > 0) wake_pusher(self);
          pb::Count count;
          count.set_count(n);
          answer(self, c, count, [](const pb::Count& m) {
            return "{\"retried\":" + std::to_string(m.count()) + "}";
          });
        },
        retry_atom_v, batch);
  } else {
    fail(self, *c,
         make_error(errc::not_found, "no such endpoint: " + c->req.method + " " + c->req.target));
  }
}

void stats(self_ptr self, call_ptr c) {
  const auto& o = self->state.options;
  self->request(o.storage, ask_timeout, stats_atom_v)
      .then(
          [self, c](pb::Stats& stats) {
            const auto& o = self->state.options;
            self->request(o.storage, ask_timeout, nodes_atom_v, o.lease.count())
                .then(
                    [self, c, stats](const pb::NodeList& nodes) mutable {
                      const auto& o = self->state.options;
                      self->request(o.limiter, ask_timeout, caf::get_atom_v)
                          .then(
                              [self, c, stats, nodes](int64_t in_flight) mutable {
                                const auto& cfg = *self->state.options.cfg;
                                std::map<std::string, int64_t> running;
                                int64_t total_running = 0;
                                for (const auto& count : stats.counts())
                                  if (count.status() == pb::RUNNING) {
                                    running[count.type()] += count.count();
                                    total_running += count.count();
                                  }
                                for (const auto& n : nodes.nodes()) *stats.add_nodes() = n;
                                auto use = [&](const std::string& scope, int64_t used,
                                               int64_t limit) {
                                  auto l = stats.add_limiter();
                                  l->set_scope(scope);
                                  l->set_used(used);
                                  l->set_limit(limit);
                                };
                                use("node:" + cfg.node.name, in_flight, cfg.scheduling.node_limit);
                                use("global", total_running, cfg.scheduling.global_limit);
                                for (const auto& [type, t] : cfg.types)
                                  if (t.running_limit > 0)
                                    use("type:" + type, running[type], t.running_limit);
                                answer(self, *c, stats);
                              },
                              [self, c](const caf::error& err) { fail(self, *c, err); });
                    },
                    [self, c](const caf::error& err) { fail(self, *c, err); });
          },
          [self, c](const caf::error& err) { fail(self, *c, err); });
}

void ready(self_ptr self, call_ptr c) {
  self->request(self->state.options.storage, ask_timeout, status_atom_v)
      .then(
          [self, c](const pb::StorageStatus& status) {
            bool migrated = status.schema_version() >= db::all_migrations().back().version;
            bool ok = status.connected() && migrated;
            http_response res;
            res.status = ok ? 200 : 503;
            res.body =
                ok ? R"({"ready":true})"
                   : json::encode_error("unavailable", status.connected()
                                                           ? "migrations are not applied"
                                                           : "PostgreSQL is not connected: " +
                                                                 status.last_error());
            send(self, *c, std::move(res));
          },
          [self, c](const caf::error& err) { fail(self, *c, err); });
}

void metrics(self_ptr self, call_ptr c) {
  const auto& o = self->state.options;
  self->request(o.storage, ask_timeout, status_atom_v)
      .then(
          [self, c](const pb::StorageStatus& status) {
            const auto& o = self->state.options;
            o.metrics->storage_connected.Set(status.connected() ? 1 : 0);
            o.metrics->storage_round_trips.Set(static_cast<double>(status.round_trips()));
            o.metrics->storage_statements.Set(static_cast<double>(status.statements()));
            self->request(o.limiter, ask_timeout, caf::get_atom_v)
                .then(
                    [self, c](int64_t in_flight) {
                      auto& m = *self->state.options.metrics;
                      m.in_flight.Set(static_cast<double>(in_flight));
                      http_response res;
                      res.content_type = "text/plain; version=0.0.4";
                      res.body = m.render();
                      send(self, *c, std::move(res));
                    },
                    [self, c](const caf::error& err) { fail(self, *c, err); });
          },
          [self, c](const caf::error& err) { fail(self, *c, err); });
}

void route(self_ptr self, call_ptr c) {
  const auto& p = c->path;
  const auto& method = c->req.method;
  auto not_found = [&] {
    fail(self, *c,
         make_error(errc::not_found, "no such endpoint: " + method + " " + c->req.target));
  };
  if (p.size() == 1 && method == "GET") {
    if (p[0] == "healthz")
      return send(self, *c, http_response{200, "application/json", R"({"status":"ok"})"});
    if (p[0] == "readyz") return ready(self, c);
    if (p[0] == "metrics") return metrics(self, c);
  }
  const auto& token = self->state.options.cfg->api.token;
  if (!token.empty() && !same_secret(c->req.authorization, "Bearer " + token))
    return fail(self, *c,
                make_error(errc::unauthorized, "a valid Authorization: Bearer token is required"));
  if (p.size() < 2 || p[0] != "v1") return not_found();
  if (p[1] == "tasks") {
    if (p.size() == 2 && method == "POST") return submit(self, c);
    if (p.size() == 2 && method == "GET") return list(self, c);
    if (p.size() == 3 && p[2] == "reschedule" && method == "POST") return reschedule(self, c);
    if (p.size() == 3 && p[2] == "cancel" && method == "POST") return cancel(self, c);
    if (p.size() >= 3 && p.size() <= 4 && p[2] != "reschedule" && p[2] != "cancel") {
      auto id = task_id(p[2]);
      if (!id) return fail(self, *c, id.error());
      return task_endpoint(self, c, *id);
    }
    return not_found();
  }
  if (p[1] == "batches" && p.size() >= 3) return batch_endpoint(self, c);
  if (p.size() == 2 && p[1] == "stats" && method == "GET") return stats(self, c);
  if (p.size() == 2 && p[1] == "nodes" && method == "GET") {
    return ask<pb::NodeList>(
        self, c, self->state.options.storage,
        [self](const call& c, const pb::NodeList& n) { answer(self, c, n); }, nodes_atom_v,
        self->state.options.lease.count());
  }
  not_found();
}

api_actor::behavior_type api(self_ptr self, api_options options) {
  self->state.options = std::move(options);
  return {
      [self](http_atom, http_exchange& ex) {
        auto c = std::make_shared<call>();
        c->req = std::move(ex.request);
        c->reply = std::move(ex.reply);
        c->protobuf_in = c->req.content_type.rfind("application/x-protobuf", 0) == 0;
        c->protobuf_out =
            c->protobuf_in || c->req.accept.find("application/x-protobuf") != std::string::npos;
        split_target(*c);
        route(self, std::move(c));
      },
  };
}

}  // namespace

api_actor spawn_api(caf::actor_system& sys, api_options options) {
  return sys.spawn(api, std::move(options));
}

}  // namespace taskmill
