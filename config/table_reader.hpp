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

namespace taskmill {

/// Reads the keys of one TOML table into fields, remembering which keys it
/// consumed so that misspelled options are reported instead of ignored.
class table_reader {
 public:
  table_reader(const toml::table* table, std::string prefix)
      : table_(table), prefix_(std::move(prefix)) {}

  const std::string& error() const { return error_; }

  void read(const char* key, std::string& out) {
    if (auto node = take(key)) {
      if (auto v = node->value<std::string>())
        out = *v;
      else
        fail(key, "must be a string");
    }
  }

  void read(const char* key, bool& out) {
    if (auto node = take(key)) {
      if (auto v = node->value<bool>())
        out = *v;
      else
        fail(key, "must be true or false");
    }
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
  }

  void read(const char* key, double& out, double min, double max) {
    if (auto node = take(key)) {
      auto v = node->value<double>();
      if (!v || *v < min || *v > max)
        fail(key, "must be a number from " + std::to_string(min) + " to " + std::to_string(max));
      else
        out = *v;
    }
  }

  void read(const char* key, milliseconds& out, milliseconds min = milliseconds{0},
            milliseconds max = max_duration) {
    auto node = take(key);
    if (!node) return;
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
  }

  std::string path(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }

  /// Reports the first key nobody read.
  void reject_unknown_keys() {
    if (!table_ || !error_.empty()) return;
    for (auto&& [key, value] : *table_) {
      std::string name{key.str()};
      if (!seen_.count(name)) {
        error_ = "unknown option '" + path(name) + "'";
        return;
      }
    }
  }

  void fail(const std::string& key, const std::string& what) {
    if (error_.empty()) error_ = "'" + path(key) + "' " + what;
  }

  /// The option as it is, or nullptr when absent.
  const toml::node* node(const char* key) { return take(key); }

 private:
  const toml::node* take(const char* key) {
    seen_.insert(key);
    if (!table_) return nullptr;
    return table_->get(key);
  }

  const toml::table* table_;
  std::string prefix_;
  std::set<std::string> seen_;
  std::string error_;
};

}  // namespace taskmill
