#include "messages/types.hpp"

#include "messages/actors.hpp"
#include "messages/errors.hpp"

#include <caf/actor_system_config.hpp>

namespace taskmill {

void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::taskmill>();
  cfg.add_error_category(
      error_category, [](uint8_t code, caf::atom_value, const caf::message& context) {
        auto text = std::string{"taskmill::"} + to_string(static_cast<errc>(code));
        if (context.match_elements<std::string>()) text += ": " + context.get_as<std::string>(0);
        return text;
      });
}

}  // namespace taskmill
