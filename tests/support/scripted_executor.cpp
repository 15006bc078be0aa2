#include "tests/support/scripted_executor.hpp"

#include "tests/support/test_database.hpp"
#include "tools/http_fetch.hpp"

#include <boost/test/unit_test.hpp>

namespace taskmill::test {

using nlohmann::json;

scripted_executor::scripted_executor() {
  auto started = http_server::start(
      "127.0.0.1", 0, 1 << 20,
      [this](http_request req, http_reply reply) { handle(std::move(req), std::move(reply)); });
  BOOST_REQUIRE_MESSAGE(started, describe(started));
  server_ = std::move(*started);
}

scripted_executor::~scripted_executor() {
  // Workers still hold replies that post into the server: they go first,
  // their delays cut short (a test that ends does not wait out a long task).
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    closing_ = true;
    workers.swap(workers_);
  }
  closed_.notify_all();
  for (auto& w : workers) w.join();
  server_.reset();
}

std::string scripted_executor::url() const {
  return "http://127.0.0.1:" + std::to_string(server_->port()) + "/work";
}

void scripted_executor::set_node_api(const std::string& base) {
  std::lock_guard<std::mutex> guard{mtx_};
  node_api_ = base;
}

std::vector<scripted_executor::seen> scripted_executor::requests_for(const std::string& key) {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<seen> out;
  for (const auto& r : requests_)
    if (r.body["key"] == key) out.push_back(r);
  return out;
}

std::vector<scripted_executor::seen> scripted_executor::all_requests() {
  std::lock_guard<std::mutex> guard{mtx_};
  return requests_;
}

std::vector<scripted_executor::seen> scripted_executor::cancels_for(const std::string& key) {
  std::lock_guard<std::mutex> guard{mtx_};
  std::vector<seen> out;
  for (const auto& r : cancels_)
    if (r.body["key"] == key) out.push_back(r);
  return out;
}

void scripted_executor::refuse_cancels(int count) {
  std::lock_guard<std::mutex> guard{mtx_};
  cancels_to_refuse_ = count;
}

void scripted_executor::handle(http_request req, http_reply reply) {
  auto body = json::parse(req.body);
  if (req.method == "DELETE") {
    std::lock_guard<std::mutex> guard{mtx_};
    cancels_.push_back({body, req.header("idempotency-key"), {}, req.content_type, req.target});
    if (cancels_to_refuse_ > 0) {
      --cancels_to_refuse_;
      return reply(http_response{503, "application/json", "{}"});
    }
    return reply(http_response{200, "application/json", "{}"});
  }
  const auto& script = body["payload"];
  int attempt = body["attempt"];
  int status = script.value("status", 200);
  if (attempt <= script.value("fail_first", 0)) status = 503;
  http_response res{status, "application/json",
                    script.value("body", std::string{"{\"done\":true}"})};
  auto delay = std::chrono::milliseconds{script.value("delay_ms", 0)};
  std::lock_guard<std::mutex> guard{mtx_};
  requests_.push_back({body, req.header("idempotency-key"), req.header("traceparent"),
                       req.content_type, req.target});
  if (script.contains("async")) {
    // Answer 202 now, the result later through the node's API.
    reply(http_response{202, "application/json", "{}"});
    json result = script["async"];
    result["attempt"] = attempt;
    auto target = node_api_ + "/v1/tasks/" + std::to_string(body["id"].get<int64_t>()) + "/result";
    workers_.emplace_back([this, target, result, delay] {
      if (waited_out(delay)) http_fetch("POST", target, result.dump());
    });
    return;
  }
  workers_.emplace_back([this, reply = std::move(reply), res = std::move(res), delay]() mutable {
    if (waited_out(delay)) reply(std::move(res));
  });
}

bool scripted_executor::waited_out(std::chrono::milliseconds delay) {
  std::unique_lock<std::mutex> lock{mtx_};
  return !closed_.wait_for(lock, delay, [&] { return closing_; });
}

}  // namespace taskmill::test
