#include "tools/bench/latency.hpp"

#include "messages/errors.hpp"
#include "storage/listener.hpp"
#include "tools/percentile.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <thread>

namespace taskmill::bench {
namespace {

using nlohmann::json;

/// Calls `submit(i)` at the latency rate for as long as the latency
/// measurement lasts; answers how many times.
int paced(const pace& p, const std::function<void(int)>& submit) {
  int count = static_cast<int>(p.seconds * p.rate);
  auto interval =
      std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>{1.0 / p.rate});
  auto start = steady::now();
  for (int i = 0; i < count; ++i) {
    check_interrupted();
    std::this_thread::sleep_until(start + i * interval);
    submit(i);
  }
  return count;
}

/// Submits at the latency rate, `submit(i)` answering the key of task i once
/// it is committed, and times each from then to its arrival at the HTTP
/// executor.
latency_run paced_latency(arrivals& seen, const pace& p, const char* what,
                          const std::function<std::string(int)>& submit) {
  seen.clear();
  std::vector<std::pair<std::string, steady::time_point>> committed;
  paced(p, [&](int i) {
    auto key = submit(i);
    committed.emplace_back(key, steady::now());
  });
  auto deadline = steady::now() + std::chrono::seconds{30};
  while (seen.size() < committed.size() && steady::now() < deadline)
    sleep_checked(milliseconds{20});
  std::vector<double> ms;
  for (const auto& [key, at] : committed) {
    auto arrived = seen.find(key);
    if (!arrived)
      throw bench_failure{std::string{what} + ": task " + key +
                          " did not reach the executor within 30 s"};
    ms.push_back(std::max(0.0, std::chrono::duration<double, std::milli>(*arrived - at).count()));
  }
  return summary(std::move(ms));
}

}  // namespace

/// Submits through taskmill.submit (one autocommit statement each, as a
/// business service would) at a steady rate and times, for each task, the
/// return of its commit to its arrival at the HTTP executor.
latency_run pickup_latency(db::connection& conn, arrivals& seen, const pace& p, int run_index) {
  run(conn, sql::reset_tasks);
  return paced_latency(seen, p, "latency", [&](int i) {
    auto key = "l" + std::to_string(run_index) + "-" + std::to_string(i);
    run(conn, sql::submit_one, {std::string{latency_type}, key});
    return key;
  });
}

latency_run summary(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {percentile(ms, 0.50), percentile(ms, 0.95), percentile(ms, 0.99), ms.back()};
}

latency_run inproc_pickup_latency(db::connection& conn, const pace& p, int run_index) {
  run(conn, sql::reset_tasks);
  return summary(inproc_pickup_times(conn, p, run_index));
}

/// The same paced submits for a type the built-in noop executor runs, timed
/// from the return of each commit to the executor's start, which it reports
/// in its result by the node's clock, the bench's own.
std::vector<double> inproc_pickup_times(db::connection& conn, const pace& p, int run_index) {
  run(conn, sql::delete_types, {types_param({inproc_type})});
  auto since = run(conn, sql::now).string(0, 0);
  std::unordered_map<std::string, double> committed;
  auto count = paced(p, [&](int i) {
    auto key = "i" + std::to_string(run_index) + "-" + std::to_string(i);
    run(conn, sql::submit_reporting_start, {std::string{inproc_type}, key});
    committed.emplace(
        key,
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  });
  await_succeeded(conn, {inproc_type}, count, since);
  auto started = run(conn, sql::start_times, {std::string{inproc_type}});
  std::vector<double> ms;
  for (int r = 0; r < started.rows(); ++r) {
    auto it = committed.find(started.string(r, 0));
    if (it == committed.end()) continue;
    ms.push_back(std::max(0.0, (started.float64(r, 1) - it->second) * 1000));
  }
  if (ms.size() != committed.size())
    throw bench_failure{"in-process latency: " + std::to_string(ms.size()) + " of " +
                        std::to_string(committed.size()) + " tasks started"};
  return ms;
}

/// The pickup as plain SQL, the floor of the node's: jobs inserted with a
/// NOTIFY in one autocommit statement each, at the latency rate, and a
/// listener (the node's own) that claims the due jobs (SKIP LOCKED) on a
/// second connection at each burst of notifications; each job timed from the
/// return of its insert to the return of its claim, so over the claim's
/// durable commit, as a task reaches an HTTP executor only after its claim's.
/// The claim is prepared and sent in pipeline mode, as the node's are.
latency_run raw_pickup_latency(const std::string& conninfo, const pace& p) {
  auto submitter = connect(conninfo);
  run(submitter, sql::raw_reset);
  auto claimer = connect(conninfo);
  static const db::statement claim{"raw_claim", sql::raw_claim};
  if (auto err = claimer.prepare_and_enter_pipeline({&claim}))
    throw bench_failure{"raw pickup: " + error_message(err)};
  std::mutex guard;
  std::unordered_map<int64_t, steady::time_point> claimed;
  std::string failure;
  bool listening = false;
  // On the listener's thread, also once it listens.
  auto claim_due = [&] {
    caf::expected<db::result> res{caf::error{}};
    claimer.run({db::call{&claim, {std::string{"raw-pickup"}, std::string{"100"}}}},
                [&](caf::expected<db::result>&& r) { res = std::move(r); });
    auto at = steady::now();
    std::lock_guard<std::mutex> lock{guard};
    listening = true;
    if (!res) {
      failure = error_message(res.error());
      return;
    }
    for (int r = 0; r < res->rows(); ++r) claimed.emplace(res->int64(r, 0), at);
  };
  auto locked = [&](auto read) {
    std::lock_guard<std::mutex> lock{guard};
    return read();
  };
  std::vector<std::pair<int64_t, steady::time_point>> committed;
  {
    db::notification_listener listener{
        conninfo,
        {sql::raw_channel},
        [&claim_due](const std::vector<db::notification>&, bool) { claim_due(); },
        std::chrono::milliseconds{100},
        std::chrono::seconds{1}};
    auto deadline = steady::now() + std::chrono::seconds{10};
    while (!locked([&] { return listening; }) && steady::now() < deadline)
      sleep_checked(milliseconds{5});
    if (!locked([&] { return listening; }))
      throw bench_failure{"raw pickup: no LISTEN within 10 s"};
    paced(p, [&](int) {
      auto id = run(submitter, sql::raw_insert_one_notify,
                    {std::string{"{}"}, std::string{sql::raw_channel}})
                    .int64(0, 0);
      committed.emplace_back(id, steady::now());
    });
    deadline = steady::now() + std::chrono::seconds{30};
    while (locked([&] { return claimed.size(); }) < committed.size() && steady::now() < deadline)
      sleep_checked(milliseconds{20});
  }
  if (!failure.empty()) throw bench_failure{"raw pickup: " + failure};
  std::vector<double> ms;
  for (const auto& [id, at] : committed) {
    auto it = claimed.find(id);
    if (it == claimed.end())
      throw bench_failure{"raw pickup: job " + std::to_string(id) + " not claimed within 30 s"};
    ms.push_back(std::max(0.0, std::chrono::duration<double, std::milli>(it->second - at).count()));
  }
  return summary(std::move(ms));
}

/// Two nodes that neither LISTEN nor poll more than every 30 s (the bench's
/// node is stopped meanwhile); only the second runs any type. Tasks are
/// submitted one per request to the first, at the latency rate, and timed
/// from the answer to their arrival at the executor: each start is a
/// wake-up the first node sent over CAF.
latency_run cluster_wakeup(const std::string& binary, db::connection& conn,
                           const std::string& conninfo, const std::string& executor_url,
                           arrivals& seen, const pace& p, int run_index) {
  run(conn, sql::reset_tasks);
  std::vector<std::string> quiet{"database.listen=false", "scheduling.poll_interval=30s"};
  auto runs_it = quiet;
  runs_it.push_back(std::string{"types."} + wakeup_type + ".executor=http");
  runs_it.push_back(std::string{"types."} + wakeup_type + ".url=" + executor_url);
  bench_node submitter{binary, conninfo, quiet, "wake-submitter"};
  bench_node runner{binary, conninfo, runs_it, "wake-runner"};
  submitter.start();
  runner.start();
  auto deadline = steady::now() + std::chrono::seconds{30};
  auto linked = [&] {
    auto nodes = http_fetch("GET", submitter.api() + "/v1/nodes");
    if (!nodes || nodes->status != 200) return false;
    auto doc = json::parse(nodes->body, nullptr, false);
    for (const auto& l : doc.value("links", json::array()))
      if (l.value("name", "").rfind("wake-runner", 0) == 0 && l.value("state", "") == "up")
        return true;
    return false;
  };
  while (!linked()) {
    if (steady::now() > deadline) throw bench_failure{"the wake-up nodes did not link in 30 s"};
    sleep_checked(milliseconds{100});
  }
  // Past both pushers' first poll, into their 30 s sleep.
  sleep_checked(milliseconds{1000});
  http_session session{submitter.api()};
  auto timed = paced_latency(seen, p, "wake-up", [&](int i) {
    auto key = "w" + std::to_string(run_index) + "-" + std::to_string(i);
    post_tasks(session, task_json(wakeup_type, key, nullptr));
    return key;
  });
  submitter.stop();
  runner.stop();
  return timed;
}

}  // namespace taskmill::bench
