#include "storage/job_rows.hpp"

#include "messages/names.hpp"
#include "messages/schedule.hpp"
#include "messages/time.hpp"
#include "storage/rows.hpp"

namespace taskmill::db {

namespace {

param optional_number(bool has, int64_t value) {
  return has ? param{std::to_string(value)} : param{};
}

param optional_text(bool has, const std::string& value) {
  return has ? param{value} : param{};
}

param names_param(const google::protobuf::RepeatedPtrField<std::string>& names) {
  return array_literal_of(names, [](const std::string& n) { return param{n}; });
}

/// A text[] of job names as PostgreSQL writes it: {a,b}. Names are letters,
/// digits and ".", "_", ":", "-" (taskmill.job_problem), so only a name
/// that reads as NULL comes quoted.
void read_names(const result& res, int row, int col,
                google::protobuf::RepeatedPtrField<std::string>* out) {
  auto text = res.string(row, col);
  if (text.size() < 2) return;
  std::string_view inner{text.data() + 1, text.size() - 2};
  while (!inner.empty()) {
    auto comma = inner.find(',');
    auto name = inner.substr(0, comma);
    if (name.size() >= 2 && name.front() == '"') name = name.substr(1, name.size() - 2);
    out->Add(std::string{name});
    if (comma == std::string_view::npos) break;
    inner.remove_prefix(comma + 1);
  }
}

void read_optional_time(const result& res, int row, int col, google::protobuf::Timestamp* out) {
  if (!res.is_null(row, col)) set_micros(out, res.micros(row, col));
}

}  // namespace

param micros_param(int64_t micros) {
  return format_rfc3339(micros);
}

std::vector<param> job_params(const pb::Job& j) {
  const auto& b = j.backoff();
  bool backoff = j.has_backoff();
  return {
      j.name(),
      j.schedule(),
      j.time_zone(),
      j.type(),
      optional_text(j.has_payload(), j.payload()),
      optional_number(j.has_priority(), j.priority()),
      optional_number(j.has_max_retries(), j.max_retries()),
      optional_number(j.has_timeout_ms(), j.timeout_ms()),
      backoff && b.kind() != pb::BACKOFF_KIND_UNSPECIFIED ? param{backoff_kind_name(b.kind())}
                                                          : param{},
      optional_number(backoff && b.base_ms() != 0, b.base_ms()),
      optional_number(backoff && b.cap_ms() != 0, b.cap_ms()),
      backoff ? param{std::to_string(b.jitter())} : param{},
      param{!j.has_enabled() || j.enabled() ? "true" : "false"},
      j.has_routing() ? param{j.routing()} : param{"any"},
      optional_number(j.has_shards(), j.shards()),
      j.has_overlap() ? param{j.overlap()} : param{"allow"},
      j.has_misfire() ? param{j.misfire()} : param{"fire_once"},
      j.has_catch_up_limit() ? param{std::to_string(j.catch_up_limit())} : param{"10"},
      j.description(),
      j.source().empty() ? param{"api"} : param{j.source()},
      j.has_next_fire_at() ? timestamp_param(j.next_fire_at()) : param{},
      timestamp_param(j.anchor_at()),
      j.has_dialect() ? param{j.dialect()} : param{cron::default_dialect},
      names_param(j.child_jobs()),
      names_param(j.child_jobs_on_failure()),
      optional_text(j.has_on_finish(), j.on_finish()),
      optional_text(j.has_on_success(), j.on_success()),
      names_param(j.known_jobs()),
  };
}

void read_job(const result& res, int row, pb::Job* out) {
  auto col = [&](const char* name) { return res.column(name); };
  out->set_name(res.string(row, col("name")));
  out->set_schedule(res.string(row, col("schedule")));
  out->set_dialect(res.string(row, col("dialect")));
  out->set_time_zone(res.string(row, col("time_zone")));
  out->set_type(res.string(row, col("type")));
  out->set_payload(res.string(row, col("payload")));
  if (auto c = col("priority"); !res.is_null(row, c)) out->set_priority(res.int32(row, c));
  if (auto c = col("max_retries"); !res.is_null(row, c)) out->set_max_retries(res.int32(row, c));
  if (auto c = col("timeout_ms"); !res.is_null(row, c)) out->set_timeout_ms(res.int32(row, c));
  if (auto c = col("backoff_kind"); !res.is_null(row, c))
    out->mutable_backoff()->set_kind(
        parse_backoff_kind(res.text(row, c)).value_or(pb::BACKOFF_KIND_UNSPECIFIED));
  if (auto c = col("backoff_base_ms"); !res.is_null(row, c))
    out->mutable_backoff()->set_base_ms(res.int32(row, c));
  if (auto c = col("backoff_cap_ms"); !res.is_null(row, c))
    out->mutable_backoff()->set_cap_ms(res.int32(row, c));
  if (auto c = col("backoff_jitter"); !res.is_null(row, c))
    out->mutable_backoff()->set_jitter(res.float64(row, c));
  out->set_enabled(res.boolean(row, col("enabled")));
  out->set_routing(res.string(row, col("routing")));
  if (auto c = col("shards"); !res.is_null(row, c)) out->set_shards(res.int32(row, c));
  out->set_overlap(res.string(row, col("overlap")));
  out->set_misfire(res.string(row, col("misfire")));
  out->set_catch_up_limit(res.int32(row, col("catch_up_limit")));
  out->set_description(res.string(row, col("description")));
  out->set_source(res.string(row, col("source")));
  if (auto c = col("next_fire_at"); !res.is_null(row, c))
    set_micros(out->mutable_next_fire_at(), res.micros(row, c));
  read_optional_time(res, row, col("anchor_at"), out->mutable_anchor_at());
  read_optional_time(res, row, col("created_at"), out->mutable_created_at());
  read_optional_time(res, row, col("updated_at"), out->mutable_updated_at());
  read_names(res, row, col("child_jobs"), out->mutable_child_jobs());
  read_names(res, row, col("child_jobs_on_failure"), out->mutable_child_jobs_on_failure());
  if (auto c = col("on_finish"); !res.is_null(row, c)) out->set_on_finish(res.string(row, c));
  if (auto c = col("on_success"); !res.is_null(row, c)) out->set_on_success(res.string(row, c));
}

pb::JobFirings read_firings(const result& res, const std::string& job) {
  pb::JobFirings out;
  for (int row = 0; row < res.rows(); ++row) {
    auto fire_at = res.micros(row, 0);
    auto n = out.firings_size();
    pb::JobFiring* f = nullptr;
    if (n > 0 && to_micros(out.firings(n - 1).fire_at()) == fire_at) {
      f = out.mutable_firings(n - 1);
    } else {
      f = out.add_firings();
      f->set_job(job);
      set_micros(f->mutable_fire_at(), fire_at);
      f->set_kind(res.string(row, 1));
      f->set_outcome(res.string(row, 2));
      f->set_batch(res.string(row, 3));
      if (!res.is_null(row, 6)) {
        f->set_parent_job(res.string(row, 6));
        set_micros(f->mutable_parent_fire_at(), res.micros(row, 7));
      }
    }
    if (!res.is_null(row, 4)) (*f->mutable_counts())[res.string(row, 4)] = res.int64(row, 5);
  }
  return out;
}

pb::JobMetrics read_job_metrics(const result& res) {
  pb::JobMetrics out;
  for (int row = 0; row < res.rows(); ++row) {
    auto name = res.string(row, 0);
    auto n = out.jobs_size();
    auto m = n > 0 && out.jobs(n - 1).job() == name ? out.mutable_jobs(n - 1) : out.add_jobs();
    m->set_job(name);
    if (!res.is_null(row, 4)) m->set_next_fire_us(res.micros(row, 4));
    if (res.is_null(row, 1)) continue;
    auto outcome = res.string(row, 1);
    (*m->mutable_firings())[outcome] = res.int64(row, 2);
    if (outcome == "fired") m->set_last_fired_us(res.micros(row, 3));
  }
  return out;
}

pb::FiringRound read_firing_round(const result& fired, const caf::expected<result>& next_due) {
  pb::FiringRound out;
  for (int row = 0; row < fired.rows(); ++row) {
    auto f = out.mutable_firings()->add_firings();
    f->set_job(fired.string(row, 0));
    if (!fired.is_null(row, 1)) set_micros(f->mutable_fire_at(), fired.micros(row, 1));
    f->set_outcome(fired.string(row, 2));
    if (!fired.is_null(row, 3)) f->set_batch(fired.string(row, 3));
  }
  if (!next_due)
    out.set_next_due_in_ms(0);
  else if (next_due->rows() > 0 && !next_due->is_null(0, 0))
    out.set_next_due_in_ms(next_due->int64(0, 0));
  return out;
}

pb::DueJobs read_due_jobs(const result& due, const result& next_due) {
  pb::DueJobs out;
  for (int row = 0; row < due.rows(); ++row) {
    auto j = out.add_jobs();
    j->set_name(due.string(row, 0));
    j->set_schedule(due.string(row, 1));
    j->set_time_zone(due.string(row, 2));
    j->set_misfire(due.string(row, 3));
    j->set_catch_up_limit(due.int32(row, 4));
    j->set_next_fire_at_us(due.micros(row, 5));
    j->set_anchor_at_us(due.micros(row, 6));
    j->set_dialect(due.string(row, 8));
  }
  if (due.rows() > 0) out.set_db_now_us(due.micros(0, 7));
  if (next_due.rows() > 0 && !next_due.is_null(0, 0)) out.set_next_due_in_ms(next_due.int64(0, 0));
  return out;
}

std::vector<param> fire_params(const pb::JobPlans& plans) {
  std::vector<param> jobs, fire_ats, kinds, missed, expected, next;
  auto add = [&](const pb::JobPlan& p, const pb::PlannedFiring* f) {
    jobs.emplace_back(p.job());
    fire_ats.push_back(f ? micros_param(f->fire_at_us()) : param{});
    kinds.push_back(f ? param{f->kind()} : param{});
    missed.emplace_back(f && f->missed() ? "true" : "false");
    expected.push_back(micros_param(p.expected_next_us()));
    next.push_back(p.has_new_next_us() ? micros_param(p.new_next_us()) : param{});
  };
  for (const auto& p : plans.jobs()) {
    if (p.firings().empty()) add(p, nullptr);
    for (const auto& f : p.firings()) add(p, &f);
  }
  return {array_literal(jobs),
          array_literal(fire_ats),
          array_literal(kinds),
          array_literal(missed),
          array_literal(expected),
          array_literal(next),
          std::to_string(plans.lease_ms()),
          std::to_string(plans.term())};
}

}  // namespace taskmill::db
