#include "actors/jobs/job_times.hpp"

#include "messages/errors.hpp"
#include "messages/text.hpp"
#include "messages/time.hpp"

#include <date/tz.h>

namespace taskmill {

namespace {

using namespace std::chrono;

void set_time(google::protobuf::Timestamp* ts, cron::seconds_time t) {
  set_micros(ts, duration_cast<microseconds>(t.time_since_epoch()).count());
}

cron::seconds_time time_of(const google::protobuf::Timestamp& ts) {
  return cron::seconds_time{floor<seconds>(microseconds{to_micros(ts)})};
}

}  // namespace

cron::seconds_time seconds_now() {
  return floor<seconds>(system_clock::now());
}

caf::error schedule_job(pb::Job& job, cron::seconds_time now) {
  auto schedule = cron::parse(job.schedule(), job.dialect());
  if (!schedule) return schedule.error();
  auto zone = cron::find_zone(job.time_zone());
  if (!zone) return zone.error();
  job.set_time_zone(std::string{(*zone)->name()});
  auto next = cron::next_after(*schedule, *zone, now, now);
  if (!next)
    return make_error(errc::invalid_argument,
                      "schedule: " + quote_input(job.schedule()) + " never fires");
  set_time(job.mutable_next_fire_at(), *next);
  set_time(job.mutable_anchor_at(), now);
  return caf::none;
}

caf::expected<std::vector<cron::seconds_time>> upcoming_fire_times(const pb::Job& job,
                                                                   cron::seconds_time now,
                                                                   int count) {
  auto schedule = cron::parse(job.schedule(), job.dialect());
  if (!schedule) return schedule.error();
  auto zone = cron::find_zone(job.time_zone());
  if (!zone) return zone.error();
  return cron::next_times(*schedule, *zone, now, count, time_of(job.anchor_at()));
}

}  // namespace taskmill
