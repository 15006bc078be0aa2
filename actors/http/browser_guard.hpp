#pragma once

// What the API trusts of a request that may come from a browser (SPEC §8).
//
// A node's API is often on 127.0.0.1 without a token: reachable from the
// operator's browser, and so from any page the operator has open. Such a page
// may send "simple" cross-origin requests (a form, or fetch with text/plain),
// which browsers send without asking first, and a page whose host name is
// re-pointed at 127.0.0.1 (DNS rebinding) becomes same-origin with the node.
// So: the Host header must name the node (an IP address, localhost, or a
// name the operator listed), a request from a page of another origin is
// refused, and a request that changes something must say its body is JSON
// or protobuf, which no form and no simple request can.

#include "messages/errors.hpp"
#include "messages/http.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace taskmill {

struct browser_policy {
  /// Host names the node is reached by, besides IP addresses and localhost
  /// (api.allowed_hosts).
  std::vector<std::string> allowed_hosts;
  /// Origins whose pages may call the API, besides the node's own
  /// (api.allowed_origins), as scheme://host[:port].
  std::vector<std::string> allowed_origins;
};

struct browser_refusal {
  /// misdirected (Host), forbidden (Origin) or unsupported_media_type.
  errc code;
  std::string message;
};

/// Why `req` is refused, if it is, for where it comes from: its Host, then
/// its Origin.
std::optional<browser_refusal> refuse_foreign_request(const http_request& req,
                                                      const browser_policy& policy);

/// Why `req` is refused, if it is, for what it says its body is: a method
/// that changes state (POST, PUT, PATCH, DELETE), or any request with a
/// body, needs JSON or protobuf.
std::optional<browser_refusal> refuse_content_type(const http_request& req);

/// The headers every answer carries: the console runs only its own script
/// and style, in no frame; nothing is sniffed; no referrer leaves.
const std::vector<std::pair<std::string, std::string>>& protective_headers();

}  // namespace taskmill
