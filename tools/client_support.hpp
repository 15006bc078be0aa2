#pragma once

// What the client subcommands share: showing the API's answers on a
// terminal, calling a node's API, and the options every subcommand takes.

#include "messages/errors.hpp"
#include "tools/client_commands.hpp"
#include "tools/http_fetch.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskmill::client {

using nlohmann::json;

/// Table cells and listing values longer than these are cut short.
constexpr size_t cell_chars = 40;
constexpr size_t value_chars = 200;

/// Every status a task can have, in the order of its life.
constexpr const char* task_statuses[] = {"pending", "running",   "succeeded", "failed",
                                         "dead",    "cancelled", "stopped"};

// -- showing values -----------------------------------------------------------------

/// Characters on screen: UTF-8 code points.
size_t display_width(const std::string& text);
/// At most `max` code points, the cut marked with "...".
std::string shorten(const std::string& text, size_t max);
/// Control characters would break a row in two.
std::string one_line(std::string text);
/// A value as people read it: strings bare, absent or empty as "-", other JSON
/// compact.
std::string shown(const json& value);
/// The field `name` of an object; null when absent.
const json& field(const json& object, const char* name);
/// The array field `name`; empty when absent.
const json& array_field(const json& object, const char* name);
int64_t integer(const json& value);
/// A task status after which nothing runs again unless asked to.
bool finished(const std::string& status);
std::string upper(std::string text);

/// Rows printed in aligned columns.
class table {
 public:
  explicit table(std::vector<std::string> header = {}) {
    if (!header.empty()) rows_.push_back(std::move(header));
  }

  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  void print(std::ostream& out) const {
    std::vector<size_t> widths;
    for (const auto& row : rows_) {
      widths.resize(std::max(widths.size(), row.size()));
      for (size_t i = 0; i < row.size(); ++i)
        widths[i] = std::max(widths[i], display_width(row[i]));
    }
    for (const auto& row : rows_) {
      for (size_t i = 0; i < row.size(); ++i) {
        out << row[i];
        if (i + 1 < row.size()) out << std::string(widths[i] - display_width(row[i]) + 2, ' ');
      }
      out << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

/// What every client subcommand accepts.
struct common_options {
  std::string server = "http://127.0.0.1:8480";
  bool json_output = false;
};

/// A successful answer: the body as sent (for --json) and parsed.
struct answer {
  std::string body;
  json doc;
};

std::string percent_encode(std::string_view text);
/// The API's own message when it sent one; the raw answer otherwise.
std::string failure_message(const fetched& res, const json& doc, const std::string& server);
/// The tasks of an answer ({"tasks": [...]}) as a table.
void print_tasks(const json& doc);
/// A deletion's answer.
void print_deleted(const json& doc);

/// Why a task is not running, as an error answer may tell (the task's read
/// while PostgreSQL is away).
void print_waiting(std::ostream& out, const json& waiting);

/// Calls one node's API with the token from TASKMILL_API_TOKEN. A failed call
/// prints `error: <message>` and returns nothing.
class api_client {
 public:
  explicit api_client(const std::string& server) : server_(server) {
    while (!server_.empty() && server_.back() == '/') server_.pop_back();
    if (const char* token = std::getenv("TASKMILL_API_TOKEN"); token && *token)
      headers_.emplace_back("Authorization", std::string{"Bearer "} + token);
  }

  std::optional<answer> get(const std::string& target) const { return call("GET", target, {}); }

  std::optional<answer> post(const std::string& target) const { return call("POST", target, {}); }

  std::optional<answer> post(const std::string& target, const json& body) const {
    // Invalid UTF-8 from the command line is sent replaced, not refused here.
    return call("POST", target, body.dump(-1, ' ', false, json::error_handler_t::replace));
  }

  std::optional<answer> put(const std::string& target, const json& body) const {
    return call("PUT", target, body.dump(-1, ' ', false, json::error_handler_t::replace));
  }

  std::optional<answer> del(const std::string& target) const { return call("DELETE", target, {}); }

 private:
  std::optional<answer> call(const std::string& method, const std::string& target,
                             const std::string& body) const {
    auto res = http_fetch(method, server_ + target, body, headers_);
    if (!res) {
      std::cerr << "error: " << error_message(res.error()) << " (is a taskmill node listening at "
                << server_ << "?)\n";
      return std::nullopt;
    }
    auto doc = json::parse(res->body, nullptr, false);
    if (res->status / 100 != 2 || doc.is_discarded()) {
      std::cerr << "error: " << failure_message(*res, doc, server_) << "\n";
      print_waiting(std::cerr, field(field(doc, "error"), "waiting"));
      return std::nullopt;
    }
    return answer{std::move(res->body), std::move(doc)};
  }

  std::string server_;
  std::vector<std::pair<std::string, std::string>> headers_;
};

/// Prints the answer: as sent with --json, else with `print`.
int print_answer(const common_options& o, const answer& a, void (*print)(const json&));
/// Prints the answer of a call; a failed call has printed its error already.
int answer_of(const common_options& o, const std::optional<answer>& a, void (*print)(const json&));

// -- command-line checks -------------------------------------------------------------

// CLI11 checks: an empty answer accepts the value, anything else is the complaint.
std::string http_url(const std::string& url);
std::string json_text(const std::string& text);
std::string duration(const std::string& text);

/// --server and --json.
void add_common_options(CLI::App& sub, common_options& o);
/// Registers `sub` to set `chosen` to `run` when it is on the command line.
void on_parsed(CLI::App* sub, client_command& chosen, client_command run);

}  // namespace taskmill::client
