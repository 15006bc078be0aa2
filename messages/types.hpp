#pragma once

#include <caf/fwd.hpp>

namespace taskmill {

/// Registers taskmill's message types and error category with CAF.
void register_message_types(caf::actor_system_config& cfg);

}  // namespace taskmill
