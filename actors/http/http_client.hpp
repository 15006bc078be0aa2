#pragma once

// An asynchronous HTTP/1.1 client (Boost.Beast) on its own I/O thread, with a
// pool of keep-alive connections per host. On a pooled connection the caller
// sends what the socket takes at once itself, sparing the request the hop to
// that thread; the rest, and the answer, are the I/O thread's. `done` runs on
// that thread.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace taskmill {

struct http_call {
  std::string method = "POST";
  std::string url;  // http://host:port/path
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{5000};
};

struct http_answer {
  int status = 0;  // 0: no HTTP answer (see error)
  std::string body;
  std::string error;  // connection error, or "timed out"
  bool timed_out = false;
};

class http_client {
 public:
  http_client();
  ~http_client();

  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  void send(http_call call, std::function<void(http_answer)> done);

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace taskmill
