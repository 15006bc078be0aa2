#pragma once

// What callers of a node's cluster port may do to it, under CAF 0.17.
//
// CAF's BASP broker reads a 32-byte header from a caller before anything
// else is checked, takes the payload length from it (up to 4 GiB) and
// allocates and zeroes that much to read the payload into. One header of
// nonsense, or of malice, stalls the multiplexer thread that serves every
// link of the process, or ends it for want of memory. The program therefore
// defines accept, recv and close ahead of libc's (and checks the bytes
// SSL_read decrypts, see cluster_tls.cpp): connections accepted on a
// guarded port have every frame header checked before CAF reads it, and one
// with an unknown operation or a payload over the port's bound is closed,
// that connection alone.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace taskmill {

/// A caller refused on a cluster port of this process, or a link dialled
/// from here that failed its TLS handshake.
struct cluster_refusal {
  /// The other side's IP address.
  std::string address;
  /// One of a fixed set, for metrics: wrong_ca, no_certificate, not_tls,
  /// tls_mismatch, tls_error, closed_in_handshake (the TLS handshake),
  /// bad_frame, oversized_frame (the frames), bad_proof (the secret).
  std::string reason;
  /// What an operator reads.
  std::string detail;
  /// Accepted on a port of this process (else dialled from here).
  bool inbound = true;
};

using cluster_watcher = std::function<void(const cluster_refusal&)>;

/// The largest frame payload a node takes from a caller. One message is
/// one task (payload, last error) or one outcome (result, error), each
/// text bounded by api.max_payload_bytes, with a margin for the rest.
uint32_t max_frame_payload(int64_t max_payload_bytes);

/// Checks the frames of connections accepted on `port` from now on, with
/// payloads up to `max_payload`, and tells `watcher` of every caller
/// refused there (frames and TLS handshakes). The watcher runs on CAF's
/// multiplexer thread: it must be quick and thread-safe. Answers an id for
/// release_cluster_watch.
int guard_cluster_port(uint16_t port, uint32_t max_payload, cluster_watcher watcher);

/// Tells `watcher` of every link dialled from this process that fails its
/// TLS handshake. Answers an id for release_cluster_watch.
int watch_dialled_links(cluster_watcher watcher);

void release_cluster_watch(int id);

/// Whether calls to accept, recv and close reach the definitions of this
/// program (they do unless it was linked so that libc's win).
bool cluster_frames_checked();

/// The frame check of one connection: BASP headers as CAF 0.17 writes them
/// (operation, two bytes of padding, flags, payload length, operation data,
/// source and destination actor; integers in network order), each followed
/// by its payload.
class basp_frame_check {
 public:
  explicit basp_frame_check(uint32_t max_payload) : max_payload_(max_payload) {}

  /// Takes the next bytes of the stream; answers why the caller is refused
  /// (reason, detail), or nothing while the frames are sound.
  std::optional<std::pair<std::string, std::string>> take(const unsigned char* data, size_t size);

  static constexpr size_t header_size = 32;

 private:
  uint32_t max_payload_;
  unsigned char header_[header_size] = {};
  size_t header_filled_ = 0;
  uint64_t payload_left_ = 0;
};

namespace detail {

/// Tells the watchers of `local_port` (0: of dialled links) of `refusal`.
void tell_cluster_watchers(uint16_t local_port, const cluster_refusal& refusal);

/// Checks `size` bytes just read from `fd`: true if they may go on to CAF
/// (not a guarded connection, or sound frames). A refused connection is
/// shut down and its watchers told.
bool cluster_frames_pass(int fd, const void* data, size_t size);

/// The IP address and the port of a sockaddr_storage ("" and 0 if neither
/// v4 nor v6).
std::string address_text(const void* sockaddr_storage_ptr);
uint16_t port_number(const void* sockaddr_storage_ptr);

}  // namespace detail

}  // namespace taskmill
