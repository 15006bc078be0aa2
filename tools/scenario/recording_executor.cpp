#include "tools/scenario/recording_executor.hpp"

#include "actors/http/http_server.hpp"
#include "messages/errors.hpp"
#include "messages/time.hpp"
#include "storage/pg.hpp"
#include "tools/http_fetch.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace taskmill::scenario {

namespace {

using steady = std::chrono::steady_clock;
using nlohmann::json;

constexpr int worker_threads = 8;

}  // namespace

/// What is left to do for one delivery, at `at`.
struct recording_executor::job {
  steady::time_point at;
  http_reply reply;
  int status = 200;
  /// Do the business work before answering.
  bool work = false;
  /// After the work, answer only this much later.
  std::chrono::milliseconds late{0};
  /// 202 given: the result goes to the node's API instead.
  bool post_result = false;
  int64_t task_id = 0;
  int attempt = 0;
  std::string payload;
  /// JSON text; "null" for a task that is not a workflow step.
  std::string parents = "null";
  std::string key;
  /// The answer of a success: what the work gave, or {"done": true}.
  std::string result = R"({"done":true})";
  /// SQL literals: a number, or NULL for a task that is not a shard.
  std::string shard_index = "NULL";
  std::string shard_total = "NULL";
};

std::unique_ptr<recording_executor> recording_executor::start(executor_behaviour behaviour,
                                                              std::string conninfo,
                                                              std::string& error) {
  std::unique_ptr<recording_executor> self{
      new recording_executor(std::move(behaviour), std::move(conninfo))};
  auto* raw = self.get();
  auto server = http_server::start("127.0.0.1", 0, 1 << 20, [raw](http_request req, http_reply r) {
    raw->on_request(std::move(req), std::move(r));
  });
  if (!server) {
    error = "cannot start executor " + self->name();
    return nullptr;
  }
  self->server_ = std::move(*server);
  for (int i = 0; i < worker_threads; ++i) self->workers_.emplace_back([raw] { raw->run_jobs(); });
  return self;
}

namespace {

bool later_first(const std::shared_ptr<recording_executor::job>& a,
                 const std::shared_ptr<recording_executor::job>& b) {
  return a->at > b->at;
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string{"''"} : std::string{c};
  return out + "'";
}

}  // namespace

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

double draw_delay_ms(const executor_behaviour& b, std::mt19937_64& random) {
  if (b.latency_p50_ms <= 0) {
    std::uniform_int_distribution<int> uniform{b.latency_min_ms,
                                               std::max(b.latency_min_ms, b.latency_max_ms)};
    return uniform(random);
  }
  // ln(delay) is normal: its median is ln(p50), and p99 lies 2.326 standard
  // deviations above it.
  double sigma = std::log(b.latency_p99_ms / b.latency_p50_ms) / 2.326;
  std::lognormal_distribution<double> tail{std::log(b.latency_p50_ms), sigma};
  return tail(random);
}

namespace {

/// The work statement for one delivery: {payload} and {parents} (jsonb),
/// {key} (text), {attempt}, {shard_index} and {shard_total} become literals;
/// standard_conforming_strings is on since PostgreSQL 9.1, so doubling quotes
/// is all the quoting they need.
std::string work_statement(const std::string& sql, const recording_executor::job& j) {
  auto out = replace_all(sql, "{payload}", quoted(j.payload) + "::jsonb");
  out = replace_all(out, "{parents}", quoted(j.parents) + "::jsonb");
  out = replace_all(out, "{key}", quoted(j.key));
  out = replace_all(out, "{shard_index}", j.shard_index);
  out = replace_all(out, "{shard_total}", j.shard_total);
  return replace_all(out, "{attempt}", std::to_string(j.attempt));
}

}  // namespace

void recording_executor::push(std::shared_ptr<job> j) {
  jobs_.push_back(std::move(j));
  std::push_heap(jobs_.begin(), jobs_.end(), &later_first);
}

std::shared_ptr<recording_executor::job> recording_executor::pop() {
  std::pop_heap(jobs_.begin(), jobs_.end(), &later_first);
  auto j = std::move(jobs_.back());
  jobs_.pop_back();
  return j;
}

recording_executor::recording_executor(executor_behaviour behaviour, std::string conninfo)
    : behaviour_(std::move(behaviour)),
      conninfo_(std::move(conninfo)),
      random_(std::hash<std::string>{}(behaviour_.name)) {}

recording_executor::~recording_executor() {
  stopping_ = true;
  wake_.notify_all();
  for (auto& w : workers_) w.join();
  // Replies hold the server's connections: gone before the server is.
  {
    std::lock_guard<std::mutex> guard{mtx_};
    hung_.clear();
    jobs_.clear();
  }
  server_.reset();
}

std::string recording_executor::url() const {
  return "http://127.0.0.1:" + std::to_string(server_->port()) + "/" + behaviour_.name;
}

void recording_executor::set_result_api(const std::string& base) {
  std::lock_guard<std::mutex> guard{mtx_};
  result_api_ = base;
}

std::vector<delivery> recording_executor::deliveries() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return deliveries_;
}

std::vector<std::string> recording_executor::work_errors() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return work_errors_;
}

size_t recording_executor::cancels() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return cancels_;
}

void recording_executor::on_request(http_request req, http_reply reply) {
  // A cancel of a running attempt: not a delivery.
  if (req.method == "DELETE") {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      ++cancels_;
    }
    reply(http_response{200, "application/json", "{}"});
    return;
  }
  auto task = json::parse(req.body, nullptr, false);
  if (!task.is_object() || !task.contains("id") || !task.contains("attempt")) {
    reply(http_response{400, "application/json", R"({"error":"not a task"})"});
    return;
  }
  auto j = std::make_shared<job>();
  j->task_id = task.value("id", int64_t{0});
  j->attempt = task.value("attempt", 0);
  j->key = task.value("key", std::string{});
  j->payload = task.contains("payload") ? task["payload"].dump() : "null";
  if (task.contains("parents")) j->parents = task["parents"].dump();
  if (task.value("shard_total", json{}).is_number_integer()) {
    j->shard_index = std::to_string(task["shard_index"].get<int64_t>());
    j->shard_total = std::to_string(task["shard_total"].get<int64_t>());
  }
  delivery d;
  d.executor = behaviour_.name;
  d.task_id = j->task_id;
  d.type = task.value("type", std::string{});
  d.key = j->key;
  d.attempt = j->attempt;
  d.arrived_us = wall_clock_micros();

  std::lock_guard<std::mutex> guard{mtx_};
  std::uniform_real_distribution<double> chance{0, 1};
  j->at = steady::now() + std::chrono::microseconds{
                              static_cast<int64_t>(1000 * draw_delay_ms(behaviour_, random_))};
  auto n = static_cast<size_t>(j->attempt);
  if (n >= 1 && n <= behaviour_.answers.size())
    j->status = behaviour_.answers[n - 1];
  else if (chance(random_) < behaviour_.failure_rate)
    j->status = 500;
  j->work = j->status == 200;
  if (chance(random_) < behaviour_.hang_rate) {
    d.behaviour = "hang";
    deliveries_.push_back(std::move(d));
    j->reply = std::move(reply);
    hung_.push_back(std::move(j));
    return;
  }
  if (j->work && chance(random_) < behaviour_.late_rate) {
    j->late = std::chrono::milliseconds{behaviour_.late_ms};
    d.behaviour = "late";
  } else {
    d.behaviour = j->status == 200 ? "success" : "status " + std::to_string(j->status);
  }
  deliveries_.push_back(std::move(d));
  if (behaviour_.async) {
    j->post_result = true;
    reply(http_response{202, "application/json", "{}"});
  } else {
    j->reply = std::move(reply);
  }
  push(std::move(j));
  wake_.notify_one();
}

void recording_executor::run_jobs() {
  std::optional<db::connection> conn;
  std::unique_lock<std::mutex> lock{mtx_};
  while (!stopping_) {
    if (jobs_.empty()) {
      wake_.wait_for(lock, std::chrono::milliseconds{200});
      continue;
    }
    if (jobs_.front()->at > steady::now()) {
      wake_.wait_until(lock, jobs_.front()->at);
      continue;
    }
    auto next = pop();
    auto result_api = result_api_;
    lock.unlock();
    if (next->work && !behaviour_.work_sql.empty()) {
      next->work = false;
      if (!conn)
        if (auto c =
                db::connection::open(conninfo_, std::chrono::seconds{30}, std::chrono::seconds{10}))
          conn.emplace(std::move(*c));
      std::string why = "no connection to PostgreSQL";
      bool done = false;
      if (conn) {
        auto res = conn->exec(work_statement(behaviour_.work_sql, *next));
        done = static_cast<bool>(res);
        if (!res)
          why = error_message(res.error());
        else if (res->rows() > 0 && !res->is_null(0, 0))
          next->result = res->string(0, 0);
      }
      if (!done) {
        // The database may be down (a scenario crashes it): a failed attempt.
        conn.reset();
        next->status = 503;
        std::lock_guard<std::mutex> guard{mtx_};
        work_errors_.push_back(next->key + " attempt " + std::to_string(next->attempt) + ": " +
                               why);
      }
      if (next->late.count() > 0) {
        next->at = steady::now() + next->late;
        next->late = std::chrono::milliseconds{0};
        lock.lock();
        push(std::move(next));
        continue;
      }
    }
    auto outcome = next->status == 200 ? "succeeded" : "retry";
    if (next->post_result) {
      json report{{"attempt", next->attempt}, {"outcome", outcome}};
      if (next->status != 200) report["error"] = "answered " + std::to_string(next->status);
      http_fetch("POST", result_api + "/v1/tasks/" + std::to_string(next->task_id) + "/result",
                 report.dump());
    } else if (next->reply) {
      next->reply(
          http_response{next->status, "application/json",
                        next->status == 200 ? next->result : R"({"error":"scripted failure"})"});
    }
    lock.lock();
  }
}

}  // namespace taskmill::scenario
