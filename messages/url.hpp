#pragma once

// http:// URLs, taken apart once for every HTTP client of the node and the
// config's checks (executor URLs, webhooks).

#include <optional>
#include <string>
#include <string_view>

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

}  // namespace taskmill
