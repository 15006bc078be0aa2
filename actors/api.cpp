#include "actors/api.hpp"

#include "actors/http/api_call.hpp"
#include "actors/http/browser_guard.hpp"
#include "actors/http/job_endpoints.hpp"
#include "actors/http/key_endpoints.hpp"
#include "actors/http/task_endpoints.hpp"
#include "actors/http/web_assets.hpp"
#include "actors/http/workflow_endpoints.hpp"
#include "actors/limiter.hpp"
#include "actors/metrics/node_metrics.hpp"
#include "messages/errors.hpp"
#include "messages/json_codec.hpp"
#include "messages/peer_proof.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"
#include "messages/url.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <charconv>
#include <map>

#include <spdlog/spdlog.h>

namespace taskmill {

namespace {

using namespace api_call;

/// The limiter's `limits` in `stats`, the cluster-wide ones with the running
/// counts of `stats`.
void add_limit_use(const std::string& node, const pb::Stats& limits, pb::Stats& stats) {
  std::map<std::string, int64_t> running;
  int64_t total_running = 0;
  for (const auto& count : stats.counts())
    if (count.status() == pb::RUNNING) {
      running["type:" + count.type()] += count.count();
      total_running += count.count();
    }
  for (auto l : limits.limiter()) {
    if (l.scope() == "node")
      l.set_scope("node:" + node);
    else if (l.scope() == "global")
      l.set_used(total_running);
    else
      l.set_used(running[l.scope()]);
    *stats.add_limiter() = std::move(l);
  }
}

void stats(self_ptr self, call_ptr c) {
  const auto& o = self->state.options;
  self->request(o.storage, local_request_timeout, stats_atom_v)
      .then(
          [self, c](pb::Stats& stats) {
            const auto& o = self->state.options;
            self->request(o.storage, local_request_timeout, nodes_atom_v, o.lease.count())
                .then(
                    [self, c, stats](const pb::NodeList& nodes) mutable {
                      const auto& o = self->state.options;
                      self->request(o.limiter, local_request_timeout, stats_atom_v)
                          .then(
                              [self, c, stats, nodes](const pb::Stats& limits) mutable {
                                for (const auto& n : nodes.nodes()) *stats.add_nodes() = n;
                                add_limit_use(self->state.options.cfg->node.name, limits, stats);
                                answer(self, *c, stats);
                              },
                              [self, c](const caf::error& err) { fail(self, *c, err); });
                    },
                    [self, c](const caf::error& err) { fail(self, *c, err); });
          },
          [self, c](const caf::error& err) { fail(self, *c, err); });
}

// -- alerts (SPEC §6) -------------------------------------------------------------------

/// GET /v1/alerts?since=&limit=: `since` is an alert id or an RFC 3339 time.
caf::expected<pb::ListAlertsRequest> alerts_request(const call& c) {
  pb::ListAlertsRequest req;
  req.set_limit(100);
  for (const auto& [name, value] : c.query) {
    if (name == "limit") {
      int32_t limit = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), limit);
      if (ec != std::errc{} || end != value.data() + value.size() || limit < 1 || limit > 1000)
        return make_error(errc::invalid_argument, "limit must be an integer from 1 to 1000");
      req.set_limit(limit);
    } else if (name == "since") {
      int64_t id = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), id);
      if (ec == std::errc{} && end == value.data() + value.size() && id >= 0) {
        req.set_after_id(id);
        continue;
      }
      auto since = parse_rfc3339(value);
      if (!since)
        return make_error(
            errc::invalid_argument,
            "since must be an alert id or an RFC 3339 time (got " + quote_input(value) + ")");
      set_micros(req.mutable_since(), *since);
    } else {
      return make_error(errc::invalid_argument, "unknown query parameter " + quote_input(name));
    }
  }
  return req;
}

void list_alerts(self_ptr self, call_ptr c) {
  auto req = alerts_request(*c);
  if (!req) return fail(self, *c, req.error());
  ask<pb::AlertList>(
      self, c, self->state.options.storage,
      [self](const call& c, const pb::AlertList& l) { answer(self, c, l); }, alerts_atom_v,
      std::move(*req));
}

void ready(self_ptr self, call_ptr c) {
  constexpr auto patience = std::chrono::seconds{2};
  auto answer = [self, c](const std::string& problem) {
    http_response res;
    res.status = problem.empty() ? 200 : 503;
    res.body = problem.empty() ? R"({"ready":true})" : json::encode_error("unavailable", problem);
    send(self, *c, std::move(res));
  };
  self->request(self->state.options.readiness, patience + std::chrono::seconds{1}, ready_atom_v,
                caf::timespan{patience})
      .then(answer, [answer](const caf::error&) { answer("the readiness actor does not answer"); });
}

/// /metrics, last: live tasks per type and the use of the limiter's
/// `limits`.
void answer_live_metrics(self_ptr self, call_ptr c, http_response res, pb::Stats limits) {
  self->request(self->state.options.storage, local_request_timeout, stats_atom_v, live_atom_v)
      .then(
          [self, c, res, limits](pb::Stats& live) mutable {
            add_limit_use(self->state.options.cfg->node.name, limits, live);
            res.body += render_live_metrics(live);
            send(self, *c, std::move(res));
          },
          [self, c](const caf::error& err) { fail(self, *c, err); });
}

/// /metrics, once the numbers of the jobs are in: the alerts' come next.
void answer_metrics(self_ptr self, call_ptr c, const pb::JobMetrics& jobs, pb::Stats limits) {
  self->request(self->state.options.storage, local_request_timeout, alerts_atom_v, stats_atom_v)
      .then(
          [self, c, jobs, limits](const pb::AlertMetrics& alerts) {
            http_response res;
            res.content_type = "text/plain; version=0.0.4";
            res.body = self->state.options.metrics->render() + render_job_metrics(jobs) +
                       render_alert_metrics(alerts);
            self->request(self->state.options.peers, local_request_timeout, peers_atom_v)
                .then(
                    [self, c, res, limits](const pb::PeerLinks& links) mutable {
                      res.body += render_link_metrics(links);
                      answer_live_metrics(self, c, std::move(res), std::move(limits));
                    },
                    [self, c](const caf::error& err) { fail(self, *c, err); });
          },
          [self, c](const caf::error& err) { fail(self, *c, err); });
}

void metrics(self_ptr self, call_ptr c) {
  const auto& o = self->state.options;
  self->request(o.storage_status, local_request_timeout, status_atom_v)
      .then(
          [self, c](const pb::StorageStatus& status) {
            const auto& o = self->state.options;
            o.metrics->storage_connected.Set(status.connected() ? 1 : 0);
            o.metrics->storage_round_trips.Set(static_cast<double>(status.round_trips()));
            o.metrics->storage_statements.Set(static_cast<double>(status.statements()));
            self->request(o.limiter, local_request_timeout, stats_atom_v)
                .then(
                    [self, c](const pb::Stats& limits) {
                      self->state.options.metrics->in_flight.Set(
                          static_cast<double>(tasks_in_flight(limits)));
                      self->request(self->state.options.jobs, local_request_timeout, jobs_atom_v,
                                    stats_atom_v)
                          .then(
                              [self, c, limits](const pb::JobMetrics& jobs) {
                                answer_metrics(self, c, jobs, limits);
                              },
                              [self, c](const caf::error& err) { fail(self, *c, err); });
                    },
                    [self, c](const caf::error& err) { fail(self, *c, err); });
          },
          [self, c](const caf::error& err) { fail(self, *c, err); });
}

/// GET /v1/nodes: the nodes as the database has them, each with this
/// node's link to it, and the remote executors linked here.
void answer_nodes(self_ptr self, call_ptr c, pb::NodeList nodes) {
  self->request(self->state.options.peers, local_request_timeout, peers_atom_v)
      .then(
          [self, c, nodes](const pb::PeerLinks& links) mutable {
            std::map<std::string, std::string> state;
            for (const auto& l : links.links()) state[l.name()] = l.state();
            for (auto& n : *nodes.mutable_nodes()) {
              auto it = state.find(n.name());
              n.set_link(n.name() == self->state.options.cfg->node.name ? "self"
                         : it != state.end()                            ? it->second
                                                                        : "none");
            }
            *nodes.mutable_links() = links.links();
            answer(self, *c, nodes);
          },
          [self, c](const caf::error& err) { fail(self, *c, err); });
}

/// A file compiled into the node; `/ui` alone is sent on to `/ui/`, so that
/// the console's relative links resolve.
void serve_asset(self_ptr self, const call& c) {
  auto path = std::string_view{c.req.target}.substr(0, c.req.target.find('?'));
  if (path == "/ui")
    return send(self, c, http_response{308, "text/plain", "", {{"Location", "/ui/"}}});
  auto asset = find_web_asset(path);
  if (!asset)
    return fail(self, c, make_error(errc::not_found, "no such file: " + quote_input(c.req.target)));
  send(self, c,
       http_response{200,
                     std::string{asset->content_type},
                     std::string{asset->body},
                     {{"Cache-Control", "no-cache"}}});
}

void healthz(self_ptr self, call_ptr c) {
  send(self, *c, http_response{200, "application/json", R"({"status":"ok"})"});
}

void list_nodes(self_ptr self, call_ptr c) {
  ask<pb::NodeList>(
      self, c, self->state.options.storage,
      [self, c](const call&, const pb::NodeList& n) { answer_nodes(self, c, n); }, nodes_atom_v,
      self->state.options.lease.count());
}

/// One endpoint. A segment in braces matches any one segment (the handler
/// reads it from the call's path), a final `*` whatever follows; GET routes
/// answer HEAD too. Open routes answer without the token: the probes, and
/// the console's files, which hold no data (the page asks for the token).
struct route {
  std::string_view method;
  std::string_view path;
  bool open;
  void (*handle)(self_ptr, call_ptr);
};

constexpr bool anyone = true;
constexpr bool with_token = false;

const route routes[] = {
    {"GET", "/healthz", anyone, healthz},
    {"GET", "/readyz", anyone, ready},
    {"GET", "/metrics", anyone, metrics},
    {"GET", "/ui/*", anyone, [](self_ptr self, call_ptr c) { serve_asset(self, *c); }},
    {"GET", "/v1/openapi.json", with_token,
     [](self_ptr self, call_ptr c) { serve_asset(self, *c); }},
    {"GET", "/v1/tasks", with_token, list},
    {"POST", "/v1/tasks", with_token, submit},
    {"POST", "/v1/tasks/reschedule", with_token, reschedule},
    {"POST", "/v1/tasks/cancel", with_token, cancel},
    {"GET", "/v1/tasks/{id}", with_token, get_task},
    {"GET", "/v1/tasks/{id}/attempts", with_token, task_attempts},
    {"POST", "/v1/tasks/{id}/result", with_token, task_result},
    {"POST", "/v1/tasks/{id}/progress", with_token, task_progress},
    {"GET", "/v1/tasks/{id}/logs", with_token, read_task_log},
    {"POST", "/v1/tasks/{id}/logs", with_token, task_log},
    {"POST", "/v1/tasks/{id}/retry", with_token, retry_task},
    {"GET", "/v1/batches/{batch}", with_token, get_batch},
    {"POST", "/v1/batches/{batch}/retry-failed", with_token, retry_batch},
    {"GET", "/v1/workflows", with_token, list_workflows},
    {"POST", "/v1/workflows", with_token, submit_workflow},
    {"GET", "/v1/workflows/{id}", with_token, get_workflow},
    {"POST", "/v1/workflows/{id}/cancel", with_token, cancel_workflow},
    {"POST", "/v1/workflows/{id}/retry", with_token, retry_workflow},
    {"GET", "/v1/stats", with_token, stats},
    {"GET", "/v1/nodes", with_token, list_nodes},
    {"GET", "/v1/alerts", with_token, list_alerts},
    {"GET", "/v1/jobs", with_token, list_jobs},
    {"GET", "/v1/jobs/{name}", with_token, get_job},
    {"PUT", "/v1/jobs/{name}", with_token, put_job},
    {"DELETE", "/v1/jobs/{name}", with_token, delete_job},
    {"POST", "/v1/jobs/{name}/trigger", with_token, trigger_job},
    {"POST", "/v1/jobs/{name}/pause", with_token, pause_job},
    {"POST", "/v1/jobs/{name}/resume", with_token, resume_job},
    {"GET", "/v1/jobs/{name}/firings", with_token, job_firings},
    {"GET", "/v1/jobs/{name}/next", with_token, next_fire_times},
    {"GET", "/v1/key-spaces", with_token, list_key_spaces},
    {"GET", "/v1/key-spaces/{name}", with_token, get_key_space},
    {"PUT", "/v1/key-spaces/{name}", with_token, put_key_space},
    {"DELETE", "/v1/key-spaces/{name}", with_token, delete_key_space},
    {"GET", "/v1/key-spaces/{name}/keys", with_token, get_key},
    {"GET", "/v1/key-spaces/{name}/keys/{key}", with_token, get_key},
};

/// How many literal segments of `pattern` name `path`: -1 when it does not
/// match, else the more, the more specific (`/v1/tasks/cancel` over
/// `/v1/tasks/{id}`).
int literal_match(std::string_view pattern, const std::vector<std::string>& path) {
  size_t i = 0;
  int literals = 0;
  for (auto rest = pattern.substr(1); !rest.empty();) {
    auto slash = rest.find('/');
    auto segment = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (segment == "*") return literals;
    if (i >= path.size()) return -1;
    if (segment.front() != '{') {
      if (segment != path[i]) return -1;
      ++literals;
    }
    ++i;
  }
  return i == path.size() ? literals : -1;
}

/// The routes of the most specific path that names `path`.
std::vector<const route*> routes_of(const std::vector<std::string>& path) {
  std::vector<const route*> found;
  int best = -1;
  for (const auto& r : routes) {
    auto m = literal_match(r.path, path);
    if (m < best) continue;
    if (m > best) found.clear();
    best = m;
    found.push_back(&r);
  }
  return best < 0 ? std::vector<const route*>{} : found;
}

/// The Allow header of a path's routes.
std::string allowed_methods(const std::vector<const route*>& named) {
  std::string out;
  for (const auto* r : named) {
    out += (out.empty() ? "" : ", ") + std::string{r->method};
    if (r->method == "GET") out += ", HEAD";
  }
  return out;
}

/// Whether `authorization` carries `token` as a bearer credential; the
/// scheme is case-insensitive (RFC 7235).
bool has_bearer_token(std::string_view authorization, const std::string& token) {
  constexpr std::string_view scheme = "bearer";
  if (authorization.size() <= scheme.size()) return false;
  for (size_t i = 0; i < scheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != scheme[i]) return false;
  auto rest = authorization.substr(scheme.size());
  if (rest.front() != ' ') return false;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return same_secret(std::string{rest}, token);
}

/// The first piece of the request that is not text a field can hold.
caf::error check_request_text(const call& c) {
  for (const auto& segment : c.path)
    if (auto problem = text_problem(segment))
      return make_error(errc::invalid_argument, std::string{"the path "} + problem);
  for (const auto& [name, value] : c.query) {
    if (auto problem = text_problem(name))
      return make_error(errc::invalid_argument, std::string{"a query parameter name "} + problem);
    if (auto problem = text_problem(value))
      return make_error(errc::invalid_argument, "query parameter " + name + " " + problem);
  }
  for (const auto& [name, value] : c.req.headers)
    if (auto problem = text_problem(value))
      return make_error(errc::invalid_argument, "header " + quote_input(name) + " " + problem);
  return caf::none;
}

void dispatch(self_ptr self, call_ptr c) {
  if (auto err = check_request_text(*c)) return fail(self, *c, err);
  if (auto refused = refuse_foreign_request(c->req, self->state.browsers))
    return fail(self, *c, make_error(refused->code, refused->message));
  auto named = routes_of(c->path);
  // Without the token nothing but the open routes answers, not even whether
  // a path exists.
  bool open = !named.empty() && named.front()->open;
  const auto& token = self->state.options.cfg->api.token;
  if (!open && !token.empty() && !has_bearer_token(c->req.authorization, token))
    return fail(self, *c,
                make_error(errc::unauthorized, "a valid Authorization: Bearer token is required"));
  if (named.empty())
    return fail(self, *c,
                make_error(errc::not_found, "no such endpoint: " + quote_input(c->req.method) +
                                                " " + quote_input(c->req.target)));
  // HEAD is GET without the body, which the HTTP server leaves out.
  const auto& method = c->req.method == "HEAD" ? std::string{"GET"} : c->req.method;
  auto r =
      std::find_if(named.begin(), named.end(), [&](const route* r) { return r->method == method; });
  if (r == named.end()) {
    auto allowed = allowed_methods(named);
    auto err =
        make_error(errc::method_not_allowed, "method " + quote_input(c->req.method) +
                                                 " is not allowed here; allowed: " + allowed);
    return fail(self, *c, err, {{"Allow", allowed}});
  }
  if (auto refused = refuse_content_type(c->req))
    return fail(self, *c, make_error(refused->code, refused->message));
  (*r)->handle(self, c);
}

api_actor::behavior_type api(self_ptr self, api_options options) {
  self->state.options = std::move(options);
  const auto& api_cfg = self->state.options.cfg->api;
  self->state.browsers = {api_cfg.allowed_hosts, api_cfg.allowed_origins};
  return {
      [self](http_atom, http_exchange& ex) {
        auto c = std::make_shared<call>();
        c->req = std::move(ex.request);
        c->reply = std::move(ex.reply);
        c->protobuf_in = c->req.content_type.rfind("application/x-protobuf", 0) == 0;
        // The answer is protobuf when asked for, or when the request was and
        // JSON was not asked for.
        c->protobuf_out =
            c->req.accept.find("application/x-protobuf") != std::string::npos ||
            (c->protobuf_in && c->req.accept.find("application/json") == std::string::npos);
        auto target = parse_target(c->req.target);
        c->path = std::move(target.path);
        c->query = std::move(target.query);
        guarded(self, *c, [&] { dispatch(self, c); });
      },
  };
}

}  // namespace

std::vector<api_endpoint> api_endpoints() {
  std::vector<api_endpoint> out;
  for (const auto& r : routes) out.push_back({std::string{r.method}, std::string{r.path}, r.open});
  return out;
}

api_actor spawn_api(caf::actor_system& sys, api_options options) {
  return sys.spawn(api, std::move(options));
}

}  // namespace taskmill
