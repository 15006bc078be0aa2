#pragma once

// HTTP as bytes on a socket, for tests that send what no well-behaved client
// would: broken request lines, huge headers, pipelined requests.

#include <chrono>
#include <cstdint>
#include <string>

namespace taskmill::test {

/// Sends `request` as it is to 127.0.0.1:`port`, ends the sending side, and
/// answers everything the server sent until it closed the connection or
/// `timeout` passed.
std::string raw_exchange(uint16_t port, const std::string& request,
                         std::chrono::milliseconds timeout = std::chrono::seconds{5});

/// The status code of the first response in `raw`; 0 if there is none.
int first_status(const std::string& raw);

}  // namespace taskmill::test
