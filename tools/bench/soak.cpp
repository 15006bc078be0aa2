#include "tools/bench/soak.hpp"

#include "messages/time.hpp"
#include "tools/bench/harness.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>
#include <thread>

namespace taskmill::bench {

namespace {

using namespace std::chrono_literals;

constexpr auto sample_every = 10s;
/// Succeeded tasks are stopped after this and deleted after as long again
/// (watcher.success_retention, purge_retention): the table reaches a steady
/// size once the oldest row kept is twice this old.
constexpr auto success_retention = 3min;

/// The load, per second: one-task submits, tasks in batches (a tenth of
/// them due 30 s later), tasks that fail to the end of their retries, and
/// tasks that time out; a job fires every second besides.
constexpr int single_per_second = 100;
constexpr int batch_size = 50;
constexpr int batches_per_second = 10;
constexpr int failing_per_second = 2;
constexpr int timing_out_per_second = 2;

/// Bounds of the verdict, comparing the last quarter of the run with the
/// second (the first being warm-up and the retention's filling).
constexpr double rss_growth_bound = 1.25;
constexpr double p99_drift_bound = 2.0;
constexpr double table_growth_bound = 1.3;

struct sample {
  double at_s = 0;
  double succeeded_per_s = 0;
  double pickup_p50_ms = 0;
  double pickup_p99_ms = 0;
  double rss_mib = 0;
  int fds = 0;
  double table_mib = 0;
  double indexes_mib = 0;
  int64_t live = 0;
  int64_t dead = 0;
  int64_t autovacuums = 0;
};

/// The node's count of succeeded outcomes, from /metrics; `last` when it
/// does not answer.
double succeeded_so_far(const bench_node& node, double last) {
  auto metrics = http_fetch("GET", node.api() + "/metrics", {}, {}, 5s);
  if (!metrics || metrics->status != 200) return last;
  static const std::string name = "taskmill_outcomes_total{outcome=\"succeeded\"} ";
  auto at = metrics->body.find(name);
  return at == std::string::npos ? 0 : std::stod(metrics->body.substr(at + name.size()));
}

/// Submits the load until `stop`, one second's worth at a time.
void load(const bench_node& node, const std::atomic<bool>& stop, std::atomic<int64_t>& submitted) {
  http_session session{node.api()};
  for (int64_t second = 0; !stop && !interrupted; ++second) {
    auto began = steady::now();
    auto key = [&](const char* what, int i) {
      return std::string{what} + "-" + std::to_string(second) + "-" + std::to_string(i);
    };
    const auto later = format_rfc3339(wall_clock_micros() + 30'000'000);
    for (int b = 0; b < batches_per_second; ++b) {
      std::string body = R"({"tasks":[)";
      for (int i = 0; i < batch_size; ++i) {
        if (i > 0) body += ',';
        body += task_json("SOAK_OK", key("b", b * batch_size + i),
                          i % 10 == 0 ? later.c_str() : nullptr);
      }
      post_tasks(session, body + "]}");
    }
    for (int i = 0; i < single_per_second; ++i)
      post_tasks(session, task_json("SOAK_OK", key("s", i), nullptr));
    for (int i = 0; i < failing_per_second; ++i)
      post_tasks(session, task_json("SOAK_FAIL", key("f", i), nullptr));
    for (int i = 0; i < timing_out_per_second; ++i)
      post_tasks(session, task_json("SOAK_SLOW", key("t", i), nullptr, "500"));
    submitted += batches_per_second * batch_size + single_per_second + failing_per_second +
                 timing_out_per_second;
    std::this_thread::sleep_until(began + 1s);
  }
}

/// The values `of` takes in the samples of quarter `q` (0..3) of the run.
series quarter(const std::vector<sample>& samples, int q, double (*of)(const sample&)) {
  series out{""};
  size_t from = samples.size() * q / 4, to = samples.size() * (q + 1) / 4;
  for (size_t i = from; i < to; ++i) out.runs.push_back(of(samples[i]));
  return out;
}

void write_csv(const std::string& path, const std::vector<sample>& samples) {
  std::ofstream out{path};
  out << "at_s,succeeded_per_s,pickup_p50_ms,pickup_p99_ms,rss_mib,fds,table_mib,indexes_mib,"
         "live_tuples,dead_tuples,autovacuums\n";
  for (const auto& s : samples)
    out << s.at_s << ',' << s.succeeded_per_s << ',' << s.pickup_p50_ms << ',' << s.pickup_p99_ms
        << ',' << s.rss_mib << ',' << s.fds << ',' << s.table_mib << ',' << s.indexes_mib << ','
        << s.live << ',' << s.dead << ',' << s.autovacuums << '\n';
}

/// One panel of the chart: `of` over time, its range from 0 to its peak.
void svg_panel(std::ostream& out, const std::vector<sample>& samples, int top,
               const std::string& title, double (*of)(const sample&)) {
  constexpr int left = 70, width = 820, height = 150;
  double peak = 0;
  for (const auto& s : samples) peak = std::max(peak, of(s));
  if (peak <= 0) peak = 1;
  double end = samples.empty() ? 1 : std::max(1.0, samples.back().at_s);
  out << "<text x='" << left << "' y='" << top - 6 << "' font-size='13'>" << title << " (peak "
      << fixed(peak, 1) << ")</text>\n";
  out << "<rect x='" << left << "' y='" << top << "' width='" << width << "' height='" << height
      << "' fill='none' stroke='#999'/>\n";
  out << "<polyline fill='none' stroke='#1f5fa8' stroke-width='1.5' points='";
  for (const auto& s : samples)
    out << fixed(left + width * s.at_s / end, 1) << ','
        << fixed(top + height - height * of(s) / peak, 1) << ' ';
  out << "'/>\n";
  out << "<text x='" << left - 4 << "' y='" << top + height << "' font-size='11' "
      << "text-anchor='end'>0</text><text x='" << left + width << "' y='" << top + height + 14
      << "' font-size='11' text-anchor='end'>" << fixed(end / 60, 0) << " min</text>\n";
}

void write_svg(const std::string& path, const std::vector<sample>& samples,
               const std::string& title) {
  std::ofstream out{path};
  out << "<svg xmlns='http://www.w3.org/2000/svg' width='920' height='860' "
         "font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n"
      << "<text x='70' y='24' font-size='15'>" << title << "</text>\n";
  svg_panel(out, samples, 60, "succeeded tasks/s",
            [](const sample& s) { return s.succeeded_per_s; });
  svg_panel(out, samples, 260, "pickup p99 (ms)", [](const sample& s) { return s.pickup_p99_ms; });
  svg_panel(out, samples, 460, "node RSS (MiB)", [](const sample& s) { return s.rss_mib; });
  svg_panel(out, samples, 660, "tasks table + indexes (MiB)",
            [](const sample& s) { return s.table_mib + s.indexes_mib; });
  out << "</svg>\n";
}

}  // namespace

int run_soak(const soak_options& options) {
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  try {
    bench_database database{options.database, false};
    auto retention =
        std::to_string(
            std::chrono::duration_cast<std::chrono::seconds>(success_retention).count()) +
        "s";
    bench_node node{
        options.binary,
        database.conninfo(),
        {"types.SOAK_OK.executor=noop", "types.SOAK_FAIL.executor=fail",
         "types.SOAK_FAIL.max_retries=2", "types.SOAK_FAIL.backoff=fixed",
         "types.SOAK_FAIL.backoff_base=500ms", "types.SOAK_SLOW.executor=sleep",
         "types.SOAK_SLOW.timeout=100ms", "types.SOAK_SLOW.max_retries=1",
         "watcher.success_retention=" + retention, "watcher.purge_retention=" + retention,
         "jobs=[{name = 'soak-tick', schedule = '@every 1s', type = 'SOAK_OK'}]"},
        "soak"};
    node.start();
    auto conn = connect(database.conninfo());
    progress("soak: " + fixed(options.duration.count() / 60000.0, 1) + " min on " +
             database.description() + "; samples every 10 s to " + options.prefix + ".csv");
    std::atomic<bool> stop{false};
    std::atomic<int64_t> submitted{0};
    std::vector<sample> samples;
    auto start = steady::now();
    auto last_succeeded = succeeded_so_far(node, 0);
    auto last_at = start;
    // The load on one thread, the samples on the other; either ending, for
    // whatever reason, ends the other.
    in_parallel(2, [&](int role) {
      struct stop_at_end {
        std::atomic<bool>& stop;
        ~stop_at_end() { stop = true; }
      } at_end{stop};
      if (role == 0) return load(node, stop, submitted);
      while (!stop && !interrupted && steady::now() - start < options.duration) {
        std::this_thread::sleep_until(last_at + sample_every);
        auto now = steady::now();
        sample s;
        s.at_s = seconds_since(start);
        auto succeeded = succeeded_so_far(node, last_succeeded);
        s.succeeded_per_s =
            (succeeded - last_succeeded) / std::chrono::duration<double>(now - last_at).count();
        last_succeeded = succeeded;
        last_at = now;
        auto pickups = run(conn, sql::soak_pickups, {std::to_string(sample_every.count())});
        s.pickup_p50_ms = pickups.float64(0, 0);
        s.pickup_p99_ms = pickups.float64(0, 1);
        s.rss_mib = static_cast<double>(node.rss()) / (1 << 20);
        s.fds = node.open_fds();
        auto table = run(conn, sql::soak_table);
        s.table_mib = static_cast<double>(table.int64(0, 0)) / (1 << 20);
        s.indexes_mib = static_cast<double>(table.int64(0, 1)) / (1 << 20);
        s.live = table.int64(0, 2);
        s.dead = table.int64(0, 3);
        s.autovacuums = table.int64(0, 4);
        samples.push_back(s);
        progress("soak " + fixed(s.at_s / 60, 1) + " min: " + fixed(s.succeeded_per_s, 0) +
                 " tasks/s, pickup p50 " + fixed(s.pickup_p50_ms, 1) + " p99 " +
                 fixed(s.pickup_p99_ms, 1) + " ms, RSS " + fixed(s.rss_mib, 1) + " MiB, " +
                 std::to_string(s.fds) + " fds, table " + fixed(s.table_mib, 1) + " + " +
                 fixed(s.indexes_mib, 1) + " MiB, dead " + std::to_string(s.dead) +
                 ", autovacuums " + std::to_string(s.autovacuums));
      }
    });
    node.stop();
    check_interrupted();
    write_csv(options.prefix + ".csv", samples);
    write_svg(options.prefix + ".svg", samples,
              "taskmill soak: " + fixed(seconds_since(start) / 60, 1) + " min, " +
                  std::to_string(submitted.load()) + " tasks submitted");

    // The verdict: the last quarter against the second.
    // The second quarter must begin in the steady state to be compared.
    bool steady_retention = options.duration >= 8 * success_retention;
    auto second_rss = quarter(samples, 1, [](const sample& s) { return s.rss_mib; }).median();
    auto last_rss = quarter(samples, 3, [](const sample& s) { return s.rss_mib; }).median();
    auto second_p99 = quarter(samples, 1, [](const sample& s) { return s.pickup_p99_ms; }).median();
    auto last_p99 = quarter(samples, 3, [](const sample& s) { return s.pickup_p99_ms; }).median();
    auto size = [](const sample& s) { return s.table_mib + s.indexes_mib; };
    auto second_size = quarter(samples, 1, size), last_size = quarter(samples, 3, size);
    struct bound {
      std::string what;
      double measured, limit;
      bool judged;
    };
    std::vector<bound> bounds{
        {"node RSS, last quarter / second (median)", last_rss / std::max(second_rss, 1e-9),
         rss_growth_bound, true},
        {"pickup p99, last quarter / second (median)", last_p99 / std::max(second_p99, 1e-9),
         p99_drift_bound, true},
        {"table + indexes, last quarter / second (peak)",
         last_size.max() / std::max(second_size.max(), 1e-9), table_growth_bound, steady_retention},
    };
    bool held = true;
    std::cout << "\nsoak verdict (" << samples.size() << " samples; " << submitted.load()
              << " tasks submitted)\n";
    for (const auto& b : bounds) {
      bool ok = !b.judged || b.measured <= b.limit;
      held = held && ok;
      std::cout << "  " << b.what << ": " << fixed(b.measured, 2) << " <= " << fixed(b.limit, 2)
                << (b.judged ? (ok ? "  held" : "  BROKEN")
                             : "  not judged: in a run under 8 x the retention (" + retention +
                                   ") the second quarter is before the steady state")
                << "\n";
    }
    std::cout << "  samples: " << options.prefix << ".csv, chart: " << options.prefix << ".svg\n";
    return held ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "soak failed: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace taskmill::bench
