#include "tools/remote_executor/example.hpp"

#include "actors/executors/outcome.hpp"
#include "messages/cluster_port.hpp"
#include "messages/errors.hpp"
#include "messages/refusal_log.hpp"
#include "tools/node/node.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <nlohmann/json.hpp>

#include <csignal>
#include <iostream>
#include <mutex>
#include <thread>

namespace taskmill {

namespace {

std::mutex output;

void say(const std::string& line) {
  std::lock_guard<std::mutex> guard{output};
  std::cout << "remote-executor: " << line << std::endl;
}

pb::TaskOutcome run_task(const std::string& name, const pb::Task& task,
                         const remote_execution& execution) {
  auto payload = nlohmann::json::parse(task.payload(), nullptr, false);
  if (!payload.is_object()) payload = nlohmann::json::object();
  auto what = task.type() + "/" + task.key() + " attempt " + std::to_string(task.attempt());
  auto sleep = std::chrono::milliseconds{payload.value("sleep_ms", 0)};
  execution.log({"started " + what + " on " + name});
  // {"progress": true}: half way, it says so.
  if (payload.value("progress", false)) {
    if (execution.cancelled_within(sleep / 2)) sleep = std::chrono::milliseconds{0};
    pb::Progress half;
    half.set_progress(0.5);
    half.set_processed(5);
    half.set_message("half way");
    execution.report(std::move(half));
    sleep -= sleep / 2;
  }
  if (execution.cancelled_within(sleep)) {
    say(what + ": cancelled");
    return outcome_of(task, pb::OUTCOME_FAIL, "cancelled");
  }
  if (payload.value("fail", false)) {
    say(what + ": failed");
    return outcome_of(task, pb::OUTCOME_RETRY, "failed as the payload asked");
  }
  say(what + ": done");
  return outcome_of(task, pb::OUTCOME_SUCCEEDED, {}, nlohmann::json{{"handled_by", name}}.dump());
}

bool stop_within(const sigset_t& signals, std::chrono::milliseconds wait) {
  timespec ts{static_cast<time_t>(wait.count() / 1000),
              static_cast<long>((wait.count() % 1000) * 1000000)};
  return sigtimedwait(&signals, nullptr, &ts) > 0;
}

}  // namespace

int run_remote_executor_example(const remote_executor_options& options) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  caf::actor_system_config cfg;
  config::cluster_section tls;
  tls.tls_cert = options.tls_cert;
  tls.tls_key = options.tls_key;
  tls.tls_ca = options.tls_ca;
  configure_actor_system(cfg, tls);
  caf::actor_system sys{cfg};
  refusal_log refusals{std::chrono::minutes{1}};
  auto watch = watch_dialled_links([&refusals](const cluster_refusal& r) {
    if (auto unlogged = refusals.record(r.address, r.reason, refusal_log::clock::now()))
      say("the TLS handshake with " + r.address + " failed: " + r.detail +
          (*unlogged > 0 ? " (and " + std::to_string(*unlogged) + " more times since)" : ""));
  });
  struct unwatch {
    int id;
    ~unwatch() { release_cluster_watch(id); }
  } unwatch_at_exit{watch};
  auto handler = [name = options.name](const pb::Task& task, const remote_execution& execution) {
    return run_task(name, task, execution);
  };
  auto backoff = std::chrono::milliseconds{200};
  while (true) {
    auto runner = start_remote_executor(sys, options, handler);
    if (!runner) {
      say(error_message(runner.error()) + "; trying again in " + std::to_string(backoff.count()) +
          " ms");
      if (stop_within(signals, backoff)) return 0;
      backoff = std::min(2 * backoff, std::chrono::milliseconds{10000});
      continue;
    }
    backoff = std::chrono::milliseconds{200};
    say("linked to " + options.node + ", running " + std::to_string(options.capacity) +
        " at a time");
    caf::scoped_actor self{sys};
    self->monitor(*runner);
    bool linked = true;
    while (linked) {
      if (stop_within(signals, std::chrono::milliseconds{200})) {
        self->send_exit(*runner, caf::exit_reason::user_shutdown);
        return 0;
      }
      self->receive(
          [&](caf::down_msg& down) {
            linked = false;
            say("the link to " + options.node + " dropped: " + error_message(down.reason));
          },
          caf::after(std::chrono::seconds{0}) >> [] {});
    }
  }
}

}  // namespace taskmill
