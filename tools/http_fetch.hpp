#pragma once

// A blocking HTTP/1.1 call, for the command line, the benchmark and tests.

#include <caf/expected.hpp>

#include <chrono>
#include <memory>
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

/// Blocking calls on one kept-alive connection to one server (reconnects
/// when the server closed it); for clients that send many requests.
class http_session {
 public:
  /// `base`: http://host:port
  explicit http_session(const std::string& base);
  ~http_session();
  http_session(const http_session&) = delete;
  http_session& operator=(const http_session&) = delete;

  caf::expected<fetched> call(const std::string& method, const std::string& target,
                              const std::string& body = {});

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace taskmill
