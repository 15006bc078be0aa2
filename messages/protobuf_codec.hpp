#pragma once

// Bodies in protobuf (Content-Type: application/x-protobuf), beside the JSON
// codec: a body that does not parse is an error that names the message and,
// for a string that is not UTF-8, the field.

#include "messages/errors.hpp"

#include <caf/expected.hpp>

#include <string>

namespace taskmill::protobuf {

/// Starts keeping what libprotobuf complains of, per thread; once a process.
void keep_complaints();

/// The field the last complaint on this thread names as invalid UTF-8, or
/// empty; cleared by the call.
std::string take_invalid_utf8_field();

template <class Message>
caf::expected<Message> decode(const std::string& body) {
  keep_complaints();
  take_invalid_utf8_field();
  Message msg;
  if (msg.ParseFromString(body)) return msg;
  auto what = "the body is not a valid protobuf " + Message::descriptor()->full_name();
  if (auto field = take_invalid_utf8_field(); !field.empty())
    what += ": " + field + " must be valid UTF-8";
  return make_error(errc::invalid_argument, what);
}

}  // namespace taskmill::protobuf
