#pragma once

// The cluster port's TLS under CAF 0.17's OpenSSL module.
//
// That module asks SSL_get_error why a call on one connection failed without
// first clearing the thread's OpenSSL error queue, and never clears it after
// a failure (its logging, which would read the queue, is compiled out in
// Debian's build). All connections share the multiplexer's thread, so one
// caller's failed handshake (another CA, no TLS at all, random bytes) leaves
// an error that the next read on a good connection takes for its own: the
// good link is closed. This file defines SSL_accept, SSL_connect, SSL_read
// and SSL_write in the program, ahead of libssl's, and each clears the queue
// before it calls libssl's (what OpenSSL's manual asks of every caller). The
// same wrappers see why a handshake failed, which CAF does not say, and tell
// it to whoever watches the port.

#include <cstdint>
#include <functional>
#include <string>

namespace taskmill {

/// A TLS handshake that failed, on a port of this process or on a link it
/// dialled.
struct handshake_refusal {
  /// The other side's IP address.
  std::string address;
  /// One of a fixed set, for metrics: wrong_ca, no_certificate, not_tls,
  /// tls_mismatch, tls_error, closed_in_handshake.
  std::string reason;
  /// What an operator reads.
  std::string detail;
  /// Accepted on a port of this process (else dialled from here).
  bool inbound = true;
};

using handshake_watcher = std::function<void(const handshake_refusal&)>;

/// Calls `watcher` for every failed handshake of a connection accepted on
/// `local_port`, or with port 0, of every connection dialled from this
/// process. It runs on CAF's multiplexer thread: it must be quick and
/// thread-safe. Answers an id for unwatch_handshakes.
int watch_handshakes(uint16_t local_port, handshake_watcher watcher);
void unwatch_handshakes(int id);

/// Whether CAF's calls reach the wrappers above (they do unless the program
/// was linked so that libssl's definitions win).
bool tls_error_queue_guarded();

}  // namespace taskmill
