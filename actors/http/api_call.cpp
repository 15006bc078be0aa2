#include "actors/http/api_call.hpp"

#include "actors/metrics/node_metrics.hpp"

#include <prometheus/counter.h>

#include <charconv>

namespace taskmill::api_call {

namespace {

const char* code_of(const caf::error& err) {
  if (err.category() != error_category) return "unavailable";
  return to_string(static_cast<errc>(err.code()));
}

}  // namespace

int status_of(const caf::error& err) {
  if (err.category() != error_category) return 503;  // e.g. a request timeout
  switch (static_cast<errc>(err.code())) {
    case errc::invalid_argument:
      return 400;
    case errc::unauthorized:
      return 401;
    case errc::not_found:
      return 404;
    case errc::method_not_allowed:
      return 405;
    case errc::forbidden:
      return 403;
    case errc::misdirected:
      return 421;
    case errc::unsupported_media_type:
      return 415;
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

void send(self_ptr self, const call& c, http_response res) {
  self->state.options.metrics->http_requests.Increment();
  if (res.status >= 400) self->state.options.metrics->http_errors.Increment();
  c.reply(std::move(res));
}

void fail(self_ptr self, const call& c, const caf::error& err,
          std::vector<std::pair<std::string, std::string>> headers, const pb::Waiting* waiting) {
  http_response res;
  res.status = status_of(err);
  res.headers = std::move(headers);
  pb::Error e;
  e.set_code(code_of(err));
  e.set_message(error_message(err));
  if (waiting) *e.mutable_waiting() = *waiting;
  if (c.protobuf_out) {
    res.content_type = "application/x-protobuf";
    res.body = e.SerializeAsString();
  } else {
    res.body = json::encode_error(e);
  }
  send(self, c, std::move(res));
}

void fail_task_read(self_ptr self, const call& c, const caf::error& err) {
  if (!is(err, errc::storage_unavailable)) return fail(self, c, err);
  pb::Waiting why;
  why.set_reason("storage_unavailable");
  why.set_message("PostgreSQL cannot be reached: no node claims or runs a task until it is back");
  fail(self, c, err, {}, &why);
}

caf::error no_query_parameters(const call& c) {
  if (c.query.empty()) return caf::none;
  return make_error(errc::invalid_argument,
                    "unknown query parameter " + quote_input(c.query.begin()->first));
}

caf::expected<int32_t> count_parameter(const call& c, const char* name, int32_t fallback,
                                       int32_t max) {
  for (const auto& [key, value] : c.query) {
    if (key != name)
      return make_error(errc::invalid_argument, "unknown query parameter " + quote_input(key));
    int32_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc{} || end != value.data() + value.size() || n < 1 || n > max)
      return make_error(errc::invalid_argument,
                        std::string{name} + " must be an integer from 1 to " + std::to_string(max));
    return n;
  }
  return fallback;
}

}  // namespace taskmill::api_call
