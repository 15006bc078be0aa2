#pragma once

// Files the node serves as they are, compiled into the binary so that a node
// needs nothing beside it: the console under /ui/ and the OpenAPI document.

#include <string_view>

namespace taskmill {

struct web_asset {
  std::string_view path;
  std::string_view content_type;
  std::string_view body;
};

/// The file served at `path` (`/ui/` is the console's index), or nullptr.
const web_asset* find_web_asset(std::string_view path);

}  // namespace taskmill
