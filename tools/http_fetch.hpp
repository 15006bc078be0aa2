#pragma once

// A blocking HTTP/1.1 call, for the command line, the benchmark and tests.

#include <caf/expected.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace taskmill {

struct fetched {
  int status = 0;
  std::string content_type;
  std::string body;
};

/// `method` `url` (http://host:port/path?query) with `body`; fails only when
/// no HTTP answer came (connection refused, timeout).
caf::expected<fetched> http_fetch(
    const std::string& method, const std::string& url, const std::string& body = {},
    const std::vector<std::pair<std::string, std::string>>& headers = {},
    std::chrono::milliseconds timeout = std::chrono::seconds{30});

}  // namespace taskmill
