// The requests of alerts (SPEC §6).

#include "storage/storage_internal.hpp"

#include "messages/time.hpp"
#include "storage/alert_rows.hpp"

namespace taskmill::storage_internal {

/// The alerts raised and, in the same round trip, the deliveries due.
caf::result<pb::AlertRound> alert_round(self_ptr self, const pb::AlertCheck& check) {
  return ask_db<pb::AlertRound>(
      self,
      {db::call{&db::sql::raise_alerts, db::raise_alerts_params(check)},
       db::call{&db::sql::take_alert_deliveries,
                {std::to_string(check.batch_size()), std::to_string(check.delivery_lease_ms()),
                 std::to_string(check.term())}}},
      [](results& rs) { return db::read_alert_round(*rs[0], *rs[1]); });
}

caf::result<pb::AlertList> list_alerts(self_ptr self, const pb::ListAlertsRequest& req) {
  return ask_db<pb::AlertList>(self, {db::call{&db::sql::list_alerts, db::list_alerts_params(req)}},
                               [](results& rs) { return db::read_alert_list(*rs[0]); });
}

caf::result<pb::AlertMetrics> alert_metrics(self_ptr self) {
  return ask_db<pb::AlertMetrics>(self, {db::call{&db::sql::alert_metrics, {}}},
                                  [](results& rs) { return db::read_alert_metrics(*rs[0]); });
}

}  // namespace taskmill::storage_internal
