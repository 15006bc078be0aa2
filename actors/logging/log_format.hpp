#pragma once

// How a node's log lines look (node.log_format), and the fields a line about
// one task or job carries.
//
// Every line starts with the actor that writes it and a colon ("pusher:
// cannot claim: ..."); a node's own lines name it ("node n1: ..."). JSON
// lines split that off into "actor". Nothing is logged per task at info
// level or above on the way from a claim to an outcome: a line per task is
// debug (an attempt that failed or is to be retried, with its trace id), or
// a warning of something gone wrong with that task.

#include <spdlog/formatter.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace taskmill {

/// What a line is about, beyond its message.
struct log_fields {
  int64_t task_id = 0;
  int32_t attempt = 0;
  std::string_view type;
  /// The task's W3C trace-id, which its HTTP executor's call carries too.
  std::string_view trace_id;
  std::string_view job;

  static log_fields of_attempt(int64_t task_id, int32_t attempt, std::string_view type,
                               std::string_view trace_id = {}) {
    log_fields f;
    f.task_id = task_id;
    f.attempt = attempt;
    f.type = type;
    f.trace_id = trace_id;
    return f;
  }
  static log_fields of_job(std::string_view job) {
    log_fields f;
    f.job = job;
    return f;
  }
};

/// Lines logged by this thread while it lives carry `fields` (in JSON; the
/// texts they view must outlive it).
class log_scope {
 public:
  explicit log_scope(log_fields fields);
  ~log_scope();
  log_scope(const log_scope&) = delete;
  log_scope& operator=(const log_scope&) = delete;

 private:
  log_fields fields_;
  const log_fields* outer_;
};

struct log_format_options {
  /// "text" or "json".
  std::string format = "text";
  /// The node's name, in every JSON line.
  std::string node;
  /// Each line starts with its syslog priority ("<4>"), which journald
  /// takes for the line's and strips.
  bool journal_priorities = false;
};

/// The formatter of a node's log lines.
std::unique_ptr<spdlog::formatter> make_log_formatter(const log_format_options& options);

/// Whether standard error is the systemd journal's stream ($JOURNAL_STREAM
/// names its device and inode).
bool stderr_is_journal();

}  // namespace taskmill
