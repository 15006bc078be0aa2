#include "actors/limiter.hpp"

#include "actors/pusher.hpp"

#include "config/config.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <map>
#include <set>

namespace taskmill {

struct limiter_state {
  static inline const char* name = "limiter";

  limiter_options options;
  int64_t in_flight = 0;  // claimed and not yet stored as finished
  int64_t reserved = 0;   // granted to a claim still under way
  std::map<std::string, int64_t> by_type;
  // Types run on executors of limited capacity (CAF executors), and it.
  std::map<std::string, int32_t> capacity;
  // Executor places granted to claims still under way, by type.
  std::map<std::string, int64_t> room_reserved;
  /// Told when permits come back: the pusher, and the peers.
  std::vector<wake_listener_actor> subscribers;
  // A claim found a type it was for keyed in the database (SPEC §4 Keyed
  // limits): keys' limits may cut claims short. The database, not the
  // config, because another node's config may key a type this one runs.
  // Kept for the process's life.
  bool keyed_in_database = false;
  // A claim got fewer permits than it wanted: permits coming back may let the
  // pusher claim more. Other releases wake nobody; a claim that was not short
  // of permits found all the due work there was.
  bool short_of_room = false;

  // Permits for a claim of `wanted`. Cluster-wide limits count this node's
  // tasks in flight wherever the other nodes stand: a claim past them would
  // come back empty, taking the claims' connection from the one that finds
  // room once a release comes. Where they bound less than the claims under
  // way could take, a claim gets at most its share of them: claims of one
  // size, each taking the room the outcomes of the one before it freed,
  // keep the claims' and the outcomes' connections busy together
  // (tools/bench/BENCH.md).
  int64_t permits_for(int32_t wanted) const {
    int64_t most = std::min<int64_t>(wanted, options.node_limit - in_flight - reserved);
    if (auto window = most_running_under_limits(options, capacity)) {
      most = std::min(most, *window - in_flight - reserved);
      if (*window < int64_t{wanted} * claims_under_way)
        most = std::min<int64_t>(most, (*window + claims_under_way - 1) / claims_under_way);
    }
    return std::max<int64_t>(0, most);
  }
  // Claims may also have been cut short in the database, by cluster-wide
  // limits or by the room left on executors of limited capacity; any permit
  // coming back may be the one such a claim waited for.
  bool limited_in_claims() const {
    return options.global_limit > 0 || !options.type_limits.empty() || keyed_in_database ||
           !capacity.empty();
  }
};

namespace {

/// The scope of the node's own limit among the limiter's stats.
constexpr const char* node_scope = "node";

int64_t count_of(const std::map<std::string, int64_t>& counts, const std::string& type) {
  auto it = counts.find(type);
  return it == counts.end() ? 0 : it->second;
}

limiter_actor::behavior_type limiter(limiter_actor::stateful_pointer<limiter_state> self,
                                     limiter_options options) {
  self->state.options = std::move(options);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](acquire_atom, int32_t wanted) -> pb::ClaimGrant {
        auto& st = self->state;
        auto permits = static_cast<int32_t>(st.permits_for(wanted));
        st.reserved += permits;
        if (permits < wanted) st.short_of_room = true;
        pb::ClaimGrant grant;
        grant.set_permits(permits);
        grant.set_global_limit(st.options.global_limit);
        grant.mutable_type_limits()->insert(st.options.type_limits.begin(),
                                            st.options.type_limits.end());
        grant.set_any_type(st.options.any_type);
        for (const auto& type : st.options.types) grant.add_types(type);
        for (const auto& [type, capacity] : st.capacity) {
          auto room = permits > 0 ? std::max<int64_t>(0, capacity - count_of(st.by_type, type) -
                                                             count_of(st.room_reserved, type))
                                  : 0;
          if (room > 0) st.room_reserved[type] += room;
          grant.add_types(type);
          (*grant.mutable_executor_room())[type] = static_cast<int32_t>(room);
        }
        return grant;
      },
      [self](settle_atom, const pb::PermitUse& use) {
        auto& st = self->state;
        st.reserved -= use.permits();
        for (const auto& [type, room] : use.executor_room())
          if ((st.room_reserved[type] -= room) <= 0) st.room_reserved.erase(type);
        for (const auto& type : use.claimed_types()) {
          ++st.in_flight;
          ++st.by_type[type];
        }
        st.keyed_in_database = st.keyed_in_database || use.keyed();
      },
      [self](release_atom, const pb::PermitRelease& release) {
        auto& st = self->state;
        for (const auto& type : release.types()) {
          --st.in_flight;
          if (--st.by_type[type] <= 0) st.by_type.erase(type);
        }
        if (release.types().empty() || !(st.short_of_room || st.limited_in_claims())) return;
        st.short_of_room = false;
        for (const auto& target : st.subscribers) self->send(target, wake_atom_v);
      },
      [self](stats_atom) {
        const auto& st = self->state;
        pb::Stats limits;
        auto add = [&](std::string scope, int64_t used, int64_t limit) {
          auto* l = limits.add_limiter();
          l->set_scope(std::move(scope));
          l->set_used(used);
          l->set_limit(limit);
        };
        add(node_scope, st.in_flight, st.options.node_limit);
        add("global", 0, st.options.global_limit);
        for (const auto& [type, limit] : st.options.type_limits) add("type:" + type, 0, limit);
        return limits;
      },
      [self](capacity_atom, const std::string& type, int32_t capacity) {
        auto& st = self->state;
        if (capacity > 0)
          st.capacity[type] = capacity;
        else
          st.capacity.erase(type);
        for (const auto& target : st.subscribers) self->send(target, wake_atom_v);
      },
      [self](caf::subscribe_atom, wake_listener_actor target) {
        self->state.subscribers.push_back(std::move(target));
      },
      [self](reload_atom, const pb::TypeSettingsList& settings) {
        set_limits(self->state.options, settings);
        // A limit raised may let claims take more now.
        for (const auto& target : self->state.subscribers) self->send(target, wake_atom_v);
      },
  };
}

}  // namespace

limiter_options limiter_options_from(const config& cfg) {
  limiter_options o;
  o.node_limit = cfg.scheduling.node_limit;
  auto run_here = types_run_here(cfg);
  o.any_type = run_here.any;
  o.types = run_here.types;
  return o;
}

void set_limits(limiter_options& options, const pb::TypeSettingsList& settings) {
  options.global_limit = settings.global_limit();
  options.type_limits.clear();
  for (const auto& t : settings.types()) {
    // The defaults' entry ("") is no type.
    if (t.type().empty()) continue;
    if (t.running_limit() > 0) options.type_limits.emplace(t.type(), t.running_limit());
  }
}

std::optional<int64_t> most_running_under_limits(const limiter_options& options,
                                                 const std::map<std::string, int32_t>& capacity) {
  std::optional<int64_t> most;
  if (options.global_limit > 0) most = options.global_limit;
  if (options.any_type || (options.types.empty() && capacity.empty())) return most;
  std::set<std::string> types{options.types.begin(), options.types.end()};
  for (const auto& [type, places] : capacity) types.insert(type);
  int64_t of_types = 0;
  for (const auto& type : types) {
    auto limit = options.type_limits.find(type);
    if (limit == options.type_limits.end()) return most;
    of_types += limit->second;
  }
  return most ? std::min(*most, of_types) : of_types;
}

int64_t tasks_in_flight(const pb::Stats& limits) {
  for (const auto& l : limits.limiter())
    if (l.scope() == node_scope) return l.used();
  return 0;
}

limiter_actor spawn_limiter(caf::actor_system& sys, limiter_options options) {
  return sys.spawn(limiter, std::move(options));
}

}  // namespace taskmill
