#include "storage/finished_estimate.hpp"

namespace taskmill::db {

bool finished_estimate::ask_for_sample(clock::time_point now) {
  if (sampled_at_) {
    if (now - *sampled_at_ < held_for) return false;
    if (asked_at_ && now - *asked_at_ < held_for) return false;
  }
  asked_at_ = now;
  return true;
}

std::vector<pb::StatusCount> finished_estimate::answer(found kind,
                                                       std::vector<pb::StatusCount> rows,
                                                       clock::time_point now) {
  switch (kind) {
    case found::counted:
      sampled_at_.reset();
      asked_at_.reset();
      return rows;
    case found::sampled:
      held_ = std::move(rows);
      sampled_at_ = now;
      asked_at_.reset();
      return held_;
    case found::not_sampled:
      break;
  }
  // A call that asked while an estimate was held, answered after a count
  // (the table shrank in between), still gets the last estimate.
  return held_;
}

}  // namespace taskmill::db
