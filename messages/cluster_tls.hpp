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
// it to the port's watchers (cluster_port.hpp); SSL_read passes what it
// decrypts through the port's frame check.

namespace taskmill {

/// Whether CAF's calls reach the wrappers above (they do unless the program
/// was linked so that libssl's definitions win).
bool tls_error_queue_guarded();

}  // namespace taskmill
