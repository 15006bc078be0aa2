#include "storage/finished_estimate.hpp"

namespace taskmill::db {

bool finished_estimate::sample_due(clock::time_point now) const {
  return !sampled_at_ || now - *sampled_at_ >= held_for;
}

std::vector<pb::StatusCount> finished_estimate::answer(found kind,
                                                       std::vector<pb::StatusCount> rows,
                                                       clock::time_point now) {
  switch (kind) {
    case found::counted:
      sampled_at_.reset();
      return rows;
    case found::sampled:
      held_ = std::move(rows);
      sampled_at_ = now;
      return held_;
    case found::not_sampled:
      break;
  }
  // A call that asked while an estimate was held, answered after a count
  // (the table shrank in between), still gets the last estimate.
  return held_;
}

}  // namespace taskmill::db
