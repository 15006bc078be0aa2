#pragma once

// What --print-config shows and a SIGHUP compares: the options a node uses.

#include "config/config.hpp"

#include <toml++/toml.h>

#include <string>

namespace taskmill {

/// The options read (`shown`) as TOML, with the name the node takes and,
/// when `masked`, its secrets masked.
std::string effective_toml(toml::table& shown, const config& cfg, bool masked);

}  // namespace taskmill
