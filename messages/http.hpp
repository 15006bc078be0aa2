#pragma once

// HTTP requests as the API actor receives them from the HTTP server's thread,
// with the function that writes the answer back on that connection.

#include <caf/allowed_unsafe_message_type.hpp>

#include <functional>
#include <string>

namespace taskmill {

struct http_request {
  std::string method;
  std::string target;  // path and query, as sent
  std::string authorization;
  std::string content_type;
  std::string accept;
  std::string body;
};

struct http_response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

using http_reply = std::function<void(http_response)>;

/// A request and where its answer goes; never leaves the process.
struct http_exchange {
  http_request request;
  http_reply reply;
};

}  // namespace taskmill

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(taskmill::http_exchange)
