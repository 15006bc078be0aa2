#pragma once

// HTTP requests as the API actor receives them from the HTTP server's thread,
// with the function that writes the answer back on that connection.

#include <caf/allowed_unsafe_message_type.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace taskmill {

struct http_request {
  std::string method;
  std::string target;  // path and query, as sent
  std::string authorization;
  std::string content_type;
  std::string accept;
  std::string body;
  /// Every header, names in lower case.
  std::vector<std::pair<std::string, std::string>> headers;

  /// The value of header `name` (lower case), empty if absent.
  std::string header(const std::string& name) const {
    for (const auto& [n, v] : headers)
      if (n == name) return v;
    return {};
  }
};

struct http_response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  /// Further headers, e.g. Allow on a 405.
  std::vector<std::pair<std::string, std::string>> headers = {};
};

using http_reply = std::function<void(http_response)>;

/// A request and where its answer goes; never leaves the process.
struct http_exchange {
  http_request request;
  http_reply reply;
};

}  // namespace taskmill

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(taskmill::http_exchange)
