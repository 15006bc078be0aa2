#include "actors/jobs/firing_plan.hpp"

#include "messages/schedule.hpp"

#include <deque>

namespace taskmill {

namespace {

using namespace std::chrono;

cron::seconds_time time_of(int64_t micros) {
  return cron::seconds_time{floor<seconds>(microseconds{micros})};
}

int64_t micros_of(cron::seconds_time t) {
  return duration_cast<microseconds>(t.time_since_epoch()).count();
}

void add(pb::JobPlan& plan, cron::seconds_time at, const char* kind, bool missed) {
  auto f = plan.add_firings();
  f->set_fire_at_us(micros_of(at));
  f->set_kind(kind);
  f->set_missed(missed);
}

}  // namespace

caf::expected<pb::JobPlan> plan_firings(const pb::DueJob& job, int64_t now_us,
                                        const misfire_rules& rules) {
  auto schedule = cron::parse(job.schedule(), job.dialect());
  if (!schedule) return schedule.error();
  auto zone = cron::find_zone(job.time_zone());
  if (!zone) return zone.error();
  auto now = time_of(now_us);
  auto anchor = time_of(job.anchor_at_us());
  pb::JobPlan plan;
  plan.set_job(job.name());
  plan.set_expected_next_us(job.next_fire_at_us());
  // The stored next fire time and those after it, up to now; only the newest
  // max_times of a long outage.
  std::deque<cron::seconds_time> due;
  std::optional<cron::seconds_time> t = time_of(job.next_fire_at_us());
  while (t && *t <= now) {
    due.push_back(*t);
    if (static_cast<int>(due.size()) > rules.max_times) due.pop_front();
    t = cron::next_after(*schedule, *zone, *t, anchor);
  }
  if (t) plan.set_new_next_us(micros_of(*t));
  std::vector<cron::seconds_time> late;
  std::vector<cron::seconds_time> on_time;
  for (auto at : due) (now - at > rules.threshold ? late : on_time).push_back(at);
  const auto& policy = job.misfire();
  for (size_t i = 0; i < late.size(); ++i) {
    if (policy == "fire_once" && i + 1 == late.size())
      add(plan, late[i], "fire_once", false);
    else if (policy == "catch_up" && static_cast<int>(i) < job.catch_up_limit())
      add(plan, late[i], "catch_up", false);
    else
      add(plan, late[i], "scheduled", true);
  }
  for (auto at : on_time) add(plan, at, "scheduled", false);
  return plan;
}

}  // namespace taskmill
