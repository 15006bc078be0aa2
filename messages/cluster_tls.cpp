#include "messages/cluster_tls.hpp"

#include "messages/cluster_port.hpp"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace taskmill {

namespace {

template <class F>
F libssl(const char* name) {
  auto f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
  if (!f) throw std::runtime_error(std::string{"libssl has no "} + name);
  return f;
}

std::string reason_text(unsigned long err) {
  const char* text = ERR_reason_error_string(err);
  return text ? text : "unknown TLS error " + std::to_string(ERR_GET_REASON(err));
}

/// Why a handshake failed, from SSL_get_error's verdict and the first error
/// on the queue (which the wrappers cleared before the call).
void classify(cluster_refusal& r, int verdict, unsigned long err, int sys_errno) {
  auto peer = r.inbound ? std::string{"it"} : std::string{"the node"};
  auto mine = r.inbound ? std::string{"this node's"} : std::string{"this"};
  if (verdict != SSL_ERROR_SSL || err == 0) {
    r.reason = "closed_in_handshake";
    r.detail = peer + " closed the connection during the TLS handshake" +
               (sys_errno != 0 ? std::string{" ("} + std::strerror(sys_errno) + ")" : "");
    return;
  }
  switch (ERR_GET_REASON(err)) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      r.reason = "wrong_ca";
      r.detail = r.inbound ? "its certificate is not signed by cluster.tls_ca"
                           : "the node's certificate is not signed by the CA this side trusts";
      return;
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      r.reason = "wrong_ca";
      r.detail = peer + " does not trust " + mine + " certificate (it trusts another CA)";
      return;
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      r.reason = "no_certificate";
      r.detail = r.inbound ? "it sent no certificate" : "the node asks for a certificate";
      return;
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_UNKNOWN_PROTOCOL:
    case SSL_R_BAD_PACKET_LENGTH:
    case SSL_R_UNEXPECTED_MESSAGE:
    case SSL_R_UNEXPECTED_RECORD:
      r.reason = "not_tls";
      r.detail = peer + " does not speak TLS (" + reason_text(err) + ")";
      return;
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
      r.reason = "closed_in_handshake";
      r.detail = peer + " closed the connection during the TLS handshake";
      return;
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
      r.reason = "tls_mismatch";
      r.detail = "no TLS version or cipher in common (" + reason_text(err) +
                 "; one side may have no certificate configured)";
      return;
    default:
      r.reason = "tls_error";
      r.detail = reason_text(err);
  }
}

/// After a handshake step that did not complete: tells the watchers of
/// that connection's port if it failed (rather than waits for bytes). The
/// queue is left as it is for CAF's own SSL_get_error.
void report_failure(SSL* ssl, int ret, bool inbound) {
  int sys_errno = errno;
  int verdict = SSL_get_error(ssl, ret);
  if (verdict == SSL_ERROR_WANT_READ || verdict == SSL_ERROR_WANT_WRITE) return;
  int fd = SSL_get_fd(ssl);
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof local, remote_len = sizeof remote;
  if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return;
  getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len);
  cluster_refusal r;
  r.address = detail::address_text(&remote);
  // The caller may be gone already (a reset), and with it its address.
  if (r.address.empty()) r.address = "an unknown address (the caller left)";
  r.inbound = inbound;
  classify(r, verdict, ERR_peek_error(), verdict == SSL_ERROR_SYSCALL ? sys_errno : 0);
  detail::tell_cluster_watchers(inbound ? detail::port_number(&local) : uint16_t{0}, r);
  errno = sys_errno;
}

}  // namespace

bool tls_error_queue_guarded() {
  return dlsym(RTLD_DEFAULT, "SSL_read") == reinterpret_cast<void*>(&SSL_read);
}

}  // namespace taskmill

// The wrappers. C linkage and libssl's exact signatures: the dynamic linker
// binds CAF's calls to the program's definitions before libssl's.

extern "C" int SSL_accept(SSL* ssl) {
  static auto real = taskmill::libssl<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  int ret = real(ssl);
  if (ret <= 0) taskmill::report_failure(ssl, ret, true);
  return ret;
}

extern "C" int SSL_connect(SSL* ssl) {
  static auto real = taskmill::libssl<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  int ret = real(ssl);
  if (ret <= 0) taskmill::report_failure(ssl, ret, false);
  return ret;
}

extern "C" int SSL_read(SSL* ssl, void* buf, int num) {
  static auto real = taskmill::libssl<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  int ret = real(ssl, buf, num);
  if (ret > 0 &&
      !taskmill::detail::cluster_frames_pass(SSL_get_fd(ssl), buf, static_cast<size_t>(ret))) {
    // Not a would-block: CAF closes the connection.
    ERR_raise(ERR_LIB_SSL, ERR_R_INTERNAL_ERROR);
    return -1;
  }
  return ret;
}

extern "C" int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto real = taskmill::libssl<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return real(ssl, buf, num);
}
