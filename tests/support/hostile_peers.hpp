#pragma once

// Callers that misbehave on a node's cluster port, from threads of the test
// process: TLS with a certificate of another CA, plain TCP where TLS is
// expected and TLS where it is not, random bytes, connections opened and
// left idle, a slow-loris that sends a byte now and then, half-closed and
// reset connections, and a flood of connects. Each runs until stop() and
// counts what it did, so that a test can check the attack took place.

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace taskmill::test {

struct tls_identity {
  std::string cert;
  std::string key;
  std::string ca;
};

class hostile_peers {
 public:
  /// Attacks `target` (127.0.0.1:port).
  explicit hostile_peers(std::string target);
  ~hostile_peers();

  hostile_peers(const hostile_peers&) = delete;
  hostile_peers& operator=(const hostile_peers&) = delete;

  /// TLS handshakes with `who`, one every `every_ms`.
  void tls_handshakes(tls_identity who, int every_ms);
  /// Connections that send `bytes` random bytes and close, one every `every_ms`.
  void random_bytes(int bytes, int every_ms);
  /// Connections that send a well-formed BASP client handshake header (CAF
  /// 0.17's wire format) announcing a payload of `payload_bytes`, send none
  /// of it, and close after a while; one every `every_ms`.
  void oversized_frames(uint32_t payload_bytes, int every_ms);
  /// `count` connections opened and left idle until stop().
  void idle(int count);
  /// `count` connections that each send one byte of a TLS client hello (or
  /// of whatever `first` is) every `every_ms`, and never finish it.
  void slow_loris(int count, int every_ms);
  /// Connections that send a few bytes and half-close, and others that
  /// close with a reset, one every `every_ms`.
  void half_open(int every_ms);
  /// Up to `total` connects that close at once, as fast as the node takes them.
  void flood(int total);

  /// Ends every attack and closes what is still open.
  void stop();

  /// Connections made so far, by every attack.
  int connections() const { return connections_; }
  /// TLS handshakes tried, and those the node completed.
  int handshakes() const { return handshakes_; }
  int handshakes_completed() const { return handshakes_completed_; }

 private:
  int connect_once();
  void spawn(void (hostile_peers::*loop)(int, int), int a, int b);
  void tls_loop(int, int);
  void random_loop(int bytes, int every_ms);
  void oversized_loop(int payload_bytes, int every_ms);
  void idle_loop(int count, int);
  void loris_loop(int count, int every_ms);
  void half_open_loop(int every_ms, int);
  void flood_loop(int total, int);
  bool sleep_ms(int ms) const;

  uint16_t port_;
  tls_identity identity_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> handshakes_{0};
  std::atomic<int> handshakes_completed_{0};
  std::vector<std::thread> threads_;
};

}  // namespace taskmill::test
