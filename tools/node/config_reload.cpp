#include "tools/node/config_reload.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace taskmill {

namespace {

using flat = std::map<std::string, std::string>;

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void flatten(const toml::node& node, const std::string& path, flat& out) {
  if (auto table = node.as_table()) {
    for (auto&& [key, value] : *table)
      flatten(value, path.empty() ? std::string{key.str()} : path + "." + std::string{key.str()},
              out);
    return;
  }
  if (auto array = node.as_array(); array && array->is_array_of_tables()) {
    // Jobs and rules by name, so that one removed does not shift the rest.
    for (size_t i = 0; i < array->size(); ++i) {
      auto name = (*array)[i].as_table()->get_as<std::string>("name");
      flatten((*array)[i], path + "[" + (name ? name->get() : std::to_string(i)) + "]", out);
    }
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

/// The entry of a map or list of tables that `option` belongs to
/// ("jobs[nightly]", "types.A", "alerts.jobs.nightly"), or empty.
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
    end = option.find('.', i == 0 ? 0 : end + 1);
    if (end == std::string::npos) return i + 1 == segments ? option : std::string{};
  }
  return option.substr(0, end);
}

bool has_entry(const flat& options, const std::string& entry) {
  auto within = entry + ".";
  auto it = options.lower_bound(within);
  return options.count(entry) || (it != options.end() && starts_with(it->first, within));
}

/// What differs from `before` to `after`: an entry added or removed whole
/// once, by its name.
std::set<std::string> differences(const flat& before, const flat& after) {
  std::set<std::string> out;
  auto note = [&](const std::string& option) {
    auto entry = entry_of(option);
    out.insert(!entry.empty() && (!has_entry(before, entry) || !has_entry(after, entry)) ? entry
                                                                                         : option);
  };
  for (const auto& [option, value] : after)
    if (auto it = before.find(option); it == before.end() || it->second != value) note(option);
  for (const auto& [option, value] : before)
    if (!after.count(option)) note(option);
  return out;
}

bool any_starts_with(const std::vector<std::string>& options,
                     std::initializer_list<const char*> prefixes) {
  for (const auto& option : options)
    for (const char* prefix : prefixes)
      if (starts_with(option, prefix)) return true;
  return false;
}

}  // namespace

bool config_changes::takes_log_level() const {
  return any_starts_with(taken, {"node.log_level"});
}

bool config_changes::takes_database_settings() const {
  return any_starts_with(
      taken, {"scheduling.global_limit", "defaults.", "types.", "key_spaces.", "jobs["});
}

bool config_changes::takes_alert_rules() const {
  return any_starts_with(taken, {"alerts."});
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

config_changes compare_configs(const std::string& started, const std::string& applied,
                               const std::string& fresh) {
  auto now = flattened(fresh);
  auto last = flattened(applied);
  config_changes changes;
  for (const auto& option : differences(last, now)) {
    if (!taken_on_reload(option)) continue;
    bool gone = option == entry_of(option) && !has_entry(now, option);
    if (gone && (starts_with(option, "jobs[") || starts_with(option, "key_spaces.")))
      changes.stay.push_back(option);
    else
      changes.taken.push_back(option);
  }
  for (const auto& option : differences(flattened(started), now))
    if (!taken_on_reload(option)) changes.need_restart.push_back(option);
  return changes;
}

}  // namespace taskmill
