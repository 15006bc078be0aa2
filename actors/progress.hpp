#pragma once

#include "messages/actors.hpp"

#include <caf/fwd.hpp>

namespace taskmill {

struct progress_options {
  progress_storage_actor storage;
};

progress_actor spawn_progress(caf::actor_system& sys, progress_options options);

}  // namespace taskmill
