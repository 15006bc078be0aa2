#include "actors/http/key_endpoints.hpp"

namespace taskmill::api_call {

void list_key_spaces(self_ptr self, call_ptr c) {
  if (auto err = no_query_parameters(*c)) return fail(self, *c, err);
  ask<pb::KeySpaceList>(
      self, c, self->state.options.keys,
      [self](const call& c, const pb::KeySpaceList& l) { answer(self, c, l); }, key_spaces_atom_v);
}

void get_key_space(self_ptr self, call_ptr c) {
  auto top = count_parameter(*c, "top", 10, 100);
  if (!top) return fail(self, *c, top.error());
  ask<pb::KeySpaceState>(
      self, c, self->state.options.keys,
      [self](const call& c, const pb::KeySpaceState& s) { answer(self, c, s); }, key_space_atom_v,
      c->path[2], *top);
}

void put_key_space(self_ptr self, call_ptr c) {
  if (auto err = no_query_parameters(*c)) return fail(self, *c, err);
  const auto& name = c->path[2];
  auto space =
      c->protobuf_in ? decode_protobuf<pb::KeySpace>(*c) : json::decode_key_space(c->req.body);
  if (!space) return fail(self, *c, space.error());
  if (!space->name().empty() && space->name() != name)
    return fail(self, *c,
                make_error(errc::invalid_argument, "name " + quote_input(space->name()) +
                                                       " differs from the name in the path"));
  space->set_name(name);
  ask<pb::KeySpacePutResult>(
      self, c, self->state.options.keys,
      [self](const call& c, const pb::KeySpacePutResult& r) {
        answer(
            self, c, r, [](const pb::KeySpacePutResult& m) { return json::encode(m); },
            r.created() ? 201 : 200);
      },
      put_key_space_atom_v, std::move(*space));
}

void delete_key_space(self_ptr self, call_ptr c) {
  if (auto err = no_query_parameters(*c)) return fail(self, *c, err);
  const auto& name = c->path[2];
  ask<bool>(
      self, c, self->state.options.keys,
      [self, name](const call& c, bool deleted) {
        if (!deleted) return fail(self, c, make_error(errc::not_found, "no key space " + name));
        send(self, c, http_response{200, "application/json", R"({"deleted":true})"});
      },
      drop_key_space_atom_v, name);
}

void get_key(self_ptr self, call_ptr c) {
  auto tasks = count_parameter(*c, "tasks", 20, 100);
  if (!tasks) return fail(self, *c, tasks.error());
  ask<pb::KeyState>(
      self, c, self->state.options.keys,
      [self](const call& c, const pb::KeyState& k) { answer(self, c, k); }, key_atom_v, c->path[2],
      c->path.size() > 4 ? c->path[4] : std::string{}, *tasks);
}

}  // namespace taskmill::api_call
