#include "messages/url.hpp"

namespace taskmill {

std::optional<http_url> parse_http_url(std::string_view url) {
  constexpr std::string_view scheme = "http://";
  if (!url.starts_with(scheme)) return std::nullopt;
  auto rest = url.substr(scheme.size());
  auto slash = rest.find('/');
  http_url out;
  out.authority = std::string{rest.substr(0, slash)};
  out.target = slash == std::string_view::npos ? "/" : std::string{rest.substr(slash)};
  auto colon = out.authority.rfind(':');
  out.host = out.authority.substr(0, colon);
  out.port = colon == std::string::npos ? "80" : out.authority.substr(colon + 1);
  if (out.host.empty() || out.port.empty()) return std::nullopt;
  return out;
}

}  // namespace taskmill
