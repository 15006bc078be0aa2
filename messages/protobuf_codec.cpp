#include "messages/protobuf_codec.hpp"

#include <google/protobuf/stubs/logging.h>

namespace taskmill::protobuf {

namespace {

// What libprotobuf last complained of on this thread; it names the field of
// a string that is not UTF-8, which the parse result does not.
thread_local std::string last_complaint;

void keep_complaint(google::protobuf::LogLevel, const char*, int, const std::string& message) {
  last_complaint = message;
}

}  // namespace

void keep_complaints() {
  static const bool kept = [] {
    google::protobuf::SetLogHandler(&keep_complaint);
    return true;
  }();
  (void)kept;
}

std::string take_invalid_utf8_field() {
  // "String field 'taskmill.pb.SubmitTask.key' contains invalid UTF-8 ..."
  constexpr std::string_view marker = "String field '";
  auto complaint = std::move(last_complaint);
  last_complaint.clear();
  auto start = complaint.find(marker);
  if (start == std::string::npos || complaint.find("invalid UTF-8") == std::string::npos) return {};
  start += marker.size();
  auto end = complaint.find('\'', start);
  if (end == std::string::npos) return {};
  auto name = complaint.substr(start, end - start);
  return name.substr(name.rfind('.') + 1);
}

}  // namespace taskmill::protobuf
