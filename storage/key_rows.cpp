#include "storage/key_rows.hpp"

#include "messages/time.hpp"
#include "storage/rows.hpp"

#include <nlohmann/json.hpp>

#include <map>

namespace taskmill::db {

namespace {

using nlohmann::json;

/// A JSON object of limits ({"acme": 50}) into a map of them.
void read_limits(const result& res, int row, int col,
                 google::protobuf::Map<std::string, int64_t>* out) {
  auto limits = json::parse(res.text(row, col), nullptr, false);
  if (!limits.is_object()) return;
  for (const auto& [name, limit] : limits.items())
    if (limit.is_number_integer()) (*out)[name] = limit.get<int64_t>();
}

void read_key(const result& res, int row, const std::string& space, pb::KeyState* out) {
  out->set_space(space);
  if (!res.is_null(row, res.column("key_class")))
    out->set_key_class(res.string(row, res.column("key_class")));
  out->set_limit(res.int64(row, res.column("key_limit")));
  out->set_limit_from(res.string(row, res.column("limit_from")));
  out->set_running(res.int64(row, res.column("running")));
  out->set_due(res.int64(row, res.column("due")));
}

}  // namespace

std::string key_space_json(const pb::KeySpace& k) {
  json space{{"name", k.name()}, {"limit", k.limit()}};
  if (!k.keys().empty())
    space["keys"] = std::map<std::string, int64_t>(k.keys().begin(), k.keys().end());
  if (!k.class_path().empty()) space["class_path"] = k.class_path();
  if (!k.classes().empty())
    space["classes"] = std::map<std::string, int64_t>(k.classes().begin(), k.classes().end());
  if (k.has_rate()) space["rate"] = k.rate();
  if (k.has_period_ms()) space["period_ms"] = k.period_ms();
  return space.dump();
}

void read_key_space_state(const result& res, int row, pb::KeySpaceState* out) {
  auto* s = out->mutable_settings();
  s->set_name(res.string(row, res.column("name")));
  s->set_limit(res.int64(row, res.column("key_limit")));
  read_limits(res, row, res.column("key_limits"), s->mutable_keys());
  if (auto c = res.column("class_path"); !res.is_null(row, c))
    s->set_class_path(res.string(row, c));
  read_limits(res, row, res.column("class_limits"), s->mutable_classes());
  if (auto c = res.column("rate"); !res.is_null(row, c)) {
    s->set_rate(res.int64(row, c));
    s->set_period_ms(res.int64(row, res.column("rate_period_ms")));
  }
  set_micros(out->mutable_updated_at(), res.micros(row, res.column("updated_at")));
  auto types = json::parse(res.text(row, res.column("types")), nullptr, false);
  if (types.is_array())
    for (const auto& t : types)
      if (t.is_string()) out->add_types(t.get<std::string>());
  out->set_running(res.int64(row, res.column("running")));
  out->set_keys_running(res.int64(row, res.column("keys_running")));
}

void read_top_keys(const result& res, const std::string& space, pb::KeySpaceState* out) {
  for (int row = 0; row < res.rows(); ++row) {
    if (res.boolean(row, res.column("due_capped"))) out->set_due_capped(true);
    auto ranked_by = res.column("ranked_by");
    if (res.is_null(row, ranked_by)) continue;  // no key to show
    auto* key = res.text(row, ranked_by) == "running" ? out->add_top_running() : out->add_top_due();
    key->set_key(res.string(row, res.column("key")));
    read_key(res, row, space, key);
  }
}

pb::KeyState read_key_state(const result& view, const result& tasks, const std::string& space,
                            const std::string& key) {
  pb::KeyState out;
  out.set_key(key);
  read_key(view, 0, space, &out);
  out.set_later(view.int64(0, view.column("later")));
  out.set_waiting_capped(view.boolean(0, view.column("capped")));
  if (auto c = view.column("rate_used"); !view.is_null(0, c)) out.set_rate_used(view.int64(0, c));
  if (auto c = view.column("rate_opens_at"); !view.is_null(0, c))
    set_micros(out.mutable_rate_opens_at(), view.micros(0, c));
  task_columns cols{tasks};
  for (int row = 0; row < tasks.rows(); ++row) read_task(tasks, row, cols, out.add_tasks());
  return out;
}

}  // namespace taskmill::db
