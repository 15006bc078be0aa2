// Key spaces as JSON (SPEC §4 Keyed limits): the body that puts one, a
// space with its use and top keys, and one key with its tasks.

#include "messages/json_codec.hpp"
#include "messages/json_objects.hpp"

namespace taskmill::json {

namespace {

/// {"name": limit, ...} into `out`, each limit an integer.
void read_limits(object_reader& r, const char* field,
                 google::protobuf::Map<std::string, int64_t>& out) {
  auto v = r.find(field);
  if (!v) return;
  if (!v->is_object()) return r.fail(r.path(field) + " must be an object of limits");
  object_reader limits{*v, r.path(field)};
  for (const auto& [name, value] : v->items()) {
    if (value.is_null()) limits.fail(limits.path(name) + " must be an integer");
    if (auto limit = limits.integer(name.c_str(), INT64_MIN, INT64_MAX)) out[name] = *limit;
  }
  if (auto err = limits.error()) r.fail(error_message(err));
}

json limits_json(const google::protobuf::Map<std::string, int64_t>& limits) {
  json out = json::object();
  for (const auto& [name, limit] : limits) out[name] = limit;
  return out;
}

json key_json(const pb::KeyState& k) {
  return json{{"key", k.key()},         {"key_class", text_or_null(k.key_class())},
              {"limit", k.limit()},     {"limit_from", k.limit_from()},
              {"running", k.running()}, {"due", k.due()}};
}

json keys_json(const google::protobuf::RepeatedPtrField<pb::KeyState>& keys) {
  json out = json::array();
  for (const auto& k : keys) out.push_back(key_json(k));
  return out;
}

json space_json(const pb::KeySpaceState& state, bool with_top_keys) {
  const auto& s = state.settings();
  json out{{"name", s.name()},
           {"limit", s.limit()},
           {"keys", limits_json(s.keys())},
           {"class_path", text_or_null(s.class_path())},
           {"classes", limits_json(s.classes())},
           {"rate", s.has_rate() ? json(s.rate()) : json(nullptr)},
           {"period_ms", s.has_period_ms() ? json(s.period_ms()) : json(nullptr)},
           {"types", std::vector<std::string>(state.types().begin(), state.types().end())},
           {"running", state.running()},
           {"keys_running", state.keys_running()},
           {"updated_at", time_or_null(state.updated_at(), state.has_updated_at())}};
  if (with_top_keys) {
    out["top_running"] = keys_json(state.top_running());
    out["top_due"] = keys_json(state.top_due());
    out["due_capped"] = state.due_capped();
    out["due_counted_up_to"] = state.due_counted_up_to();
  }
  return out;
}

}  // namespace

// The rules on the values are taskmill.key_space_problem's
// (storage/sql/keys.sql), which names the field of the config they share.
caf::expected<pb::KeySpace> decode_key_space(std::string_view body) {
  auto doc = parse_body(body);
  if (!doc) return doc.error();
  object_reader r{*doc, ""};
  pb::KeySpace out;
  if (auto v = r.text("name")) out.set_name(*v);
  auto limit = r.integer("limit", INT64_MIN, INT64_MAX);
  if (limit) out.set_limit(*limit);
  read_limits(r, "keys", *out.mutable_keys());
  if (auto v = r.text("class_path")) out.set_class_path(*v);
  read_limits(r, "classes", *out.mutable_classes());
  if (auto v = r.integer("rate", INT64_MIN, INT64_MAX)) out.set_rate(*v);
  if (auto v = r.integer("period_ms", INT64_MIN, INT64_MAX)) out.set_period_ms(*v);
  if (auto err = r.finish()) return err;
  if (!limit) return bad("limit is required");
  return out;
}

std::string encode(const pb::KeySpaceList& list) {
  json spaces = json::array();
  for (const auto& s : list.key_spaces()) spaces.push_back(space_json(s, false));
  return dump(json{{"key_spaces", spaces}});
}

std::string encode(const pb::KeySpaceState& space) {
  return dump(space_json(space, true));
}

std::string encode(const pb::KeySpacePutResult& result) {
  return dump(
      json{{"created", result.created()}, {"key_space", space_json(result.key_space(), false)}});
}

std::string encode(const pb::KeyState& key) {
  auto head = key_json(key);
  head["space"] = key.space();
  head["later"] = key.later();
  head["waiting_capped"] = key.waiting_capped();
  head["counted_up_to"] = key.counted_up_to();
  head["rate_used"] = key.has_rate_used() ? json(key.rate_used()) : json(nullptr);
  head["rate_opens_at"] = time_or_null(key.rate_opens_at(), key.has_rate_opens_at());
  auto out = dump(head);
  out.pop_back();
  out += ",\"tasks\":[";
  for (int i = 0; i < key.tasks_size(); ++i) {
    if (i > 0) out += ',';
    write_task(out, key.tasks(i));
  }
  return out + "]}";
}

}  // namespace taskmill::json
