#include "tools/example_executor.hpp"

#include "actors/http/http_server.hpp"
#include "messages/errors.hpp"
#include "tools/http_fetch.hpp"

#include <nlohmann/json.hpp>

#include <csignal>
#include <iostream>
#include <mutex>
#include <thread>

namespace taskmill {

namespace {

using nlohmann::json;

std::mutex output;

void say(const std::string& line) {
  std::lock_guard<std::mutex> guard{output};
  std::cout << "example-executor: " << line << std::endl;
}

http_response answer(int status, const json& body) {
  return http_response{status, "application/json", body.dump()};
}

void handle(const http_request& req, http_reply reply, const std::string& callback) {
  if (req.method == "DELETE") {
    // A cancel of a running attempt: this example only says so.
    auto cancel = json::parse(req.body, nullptr, false);
    if (!cancel.is_object()) return reply(answer(400, {{"error", "the body is not a cancel"}}));
    say(cancel.value("type", std::string{}) + "/" + cancel.value("key", std::string{}) +
        " attempt " + std::to_string(cancel.value("attempt", 0)) + ": cancelled");
    return reply(answer(200, {{"cancelled", true}}));
  }
  if (req.method != "POST") return reply(answer(405, {{"error", "POST a task here"}}));
  auto task = json::parse(req.body, nullptr, false);
  if (!task.is_object()) return reply(answer(400, {{"error", "the body is not a task"}}));
  auto payload = task.value("payload", json::object());
  if (!payload.is_object()) payload = json::object();
  auto name = task.value("type", std::string{}) + "/" + task.value("key", std::string{});
  int attempt = task.value("attempt", 0);
  auto sleep = std::chrono::milliseconds{payload.value("sleep_ms", 0)};
  bool async = payload.value("async", false);
  // Answering after a sleep must not hold up other requests.
  std::thread{[=, reply = std::move(reply)] {
    std::this_thread::sleep_for(sleep);
    if (attempt <= payload.value("fail_attempts", 0)) {
      say(name + " attempt " + std::to_string(attempt) + ": 503, try again later");
      return reply(answer(503, {{"error", "not yet: attempt " + std::to_string(attempt)}}));
    }
    json result{{"handled_by", "example-executor"}, {"attempt", attempt}, {"echo", payload}};
    if (!async) {
      say(name + " attempt " + std::to_string(attempt) + ": done");
      return reply(answer(200, result));
    }
    say(name + " attempt " + std::to_string(attempt) + ": accepted (202), result follows");
    reply(answer(202, {{"accepted", true}}));
    std::this_thread::sleep_for(std::chrono::milliseconds{500});
    auto target =
        callback + "/v1/tasks/" + std::to_string(task.value("id", int64_t{0})) + "/result";
    json report{{"attempt", attempt}, {"outcome", "succeeded"}, {"result", result}};
    auto sent = http_fetch("POST", target, report.dump());
    say(name + " result posted: " + (sent ? sent->body : error_message(sent.error())));
  }}.detach();
}

}  // namespace

int run_example_executor(const std::string& host, uint16_t port, const std::string& callback) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto server = http_server::start(
      host, port, 1 << 20,
      [callback](http_request req, http_reply reply) { handle(req, std::move(reply), callback); });
  if (!server) {
    std::cerr << error_message(server.error()) << "\n";
    return 1;
  }
  say("listening on http://" + host + ":" + std::to_string((*server)->port()) + "/work");
  int sig = 0;
  sigwait(&signals, &sig);
  return 0;
}

}  // namespace taskmill
