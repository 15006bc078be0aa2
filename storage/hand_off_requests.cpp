// The requests of hand-offs (storage/sql/offers.sql): a node's offer made,
// topped up and taken back, and the tasks handed to it heard of.

#include "storage/storage_internal.hpp"

#include "storage/hand_off_notice.hpp"

#include <caf/send.hpp>

#include <spdlog/spdlog.h>

namespace taskmill::storage_internal {

caf::result<bool> make_offer(self_ptr self, const pb::ClaimRequest& req) {
  return ask_db<bool>(
      self,
      {db::call{&db::sql::offer_permits,
                {req.node(), claimable_types(req.grant()), std::to_string(req.grant().permits()),
                 std::to_string(req.offer_generation()), std::to_string(req.offer_fresh_ms())}}},
      [](results& rs) { return rs[0]->boolean(0, 0); });
}

caf::result<bool> top_up_offer(self_ptr self, const std::string& node, int64_t generation,
                               int32_t permits) {
  return ask_db<bool>(self,
                      {db::call{&db::sql::add_to_offer,
                                {node, std::to_string(generation), std::to_string(permits)}}},
                      [](results& rs) { return rs[0]->boolean(0, 0); });
}

caf::result<int32_t> take_back_offer(self_ptr self, const std::string& node, int32_t offered) {
  return ask_count(self, {&db::sql::withdraw_offer, {node, std::to_string(offered)}});
}

/// Wake-ups and the tasks handed to `node` to `pusher`, and a word after
/// every (re)connect, as hand-offs meanwhile went unheard.
void subscribe_claims(self_ptr self, claim_waker_actor pusher, const std::string& node) {
  subscribe(self, self->state.listener, {"taskmill_tasks", "taskmill_handoffs"},
            [pusher, node](const std::vector<db::notification>& burst, bool connected) {
              if (connected) {
                caf::anon_send(pusher, adopt_atom_v);
                return;
              }
              pb::HandOffs handed;
              bool wake = false;
              for (const auto& n : burst) {
                if (n.channel != "taskmill_handoffs")
                  wake = true;
                else if (!db::add_if_handed_to(node, n.payload, handed))
                  spdlog::warn("storage: a hand-off notification that is no hand-off: {}",
                               n.payload);
              }
              if (handed.hand_offs_size() > 0)
                caf::anon_send(pusher, hand_off_atom_v, std::move(handed));
              if (wake) caf::anon_send(pusher, wake_atom_v);
            });
}

}  // namespace taskmill::storage_internal
