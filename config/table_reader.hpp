#pragma once

// The reader of one TOML table of the config (config/config.cpp).

#include "config/config.hpp"

#include <toml++/toml.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace taskmill {

/// Reads the keys of one TOML table into fields, remembering which keys it
/// consumed so that misspelled options are reported instead of ignored, and
/// every problem it found. Given an echo table, it writes each option there
/// as the node will use it, read or defaulted (what --print-config shows).
class table_reader {
 public:
  table_reader(const toml::table* table, std::string prefix, toml::table* echo = nullptr)
      : table_(table), prefix_(std::move(prefix)), echo_(echo) {}

  const std::vector<std::string>& problems() const { return problems_; }

  /// The reader of sub-table `key`.
  table_reader child(const char* key) { return {table(key), path(key), echo_table(key)}; }

  /// The reader of `node` (which must be a table), found by hand under `key`
  /// of sub-table `parent`: an entry of a map of tables.
  table_reader entry(const char* parent, const toml::node& node, const std::string& key) {
    if (!node.is_table()) return not_a_table(std::string{parent} + "." + key);
    toml::table* echo = nullptr;
    if (auto map = echo_table(parent)) {
      map->insert_or_assign(key, toml::table{});
      echo = map->get_as<toml::table>(key);
    }
    return {node.as_table(), path(std::string{parent} + "." + key), echo};
  }

  /// The reader of `node`, the `index`th table of the array `key`.
  table_reader element(const char* key, const toml::node& node, size_t index) {
    auto where = std::string{key} + "[" + std::to_string(index) + "]";
    if (!node.is_table()) return not_a_table(where);
    toml::table* echo = nullptr;
    if (echo_) {
      if (!echo_->contains(key)) echo_->insert(key, toml::array{});
      auto list = echo_->get_as<toml::array>(key);
      list->push_back(toml::table{});
      echo = list->back().as_table();
    }
    return {node.as_table(), path(where), echo};
  }

  /// Shows `value` as option `key` (one read by hand).
  template <class Value>
  void echo(const char* key, Value&& value) {
    if (echo_) echo_->insert_or_assign(key, std::forward<Value>(value));
  }

  /// Shows `values` as the array option `key`.
  template <class T>
  void echo_list(const char* key, const std::vector<T>& values) {
    toml::array list;
    for (const auto& v : values) list.push_back(v);
    echo(key, std::move(list));
  }

  void read(const char* key, std::string& out) {
    if (auto node = take(key)) {
      if (auto v = node->value<std::string>())
        out = *v;
      else
        fail(key, "must be a string");
    }
    echo(key, out);
  }

  void read(const char* key, bool& out) {
    if (auto node = take(key)) {
      if (auto v = node->value<bool>())
        out = *v;
      else
        fail(key, "must be true or false");
    }
    echo(key, out);
  }

  void read(const char* key, int& out, int min, int max) {
    int64_t wide = out;
    read(key, wide, min, max);
    out = static_cast<int>(wide);
  }

  /// An integer the database checks the range of: only that it is one.
  void read(const char* key, std::optional<int>& out) {
    if (!has(key)) return;
    int value = 0;
    read(key, value, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
    out = value;
  }

  /// A duration the database checks the range of: only that it is one, in
  /// milliseconds a 32-bit integer can hold.
  void read(const char* key, std::optional<milliseconds>& out) {
    if (!has(key)) return;
    milliseconds value{0};
    read(key, value, milliseconds{0}, max_int32_ms);
    out = value;
  }

  bool has(const char* key) const { return table_ && table_->contains(key); }

  void read(const char* key, int64_t& out, int64_t min, int64_t max) {
    if (auto node = take(key)) {
      auto v = node->value<int64_t>();
      if (!v || *v < min || *v > max)
        fail(key, "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
      else
        out = *v;
    }
    echo(key, out);
  }

  void read(const char* key, double& out, double min, double max) {
    if (auto node = take(key)) {
      auto v = node->value<double>();
      if (!v || *v < min || *v > max)
        fail(key, "must be a number from " + std::to_string(min) + " to " + std::to_string(max));
      else
        out = *v;
    }
    echo(key, out);
  }

  void read(const char* key, milliseconds& out, milliseconds min = milliseconds{0},
            milliseconds max = max_duration) {
    auto node = take(key);
    if (!node) return echo(key, duration_text(out));
    caf::expected<milliseconds> parsed = caf::error{};
    if (auto text = node->value<std::string>())
      parsed = parse_duration(*text);
    else if (auto number = node->value<int64_t>())
      parsed = milliseconds{*number};
    if (!parsed || *parsed < min || *parsed > max) {
      fail(key, "must be a duration such as \"250ms\", \"5s\", \"2m\", \"24h\" or \"7d\", from " +
                    std::to_string(min.count()) + "ms to " + std::to_string(max.count()) + "ms");
      return;
    }
    out = *parsed;
    echo(key, duration_text(out));
  }

  const toml::table* table(const char* key) {
    auto node = take(key);
    if (!node) return nullptr;
    if (!node->is_table()) fail(key, "must be a table");
    return node->as_table();
  }

  const toml::array* array(const char* key) {
    auto node = take(key);
    if (!node) return nullptr;
    if (!node->is_array()) fail(key, "must be an array");
    return node->as_array();
  }

  /// A table of names and integers (limits the database checks the range of).
  void read_limits(const char* key, std::map<std::string, int64_t>& out) {
    auto limits = table(key);
    if (!limits) return;
    for (auto&& [name, node] : *limits) {
      auto v = node.value<int64_t>();
      if (!v) return fail(std::string{key} + "." + std::string{name.str()}, "must be an integer");
      out[std::string{name.str()}] = *v;
    }
    toml::table shown;
    for (const auto& [name, limit] : out) shown.insert(name, limit);
    echo(key, std::move(shown));
  }

  const std::string& prefix() const { return prefix_; }

  std::string path(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }

  /// Reports each key nobody read.
  void reject_unknown_keys() {
    if (!table_) return;
    for (auto&& [key, value] : *table_) {
      std::string name{key.str()};
      if (!seen_.count(name)) problems_.push_back("unknown option '" + path(name) + "'");
    }
  }

  void fail(const std::string& key, const std::string& what) {
    // An entry that is no table is that one problem, not one a missing key.
    if (!skipped_) problems_.push_back("'" + path(key) + "' " + what);
  }

  /// Adds the problems another reader found (or one found by hand).
  void add_problems(const std::vector<std::string>& problems) {
    problems_.insert(problems_.end(), problems.begin(), problems.end());
  }
  void add_problem(std::string problem) { problems_.push_back(std::move(problem)); }

  /// The option as it is, or nullptr when absent.
  const toml::node* node(const char* key) { return take(key); }

 private:
  const toml::node* take(const char* key) {
    seen_.insert(key);
    if (!table_) return nullptr;
    return table_->get(key);
  }

  /// Reports `where` (under this table) as not a table, and answers a reader
  /// of nothing that reports nothing.
  table_reader not_a_table(const std::string& where) {
    fail(where, "must be a table");
    table_reader nothing{nullptr, path(where)};
    nothing.skipped_ = true;
    return nothing;
  }

  toml::table* echo_table(const char* key) {
    if (!echo_) return nullptr;
    if (!echo_->contains(key)) echo_->insert(key, toml::table{});
    return echo_->get_as<toml::table>(key);
  }

  /// A duration as the config writes it: "250ms", "5s", "2m", "24h", "7d".
  static std::string duration_text(milliseconds d) {
    auto ms = d.count();
    for (auto [unit, size] :
         {std::pair{"d", 86'400'000LL}, {"h", 3'600'000LL}, {"m", 60'000LL}, {"s", 1'000LL}})
      if (ms != 0 && ms % size == 0) return std::to_string(ms / size) + unit;
    return std::to_string(ms) + "ms";
  }

  const toml::table* table_;
  std::string prefix_;
  toml::table* echo_;
  std::set<std::string> seen_;
  std::vector<std::string> problems_;
  bool skipped_ = false;
};

}  // namespace taskmill
