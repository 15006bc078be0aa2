// The requests of nodes and of the leader's duties: registration, heartbeats, the lead, sweeps and
// compensation.

#include "storage/storage_internal.hpp"

#include "messages/errors.hpp"
#include "messages/time.hpp"
#include "storage/rows.hpp"

namespace taskmill::storage_internal {

namespace {

pb::NodeList read_nodes(const db::result& res) {
  pb::NodeList out;
  for (int row = 0; row < res.rows(); ++row) {
    auto n = out.add_nodes();
    n->set_name(res.string(row, 0));
    n->set_address(res.string(row, 1));
    set_micros(n->mutable_started_at(), res.micros(row, 2));
    set_micros(n->mutable_heartbeat_at(), res.micros(row, 3));
    n->set_role(res.string(row, 4));
    n->set_running(res.int64(row, 5));
  }
  return out;
}

}  // namespace

caf::result<pb::NodeList> nodes(self_ptr self, int64_t lease_ms) {
  return ask_db<pb::NodeList>(
      self, {db::call{&db::sql::list_nodes, {std::to_string(lease_ms)}}},
      [](results& rs) -> caf::expected<pb::NodeList> { return read_nodes(*rs[0]); });
}

caf::result<int32_t> register_node(self_ptr self, const pb::NodeRegistration& node) {
  auto types = node.any_type() ? db::param{} : db::param{text_array(node.types())};
  return ask_count(self, {&db::sql::register_node,
                          {node.name(), node.incarnation(), node.address(),
                           std::to_string(node.lease_ms()), types}});
}

caf::result<bool> heartbeat(self_ptr self, const pb::Heartbeat& beat) {
  std::vector<db::call> calls{
      {&db::sql::heartbeat, {beat.name(), beat.incarnation(), beat.leader() ? "true" : "false"}}};
  if (beat.succeeded() > 0 || beat.retried() > 0 || beat.failed() > 0)
    calls.push_back({&db::sql::add_outcomes,
                     {beat.name(), std::to_string(beat.succeeded()), std::to_string(beat.retried()),
                      std::to_string(beat.failed())}});
  return ask_db<bool>(self, std::move(calls), [](results& rs) { return rs[0]->boolean(0, 0); });
}

caf::result<int64_t> lead(self_ptr self, const pb::Lead& req) {
  return ask_db<int64_t>(self,
                         {db::call{&db::sql::lead,
                                   {req.node(), req.incarnation(), req.want() ? "true" : "false",
                                    std::to_string(req.lease_ms())}}},
                         [](results& rs) { return rs[0]->int64(0, 0); });
}

caf::result<pb::SweepResult> sweep(self_ptr self, const pb::SweepRequest& req) {
  auto batch = std::to_string(req.batch_size());
  auto term = std::to_string(req.term());
  std::vector<db::call> calls{
      {&db::sql::sweep_lost, {std::to_string(req.lease_ms()), batch, term}},
      {&db::sql::sweep_timeouts, {std::to_string(req.timeout_grace_ms()), batch, term}},
      {&db::sql::sweep_silent, {batch, term}},
      {&db::sql::sweep_deadlines, {batch, term}},
      {&db::sql::sweep_succeeded, {std::to_string(req.success_retention_ms()), batch, term}},
      {&db::sql::sweep_purge, {std::to_string(req.purge_retention_ms()), batch, term}},
      {&db::sql::sweep_repin, {std::to_string(req.lease_ms()), batch, term}},
      {&db::sql::sweep_running_tally, {term}},
  };
  return ask_db<pb::SweepResult>(self, std::move(calls),
                                 [](results& rs) -> caf::expected<pb::SweepResult> {
                                   pb::SweepResult out;
                                   out.set_lost(rs[0]->int32(0, 0));
                                   out.set_timed_out(rs[1]->int32(0, 0));
                                   out.set_silent(rs[2]->int32(0, 0));
                                   out.set_expired(rs[3]->int32(0, 0));
                                   out.set_stopped(rs[4]->int32(0, 0));
                                   out.set_purged(rs[5]->int32(0, 0));
                                   out.set_repinned(rs[6]->int32(0, 0));
                                   out.set_tally_off(rs[7]->int64(0, 0));
                                   return out;
                                 });
}

caf::result<int32_t> compensate(self_ptr self, int32_t rule, int64_t term) {
  auto& st = self->state;
  if (rule < 0 || rule >= static_cast<int32_t>(st.rule_statements.size()))
    return make_error(errc::invalid_argument, "no compensation rule " + std::to_string(rule));
  return ask_count(self, {&st.rule_statements[rule],
                          {st.options.rules[rule].type,
                           std::to_string(st.options.compensation_batch), std::to_string(term)}});
}

}  // namespace taskmill::storage_internal
