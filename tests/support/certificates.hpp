#pragma once

// Throwaway TLS material for tests, made with the openssl command.

#include <filesystem>
#include <string>
#include <vector>

namespace taskmill::test {

/// A CA and a certificate it signed for `name`, with the certificate's key,
/// in a directory of their own under the temporary directory.
struct certificates {
  std::filesystem::path dir;
  std::string ca, cert, key;
};

certificates make_certificates(const std::string& name);

/// The cluster options that name `c`.
std::vector<std::string> tls_options(const certificates& c);

}  // namespace taskmill::test
