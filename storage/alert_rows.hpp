#pragma once

// Converting between the messages of alerts and statement rows and
// parameters.

#include "node.pb.h"
#include "storage/pg.hpp"

namespace taskmill::db {

/// raise_alerts' rows (the alerts raised) and take_alert_deliveries' (the
/// deliveries due).
pb::AlertRound read_alert_round(const result& raised, const result& due);

/// list_alerts' rows: one per alert and webhook.
pb::AlertList read_alert_list(const result& res);

pb::AlertMetrics read_alert_metrics(const result& res);

std::vector<param> raise_alerts_params(const pb::AlertCheck& check);

std::vector<param> list_alerts_params(const pb::ListAlertsRequest& req);

std::vector<param> record_deliveries_params(const pb::DeliveryResults& results);

}  // namespace taskmill::db
