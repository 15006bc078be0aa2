#include "actors/inserter.hpp"

#include "actors/metrics/node_metrics.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <prometheus/counter.h>

namespace taskmill {

struct inserter_state {
  static inline const char* name = "inserter";
  inserter_options options;
};

namespace {

using self_ptr = inserter_actor::stateful_pointer<inserter_state>;

/// Asks storage, wakes the pusher if `woke_work` says the answer may have
/// made work due, and hands the answer on.
template <class Answer, class Request, class Atom, class Predicate>
caf::result<Answer> forward(self_ptr self, Atom atom, Request req, Predicate woke_work) {
  auto promise = self->make_response_promise<Answer>();
  self->request(self->state.options.storage, local_request_timeout, atom, std::move(req))
      .then(
          [self, promise, woke_work](Answer& answer) mutable {
            if (woke_work(answer))
              for (const auto& target : self->state.options.wake) self->send(target, wake_atom_v);
            promise.deliver(std::move(answer));
          },
          [promise](caf::error& err) mutable { promise.deliver(std::move(err)); });
  return promise;
}

inserter_actor::behavior_type inserter(self_ptr self, inserter_options options) {
  self->state.options = std::move(options);
  return {
      [](ping_atom) { return caf::ok_atom_v; },
      [self](submit_atom atom, pb::SubmitTasks& tasks) -> caf::result<pb::SubmitResults> {
        if (auto err = validate(tasks, self->state.options.limits)) return err;
        return forward<pb::SubmitResults>(self, atom, std::move(tasks),
                                          [self](const pb::SubmitResults& r) {
                                            const auto& m = *self->state.options.metrics;
                                            bool woke = false;
                                            for (const auto& result : r.results()) {
                                              switch (result.outcome()) {
                                                case pb::CREATED:
                                                  m.submitted_created.Increment();
                                                  woke = true;
                                                  break;
                                                case pb::REPLACED:
                                                  m.submitted_replaced.Increment();
                                                  woke = true;
                                                  break;
                                                case pb::DUPLICATE:
                                                  m.submitted_duplicate.Increment();
                                                  break;
                                                default:
                                                  m.submitted_stale.Increment();
                                                  break;
                                              }
                                            }
                                            return woke;
                                          });
      },
      [self](reschedule_atom atom,
             pb::RescheduleRequest& req) -> caf::result<pb::RescheduleResult> {
        if (auto err = validate(req, self->state.options.limits)) return err;
        return forward<pb::RescheduleResult>(
            self, atom, std::move(req),
            [](const pb::RescheduleResult& r) { return r.outcome() != pb::IGNORED; });
      },
      [self](cancel_atom atom, pb::CancelRequest& req) -> caf::result<pb::CancelResult> {
        if (auto err = validate(req)) return err;
        return forward<pb::CancelResult>(self, atom, std::move(req),
                                         [](const pb::CancelResult&) { return false; });
      },
  };
}

}  // namespace

inserter_actor spawn_inserter(caf::actor_system& sys, inserter_options options) {
  return sys.spawn(inserter, std::move(options));
}

}  // namespace taskmill
