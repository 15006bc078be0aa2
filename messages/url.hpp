#pragma once

// http:// URLs, taken apart once for every HTTP client of the node and the
// config's checks (executor URLs, webhooks).

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace taskmill {

struct http_url {
  std::string authority;  // host[:port], as written
  std::string host;
  std::string port;    // "80" when the URL names none
  std::string target;  // path and query; "/" when the URL names none
};

/// `url` taken apart; nullopt unless it is http://host[:port][/...] with a
/// host and, if given, a port.
std::optional<http_url> parse_http_url(std::string_view url);

/// A request target (/v1/jobs/a%20b?count=3) taken apart: the path's
/// segments and the query's parameters, percent-decoded (and '+' a space);
/// empty segments are dropped.
struct request_target {
  std::vector<std::string> path;
  std::map<std::string, std::string> query;
};

request_target parse_target(std::string_view target);

}  // namespace taskmill
