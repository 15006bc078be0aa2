#include "actors/http/browser_guard.hpp"

#include "messages/text.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace taskmill {

namespace {

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// The host of an authority (host, host:port, [v6] or [v6]:port), without
/// brackets.
std::string host_of(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    auto end = authority.find(']');
    return std::string{authority.substr(1, end == std::string_view::npos ? end : end - 1)};
  }
  auto colon = authority.find(':');
  if (colon != std::string_view::npos && authority.find(':', colon + 1) == std::string_view::npos)
    return std::string{authority.substr(0, colon)};
  return std::string{authority};
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

/// An authority as an origin of `scheme` names it: lower case, without the
/// scheme's default port.
std::string normal_authority(std::string_view scheme, std::string_view authority) {
  auto out = lower(authority);
  auto default_port = scheme == "https" ? std::string_view{":443"} : std::string_view{":80"};
  if (out.size() > default_port.size() && out.ends_with(default_port) && out.back() != ']')
    out.resize(out.size() - default_port.size());
  return out;
}

/// scheme and authority of an origin; empty scheme when it is not one.
std::pair<std::string, std::string> split_origin(std::string_view origin) {
  auto origin_text = lower(origin);
  for (std::string_view scheme : {"http", "https"}) {
    auto prefix = std::string{scheme} + "://";
    if (origin_text.starts_with(prefix))
      return {std::string{scheme}, normal_authority(scheme, origin_text.substr(prefix.size()))};
  }
  return {};
}

bool changes_state(const http_request& req) {
  return req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
         req.method == "DELETE" || !req.body.empty();
}

bool json_or_protobuf(std::string_view content_type) {
  auto media = lower(trimmed(content_type.substr(0, content_type.find(';'))));
  return media == "application/json" || media == "application/x-protobuf";
}

}  // namespace

std::optional<browser_refusal> refuse_foreign_request(const http_request& req,
                                                      const browser_policy& policy) {
  auto authority = std::string{trimmed(req.header("host"))};
  auto host = lower(host_of(authority));
  bool known_host = authority.empty() || host == "localhost" || is_ip_address(host) ||
                    std::any_of(policy.allowed_hosts.begin(), policy.allowed_hosts.end(),
                                [&](const std::string& h) { return lower(h) == host; });
  if (!known_host)
    return browser_refusal{errc::misdirected,
                           "the Host header names " + quote_input(authority) +
                               ", which is not this node: reach it by an IP address or "
                               "localhost, or list the name in api.allowed_hosts"};
  auto origin = std::string{trimmed(req.header("origin"))};
  if (!origin.empty()) {
    auto [scheme, origin_authority] = split_origin(origin);
    bool own = !scheme.empty() && origin_authority == normal_authority(scheme, authority);
    bool listed = !scheme.empty() &&
                  std::any_of(policy.allowed_origins.begin(), policy.allowed_origins.end(),
                              [&](const std::string& o) {
                                return split_origin(o) == std::pair{scheme, origin_authority};
                              });
    if (!own && !listed)
      return browser_refusal{errc::forbidden,
                             "the Origin header names " + quote_input(origin) +
                                 ", a page of another site: this node answers its own "
                                 "pages and those of api.allowed_origins only"};
  }
  return std::nullopt;
}

std::optional<browser_refusal> refuse_content_type(const http_request& req) {
  if (changes_state(req) && !json_or_protobuf(req.content_type))
    return browser_refusal{
        errc::unsupported_media_type,
        "the Content-Type header must be application/json or application/x-protobuf "
        "(an empty JSON body where none is needed), found " +
            (req.content_type.empty() ? std::string{"none"} : quote_input(req.content_type))};
  return std::nullopt;
}

const std::vector<std::pair<std::string, std::string>>& protective_headers() {
  static const std::vector<std::pair<std::string, std::string>> headers{
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"X-Frame-Options", "DENY"},
  };
  return headers;
}

}  // namespace taskmill
