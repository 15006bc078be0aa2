#pragma once

// A small HTTP/1.1 server (Boost.Beast) on its own I/O thread. Each request
// goes to `handler` with a `reply` function that may be called later from any
// thread; the response is written on the connection's own strand. Bodies over
// the limit are answered 413 without being read. Whoever holds `reply`
// functions must be gone before the server is destroyed.

#include "messages/http.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace taskmill {

using http_handler = std::function<void(http_request, http_reply)>;

class http_server {
 public:
  static caf::expected<std::unique_ptr<http_server>> start(const std::string& host, uint16_t port,
                                                           uint64_t max_body_bytes,
                                                           http_handler handler);
  ~http_server();

  uint16_t port() const;

  struct impl;

 private:
  explicit http_server(std::unique_ptr<impl> impl);
  std::unique_ptr<impl> impl_;
};

}  // namespace taskmill
