// `taskmill logs ID [--follow]`: the lines a task's attempts logged, oldest
// first; with --follow, new lines as they come until the task is finished.

#include "tools/client_support.hpp"

#include <chrono>
#include <thread>

namespace taskmill {

namespace {

using namespace client;
using namespace std::chrono_literals;

struct logs_options {
  common_options common;
  int64_t id = 0;
  bool follow = false;
};

/// How often --follow asks for new lines.
constexpr auto follow_interval = 500ms;

void print_line(const common_options& o, const json& line) {
  if (o.json_output)
    std::cout << line.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  else
    std::cout << shown(field(line, "logged_at")) << "  attempt " << shown(field(line, "attempt"))
              << "  " << one_line(shown(field(line, "line"))) << "\n";
}

int logs(const logs_options& o) {
  api_client api{o.common.server};
  auto path = "/v1/tasks/" + std::to_string(o.id) + "/logs?after=";
  int64_t after = 0;
  // Lines may trail their task's outcome: one more read once it finished.
  bool last_read = false;
  for (;;) {
    auto a = api.get(path + std::to_string(after));
    if (!a) return EXIT_FAILURE;
    const auto& lines = array_field(a->doc, "lines");
    for (const auto& line : lines) print_line(o.common, line);
    std::cout.flush();
    after = integer(field(a->doc, "next_after"));
    if (!lines.empty() && lines.size() >= 1000) continue;
    if (!o.follow || last_read) return EXIT_SUCCESS;
    last_read = finished(shown(field(a->doc, "status")));
    std::this_thread::sleep_for(follow_interval);
  }
}

}  // namespace

void add_log_command(CLI::App& app, client_command& chosen) {
  auto o = std::make_shared<logs_options>();
  auto sub = app.add_subcommand("logs", "Show the lines a task's attempts logged");
  add_common_options(*sub, o->common);
  sub->add_option("ID", o->id, "Task id")->required();
  sub->add_flag("--follow,-f", o->follow, "Show new lines as they come, until the task finished");
  on_parsed(sub, chosen, [o] { return logs(*o); });
}

}  // namespace taskmill
