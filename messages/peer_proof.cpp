#include "messages/peer_proof.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <array>
#include <stdexcept>

namespace taskmill {

namespace {

std::string hex(const unsigned char* data, size_t size) {
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = "0123456789abcdef"[data[i] >> 4];
    out[2 * i + 1] = "0123456789abcdef"[data[i] & 15];
  }
  return out;
}

}  // namespace

std::string new_nonce() {
  std::array<unsigned char, 16> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1)
    throw std::runtime_error("no random bytes from OpenSSL");
  return hex(bytes.data(), bytes.size());
}

std::string peer_proof(const std::string& secret, proof_role role, const std::string& nonce,
                       const std::string& name) {
  std::string message = role == proof_role::answer ? "taskmill-answer|" : "taskmill-join|";
  message += nonce + "|" + name;
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  size_t size = 0;
  if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret.data(), secret.size(),
                 reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(),
                 mac.size(), &size))
    throw std::runtime_error("HMAC-SHA256 failed in OpenSSL");
  return hex(mac.data(), size);
}

bool same_secret(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace taskmill
