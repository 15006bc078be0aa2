#include "actors/logging/log_format.hpp"

#include <spdlog/details/log_msg.h>
#include <spdlog/pattern_formatter.h>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace taskmill {

namespace {

thread_local const log_fields* current_fields = nullptr;

/// syslog's priorities, as sd-daemon(3) writes them.
const char* priority_prefix(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return "<7>";
    case spdlog::level::info:
      return "<6>";
    case spdlog::level::warn:
      return "<4>";
    case spdlog::level::err:
      return "<3>";
    case spdlog::level::critical:
      return "<2>";
    default:
      return "<6>";
  }
}

std::string iso_time(spdlog::log_clock::time_point at) {
  auto since = at.time_since_epoch();
  auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since);
  auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since - seconds).count();
  std::time_t t = seconds.count();
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return text;
}

/// The actor a line starts with (lower-case words before ": "), and the rest.
std::pair<std::string_view, std::string_view> split_actor(std::string_view line) {
  auto colon = line.find(": ");
  if (colon == std::string_view::npos || colon == 0 || colon > 40) return {{}, line};
  auto head = line.substr(0, colon);
  if (head.starts_with("node ")) return {"node", line.substr(colon + 2)};
  for (char c : head)
    if (!std::islower(static_cast<unsigned char>(c)) && c != ' ') return {{}, line};
  return {head, line.substr(colon + 2)};
}

class json_formatter final : public spdlog::formatter {
 public:
  explicit json_formatter(log_format_options options) : options_(std::move(options)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto [actor, message] = split_actor({msg.payload.data(), msg.payload.size()});
    nlohmann::ordered_json line{
        {"time", iso_time(msg.time)},
        {"level", std::string{spdlog::level::to_string_view(msg.level).data(),
                              spdlog::level::to_string_view(msg.level).size()}},
        {"node", options_.node}};
    if (!actor.empty()) line["actor"] = actor;
    line["message"] = message;
    if (const auto* f = current_fields) {
      if (f->task_id != 0) line["task_id"] = f->task_id;
      if (f->attempt != 0) line["attempt"] = f->attempt;
      if (!f->type.empty()) line["type"] = f->type;
      if (!f->trace_id.empty()) line["trace_id"] = f->trace_id;
      if (!f->job.empty()) line["job"] = f->job;
    }
    std::string text;
    if (options_.journal_priorities) text = priority_prefix(msg.level);
    // Whatever bytes a message holds, the line stays JSON.
    text += line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    text += '\n';
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<json_formatter>(options_);
  }

 private:
  log_format_options options_;
};

class priority_flag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view prefix = priority_prefix(msg.level);
    dest.append(prefix.data(), prefix.data() + prefix.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<priority_flag>();
  }
};

}  // namespace

log_scope::log_scope(log_fields fields) : fields_(fields), outer_(current_fields) {
  current_fields = &fields_;
}

log_scope::~log_scope() {
  current_fields = outer_;
}

std::unique_ptr<spdlog::formatter> make_log_formatter(const log_format_options& options) {
  if (options.format == "json") return std::make_unique<json_formatter>(options);
  auto text = std::make_unique<spdlog::pattern_formatter>();
  if (options.journal_priorities) {
    // The journal stamps each line itself.
    text->add_flag<priority_flag>('*').set_pattern("%*%-5l %v");
  } else {
    text->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ %v");
  }
  return text;
}

bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (!stream) return false;
  unsigned long long device = 0, inode = 0;
  if (std::sscanf(stream, "%llu:%llu", &device, &inode) != 2) return false;
  struct stat st {};
  return fstat(2, &st) == 0 && st.st_dev == device && st.st_ino == inode;
}

}  // namespace taskmill
