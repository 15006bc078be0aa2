#pragma once

// A storage actor's status where it is read without asking the actor: the
// actor blocks while it connects (up to libpq's connect timeout against a
// host that does not answer), and readiness says at once that it is not
// connected instead of waiting out the attempt.

#include "node.pb.h"

#include <mutex>

namespace taskmill {

class shared_storage_status {
 public:
  /// Changes the status; its one writer is the storage actor.
  template <class Change>
  void update(Change&& change) {
    std::lock_guard guard{mutex_};
    change(status_);
  }

  pb::StorageStatus read() const {
    std::lock_guard guard{mutex_};
    return status_;
  }

 private:
  mutable std::mutex mutex_;
  pb::StorageStatus status_;
};

}  // namespace taskmill
