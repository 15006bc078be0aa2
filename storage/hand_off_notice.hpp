#pragma once

// The notification a node hears of a task handed to it
// (taskmill.hand_off_notice in storage/sql/offers.sql).

#include "node.pb.h"

#include <string>

namespace taskmill::db {

/// Adds the hand-off `notice` tells of to `handed` if it names `node`: its
/// id, attempt and offer generation, and the task as the notice carried it
/// (id 0 when it carried ids alone, or a task that cannot be read: the node
/// reads the task). False if `notice` is no hand-off's.
bool add_if_handed_to(const std::string& node, const std::string& notice, pb::HandOffs& handed);

}  // namespace taskmill::db
