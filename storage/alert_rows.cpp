#include "storage/alert_rows.hpp"

#include "messages/time.hpp"
#include "storage/rows.hpp"

namespace taskmill::db {

namespace {

/// Column positions of an alert row in one result, looked up once.
struct alert_columns {
  explicit alert_columns(const result& res)
      : id(res.column("id")),
        kind(res.column("kind")),
        subject(res.column("subject")),
        type(res.column("type")),
        job(res.column("job")),
        batch(res.column("batch")),
        task_id(res.column("task_id")),
        message(res.column("message")),
        details(res.column("details")),
        raised_at(res.column("raised_at")) {}
  int id, kind, subject, type, job, batch, task_id, message, details, raised_at;
};

void read_alert(const result& res, int row, const alert_columns& c, pb::Alert* out) {
  out->set_id(res.int64(row, c.id));
  out->set_kind(res.string(row, c.kind));
  out->set_subject(res.string(row, c.subject));
  if (!res.is_null(row, c.type)) out->set_type(res.string(row, c.type));
  if (!res.is_null(row, c.job)) out->set_job(res.string(row, c.job));
  if (!res.is_null(row, c.batch)) out->set_batch(res.string(row, c.batch));
  if (!res.is_null(row, c.task_id)) out->set_task_id(res.int64(row, c.task_id));
  out->set_message(res.string(row, c.message));
  out->set_details(res.string(row, c.details));
  set_micros(out->mutable_raised_at(), res.micros(row, c.raised_at));
}

void read_delivery(const result& res, int row, pb::AlertDelivery* out) {
  out->set_url(res.string(row, res.column("url")));
  out->set_attempts(res.int32(row, res.column("delivery_attempts")));
  if (auto col = res.column("delivered_at"); !res.is_null(row, col))
    set_micros(out->mutable_delivered_at(), res.micros(row, col));
  if (auto col = res.column("next_at"); !res.is_null(row, col))
    set_micros(out->mutable_next_at(), res.micros(row, col));
  if (auto col = res.column("last_error"); !res.is_null(row, col))
    out->set_last_error(res.string(row, col));
}

}  // namespace

pb::AlertRound read_alert_round(const result& raised, const result& due) {
  pb::AlertRound out;
  alert_columns raised_cols{raised};
  for (int row = 0; row < raised.rows(); ++row)
    read_alert(raised, row, raised_cols, out.add_raised());
  alert_columns due_cols{due};
  auto url = due.column("url");
  auto attempts = due.column("attempts");
  for (int row = 0; row < due.rows(); ++row) {
    auto d = out.add_due();
    d->set_url(due.string(row, url));
    d->set_attempt(due.int32(row, attempts));
    read_alert(due, row, due_cols, d->mutable_alert());
  }
  return out;
}

pb::AlertList read_alert_list(const result& res) {
  pb::AlertList out;
  alert_columns cols{res};
  auto url = res.column("url");
  pb::Alert* current = nullptr;
  for (int row = 0; row < res.rows(); ++row) {
    if (!current || current->id() != res.int64(row, cols.id)) {
      current = out.add_alerts();
      read_alert(res, row, cols, current);
    }
    if (!res.is_null(row, url)) read_delivery(res, row, current->add_deliveries());
  }
  return out;
}

pb::AlertMetrics read_alert_metrics(const result& res) {
  pb::AlertMetrics out;
  for (int row = 0; row < res.rows(); ++row) {
    auto& counts = res.text(row, 0) == "alerts" ? *out.mutable_alerts() : *out.mutable_deliveries();
    counts[res.string(row, 1)] = res.int64(row, 2);
  }
  return out;
}

std::vector<param> raise_alerts_params(const pb::AlertCheck& check) {
  return {check.rules(),
          array_literal_of(check.webhooks(), [](const std::string& url) { return param{url}; }),
          std::to_string(check.batch_size()), check.check_overdue() ? "true" : "false",
          std::to_string(check.term())};
}

std::vector<param> list_alerts_params(const pb::ListAlertsRequest& req) {
  return {req.has_after_id() ? param{std::to_string(req.after_id())} : param{},
          req.has_since() ? timestamp_param(req.since()) : param{}, std::to_string(req.limit())};
}

std::vector<param> record_deliveries_params(const pb::DeliveryResults& results) {
  const auto& rs = results.results();
  using result_t = pb::DeliveryResult;
  return {
      number_array_literal(rs, [](const result_t& r) { return r.alert_id(); }),
      array_literal_of(rs, [](const result_t& r) { return param{r.url()}; }),
      array_literal_of(
          rs, [](const result_t& r) { return r.error().empty() ? param{} : param{r.error()}; }),
      std::to_string(results.max_attempts()),
      std::to_string(results.backoff_base_ms()),
      std::to_string(results.backoff_cap_ms()),
  };
}

}  // namespace taskmill::db
