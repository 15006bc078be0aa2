#include "tools/node/config_reload.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace taskmill {

namespace {

using flat = std::map<std::string, std::string>;

void flatten(const toml::node& node, const std::string& path, flat& out) {
  if (auto table = node.as_table()) {
    for (auto&& [key, value] : *table)
      flatten(value, path.empty() ? std::string{key.str()} : path + "." + std::string{key.str()},
              out);
    return;
  }
  if (auto array = node.as_array(); array && array->is_array_of_tables()) {
    for (size_t i = 0; i < array->size(); ++i)
      flatten((*array)[i], path + "[" + std::to_string(i) + "]", out);
    return;
  }
  std::ostringstream text;
  if (auto array = node.as_array())
    text << *array;
  else
    node.visit([&](auto&& v) { text << v; });
  out[path] = text.str();
}

flat flattened(const std::string& text) {
  flat out;
  flatten(toml::parse(text), "", out);
  return out;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The entry of a map or list of tables that `option` belongs to ("jobs[2]",
/// "types.A", "alerts.jobs.nightly"), or empty.
std::string entry_of(const std::string& option) {
  if (starts_with(option, "jobs[") || starts_with(option, "reconciler.rules["))
    return option.substr(0, option.find(']') + 1);
  size_t segments = starts_with(option, "types.") || starts_with(option, "key_spaces.") ? 2
                    : starts_with(option, "alerts.types.") || starts_with(option, "alerts.jobs.")
                        ? 3
                        : 0;
  if (segments == 0) return {};
  size_t end = 0;
  for (size_t i = 0; i < segments; ++i) {
    end = option.find('.', end == 0 && i == 0 ? 0 : end + 1);
    if (end == std::string::npos) return i + 1 == segments ? option : std::string{};
  }
  return option.substr(0, end);
}

bool has_entry(const flat& options, const std::string& entry) {
  auto it = options.lower_bound(entry);
  return it != options.end() && starts_with(it->first, entry) &&
         (it->first.size() == entry.size() || it->first[entry.size()] == '.');
}

}  // namespace

bool config_changes::takes(const std::string& prefix) const {
  for (const auto& option : taken)
    if (starts_with(option, prefix)) return true;
  return false;
}

bool taken_on_reload(const std::string& option) {
  if (option == "node.log_level" || option == "scheduling.global_limit") return true;
  // A type added or removed whole: which types this node runs, and how.
  if (starts_with(option, "types.") && entry_of(option) == option) return false;
  if (starts_with(option, "types.") || starts_with(option, "defaults.")) {
    // The dispatcher runs tasks with the executors it started with.
    for (const char* executed : {".executor", ".url", ".cancel_url", ".max_timeout"})
      if (ends_with(option, executed)) return false;
    return true;
  }
  if (starts_with(option, "key_spaces.") || starts_with(option, "jobs[")) return true;
  // The rules; the webhooks and timings stay as the alerter started.
  if (starts_with(option, "alerts.types.") || starts_with(option, "alerts.jobs.")) return true;
  for (const char* rule : {"alerts.dead_task", "alerts.failure_rate", "alerts.record_failure_rate",
                           "alerts.missed_firings", "alerts.pending_after"})
    if (option == rule) return true;
  return false;
}

config_changes compare_configs(const std::string& before, const std::string& after) {
  auto old_options = flattened(before);
  auto new_options = flattened(after);
  config_changes changes;
  std::set<std::string> noted;
  // An entry added or removed whole is one change, not one an option.
  auto note = [&](const std::string& option) {
    auto entry = entry_of(option);
    auto name = !entry.empty() && (!has_entry(old_options, entry) || !has_entry(new_options, entry))
                    ? entry
                    : option;
    if (noted.insert(name).second)
      (taken_on_reload(name) ? changes.taken : changes.need_restart).push_back(name);
  };
  for (const auto& [option, value] : new_options)
    if (auto it = old_options.find(option); it == old_options.end() || it->second != value)
      note(option);
  for (const auto& [option, value] : old_options)
    if (!new_options.count(option)) note(option);
  std::sort(changes.taken.begin(), changes.taken.end());
  std::sort(changes.need_restart.begin(), changes.need_restart.end());
  return changes;
}

}  // namespace taskmill
