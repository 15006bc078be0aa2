#pragma once

// Converting between the messages of key spaces (SPEC §4 Keyed limits) and
// statement rows and parameters.

#include "storage/pg.hpp"
#include "taskmill.pb.h"

#include <string>

namespace taskmill::db {

/// A key space as taskmill.put_key_spaces takes one, in JSON.
std::string key_space_json(const pb::KeySpace& space);

/// A row of key_space_views.
void read_key_space_state(const result& res, int row, pb::KeySpaceState* out);

/// The rows of top_keys of space `space` into `out`'s top keys.
void read_top_keys(const result& res, const std::string& space, pb::KeySpaceState* out);

/// key_view's row and key_tasks' rows of key `key` of space `space`.
pb::KeyState read_key_state(const result& view, const result& tasks, const std::string& space,
                            const std::string& key);

}  // namespace taskmill::db
