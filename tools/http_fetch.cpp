#include "tools/http_fetch.hpp"

#include "messages/errors.hpp"
#include "messages/url.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <optional>

namespace taskmill {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

caf::expected<fetched> http_fetch(const std::string& method, const std::string& url,
                                  const std::string& body,
                                  const std::vector<std::pair<std::string, std::string>>& headers,
                                  std::chrono::milliseconds timeout) {
  auto where = parse_http_url(url);
  if (!where) return make_error(errc::invalid_argument, "only http:// URLs: " + url);
  const auto& [authority, host, port, target] = *where;
  try {
    net::io_context ioc;
    tcp::resolver resolver{ioc};
    beast::tcp_stream stream{ioc};
    stream.expires_after(timeout);
    stream.connect(resolver.resolve(host, port));
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, authority);
    req.set(http::field::user_agent, "taskmill");
    // A node takes no POST, PUT or DELETE without it (a browser's forms
    // cannot send it), body or not.
    if (method != "GET" && method != "HEAD") req.set(http::field::content_type, "application/json");
    for (const auto& [name, value] : headers) req.set(name, value);
    req.body() = body;
    req.prepare_payload();
    // A server may answer (413, say) and stop reading before the body is
    // sent: its answer counts more than our failed write.
    beast::error_code write_error;
    http::write(stream, req, write_error);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 << 20);
    beast::error_code read_error;
    http::read(stream, buffer, parser, read_error);
    if (read_error) throw beast::system_error{write_error ? write_error : read_error};
    auto& res = parser.get();
    fetched out;
    out.status = static_cast<int>(res.result_int());
    auto type = res[http::field::content_type];
    out.content_type = std::string{type.data(), type.size()};
    out.body = std::move(res.body());
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    return out;
  } catch (const beast::system_error& e) {
    return make_error(errc::unavailable, "cannot reach " + authority + ": " + e.code().message());
  }
}

struct http_session::impl {
  std::string host;
  std::string port;
  net::io_context ioc;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void connect() {
    tcp::resolver resolver{ioc};
    stream.emplace(ioc);
    stream->connect(resolver.resolve(host, port));
    stream->socket().set_option(tcp::no_delay{true});
    buffer.clear();
  }

  fetched exchange(const std::string& method, const std::string& target, const std::string& body) {
    http::request<http::string_body> req{http::string_to_verb(method), target, 11};
    req.set(http::field::host, host + ":" + port);
    req.keep_alive(true);
    if (method != "GET" && method != "HEAD") req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(*stream, req);
    http::response_parser<http::string_body> parser;
    parser.body_limit(256 << 20);
    http::read(*stream, buffer, parser);
    auto& res = parser.get();
    fetched out;
    out.status = static_cast<int>(res.result_int());
    out.body = std::move(res.body());
    if (!res.keep_alive()) stream.reset();
    return out;
  }
};

http_session::http_session(const std::string& base) : impl_(std::make_unique<impl>()) {
  // A bad base fails each call at connect.
  if (auto where = parse_http_url(base)) {
    impl_->host = where->host;
    impl_->port = where->port;
  }
}

http_session::~http_session() = default;

caf::expected<fetched> http_session::call(const std::string& method, const std::string& target,
                                          const std::string& body) {
  // A kept connection the server has closed fails once; then reconnect.
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (!impl_->stream) impl_->connect();
      return impl_->exchange(method, target, body);
    } catch (const beast::system_error& e) {
      impl_->stream.reset();
      if (attempt == 1)
        return make_error(errc::unavailable, "cannot reach " + impl_->host + ":" + impl_->port +
                                                 ": " + e.code().message());
    }
  }
  return make_error(errc::unavailable, "unreachable");
}

}  // namespace taskmill
