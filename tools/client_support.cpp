#include "tools/client_support.hpp"

#include "config/config.hpp"
#include "messages/errors.hpp"
#include "messages/time.hpp"

namespace taskmill::client {

namespace {

bool continuation_byte(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

}  // namespace

/// Characters on screen: UTF-8 code points.
size_t display_width(const std::string& text) {
  return std::count_if(text.begin(), text.end(), [](char c) { return !continuation_byte(c); });
}

/// At most `max` code points, the cut marked with "...".
std::string shorten(const std::string& text, size_t max) {
  if (display_width(text) <= max) return text;
  size_t kept = 0;
  size_t end = 0;
  while (end < text.size() && kept < max - 3) {
    ++end;
    while (end < text.size() && continuation_byte(text[end])) ++end;
    ++kept;
  }
  return text.substr(0, end) + "...";
}

/// Control characters would break a row in two.
std::string one_line(std::string text) {
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c >= 0 && c < 0x20; }, ' ');
  return text;
}

/// A value as people read it: strings bare, absent or empty as "-", other JSON
/// compact.
std::string shown(const json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    return text.empty() ? "-" : one_line(text);
  }
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// The field `name` of an object; null when absent.
const json& field(const json& object, const char* name) {
  static const json absent;
  if (!object.is_object()) return absent;
  auto it = object.find(name);
  return it == object.end() ? absent : *it;
}

/// The array field `name`; empty when absent.
const json& array_field(const json& object, const char* name) {
  static const json none = json::array();
  const auto& value = field(object, name);
  return value.is_array() ? value : none;
}

bool finished(const std::string& status) {
  return status == "succeeded" || status == "dead" || status == "cancelled" || status == "stopped";
}

int64_t integer(const json& value) {
  return value.is_number_integer() ? value.get<int64_t>() : 0;
}

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](char c) {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
  });
  return text;
}

std::string percent_encode(std::string_view text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out += c;
    } else {
      auto byte = static_cast<unsigned char>(c);
      out += {'%', hex[byte >> 4], hex[byte & 15]};
    }
  }
  return out;
}

/// The API's own message when it sent one; the raw answer otherwise.
std::string failure_message(const fetched& res, const json& doc, const std::string& server) {
  const auto& message = field(field(doc, "error"), "message");
  if (message.is_string()) return message.get<std::string>();
  return "unexpected answer from " + server + " (HTTP " + std::to_string(res.status) +
         "): " + shorten(one_line(res.body), value_chars);
}

/// Why a task is not running, as an error answer may tell (the task's read
/// while PostgreSQL is away).
void print_waiting(std::ostream& out, const json& waiting) {
  if (!waiting.is_object()) return;
  out << "waiting: " << shown(field(waiting, "reason")) << "\n"
      << "why: " << shown(field(waiting, "message")) << "\n";
}

/// Prints the answer: as sent with --json, else with `print`.
int print_answer(const common_options& o, const answer& a, void (*print)(const json&)) {
  if (o.json_output)
    std::cout << a.body << "\n";
  else
    print(a.doc);
  return EXIT_SUCCESS;
}

/// Prints the answer of a call; a failed call has printed its error already.
int answer_of(const common_options& o, const std::optional<answer>& a, void (*print)(const json&)) {
  return a ? print_answer(o, *a, print) : EXIT_FAILURE;
}

// CLI11 checks: an empty answer accepts the value, anything else is the complaint.

std::string http_url(const std::string& url) {
  if (url.rfind("http://", 0) == 0) return {};
  return "must be an http:// URL such as http://127.0.0.1:8480";
}

std::string json_text(const std::string& text) {
  if (!json::parse(text, nullptr, false).is_discarded()) return {};
  return "must be valid JSON, e.g. '{\"n\": 1}' or '\"text\"'";
}

std::string duration(const std::string& text) {
  if (parse_duration(text)) return {};
  return "must be a duration such as 30s, 5m, 2h or 1d (a bare number is milliseconds)";
}

void add_common_options(CLI::App& sub, common_options& o) {
  sub.add_option("--server", o.server, "The node's HTTP API")
      ->capture_default_str()
      ->check(CLI::Validator{http_url, "URL"});
  sub.add_flag("--json", o.json_output, "Print the API's JSON answer as is");
}

/// Registers `sub` to set `chosen` to `run` when it is on the command line.
void on_parsed(CLI::App* sub, client_command& chosen, client_command run) {
  sub->callback([&chosen, run = std::move(run)] { chosen = run; });
}

void print_tasks(const json& doc) {
  table rows{{"ID", "TYPE", "KEY", "STATUS", "PRIORITY", "ATTEMPT", "EXECUTE_AT", "PAYLOAD"}};
  for (const auto& task : array_field(doc, "tasks"))
    rows.add({shown(field(task, "id")), shorten(shown(field(task, "type")), cell_chars),
              shorten(shown(field(task, "key")), cell_chars), shown(field(task, "status")),
              shown(field(task, "priority")), shown(field(task, "attempt")),
              shown(field(task, "execute_at")),
              shorten(shown(field(task, "payload")), cell_chars)});
  rows.print(std::cout);
}

void print_deleted(const json&) {
  std::cout << "deleted\n";
}

}  // namespace taskmill::client
