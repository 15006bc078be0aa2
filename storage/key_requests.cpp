// The requests of key spaces (SPEC §4 Keyed limits).

#include "storage/storage_internal.hpp"

#include "messages/errors.hpp"
#include "storage/key_rows.hpp"

namespace taskmill::storage_internal {

namespace {

/// Waiting tasks of a space counted for its top keys, and of a key for its
/// counts: read from the index alone, so that a console polling them costs
/// a bounded time whatever the backlog.
constexpr int32_t counted_up_to = 100'000;

caf::error no_space(const std::string& name) {
  return make_error(errc::not_found, "no key space " + name);
}

}  // namespace

caf::result<pb::KeySpaceList> list_key_spaces(self_ptr self) {
  return ask_db<pb::KeySpaceList>(self, {db::call{&db::sql::key_space_views, {db::param{}}}},
                                  [](results& rs) -> caf::expected<pb::KeySpaceList> {
                                    pb::KeySpaceList out;
                                    for (int row = 0; row < rs[0]->rows(); ++row)
                                      db::read_key_space_state(*rs[0], row, out.add_key_spaces());
                                    return out;
                                  });
}

caf::result<pb::KeySpaceState> get_key_space(self_ptr self, const std::string& name, int32_t top) {
  return ask_db<pb::KeySpaceState>(
      self,
      {db::call{&db::sql::key_space_views, {name}},
       db::call{&db::sql::top_keys, {name, std::to_string(top), std::to_string(counted_up_to)}}},
      [name](results& rs) -> caf::expected<pb::KeySpaceState> {
        if (rs[0]->rows() == 0) return no_space(name);
        pb::KeySpaceState out;
        db::read_key_space_state(*rs[0], 0, &out);
        db::read_top_keys(*rs[1], name, &out);
        out.set_due_counted_up_to(counted_up_to);
        return out;
      });
}

caf::result<pb::KeySpacePutResult> put_key_space(self_ptr self, const pb::KeySpace& space) {
  return ask_db<pb::KeySpacePutResult>(
      self,
      {db::call{&db::sql::put_key_space, {db::key_space_json(space)}},
       db::call{&db::sql::key_space_views, {space.name()}}},
      [](results& rs) -> caf::expected<pb::KeySpacePutResult> {
        pb::KeySpacePutResult out;
        out.set_created(rs[0]->boolean(0, 0));
        db::read_key_space_state(*rs[1], 0, out.mutable_key_space());
        return out;
      });
}

caf::result<bool> delete_key_space(self_ptr self, const std::string& name) {
  return ask_db<bool>(self, {db::call{&db::sql::delete_key_space, {name}}},
                      [name](results& rs) -> caf::expected<bool> {
                        auto types = rs[0]->string(0, 1);
                        if (!types.empty())
                          return make_error(errc::conflict,
                                            "key space " + name + " is the key space of types " +
                                                types + ": key them elsewhere first");
                        return rs[0]->boolean(0, 0);
                      });
}

caf::result<pb::KeyState> get_key(self_ptr self, const std::string& space, const std::string& key,
                                  int32_t tasks) {
  return ask_db<pb::KeyState>(
      self,
      {db::call{&db::sql::key_view, {space, key, std::to_string(counted_up_to)}},
       db::call{&db::sql::key_tasks, {space, key, std::to_string(tasks)}}},
      [space, key](results& rs) -> caf::expected<pb::KeyState> {
        if (rs[0]->rows() == 0) return no_space(space);
        auto out = db::read_key_state(*rs[0], *rs[1], space, key);
        out.set_counted_up_to(counted_up_to);
        return out;
      });
}

}  // namespace taskmill::storage_internal
