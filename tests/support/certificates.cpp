#include "tests/support/certificates.hpp"

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cstdlib>

namespace taskmill::test {

certificates make_certificates(const std::string& name) {
  certificates c;
  c.dir = std::filesystem::temp_directory_path() /
          ("taskmill-tls-" + name + "-" + std::to_string(getpid()));
  std::filesystem::create_directories(c.dir);
  auto d = c.dir.string();
  auto ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes ";
  auto script = "cd " + d + " && openssl req -x509" + ec + "-keyout ca.key -out ca.pem -days 2 " +
                "-subj /CN=" + name + "-ca 2>/dev/null && openssl req" + ec +
                "-keyout node.key -out node.csr -subj /CN=" + name +
                " 2>/dev/null && openssl x509 -req -in node.csr -CA ca.pem -CAkey ca.key " +
                "-CAcreateserial -out node.pem -days 2 2>/dev/null";
  BOOST_REQUIRE_MESSAGE(std::system(script.c_str()) == 0, "openssl failed: " << script);
  c.ca = d + "/ca.pem";
  c.cert = d + "/node.pem";
  c.key = d + "/node.key";
  return c;
}

std::vector<std::string> tls_options(const certificates& c) {
  return {"cluster.tls_cert=" + c.cert, "cluster.tls_key=" + c.key, "cluster.tls_ca=" + c.ca};
}

}  // namespace taskmill::test
