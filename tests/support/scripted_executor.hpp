#pragma once

// An HTTP executor for tests, in this process: every answer is chosen by the
// task's payload: {"status": 503, "body": "...", "delay_ms": 300,
// "fail_first": 1, "async": {<result for POST .../result>}}. It records every
// request it gets, and every cancel (a DELETE), which it answers 200.

#include "actors/http/http_server.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace taskmill::test {

class scripted_executor {
 public:
  struct seen {
    nlohmann::json body;
    std::string idempotency_key;
    std::string traceparent;
    std::string content_type;
    std::string path;
  };

  scripted_executor();
  ~scripted_executor();

  std::string url() const;
  /// Where 202 results are posted (the node's API), set once the node runs.
  void set_node_api(const std::string& base);
  std::vector<seen> requests_for(const std::string& key);
  std::vector<seen> all_requests();
  /// The cancels received for task `key` (their bodies: id, type, key, attempt).
  std::vector<seen> cancels_for(const std::string& key);
  /// Answers the next `count` cancels 503 (each still seen).
  void refuse_cancels(int count);

 private:
  void handle(http_request req, http_reply reply);
  /// Waits `delay`, false when the executor closes first.
  bool waited_out(std::chrono::milliseconds delay);

  std::mutex mtx_;
  std::vector<seen> requests_;
  std::vector<seen> cancels_;
  int cancels_to_refuse_ = 0;
  std::vector<std::thread> workers_;
  bool closing_ = false;
  std::condition_variable closed_;
  std::string node_api_;
  std::unique_ptr<http_server> server_;
};

}  // namespace taskmill::test
