#include "actors/http/http_server.hpp"

#include "actors/http/browser_guard.hpp"

#include "messages/errors.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <spdlog/spdlog.h>

#include <array>
#include <optional>
#include <thread>

namespace taskmill {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

std::string text(beast::string_view view) {
  return {view.data(), view.size()};
}

// A request line longer than this is answered 414, a request head (request
// line and headers) longer than header_limit 431.
constexpr size_t target_limit = 8 * 1024;
constexpr uint32_t header_limit = 16 * 1024;

http_response refusal(int status, const char* code, const char* message) {
  return {status, "application/json",
          std::string{R"({"error":{"code":")"} + code + R"(","message":")" + message + "\"}}"};
}

// An idle keep-alive connection is closed after this long.
constexpr auto idle_timeout = std::chrono::seconds{75};
constexpr auto drain_timeout = std::chrono::seconds{2};

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket&& socket, uint64_t max_body, const http_handler& handler)
      : stream_(std::move(socket)), max_body_(max_body), handler_(handler) {}

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read(); });
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(max_body_);
    parser_->header_limit(header_limit);
    stream_.expires_after(idle_timeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    head_ = false;
    if (ec == http::error::body_limit)
      return refuse(refusal(413, "payload_too_large", "the body is larger than the limit"));
    if (ec == http::error::header_limit) {
      if (request_line_too_long())
        return refuse(refusal(414, "uri_too_long", "the request target is longer than 8 KiB"));
      return refuse(
          refusal(431, "headers_too_large", "the request headers are larger than 16 KiB"));
    }
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted)
      return close();
    if (ec) return refuse(refusal(400, "invalid_argument", "the request is not valid HTTP/1.1"));
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    head_ = req.method() == http::verb::head;
    if (req.target().size() > target_limit)
      return refuse(refusal(414, "uri_too_long", "the request target is longer than 8 KiB"));
    http_request out;
    out.method = text(req.method_string());
    out.target = text(req.target());
    out.authorization = text(req[http::field::authorization]);
    out.content_type = text(req[http::field::content_type]);
    out.accept = text(req[http::field::accept]);
    for (const auto& field : req) {
      auto name = text(field.name_string());
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      out.headers.emplace_back(std::move(name), text(field.value()));
    }
    out.body = std::move(req.body());
    auto executor = stream_.get_executor();
    handler_(std::move(out), [self = shared_from_this(), executor](http_response res) {
      net::post(executor, [self, res = std::move(res)]() mutable { self->write(std::move(res)); });
    });
  }

  /// Answers and closes: after a refused request the stream is not trusted.
  void refuse(http_response res) {
    keep_alive_ = false;
    write(std::move(res));
  }

  /// Whether the request line alone was past the limit: the parser had not
  /// got to the headers yet.
  bool request_line_too_long() const { return parser_->get().target().empty(); }

  void write(http_response res) {
    auto msg = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(res.status), 11);
    msg->set(http::field::server, "taskmill");
    msg->set(http::field::content_type, res.content_type);
    for (const auto& [name, value] : protective_headers()) msg->set(name, value);
    for (auto& [name, value] : res.headers) msg->set(name, value);
    msg->keep_alive(keep_alive_);
    if (head_) {
      // The length the GET answer would have had, and no body.
      msg->content_length(res.body.size());
    } else {
      msg->body() = std::move(res.body);
      msg->prepare_payload();
    }
    stream_.expires_after(idle_timeout);
    http::async_write(stream_, *msg,
                      [self = shared_from_this(), msg](beast::error_code ec, size_t) {
                        if (ec || !self->keep_alive_) return self->close();
                        self->read();
                      });
  }

  /// Ends our side, then reads and drops what the client still sends for a
  /// moment, so that a client still sending a refused body gets our answer
  /// instead of a reset.
  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(drain_timeout);
    drain();
  }

  void drain() {
    stream_.async_read_some(net::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (!ec) self->drain();
                            });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::array<char, 16384> scratch_;
  std::optional<http::request_parser<http::string_body>> parser_;
  uint64_t max_body_;
  const http_handler& handler_;
  bool keep_alive_ = true;
  bool head_ = false;
};

}  // namespace

struct http_server::impl {
  net::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  uint64_t max_body = 0;
  http_handler handler;
  std::thread thread;

  void accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted) return;
      if (!ec) {
        socket.set_option(tcp::no_delay{true});
        std::make_shared<session>(std::move(socket), max_body, handler)->start();
      }
      accept();
    });
  }
};

http_server::http_server(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}

http_server::~http_server() {
  net::post(impl_->ioc, [this] {
    beast::error_code ignored;
    impl_->acceptor.close(ignored);
  });
  impl_->ioc.stop();
  impl_->thread.join();
}

uint16_t http_server::port() const {
  return impl_->acceptor.local_endpoint().port();
}

caf::expected<std::unique_ptr<http_server>> http_server::start(const std::string& host,
                                                               uint16_t port,
                                                               uint64_t max_body_bytes,
                                                               http_handler handler) {
  auto state = std::make_unique<impl>();
  state->max_body = max_body_bytes;
  state->handler = std::move(handler);
  beast::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (ec) return make_error(errc::invalid_argument, "api.listen: bad address '" + host + "'");
  tcp::endpoint endpoint{address, port};
  state->acceptor.open(endpoint.protocol(), ec);
  if (!ec) state->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) state->acceptor.bind(endpoint, ec);
  if (!ec) state->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error(errc::unavailable, "cannot listen on " + host + ":" + std::to_string(port) +
                                             ": " + ec.message());
  state->accept();
  auto* raw = state.get();
  state->thread = std::thread{[raw] { raw->ioc.run(); }};
  return std::unique_ptr<http_server>{new http_server{std::move(state)}};
}

}  // namespace taskmill
