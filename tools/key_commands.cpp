// `taskmill keys ...` (SPEC §4 Keyed limits): calls to the key space
// endpoints of a node's API.

#include "tools/client_commands.hpp"

#include "tools/client_support.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace taskmill {

namespace {

using namespace client;

void print_limits(const json& space) {
  table listing;
  for (const char* name : {"name", "limit", "keys", "class_path", "classes", "rate", "period_ms",
                           "types", "running", "keys_running", "updated_at"})
    listing.add({std::string{name} + ":", shorten(shown(field(space, name)), value_chars)});
  listing.print(std::cout);
}

void print_top_keys(const char* title, const json& keys) {
  std::cout << "\n" << title << "\n";
  table rows{{"KEY", "CLASS", "RUNNING", "LIMIT", "LIMIT_FROM", "DUE"}};
  for (const auto& k : keys)
    rows.add({shorten(shown(field(k, "key")), cell_chars), shown(field(k, "key_class")),
              shown(field(k, "running")), shown(field(k, "limit")), shown(field(k, "limit_from")),
              shown(field(k, "due"))});
  rows.print(std::cout);
}

void print_space(const json& space) {
  print_limits(space);
  print_top_keys("running most:", array_field(space, "top_running"));
  auto title = std::string{"most due"};
  if (field(space, "due_capped").get<bool>())
    title += " (among the first " + shown(field(space, "due_counted_up_to")) +
             " waiting tasks by level and key)";
  print_top_keys((title + ":").c_str(), array_field(space, "top_due"));
}

void print_spaces(const json& doc) {
  table rows{{"NAME", "LIMIT", "RATE", "PERIOD_MS", "TYPES", "RUNNING", "KEYS_RUNNING"}};
  for (const auto& s : array_field(doc, "key_spaces"))
    rows.add({shown(field(s, "name")), shown(field(s, "limit")), shown(field(s, "rate")),
              shown(field(s, "period_ms")), shorten(shown(field(s, "types")), cell_chars),
              shown(field(s, "running")), shown(field(s, "keys_running"))});
  rows.print(std::cout);
}

void print_put(const json& doc) {
  std::cout << (field(doc, "created").get<bool>() ? "created" : "changed") << "\n";
  print_limits(field(doc, "key_space"));
}

void print_key(const json& key) {
  table listing;
  for (const char* name : {"space", "key", "key_class", "limit", "limit_from", "running", "due",
                           "later", "waiting_capped", "rate_used", "rate_opens_at"})
    listing.add({std::string{name} + ":", shorten(shown(field(key, name)), value_chars)});
  listing.print(std::cout);
  std::cout << "\n";
  print_tasks(key);
}

struct key_options {
  common_options common;
  std::string space;
  std::string key;
  std::optional<int> count;
  std::optional<int64_t> limit;
  std::vector<std::string> key_limits;
  std::string class_path;
  std::vector<std::string> class_limits;
  std::optional<int64_t> rate;
  std::optional<int64_t> period_ms;
};

std::string space_path(const key_options& o) {
  return "/v1/key-spaces/" + percent_encode(o.space);
}

/// NAME=N, as its parts (the last '=' splits: a key may hold one).
std::pair<std::string, int64_t> named_limit(const std::string& text) {
  auto eq = text.rfind('=');
  return {text.substr(0, eq), std::stoll(text.substr(eq + 1))};
}

std::string named_limit_problem(const std::string& text) {
  auto eq = text.rfind('=');
  if (eq == std::string::npos) return "must be NAME=N, such as acme=50";
  auto digits = text.substr(eq + 1);
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return "must be NAME=N with N a whole number, such as acme=50";
  return {};
}

json limits_body(const std::vector<std::string>& limits) {
  json out = json::object();
  for (const auto& l : limits) {
    auto [name, n] = named_limit(l);
    out[name] = n;
  }
  return out;
}

json space_body(const key_options& o) {
  json body{{"limit", *o.limit}};
  if (!o.key_limits.empty()) body["keys"] = limits_body(o.key_limits);
  if (!o.class_path.empty()) body["class_path"] = o.class_path;
  if (!o.class_limits.empty()) body["classes"] = limits_body(o.class_limits);
  if (o.rate) body["rate"] = *o.rate;
  if (o.period_ms) body["period_ms"] = *o.period_ms;
  return body;
}

/// `taskmill keys ACTION SPACE ...`: one call and its printer, with the
/// options `add_options` adds.
void add_key_action(CLI::App& keys, client_command& chosen, const char* action,
                    const char* description, void (*add_options)(CLI::App&, key_options&),
                    std::optional<answer> (*call)(const api_client&, const key_options&),
                    void (*print)(const json&)) {
  auto o = std::make_shared<key_options>();
  auto sub = keys.add_subcommand(action, description);
  add_common_options(*sub, o->common);
  sub->add_option("SPACE", o->space, "Key space name")->required();
  add_options(*sub, *o);
  on_parsed(sub, chosen, [o, call, print] {
    return answer_of(o->common, call(api_client{o->common.server}, *o), print);
  });
}

void no_options(CLI::App&, key_options&) {}

void put_options(CLI::App& sub, key_options& o) {
  sub.add_option("--limit", o.limit, "Running tasks per key (1 to 1000000)")->required();
  CLI::Validator named{named_limit_problem, "NAME=N"};
  sub.add_option("--key-limit", o.key_limits, "A named key's own limit: KEY=N (repeatable)")
      ->check(named);
  sub.add_option("--class-path", o.class_path, "A payload path whose value is a task's class");
  sub.add_option("--class-limit", o.class_limits, "A class's limit: CLASS=N (repeatable)")
      ->check(named);
  sub.add_option("--rate", o.rate, "Units a key may start in any window of the period");
  sub.add_option("--period-ms", o.period_ms, "The rate's window, in milliseconds");
}

}  // namespace

void add_key_commands(CLI::App& app, client_command& chosen) {
  auto keys = app.add_subcommand("keys", "Key spaces and their keys: list, show, key, put, delete");
  keys->require_subcommand(1);
  auto list = keys->add_subcommand("list", "List the key spaces");
  auto list_options = std::make_shared<common_options>();
  add_common_options(*list, *list_options);
  on_parsed(list, chosen, [list_options] {
    return answer_of(*list_options, api_client{list_options->server}.get("/v1/key-spaces"),
                     print_spaces);
  });
  add_key_action(
      *keys, chosen, "show", "A key space with its keys running most and with most due tasks",
      [](CLI::App& sub, key_options& o) {
        sub.add_option("--top", o.count, "Keys in each ranking (1 to 100, default 10)");
      },
      [](const api_client& api, const key_options& o) {
        auto query = o.count ? "?top=" + std::to_string(*o.count) : std::string{};
        return api.get(space_path(o) + query);
      },
      print_space);
  add_key_action(
      *keys, chosen, "key", "One key: its limit, use, rate and tasks",
      [](CLI::App& sub, key_options& o) {
        sub.add_option("KEY", o.key, "The key (\"\": that of tasks given none)")->required();
        sub.add_option("--tasks", o.count, "Running and waiting tasks shown (1 to 100 of each)");
      },
      [](const api_client& api, const key_options& o) {
        auto query = o.count ? "?tasks=" + std::to_string(*o.count) : std::string{};
        return api.get(space_path(o) + "/keys/" + percent_encode(o.key) + query);
      },
      print_key);
  add_key_action(
      *keys, chosen, "put", "Create or change a key space (a change holds at once on every node)",
      put_options,
      [](const api_client& api, const key_options& o) {
        return api.put(space_path(o), space_body(o));
      },
      print_put);
  add_key_action(
      *keys, chosen, "delete", "Delete a key space no type is keyed in", no_options,
      [](const api_client& api, const key_options& o) { return api.del(space_path(o)); },
      print_deleted);
}

}  // namespace taskmill
