#include "actors/readiness.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <memory>

namespace taskmill {

namespace {

using self_ptr = readiness_actor::pointer;

/// Answers the first problem a check reports as it comes, or none once
/// every check passed: a probe need not wait for a busy actor when another
/// check already found a problem.
class checks {
 public:
  checks(caf::typed_response_promise<std::string> promise, size_t waiting)
      : promise_{std::move(promise)}, waiting_{waiting} {
    if (waiting_ == 0) answer({});
  }

  void done(std::string problem) {
    if (answered_) return;
    if (!problem.empty())
      answer(std::move(problem));
    else if (--waiting_ == 0)
      answer({});
  }

 private:
  void answer(std::string problem) {
    answered_ = true;
    promise_.deliver(std::move(problem));
  }

  caf::typed_response_promise<std::string> promise_;
  size_t waiting_;
  bool answered_ = false;
};

/// Why storage `name` with `status` keeps the node from being ready; empty
/// if it does not.
std::string unready(const std::string& name, const pb::StorageStatus& status) {
  if (!status.connected())
    return "PostgreSQL is not connected (" + name + ")" +
           (status.last_error().empty() ? "" : ": " + status.last_error());
  if (!status.schema_current()) return "migrations are not applied";
  return {};
}

/// Asks every actor of `o` to answer within `patience`; `connected_too` also
/// wants every storage connected and migrated, as the status it keeps says
/// without being asked, and as it says once asked: it may have lost its
/// connection meanwhile.
caf::result<std::string> check(self_ptr self, const readiness_options& o, caf::timespan patience,
                               bool connected_too) {
  auto unready_now = [connected_too](const watched_storage& storage,
                                     const pb::StorageStatus& status) {
    return connected_too ? unready(storage.name, status) : std::string{};
  };
  for (const auto& storage : o.storages)
    if (auto problem = unready_now(storage, storage.status->read()); !problem.empty())
      return problem;
  auto promise = self->make_response_promise<std::string>();
  auto c = std::make_shared<checks>(promise, o.storages.size() + o.pingables.size());
  for (const auto& storage : o.storages)
    self->request(storage.actor, patience, status_atom_v)
        .then(
            [c, storage, unready_now](const pb::StorageStatus& status) {
              c->done(unready_now(storage, status));
            },
            [c, storage, unready_now](const caf::error&) {
              auto problem = unready_now(storage, storage.status->read());
              c->done(problem.empty() ? "the " + storage.name + " actor does not answer" : problem);
            });
  for (const auto& [name, actor] : o.pingables)
    self->request(actor, patience, ping_atom_v)
        .then([c](caf::ok_atom) { c->done({}); },
              [c, name = name](const caf::error&) {
                c->done("the " + name + " actor does not answer");
              });
  return promise;
}

readiness_actor::behavior_type readiness(self_ptr self, readiness_options options) {
  auto o = std::make_shared<const readiness_options>(std::move(options));
  return {
      [self, o](ready_atom, caf::timespan patience) { return check(self, *o, patience, true); },
      [self, o](alive_atom, caf::timespan patience) { return check(self, *o, patience, false); },
  };
}

}  // namespace

readiness_actor spawn_readiness(caf::actor_system& sys, readiness_options options) {
  return sys.spawn(readiness, std::move(options));
}

}  // namespace taskmill
