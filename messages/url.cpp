#include "messages/url.hpp"

#include <charconv>

namespace taskmill {

namespace {

std::string percent_decode(std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%' && i + 2 < in.size()) {
      int value = 0;
      auto [end, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, value, 16);
      if (ec == std::errc{} && end == in.data() + i + 3) {
        out += static_cast<char>(value);
        i += 2;
        continue;
      }
    }
    out += in[i] == '+' ? ' ' : in[i];
  }
  return out;
}

}  // namespace

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

request_target parse_target(std::string_view target) {
  request_target out;
  auto q = target.find('?');
  auto path = target.substr(0, q);
  size_t start = 1;
  while (start <= path.size()) {
    auto slash = path.find('/', start);
    auto end = slash == std::string_view::npos ? path.size() : slash;
    if (end > start) out.path.push_back(percent_decode(path.substr(start, end - start)));
    start = end + 1;
  }
  if (q == std::string_view::npos) return out;
  auto query = target.substr(q + 1);
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    if (!pair.empty())
      out.query[percent_decode(pair.substr(0, eq))] =
          eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return out;
}

}  // namespace taskmill
