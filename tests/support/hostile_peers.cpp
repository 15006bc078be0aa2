#include "tests/support/hostile_peers.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <csignal>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <chrono>
#include <random>

namespace taskmill::test {

namespace {

/// The first bytes of a TLS 1.2 client hello: a record header and the
/// start of the handshake message.
constexpr unsigned char hello_start[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01,
                                         0xfc, 0x03, 0x03, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a};

void close_with_reset(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(fd);
}

}  // namespace

hostile_peers::hostile_peers(std::string target)
    : port_(static_cast<uint16_t>(std::stoi(target.substr(target.rfind(':') + 1)))) {
  // OpenSSL writes with write(): a node that closed first must not end the
  // test.
  signal(SIGPIPE, SIG_IGN);
}

hostile_peers::~hostile_peers() {
  stop();
}

void hostile_peers::stop() {
  stopping_ = true;
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

bool hostile_peers::sleep_ms(int ms) const {
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds{ms};
  while (!stopping_ && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds{std::min(ms, 20)});
  return !stopping_;
}

int hostile_peers::connect_once() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port_);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  ++connections_;
  return fd;
}

void hostile_peers::spawn(void (hostile_peers::*loop)(int, int), int a, int b) {
  threads_.emplace_back([this, loop, a, b] { (this->*loop)(a, b); });
}

void hostile_peers::tls_handshakes(tls_identity who, int every_ms) {
  identity_ = std::move(who);
  spawn(&hostile_peers::tls_loop, every_ms, 0);
}
void hostile_peers::random_bytes(int bytes, int every_ms) {
  spawn(&hostile_peers::random_loop, bytes, every_ms);
}
void hostile_peers::oversized_frames(uint32_t payload_bytes, int every_ms) {
  spawn(&hostile_peers::oversized_loop, static_cast<int>(payload_bytes), every_ms);
}
void hostile_peers::idle(int count) {
  spawn(&hostile_peers::idle_loop, count, 0);
}
void hostile_peers::slow_loris(int count, int every_ms) {
  spawn(&hostile_peers::loris_loop, count, every_ms);
}
void hostile_peers::half_open(int every_ms) {
  spawn(&hostile_peers::half_open_loop, every_ms, 0);
}
void hostile_peers::flood(int total) {
  spawn(&hostile_peers::flood_loop, total, 0);
}

void hostile_peers::tls_loop(int every_ms, int) {
  auto ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_use_certificate_chain_file(ctx, identity_.cert.c_str());
  SSL_CTX_use_PrivateKey_file(ctx, identity_.key.c_str(), SSL_FILETYPE_PEM);
  SSL_CTX_load_verify_locations(ctx, identity_.ca.c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  do {
    int fd = connect_once();
    if (fd < 0) continue;
    auto ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    ++handshakes_;
    ERR_clear_error();
    if (SSL_connect(ssl) == 1) {
      ++handshakes_completed_;
      // The server checks a client's certificate after its Finished: read
      // until it says what it thinks of ours.
      char byte;
      SSL_read(ssl, &byte, 1);
    }
    ERR_clear_error();
    SSL_free(ssl);
    close(fd);
  } while (sleep_ms(every_ms));
  SSL_CTX_free(ctx);
}

void hostile_peers::random_loop(int bytes, int every_ms) {
  std::mt19937 rng{std::random_device{}()};
  std::vector<unsigned char> noise(static_cast<size_t>(bytes));
  do {
    int fd = connect_once();
    if (fd < 0) continue;
    for (auto& b : noise) b = static_cast<unsigned char>(rng());
    [[maybe_unused]] auto n = send(fd, noise.data(), noise.size(), MSG_NOSIGNAL);
    // Read what the node answers until it closes (or 200 ms pass).
    pollfd p{fd, POLLIN, 0};
    char sink[4096];
    while (poll(&p, 1, 200) > 0 && recv(fd, sink, sizeof sink, 0) > 0) {
    }
    close(fd);
  } while (sleep_ms(every_ms));
}

void hostile_peers::oversized_loop(int payload_bytes, int every_ms) {
  // operation, two bytes of padding, flags, then the payload length in
  // network order; operation data and both actor ids zero.
  unsigned char header[32] = {0x01};
  auto length = static_cast<uint32_t>(payload_bytes);
  for (int i = 0; i < 4; ++i) header[4 + i] = static_cast<unsigned char>(length >> (24 - 8 * i));
  do {
    int fd = connect_once();
    if (fd < 0) continue;
    [[maybe_unused]] auto n = send(fd, header, sizeof header, MSG_NOSIGNAL);
    pollfd p{fd, POLLIN, 0};
    char sink[4096];
    while (poll(&p, 1, 300) > 0 && recv(fd, sink, sizeof sink, 0) > 0) {
    }
    close(fd);
  } while (sleep_ms(every_ms));
}

void hostile_peers::idle_loop(int count, int) {
  std::vector<int> fds;
  for (int i = 0; i < count && !stopping_; ++i)
    if (int fd = connect_once(); fd >= 0) fds.push_back(fd);
  while (sleep_ms(100)) {
  }
  for (int fd : fds) close(fd);
}

void hostile_peers::loris_loop(int count, int every_ms) {
  std::vector<int> fds;
  for (int i = 0; i < count && !stopping_; ++i)
    if (int fd = connect_once(); fd >= 0) fds.push_back(fd);
  for (size_t sent = 0; sleep_ms(every_ms); ++sent)
    for (int fd : fds)
      [[maybe_unused]] auto n = send(fd, hello_start + sent % sizeof hello_start, 1, MSG_NOSIGNAL);
  for (int fd : fds) close(fd);
}

void hostile_peers::half_open_loop(int every_ms, int) {
  std::vector<int> half_closed;
  for (bool reset = false; sleep_ms(every_ms); reset = !reset) {
    int fd = connect_once();
    if (fd < 0) continue;
    [[maybe_unused]] auto n = send(fd, hello_start, 5, MSG_NOSIGNAL);
    if (reset) {
      close_with_reset(fd);
    } else {
      shutdown(fd, SHUT_WR);
      half_closed.push_back(fd);
    }
  }
  for (int fd : half_closed) close(fd);
}

void hostile_peers::flood_loop(int total, int) {
  for (int i = 0; i < total && !stopping_; ++i)
    if (int fd = connect_once(); fd >= 0) close(fd);
}

}  // namespace taskmill::test
