#include "actors/http/http_client.hpp"

#include "messages/url.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

namespace taskmill {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using steady = std::chrono::steady_clock;

namespace {

// Idle connections older than this are not reused; the server may have
// closed them already.
constexpr auto max_idle = std::chrono::seconds{20};
constexpr size_t max_idle_per_host = 256;
constexpr uint64_t max_answer_bytes = 16 << 20;

struct idle_connection {
  std::unique_ptr<beast::tcp_stream> stream;
  steady::time_point since;
};

}  // namespace

struct http_client::impl {
  net::io_context ioc{1};
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  tcp::resolver resolver{ioc};
  // Taken by callers, given back on the I/O thread.
  std::mutex idle_guard;
  std::map<std::string, std::vector<idle_connection>> idle;
  std::thread thread;

  std::unique_ptr<beast::tcp_stream> take_idle(const std::string& key) {
    std::lock_guard<std::mutex> lock{idle_guard};
    auto& pool = idle[key];
    while (!pool.empty()) {
      auto conn = std::move(pool.back());
      pool.pop_back();
      if (steady::now() - conn.since < max_idle) return std::move(conn.stream);
    }
    return nullptr;
  }

  void give_back(const std::string& key, std::unique_ptr<beast::tcp_stream> stream) {
    std::lock_guard<std::mutex> lock{idle_guard};
    auto& pool = idle[key];
    if (pool.size() < max_idle_per_host) pool.push_back({std::move(stream), steady::now()});
  }
};

namespace {

/// One request and its answer, on a pooled or a new connection.
class exchange : public std::enable_shared_from_this<exchange> {
 public:
  exchange(http_client::impl* client, http_call call, http_url where,
           std::function<void(http_answer)> done)
      : client_(client),
        call_(std::move(call)),
        where_(std::move(where)),
        done_(std::move(done)),
        deadline_(steady::now() + call_.timeout) {
    http::request<http::string_body> request;
    request.method(http::string_to_verb(call_.method));
    request.target(where_.target);
    request.version(11);
    request.set(http::field::host, where_.host + ":" + where_.port);
    request.set(http::field::content_type, "application/json");
    request.set(http::field::user_agent, "taskmill");
    request.keep_alive(true);
    for (const auto& [name, value] : call_.headers) request.set(name, value);
    request.body() = std::move(call_.body);
    request.prepare_payload();
    std::ostringstream wire;
    wire << request;
    wire_ = std::move(wire).str();
  }

  /// On the caller's thread: sends what the socket takes at once on a pooled
  /// connection, without waiting, so that the executor has the request
  /// before the I/O thread wakes up to read the answer.
  void send_on_pooled() {
    stream_ = client_->take_idle(pool_key());
    reused_ = stream_ != nullptr;
    if (!reused_) return;
    beast::error_code ec;
    sent_ = stream_->socket().write_some(net::buffer(wire_), ec);
    if (ec == net::error::would_block) ec = {};
    send_error_ = ec;
  }

  /// On the I/O thread: the rest of the request, then the answer.
  void start() {
    if (send_error_) return retry_or_fail(send_error_);
    if (reused_)
      write();
    else
      connect();
  }

 private:
  void connect() {
    stream_ = std::make_unique<beast::tcp_stream>(client_->ioc);
    client_->resolver.async_resolve(
        where_.host, where_.port,
        [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type endpoints) {
          if (ec) return self->fail("cannot resolve " + self->where_.host + ": " + ec.message());
          self->stream_->expires_at(self->deadline_);
          self->stream_->async_connect(endpoints,
                                       [self](beast::error_code ec, const tcp::endpoint&) {
                                         if (ec) return self->fail(ec);
                                         auto& socket = self->stream_->socket();
                                         socket.set_option(tcp::no_delay{true});
                                         // Pooled, a caller writes to it
                                         // without waiting.
                                         socket.non_blocking(true, ec);
                                         if (ec) return self->fail(ec);
                                         self->write();
                                       });
        });
  }

  void write() {
    stream_->expires_at(deadline_);
    if (sent_ == wire_.size()) return read();
    net::async_write(*stream_, net::buffer(wire_.data() + sent_, wire_.size() - sent_),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->retry_or_fail(ec);
                       self->sent_ = self->wire_.size();
                       self->read();
                     });
  }

  void read() {
    parser_.emplace();
    parser_->body_limit(max_answer_bytes);
    http::async_read(*stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->retry_or_fail(ec);
                       self->succeed();
                     });
  }

  /// A pooled connection the server closed meanwhile fails before any answer:
  /// try once more on a new one.
  void retry_or_fail(beast::error_code ec) {
    bool stale = reused_ && (ec == http::error::end_of_stream || ec == net::error::eof ||
                             ec == net::error::connection_reset || ec == net::error::broken_pipe);
    if (!stale) return fail(ec);
    reused_ = false;
    sent_ = 0;
    buffer_.clear();
    connect();
  }

  void succeed() {
    auto& res = parser_->get();
    http_answer answer;
    answer.status = static_cast<int>(res.result_int());
    answer.body = std::move(res.body());
    if (res.keep_alive()) {
      stream_->expires_never();
      client_->give_back(pool_key(), std::move(stream_));
    }
    done_(std::move(answer));
  }

  void fail(beast::error_code ec) {
    if (ec == beast::error::timeout) {
      http_answer answer;
      answer.timed_out = true;
      answer.error = "timed out after " + std::to_string(call_.timeout.count()) + " ms";
      done_(std::move(answer));
      return;
    }
    fail(ec.message());
  }

  void fail(const std::string& what) {
    http_answer answer;
    answer.error = what;
    done_(std::move(answer));
  }

  // Outlives every exchange: pending ones are destroyed with its io_context.
  http_client::impl* client_;
  http_call call_;
  http_url where_;
  std::string pool_key() const { return where_.host + ":" + where_.port; }
  std::function<void(http_answer)> done_;
  steady::time_point deadline_;
  std::unique_ptr<beast::tcp_stream> stream_;
  bool reused_ = false;
  // The request as it goes on the wire, and how much of it went.
  std::string wire_;
  size_t sent_ = 0;
  beast::error_code send_error_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
};

}  // namespace

http_client::http_client() : impl_(std::make_unique<impl>()) {
  impl_->thread = std::thread{[raw = impl_.get()] { raw->ioc.run(); }};
}

http_client::~http_client() {
  impl_->work.reset();
  impl_->ioc.stop();
  impl_->thread.join();
}

void http_client::send(http_call call, std::function<void(http_answer)> done) {
  auto where = parse_http_url(call.url);
  if (!where) {
    http_answer answer;
    answer.error = "bad URL " + call.url;
    done(std::move(answer));
    return;
  }
  auto ex =
      std::make_shared<exchange>(impl_.get(), std::move(call), std::move(*where), std::move(done));
  ex->send_on_pooled();
  net::post(impl_->ioc, [ex] { ex->start(); });
}

}  // namespace taskmill
